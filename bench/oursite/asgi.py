"""ASGI entry point for the bench: the example site's application under bench settings."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.oursite.settings")

from example_site.asgi import application

__all__ = ["application"]
