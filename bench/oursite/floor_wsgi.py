"""floor-gunicorn's WSGI application: Django with ours's settings and bench/floor_wsgi.py's one
route (bench.oursite.floor_settings), as gunicorn serves it for the floor of ours-gunicorn."""

import os

from django.core.signals import request_started
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.oursite.floor_settings")

application = get_wsgi_application()

# mcp_django's ready() hooks every request (it sends /mcp to the endpoint's /mcp/ view under
# WSGI): that is ours's cost, not Django's, so the floor runs without it. Loudly: a floor that
# kept it under a new name would measure some of ours.
if not request_started.disconnect(dispatch_uid="mcp_django.endpoint_without_slash"):
    raise RuntimeError("mcp_django's request_started receiver was not found: update the floor")
