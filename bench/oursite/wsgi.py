"""The bench site as a WSGI application: the endpoint's plain view, without the ASGI router, as
a Django deployment under gunicorn serves it (the ours-gunicorn kinds, issue 46)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.oursite.settings")

application = get_wsgi_application()
