"""The example site plus specimens each user sees only of her own (tests/e2e/projects_app)."""

from example_site.settings import *  # noqa: F403
from example_site.settings import INSTALLED_APPS as _APPS

INSTALLED_APPS = [*_APPS, "tests.testapp", "tests.e2e.projects_app"]
