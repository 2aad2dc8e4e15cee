"""The protocol tests need no Django; they run with ``-p no:django``."""

from __future__ import annotations


def pytest_addoption(parser, pluginmanager):
    # pyproject.toml sets pytest-django's ini key, and its filterwarnings "error" turns pytest's
    # "Unknown config option" warning into a crash when that plugin is disabled.
    if not pluginmanager.has_plugin("django"):
        parser.addini(
            "DJANGO_SETTINGS_MODULE", "Django settings module (unused without pytest-django)."
        )
