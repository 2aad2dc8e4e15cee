"""Bench settings: the example site plus the bench surface, tuned like a production deploy.

Environment:
  BENCH_RESPONSE_MODE  "json" (default) or "sse": MCP_DJANGO["RESPONSE_MODE"].
  BENCH_DB_PATH        SQLite file to use (bench/run.py gives each run a throwaway one).
"""

import os
import tempfile

from example_site import settings as _base
from example_site.settings import *  # noqa: F403 (settings module: take everything, then override)

INSTALLED_APPS = [*_base.INSTALLED_APPS, "bench.surface"]

# DEBUG would record every SQL query and keep it in memory, which is not what a deploy measures.
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

_db_path = os.environ.get("BENCH_DB_PATH") or os.path.join(tempfile.gettempdir(), "mcp_django_bench.sqlite3")
_base_db = dict(getattr(_base, "DATABASES", {}).get("default", {}))
if _base_db.get("ENGINE") == "django.db.backends.sqlite3":
    # Keep the example site's SQLite options, only move the file somewhere throwaway.
    DATABASES = {"default": {**_base_db, "NAME": _db_path}}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _db_path}}

MCP_DJANGO = {
    **(getattr(_base, "MCP_DJANGO", None) or {}),
    "RESPONSE_MODE": os.environ.get("BENCH_RESPONSE_MODE", "json"),
    # The reference server has no authentication either.
    "AUTHENTICATION": "none",
}

# Quiet logs: the reference server runs with access logging off as well.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
