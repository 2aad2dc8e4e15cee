"""The test settings with mcp_django before django.contrib.admin (and an app bridging the admin)."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS as _APPS

INSTALLED_APPS = ["mcp_django", *(app for app in _APPS if app != "mcp_django"), "tests.adminorder"]
