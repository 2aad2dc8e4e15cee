"""Settings of the Bookshelf provider (tests only: DEBUG, loopback, SQLite in a temporary file)."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent

SECRET_KEY = "bookshelf-e2e-provider-insecure-key"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "tests.e2e.provider.urls"
STATIC_URL = "static/"
LOGIN_URL = "/accounts/login/"
# Its own cookie names: on one loopback address, cookies do not tell ports apart.
SESSION_COOKIE_NAME = "bookshelf_sessionid"
CSRF_COOKIE_NAME = "bookshelf_csrftoken"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]

MIDDLEWARE = [
    "tests.e2e.provider.views.AccessLogMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("PROVIDER_SQLITE_PATH", str(HERE / "provider.sqlite3")),
        "OPTIONS": {"timeout": 20},
    }
}

# Every request, with headers and body, one JSON object a line (read by the test).
PROVIDER_ACCESS_LOG = os.environ.get("PROVIDER_ACCESS_LOG", "")

OAUTH2_PROVIDER = {
    "SCOPES": {"reading-list": "Read your reading list"},
    "DEFAULT_SCOPES": ["reading-list"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
}
