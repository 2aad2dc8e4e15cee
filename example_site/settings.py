"""Settings for the mcp_django example site: a small lending library served over MCP.

Embedded defaults (SQLite, in-memory channel layer, one process) need no services. Set
DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/mcp_example) and REDIS_URL
(e.g. redis://127.0.0.1:6379/0) to scale out to several processes.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-site-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h]
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "example_site.urls"
ASGI_APPLICATION = "example_site.asgi.application"
STATIC_URL = "static/"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/admin/"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "mcp_django",
    "example_site.library",
    "example_site.live",
    "example_site.conformance",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "example_site" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

if os.environ.get("DATABASE_URL"):
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=600)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "example_site.sqlite3")),
            # WAL lets readers proceed while the event log is written; NORMAL sync is safe with WAL.
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", "timeout": 20},
        }
    }

if os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [os.environ["REDIS_URL"]], "capacity": 1000}}
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}}

MCP_DJANGO = {
    "SERVER_NAME": "example-library",
    "SERVER_TITLE": "Example Library",
    "INSTRUCTIONS": "A small lending library: search the catalogue, look up books and authors, and manage loans.",
    # "none" for local trials and the conformance suite; the README shows how to switch.
    "AUTHENTICATION": os.environ.get("MCP_AUTH", "none"),
    "RESPONSE_MODE": os.environ.get("MCP_RESPONSE_MODE", "json"),
}
if os.environ.get("MCP_SSE_KEEPALIVE_SECONDS"):
    MCP_DJANGO["SSE_KEEPALIVE_SECONDS"] = float(os.environ["MCP_SSE_KEEPALIVE_SECONDS"])
if os.environ.get("MCP_SSE_MAX_CONNECTION_SECONDS"):
    MCP_DJANGO["SSE_MAX_CONNECTION_SECONDS"] = float(os.environ["MCP_SSE_MAX_CONNECTION_SECONDS"])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"mcp_django": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "WARNING")}},
}
