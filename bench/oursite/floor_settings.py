"""Settings of floor-gunicorn: ours's (bench.oursite.settings: the same apps, middleware,
DEBUG=False and database), with a URLconf of one route to a plain echoing view
(bench/floor_wsgi.py) in place of the example site's."""

from bench.oursite.settings import *  # noqa: F403 (settings module: take everything, then override)

ROOT_URLCONF = "bench.floor_wsgi"
