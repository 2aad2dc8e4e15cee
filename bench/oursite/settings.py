"""Bench settings: the example site plus the bench surface, tuned like a production deploy.

Environment:
  BENCH_RESPONSE_MODE  "json" (default) or "sse": MCP_DJANGO["RESPONSE_MODE"].
  BENCH_DB_PATH        SQLite file to use (bench/run.py gives each run a throwaway one).
  DATABASE_URL         when set, the example site's database from it instead (and REDIS_URL, when
                       set, its Redis channel layer and cache): the scale-out case.
  BENCH_OPERATIONS     "off": no audit trail and no quota (the ours-uvicorn-opsoff kind), to
                       measure what the operations layer costs.
"""

import os
import tempfile

from example_site import settings as _base
from example_site.settings import *  # noqa: F403 (settings module: take everything, then override)

INSTALLED_APPS = [*_base.INSTALLED_APPS, "bench.surface"]

# DEBUG would record every SQL query and keep it in memory, which is not what a deploy measures.
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

_db_path = os.environ.get("BENCH_DB_PATH") or os.path.join(
    tempfile.gettempdir(), "mcp_django_bench.sqlite3"
)
_base_db = dict(getattr(_base, "DATABASES", {}).get("default", {}))
if os.environ.get("DATABASE_URL"):
    # The scale-out case: the example site's PostgreSQL set-up (and REDIS_URL's channel layer).
    pass
elif _base_db.get("ENGINE") == "django.db.backends.sqlite3":
    # Keep the example site's SQLite options, only move the file somewhere throwaway.
    DATABASES = {"default": {**_base_db, "NAME": _db_path}}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _db_path}}

MCP_DJANGO = {
    **(getattr(_base, "MCP_DJANGO", None) or {}),
    "RESPONSE_MODE": os.environ.get("BENCH_RESPONSE_MODE", "json"),
    # The reference server has no authentication either.
    "AUTHENTICATION": "none",
    # Quotas stay on, so their accounting is measured as a deployment runs it, but high enough
    # that one load generator on one address (thousands of calls a second, 10,000 idle streams)
    # never reaches them.
    "QUOTAS": {
        **((getattr(_base, "MCP_DJANGO", None) or {}).get("QUOTAS") or {}),
        "TOOL_CALLS": "1000000000/minute",
        # One address makes every session: the set-up case opens thousands a second, the
        # memory case holds 10,000 open. Off, not raised: under a cap each initialize counts
        # the address's live sessions, which a real cap keeps to a hundred rows.
        "SESSIONS_PER_ADDRESS": None,
        "STREAMS_PER_USER": 1_000_000,
        # tools/call at c=32 in SSE mode holds 32 POST streams on one session.
        "STREAMS_PER_SESSION": 1_000,
    },
}
if os.environ.get("BENCH_OPERATIONS") == "off":
    MCP_DJANGO["AUDIT_TOOL_CALLS"] = False
    MCP_DJANGO["QUOTAS"] = {
        "PER_TOOL": {},
        **dict.fromkeys(
            (
                "TOOL_CALLS",
                "TOOL_CALLS_PER_CLIENT",
                "SESSIONS_PER_USER",
                "SESSIONS_PER_ADDRESS",
                "RUNNING_PER_SESSION",
                "RUNNING_PER_USER",
                "STREAMS_PER_SESSION",
                "STREAMS_PER_USER",
                "PENDING_ELICITATIONS_PER_USER",
                "LIVE_TASKS_PER_USER",
                "NEW_TASKS_PER_USER",
            )
        ),
    }

# Quiet logs: the reference server runs with access logging off as well.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
