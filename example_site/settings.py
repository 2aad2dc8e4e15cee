"""Settings for the mcp_django example site: a small lending library served over MCP.

Embedded defaults (SQLite, in-memory channel layer, one process) need no services. Set
DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/mcp_example) and REDIS_URL
(e.g. redis://127.0.0.1:6379/0) to scale out to several processes.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit

from corsheaders.defaults import default_headers
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-site-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [
    h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h
]
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "example_site.urls"
ASGI_APPLICATION = "example_site.asgi.application"
STATIC_URL = "static/"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "admin:index"  # a URL name: under a path prefix, "/admin/" is not ours

INSTALLED_APPS = [
    # First, so that `manage.py runserver` serves asgi.py (Daphne's runserver). With
    # DJANGO_RUNSERVER=wsgi it is left out and runserver is Django's own, serving wsgi.py: the
    # endpoint's plain view, as under gunicorn (docs/howto/deploy.md, "Under WSGI").
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "corsheaders",
    "mcp_django",
    "oauth2_provider",
    # Machine clients with the client_credentials grant, acting as a service user
    # (docs/howto/service-clients.md). Needs oauth2_provider.
    "mcp_django.auth.service_clients",
    # After oauth2_provider: its admin.py replaces DOT's ModelAdmins.
    "example_site.accounts",
    "example_site.library",
    "example_site.live",
    "example_site.conformance",
    "example_site.integrations",
]

if os.environ.get("DJANGO_RUNSERVER", "asgi") == "wsgi":
    INSTALLED_APPS.remove("daphne")
elif os.environ.get("DJANGO_RUNSERVER", "asgi") != "asgi":
    raise ImproperlyConfigured(
        f'DJANGO_RUNSERVER={os.environ["DJANGO_RUNSERVER"]!r}: use "asgi" (the default) or "wsgi"'
    )
WSGI_APPLICATION = "example_site.wsgi.application"

MIDDLEWARE = [
    # First: it answers the OAuth endpoints' CORS preflights before anything else refuses them.
    "corsheaders.middleware.CorsMiddleware",
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
            # wal_autocheckpoint: the commit that takes the log past this many pages copies it
            # back (about 5 ms); 4,000, not 1,000, makes that one streamed answer in 400, not
            # in 100, which was the p99 of an SSE tools/call (docs/howto/deploy.md).
            # IMMEDIATE: a transaction takes the write lock as it begins, waiting up to the
            # timeout; a deferred one that reads then writes fails at once ("database is locked")
            # when another thread wrote in between (django-oauth-toolkit's token revocation did).
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=4000;",
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
            },
        }
    }

if os.environ.get("REDIS_URL"):
    # socket_timeout: longer than the layer's 5 s blocking receive (redis-py 8 defaults to 5 s;
    # mcp_django.W006 explains). socket_connect_timeout: a Redis that cannot be reached (a
    # partition drops packets silently) fails a new connection after 2 s, not redis-py's 5 s.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": os.environ["REDIS_URL"],
                        "socket_timeout": 15,
                        "socket_connect_timeout": 2,
                    }
                ],
                "capacity": 1000,
            },
        }
    }
else:
    # mcp_django's subclass of the in-memory layer: the same, with expiry sweeps throttled.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "mcp_django.transport.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    }

if os.environ.get("REDIS_URL"):
    # The registration rate limit and DOT's metadata-document fetch backoff live in the cache:
    # with several processes it has to be shared, or each process counts on its own.
    # Bounded: a request whose cache cannot be reached answers 503 within about 2 s, not after
    # redis-py's 5 s (docs/howto/multihost.md, scenario 3). The cache never blocks on purpose.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["REDIS_URL"],
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    # One process: its own memory holds the counters (quotas, rate limits) well enough.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# -- MCP ----------------------------------------------------------------------------------------

# The canonical URI of the MCP endpoint, exactly as clients name it: tokens are issued for it
# (RFC 8707 audience) and the protected-resource metadata announces it. Set it to the public
# https:// URL in a deployment; the check compares with it, never with the request's own URL.
MCP_RESOURCE_URL = os.environ.get("MCP_RESOURCE_URL", "http://127.0.0.1:8000/mcp")
# The authorization server is this site: its issuer is the origin of the MCP endpoint and the
# prefix the site is mounted under (http://host/app for http://host/app/mcp, served with
# SCRIPT_NAME or --root-path /app), where its /o/ endpoints are. RFC 8414 puts that issuer's
# metadata at /.well-known/oauth-authorization-server/app (docs/howto/deploy.md, "Under a path
# prefix").
_resource = urlsplit(MCP_RESOURCE_URL)
MOUNT_PATH = _resource.path.rstrip("/").removesuffix("/mcp")
OAUTH_ISSUER = os.environ.get(
    "OAUTH_ISSUER", f"{_resource.scheme}://{_resource.netloc}{MOUNT_PATH}"
)

# Origins of browser-based clients (the MCP Inspector's web UI: http://localhost:6274), comma
# separated: they may call the MCP endpoint (ALLOWED_ORIGINS) and the OAuth token, registration
# and revocation endpoints (CORS_ALLOWED_ORIGINS below). Empty: no other origin may.
MCP_ALLOWED_ORIGINS = [
    o.strip() for o in os.environ.get("MCP_ALLOWED_ORIGINS", "").split(",") if o.strip()
]

# Loans and members are private: with MCP_AUTH=none (a trial without signing in) their model
# entries are hidden from the anonymous caller on purpose, which W211 would say on every command.
SILENCED_SYSTEM_CHECKS = ["mcp_django.W211"] if os.environ.get("MCP_AUTH") == "none" else []

MCP_DJANGO = {
    "SERVER_NAME": "example-library",
    "SERVER_TITLE": "Example Library",
    "INSTRUCTIONS": "A small lending library: search the catalogue, look up books and authors, and manage loans.",
    # "oauth": bearer tokens from the authorization server below. "none" for local trials and
    # the conformance suite, "django" for the session cookie, "jwt" for an external identity
    # provider's tokens (MCP_JWT_ISSUER, below); the README shows how to switch.
    "AUTHENTICATION": os.environ.get("MCP_AUTH", "oauth"),
    "RESOURCE_URL": MCP_RESOURCE_URL,
    "AUTHORIZATION_SERVERS": [OAUTH_ISSUER],
    # The minimal set for basic use (the spec's advice), which every request needs: reading.
    # Tools that change something declare library:write (example_site/library/mcp.py), and a
    # token without it still lists them and gets a 403 step-up challenge naming it on use. The
    # metadata and the 401 challenge add library:write, declared there, to these.
    "SCOPES_SUPPORTED": ["library:read"],
    "REQUIRED_SCOPES": ["library:read"],
    "RESPONSE_MODE": os.environ.get("MCP_RESPONSE_MODE", "json"),
    # The audit trail (admin: "Tool calls"): every tools/call, kept 90 days (mcp_clearsessions
    # deletes older ones); the values of arguments named like secrets (the default
    # AUDIT_SENSITIVE_ARGUMENTS) are never stored.
    "AUDIT_TOOL_CALLS": True,
    "AUDIT_RETENTION_DAYS": 90,
    "ALLOWED_ORIGINS": MCP_ALLOWED_ORIGINS,
}
# MCP_AUTH=jwt: a pure resource server for an external identity provider, MCP_JWT_ISSUER (its
# issuer URL exactly as its metadata names it). Its RFC 9068 JWT access tokens, issued for
# MCP_RESOURCE_URL, are accepted; the protected-resource metadata names that issuer and not
# this site's own authorization server (docs/howto/idp-tokens.md). The token's sub claim
# names the user (MCP_JWT_USER_CLAIM and MCP_JWT_USER_FIELD choose others, e.g. email).
if MCP_DJANGO["AUTHENTICATION"] == "jwt":
    if not os.environ.get("MCP_JWT_ISSUER"):
        raise ImproperlyConfigured(
            "MCP_AUTH=jwt needs MCP_JWT_ISSUER=<the identity provider's issuer URL>"
        )
    del MCP_DJANGO["AUTHORIZATION_SERVERS"]
    MCP_DJANGO["TRUSTED_ISSUERS"] = [
        {
            "issuer": os.environ["MCP_JWT_ISSUER"],
            "user_claim": os.environ.get("MCP_JWT_USER_CLAIM", "sub"),
            "user_field": os.environ.get("MCP_JWT_USER_FIELD", "username"),
        }
    ]
# "hide": tools a token's scopes do not allow are left out of lists (default "list": step-up on use).
if os.environ.get("MCP_UNSCOPED_ENTRIES"):
    MCP_DJANGO["UNSCOPED_ENTRIES"] = os.environ["MCP_UNSCOPED_ENTRIES"]
if os.environ.get("MCP_SSE_KEEPALIVE_SECONDS"):
    MCP_DJANGO["SSE_KEEPALIVE_SECONDS"] = float(os.environ["MCP_SSE_KEEPALIVE_SECONDS"])
if os.environ.get("MCP_SSE_MAX_CONNECTION_SECONDS"):
    MCP_DJANGO["SSE_MAX_CONNECTION_SECONDS"] = float(os.environ["MCP_SSE_MAX_CONNECTION_SECONDS"])
# Seconds a URL-elicitation page (secret, confirmation, connect) stays usable; 15 minutes by default.
if os.environ.get("MCP_CLIENT_REQUEST_TIMEOUT"):
    MCP_DJANGO["CLIENT_REQUEST_TIMEOUT"] = float(os.environ["MCP_CLIENT_REQUEST_TIMEOUT"])
if os.environ.get("MCP_ELICITATION_TTL"):
    MCP_DJANGO["ELICITATION_TTL"] = int(os.environ["MCP_ELICITATION_TTL"])
# "1": each tool call's audit row is written before it is answered (docs: the audit how-to).
if os.environ.get("MCP_AUDIT_DURABLE"):
    MCP_DJANGO["AUDIT_DURABLE"] = os.environ["MCP_AUDIT_DURABLE"] == "1"
if os.environ.get("MCP_REQUEST_LEASE_SECONDS"):
    MCP_DJANGO["REQUEST_LEASE_SECONDS"] = float(os.environ["MCP_REQUEST_LEASE_SECONDS"])

# Durable tasks (docs/howto/tasks.md). Unset: each task runs in the web process that made it.
# "database": django-tasks-db's worker runs them (`python manage.py db_worker`; `make run`
# starts it beside Daphne when this is set), so a task outlives the web process.
if os.environ.get("MCP_TASKS_BACKEND") == "database":
    import django

    # Django 6 has django.tasks; on 5.2 the django-tasks backport provides it.
    INSTALLED_APPS += (
        ["django_tasks_db"] if django.VERSION >= (6, 0) else ["django_tasks", "django_tasks_db"]
    )
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    MCP_DJANGO["TASKS_BACKEND"] = "default"
elif os.environ.get("MCP_TASKS_BACKEND"):
    raise ImproperlyConfigured(
        f'MCP_TASKS_BACKEND={os.environ["MCP_TASKS_BACKEND"]!r}: use "database" or leave it unset'
    )
for _name in ("TASK_HEARTBEAT_SECONDS", "TASK_HEARTBEAT_TIMEOUT"):
    if os.environ.get(f"MCP_{_name}"):
        MCP_DJANGO[_name] = float(os.environ[f"MCP_{_name}"])
if os.environ.get("MCP_TASK_POLL_INTERVAL_MS"):
    MCP_DJANGO["TASK_POLL_INTERVAL_MS"] = int(os.environ["MCP_TASK_POLL_INTERVAL_MS"])
# Clients without tasks (Claude, Cursor, ChatGPT) get a task tool's result within 240 s, under
# Claude's 300 s call limit, or the task's id to follow with task_status / task_result.
# MCP_TASK_DEADLINE_SECONDS=off calls task tools directly for them instead.
_deadline = os.environ.get("MCP_TASK_DEADLINE_SECONDS", "240")
MCP_DJANGO["TASK_DEADLINE_SECONDS"] = None if _deadline == "off" else float(_deadline)

# Quotas (README "Quotas and limits"): counted in CACHES["default"], so with REDIS_URL every
# process counts together. "off" turns a limit off; unset keeps mcp_django's default.
_quotas: dict = {}
if os.environ.get("MCP_RATE_LIMIT"):  # tools/call per user, e.g. "600/minute"
    _quotas["TOOL_CALLS"] = (
        None if os.environ["MCP_RATE_LIMIT"] == "off" else os.environ["MCP_RATE_LIMIT"]
    )
if os.environ.get(
    "MCP_RATE_LIMIT_PER_CLIENT"
):  # tools/call per OAuth client, all its users together
    _quotas["TOOL_CALLS_PER_CLIENT"] = (
        None
        if os.environ["MCP_RATE_LIMIT_PER_CLIENT"] == "off"
        else os.environ["MCP_RATE_LIMIT_PER_CLIENT"]
    )
if os.environ.get("MCP_RATE_LIMIT_PER_TOOL"):  # "search_books=10/minute,borrow_book=5/minute"
    _quotas["PER_TOOL"] = dict(
        item.strip().split("=", 1)
        for item in os.environ["MCP_RATE_LIMIT_PER_TOOL"].split(",")
        if "=" in item
    )
if os.environ.get("MCP_MAX_SESSIONS_PER_USER"):
    _quotas["SESSIONS_PER_USER"] = (
        None
        if os.environ["MCP_MAX_SESSIONS_PER_USER"] == "off"
        else int(os.environ["MCP_MAX_SESSIONS_PER_USER"])
    )
for _env, _key in [
    (
        "MCP_MAX_SESSIONS_PER_ADDRESS",
        "SESSIONS_PER_ADDRESS",
    ),  # anonymous sessions per client address
    (
        "MCP_MAX_RUNNING_PER_SESSION",
        "RUNNING_PER_SESSION",
    ),  # tool calls running at once per session
    ("MCP_MAX_RUNNING_PER_USER", "RUNNING_PER_USER"),  # ... per user (anonymous: client address)
    (
        "MCP_MAX_LIVE_TASKS_PER_USER",
        "LIVE_TASKS_PER_USER",
    ),  # durable tasks working or waiting, per user
]:
    if os.environ.get(_env):
        _quotas[_key] = None if os.environ[_env] == "off" else int(os.environ[_env])
if _quotas:
    MCP_DJANGO["QUOTAS"] = _quotas
# Seconds a call answered on a POST's SSE stream runs on once its connection drops, for the
# client to resume the stream; then it is cancelled. "off": never cancelled.
if os.environ.get("MCP_DISCONNECT_GRACE_SECONDS"):
    _grace = os.environ["MCP_DISCONNECT_GRACE_SECONDS"]
    MCP_DJANGO["DISCONNECT_GRACE_SECONDS"] = None if _grace == "off" else float(_grace)

# -- Third-party OAuth: "Bookshelf", another site users connect through a URL elicitation ------
# example_site/integrations/mcp.py (sync_reading_list) uses it. Configured only when
# MCP_CONNECT_PROVIDER_URL names the provider's origin (e.g. https://bookshelf.example.com); its
# OAuth server must list this site's /mcp/connect/callback/ as a redirect URI for the client.
if os.environ.get("MCP_CONNECT_PROVIDER_URL"):
    _provider = os.environ["MCP_CONNECT_PROVIDER_URL"].rstrip("/")
    MCP_DJANGO["CONNECT_PROVIDERS"] = {
        "bookshelf": {
            "label": "Bookshelf",
            "authorize_url": f"{_provider}/o/authorize/",
            "token_url": f"{_provider}/o/token/",
            "client_id": os.environ.get("MCP_CONNECT_CLIENT_ID", ""),
            "client_secret": os.environ.get("MCP_CONNECT_CLIENT_SECRET", ""),
            "scopes": ["reading-list"],
        }
    }
    # The API the tool calls with the user's Bookshelf token, server-side.
    BOOKSHELF_API_URL = f"{_provider}/api/reading-list/"

# -- OAuth 2.1 authorization server (django-oauth-toolkit), set up for MCP clients -------------
# docs/authorization.md explains each choice. DOT's defaults are looser than MCP requires.

# Client ID metadata documents on 127.0.0.1 (the e2e tests serve one): DOT refuses to fetch
# from loopback, rightly, in a deployment. Only with DEBUG on, and only when asked for.
OAUTH_CIMD_ALLOW_LOOPBACK = os.environ.get("OAUTH_CIMD_ALLOW_LOOPBACK") == "1"
OAUTH_CIMD_LOOPBACK_CA_FILE = os.environ.get("OAUTH_CIMD_LOOPBACK_CA_FILE") or None
if OAUTH_CIMD_ALLOW_LOOPBACK and not DEBUG:
    raise ImproperlyConfigured(
        "OAUTH_CIMD_ALLOW_LOOPBACK=1 is for tests and development: it needs DJANGO_DEBUG=1"
    )

# Dynamic client registration: at most this many registrations per client address and window
# ("count/seconds"), answered 429 beyond it.
_count, _, _seconds = os.environ.get("OAUTH_DCR_RATE_LIMIT", "20/3600").partition("/")
OAUTH_DCR_RATE_LIMIT = (int(_count), int(_seconds or 3600))

# CORS for the authorization server (django-cors-headers), which browser-based clients call with
# fetch() from their own origin. Not /o/authorize/: the browser navigates there, no CORS.
# /.well-known/ metadata is public and answers any origin (example_site/accounts/cors.py); the
# protected-resource metadata and /mcp are answered by mcp_django itself, before this middleware.
CORS_URLS_REGEX = r"^/o/(token|revoke_token|register)/"
CORS_ALLOW_ALL_ORIGINS = "*" in MCP_ALLOWED_ORIGINS
CORS_ALLOWED_ORIGINS = [o for o in MCP_ALLOWED_ORIGINS if o != "*"]
# MCP clients (the TypeScript SDK, so the Inspector) send MCP-Protocol-Version on discovery too.
CORS_ALLOW_HEADERS = (*default_headers, "mcp-protocol-version")

OAUTH2_PROVIDER = {
    # Scopes in words: the consent page shows these sentences.
    "SCOPES": {
        "library:read": "Read the books and authors in the catalogue, and see your loans",
        # Also: loans of any member for staff with the desk permission, clear_reading_history.
        "library:write": "Borrow, return and renew books, add and change books in the catalogue",
    },
    # A client that asks for no scope gets reading only (DOT's default is every scope).
    "DEFAULT_SCOPES": ["library:read"],
    # Ask once per client and scope set: consent is skipped while the user holds a working token
    # of that client covering the scopes asked for (a wider set asks again; revoking forgets it).
    "REQUEST_APPROVAL_PROMPT": "auto",
    # Binds every token to the MCP endpoint (RFC 8707), refuses other resources with
    # invalid_target, reads an empty "scope=" as absent, http redirects only to loopback.
    "OAUTH2_VALIDATOR_CLASS": "mcp_django.auth.oauth_validator.MCPOAuth2Validator",
    # A fixed issuer: RFC 8414 metadata, endpoint URLs and RFC 9207 iss do not depend on the
    # Host header (behind a proxy it may be an internal name).
    "OIDC_ISS_ENDPOINT": OAUTH_ISSUER,
    # RFC 9700 (OAuth 2.0 Security BCP) and OAuth 2.1, as MCP requires. DOT keeps the legacy
    # behaviour unless told otherwise (until 4.0).
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only; "plain" refused and not advertised
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,  # no tokens in query strings
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,  # RFC 9207 iss on authorization responses
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,  # tokens hashed at rest; lookups use the checksum
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,  # check --deploy errors without reuse protection
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,  # ... and with wildcard redirect URIs
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,  # ... and without PKCE
    # Left as a warning: "http" must stay allowed for loopback redirects (RFC 8252 native
    # clients, i.e. most MCP clients); the validator refuses http to any other host.
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": False,
    # Desktop and CLI clients register http://localhost/... and listen on any port.
    "ALLOW_LOCALHOST_LOOPBACK": True,
    # Public clients MUST get rotated refresh tokens; replaying a rotated one revokes the family.
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # MCP_ACCESS_TOKEN_SECONDS: shorter to try refresh by hand (the Inspector), longer for demos.
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("MCP_ACCESS_TOKEN_SECONDS", "3600")),
    "REFRESH_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,  # then cleartokens removes them
    # RFC 8414 metadata: what this server actually does, and nothing else.
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    # client_credentials: service clients only (mcp_django.auth.service_clients, installed above).
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
    # "none": MCP clients are public clients (PKCE instead of a secret).
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_basic",
        "client_secret_post",
    ],
    # Client ID metadata documents (CIMD): the client_id is an https URL the server fetches.
    # The preferred registration in MCP 2025-11-25 and later.
    "CIMD_ENABLED": True,
    "CIMD_FETCH_TIMEOUT_SECONDS": 3,
    "CIMD_MAX_DOCUMENT_SIZE": 5 * 1024,  # the draft's recommendation
    "CIMD_METADATA_MIN_AGE_SECONDS": 300,
    "CIMD_METADATA_MAX_AGE_SECONDS": 86400,
    "CIMD_FAILURE_BACKOFF_SECONDS": 60,
    "CIMD_MAX_CONCURRENT_FETCHES": 4,  # per process; fetches hold a worker thread
    "CIMD_METADATA_FETCHER": (
        "example_site.accounts.cimd.LoopbackMetadataFetcher"
        if OAUTH_CIMD_ALLOW_LOOPBACK
        else "mcp_django.auth.oauth_validator.MetadataFetcher"
    ),
    # Dynamic client registration (RFC 7591): deprecated by MCP 2026-07-28 but what most
    # clients still do, anonymously. Rate limited in the view; prune_dcr_clients cleans up.
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
}

# Managed connectors (enterprise-managed authorization, docs/howto/managed-connectors.md): with
# MCP_ID_JAG_ISSUER=<the identity provider's issuer URL>, the token endpoint also exchanges that
# provider's ID-JAG assertions (RFC 7523 jwt-bearer grant) for access tokens, for confidential
# clients, and the RFC 8414 metadata advertises the grant. The assertion's email claim names
# the user (MCP_ID_JAG_USER_CLAIM and MCP_ID_JAG_USER_FIELD choose others, e.g. sub/username).
if os.environ.get("MCP_ID_JAG_ISSUER"):
    MCP_DJANGO["ID_JAG_ISSUERS"] = [
        {
            "issuer": os.environ["MCP_ID_JAG_ISSUER"],
            "user_claim": os.environ.get("MCP_ID_JAG_USER_CLAIM", "email"),
            "user_field": os.environ.get("MCP_ID_JAG_USER_FIELD", "email"),
        }
    ]
    OAUTH2_PROVIDER["OAUTH2_SERVER_CLASS"] = "mcp_django.auth.oauth_server.Server"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "mcp_django": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "WARNING")}
    },
}
