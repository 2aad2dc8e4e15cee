"""Settings of the cron-monitoring project (tests/cronsite): default user model, email sign-in through plain-class backends.

SQLITE_PATH names its database (the e2e fixture gives each server a copy); MCP_AUTH chooses the
authentication policy, "django" (session cookies, as the tutorial says) unless told otherwise.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = "cronsite-tests-insecure-key"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "tests.cronsite.urls"
ASGI_APPLICATION = "tests.cronsite.asgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
# As the project had them: plain classes (no BaseBackend), one signs in, one grants.
AUTHENTICATION_BACKENDS = [
    "tests.cronsite.backends.EmailBackend",
    "tests.cronsite.backends.MemberPermissionBackend",
]

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
    "tests.cronsite.monitor",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "cronsite.sqlite3")),
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL;",
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
        },
    }
}

STATIC_URL = "static/"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
MCP_DJANGO = {"SERVER_NAME": "cronsite", "AUTHENTICATION": os.environ.get("MCP_AUTH", "django")}
