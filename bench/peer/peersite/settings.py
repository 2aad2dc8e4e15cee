"""Settings of the peer site: django-mcpz under gunicorn, tuned like a production deploy."""

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
# Throwaway: the site signs nothing a client keeps.
SECRET_KEY = "bench-peer-not-secret"

ROOT_URLCONF = "peersite.urls"
WSGI_APPLICATION = "peersite.wsgi.application"

# What Django's default MIDDLEWARE list needs (auth and sessions for their middleware, messages
# for its middleware), nothing else: no admin, no static files, and django-mcpz's server needs
# no app of its own.
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
]

# Django's default list, as `startproject` writes it, kept like a real project keeps it: the
# server is csrf_exempt and the echo tool touches neither the session nor the user, so no
# middleware reaches the database on a call.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# Never opened by a call; present so the contrib apps' models have a database.
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}

USE_TZ = True

# Quiet logs, like every other server of the bench: warnings and worse only.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
