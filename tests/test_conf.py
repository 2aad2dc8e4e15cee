"""The lazy, typed ``MCP_DJANGO`` settings object."""

from __future__ import annotations

import pytest
from django.test import override_settings

from mcp_django import __version__
from mcp_django.auth.base import DjangoAuthentication, NoAuthentication
from mcp_django.conf import DEFAULTS, MCPSettings, Setting, mcp_settings
from mcp_django.stores import DatabaseEventStore


def test_defaults_apply_when_the_user_sets_nothing():
    conf = MCPSettings(user_settings={})
    assert conf.server_name == "mcp_django"
    assert conf.server_version == __version__
    assert conf.response_mode == "json"
    assert conf.max_body_size == 4 * 1024 * 1024
    assert conf.max_batch_size == 100
    assert conf.allowed_origins == []
    assert conf.page_size == 50
    assert conf.sse_retry_ms == 1000
    assert conf.sse_keepalive_seconds == 15.0
    assert conf.sse_max_connection_seconds == 3600.0
    assert conf.authentication_class is DjangoAuthentication
    assert conf.EVENT_STORE_CLASS is DatabaseEventStore
    assert conf.INSTRUCTIONS is None


def test_every_default_is_readable():
    conf = MCPSettings(user_settings={})
    for name, value in DEFAULTS.items():
        if name != "EVENT_STORE_CLASS":
            assert conf.get(name) == value


def test_every_setting_has_a_typed_accessor():
    # mypy sees no __getattr__ on MCPSettings (a misspelt name is a type error), so each key
    # needs its lowercase accessor: a Setting descriptor or a property.
    conf = MCPSettings(user_settings={})
    for name in DEFAULTS:
        accessor = vars(MCPSettings).get(name.lower())
        assert isinstance(accessor, (Setting, property)), f"MCPSettings has no accessor for {name}"
        if isinstance(accessor, Setting):
            assert accessor.key == name
        getattr(conf, name.lower())


def run_fresh(script: str) -> None:
    """Run ``script`` in a new interpreter at the project's root; fail with its stderr."""
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_the_facade_stays_lazy_and_knows_every_public_name():
    # What settings.py may do before Django is set up: import mcp_django, touch nothing.
    script = (
        "import sys, mcp_django\n"
        "assert not any(m.startswith('django.db') for m in sys.modules), 'models loaded'\n"
        "assert 'mcp_django.registry.sites' not in sys.modules\n"
        "from mcp_django import Icon, ToolAnnotations\n"
        "assert ToolAnnotations(readOnlyHint=True) == {'readOnlyHint': True}\n"
        "assert Icon(src='https://example.com/i.png') == {'src': 'https://example.com/i.png'}\n"
        "missing = [n for n in mcp_django.__all__ if n != 'site' and not hasattr(mcp_django, n)]\n"
        "assert not missing, missing\n"
    )
    run_fresh(script)


def test_an_asgi_module_may_import_the_router_before_django_is_set_up():
    # The usual asgi.py order in Channels projects: imports first, get_asgi_application() after.
    script = (
        "import os\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'example_site.settings'\n"
        "from mcp_django.routing import MCPRouter\n"
        "from django.core.asgi import get_asgi_application\n"
        "application = MCPRouter(get_asgi_application())\n"
        "assert application.consumer.__name__ == 'MCPConsumer'\n"
    )
    run_fresh(script)


def test_user_settings_override_defaults():
    conf = MCPSettings(
        user_settings={"SERVER_NAME": "Library", "PAGE_SIZE": 7, "SSE_MAX_CONNECTION_SECONDS": 30}
    )
    assert conf.server_name == "Library"
    assert conf.page_size == 7
    assert conf.sse_max_connection_seconds == 30.0
    assert conf.response_mode == "json"


def test_project_settings_are_read():
    assert mcp_settings.server_name == "mcp-django-tests"
    assert mcp_settings.authentication_class is NoAuthentication


def test_override_settings_is_followed_and_restored():
    assert mcp_settings.page_size == 50
    with override_settings(MCP_DJANGO={"PAGE_SIZE": 3, "AUTHENTICATION": "django"}):
        assert mcp_settings.page_size == 3
        assert mcp_settings.authentication_class is DjangoAuthentication
        assert mcp_settings.server_name == "mcp_django"
    assert mcp_settings.page_size == 50
    assert mcp_settings.authentication_class is NoAuthentication


def test_other_setting_changes_keep_the_cache():
    mcp_settings.page_size  # noqa: B018 - fill the cache
    with override_settings(DEBUG=True):
        assert "PAGE_SIZE" in mcp_settings.__dict__


def test_settings_are_read_on_first_access_not_on_creation():
    conf = MCPSettings()
    with override_settings(MCP_DJANGO={"SERVER_NAME": "late"}):
        assert conf.server_name == "late"


def test_unknown_key_raises_attribute_error():
    with pytest.raises(AttributeError, match="NOT_A_SETTING"):
        mcp_settings.NOT_A_SETTING  # noqa: B018
    with pytest.raises(AttributeError):
        mcp_settings.get("NOT_A_SETTING")


def test_private_names_raise_attribute_error():
    with pytest.raises(AttributeError):
        mcp_settings._missing  # noqa: B018


def test_failed_import_string_names_the_setting():
    conf = MCPSettings(user_settings={"EVENT_STORE_CLASS": "no.such.Store"})
    with pytest.raises(ImportError, match=r"MCP_DJANGO\['EVENT_STORE_CLASS'\]"):
        conf.EVENT_STORE_CLASS  # noqa: B018


def test_failed_authentication_import_names_the_setting():
    conf = MCPSettings(user_settings={"AUTHENTICATION": "no.such.Authentication"})
    with pytest.raises(ImportError, match=r"MCP_DJANGO\['AUTHENTICATION'\]"):
        conf.authentication_class  # noqa: B018


def test_authentication_aliases_and_classes():
    assert (
        MCPSettings(user_settings={"AUTHENTICATION": "none"}).authentication_class
        is NoAuthentication
    )
    assert (
        MCPSettings(user_settings={"AUTHENTICATION": "django"}).authentication_class
        is DjangoAuthentication
    )
    path = "mcp_django.auth.base.NoAuthentication"
    assert (
        MCPSettings(user_settings={"AUTHENTICATION": path}).authentication_class is NoAuthentication
    )
    assert (
        MCPSettings(user_settings={"AUTHENTICATION": NoAuthentication}).authentication_class
        is NoAuthentication
    )


def test_import_string_setting_accepts_a_class():
    conf = MCPSettings(user_settings={"EVENT_STORE_CLASS": DatabaseEventStore})
    assert conf.EVENT_STORE_CLASS is DatabaseEventStore


def test_tool_error_details_follow_debug_unless_set():
    with override_settings(DEBUG=True):
        assert MCPSettings(user_settings={}).tool_error_details is True
        assert MCPSettings(user_settings={"TOOL_ERROR_DETAILS": False}).tool_error_details is False
    with override_settings(DEBUG=False):
        assert MCPSettings(user_settings={}).tool_error_details is False
        assert MCPSettings(user_settings={"TOOL_ERROR_DETAILS": True}).tool_error_details is True


def test_server_version_may_be_set():
    assert MCPSettings(user_settings={"SERVER_VERSION": "2.1"}).server_version == "2.1"


def test_reload_forgets_cached_values():
    conf = MCPSettings(user_settings={"PAGE_SIZE": 5})
    assert conf.page_size == 5
    conf._explicit = {"PAGE_SIZE": 6}
    conf.reload()
    assert conf.page_size == 6
