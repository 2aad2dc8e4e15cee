"""Minimal settings for mcp_django's own tests."""

SECRET_KEY = "mcp-django-tests-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "tests.urls"
ASGI_APPLICATION = "tests.asgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "channels",
    "oauth2_provider",
    "mcp_django",
    "mcp_django.auth.service_clients",
    "tests.testapp",
]
MIDDLEWARE = [
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
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
# Tests create users with passwords everywhere; PBKDF2 costs a third of a second each time.
# MD5 is fine for throwaway test users and cuts the in-process suite by minutes.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CHANNEL_LAYERS = {"default": {"BACKEND": "mcp_django.transport.layers.InMemoryChannelLayer"}}
MCP_DJANGO = {"AUTHENTICATION": "none", "SERVER_NAME": "mcp-django-tests"}
# The packaged validator, which issues service clients' tokens (tests/auth/test_service_clients.py).
OAUTH2_PROVIDER = {"OAUTH2_VALIDATOR_CLASS": "mcp_django.auth.oauth_validator.MCPOAuth2Validator"}
# W131: the test project's tools are registered bare on purpose (their listed labels are the
# defaults); tests/test_labels.py checks the warning itself.
SILENCED_SYSTEM_CHECKS = ["mcp_django.W002", "mcp_django.W131"]
# Django's task framework (the django-tasks backport on Django 5.2): its default, and "queued",
# which keeps what is enqueued and runs nothing, so that a test runs a durable task itself, as
# a worker would, after changing what the task may do (tests/test_tasks_security.py).
try:
    import django.tasks  # noqa: F401  (Django 6.0+)

    _TASK_BACKENDS = "django.tasks.backends"
except ImportError:
    _TASK_BACKENDS = "django_tasks.backends"
TASKS = {
    "default": {"BACKEND": f"{_TASK_BACKENDS}.immediate.ImmediateBackend"},
    "queued": {"BACKEND": f"{_TASK_BACKENDS}.dummy.DummyBackend"},
}
