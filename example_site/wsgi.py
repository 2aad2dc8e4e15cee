"""WSGI entry point: ``gunicorn example_site.wsgi`` serves the whole site, MCP included, with
the endpoint's plain view (what needs a held stream needs asgi.py; manage.py check lists it)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_site.settings")
application = get_wsgi_application()
