"""The example site plus every field type and the user model as generated tools
(tests/e2e/schemas_app)."""

from example_site.settings import *  # noqa: F403
from example_site.settings import INSTALLED_APPS as _APPS

INSTALLED_APPS = [*_APPS, "tests.testapp", "tests.e2e.schemas_app"]
