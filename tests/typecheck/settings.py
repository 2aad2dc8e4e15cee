"""The test settings plus this package as an app, so that django-stubs' plugin knows its models."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.typecheck"]
