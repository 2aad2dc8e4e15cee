"""The example site plus a plain ``site.register_admin(admin.site)`` (tests/e2e/whole_admin)."""

from example_site.settings import *  # noqa: F403
from example_site.settings import INSTALLED_APPS as _APPS

INSTALLED_APPS = [*_APPS, "tests.e2e.whole_admin"]
