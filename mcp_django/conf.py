"""The ``MCP_DJANGO`` settings dict, read lazily through one typed object.

Modelled on DRF's ``api_settings``: defaults here, the user's dict read on first access (never
at import), import strings resolved on access, the cache cleared on ``setting_changed``.
Shape and type problems are reported by ``checks.py`` with ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from .version import __version__

DEFAULTS: dict[str, Any] = {
    # What the server says about itself in ``initialize``.
    "SERVER_NAME": "mcp_django",
    "SERVER_VERSION": None,  # None: the installed mcp_django version
    "SERVER_TITLE": None,
    "INSTRUCTIONS": None,
    # "none", "django", "oauth", "jwt", or a dotted path to a BaseAuthentication subclass.
    "AUTHENTICATION": "django",
    # OAuth resource server ("oauth"): the canonical URI of the MCP endpoint, exactly as clients
    # name it in the token request's ``resource`` (e.g. "https://api.example.com/mcp"). Tokens
    # must be issued for it. None derives it from each request (development only: W005).
    "RESOURCE_URL": None,
    # Issuers of the authorization servers clients should use; None: this site's own origin
    # ("oauth"), or the TRUSTED_ISSUERS ("jwt").
    "AUTHORIZATION_SERVERS": None,
    # "jwt": the external issuers whose RFC 9068 JWT access tokens are accepted, each a dict:
    # {"issuer": "https://idp.example.com", "audience": None (RESOURCE_URL), "jwks_uri": None
    # (from the issuer's metadata), "algorithms": [...] (RS/PS/ES families), "user_claim": "sub",
    # "user_field": "username", "create_users": False, "scope_prefix": ""}.
    "TRUSTED_ISSUERS": [],
    # "jwt": the function (claims, issuer) -> user or None that maps a token to a Django user.
    "JWT_USER_HOOK": "mcp_django.auth.subjects.default_user_hook",
    # "jwt": seconds of clock skew allowed when checking a token's exp, nbf and iat.
    "JWT_LEEWAY": 60,
    # Identity providers whose ID-JAG assertions this site's own authorization server exchanges
    # for access tokens (RFC 7523 jwt-bearer grant; docs/howto/managed-connectors.md): entries
    # shaped like TRUSTED_ISSUERS', "audience" being this authorization server's issuer (None:
    # OAUTH2_PROVIDER["OIDC_ISS_ENDPOINT"]). Users are found by JWT_USER_HOOK; JWT_LEEWAY applies.
    "ID_JAG_ISSUERS": [],
    # The minimal scopes for basic use, advertised in the metadata and the 401 challenge.
    "SCOPES_SUPPORTED": [],
    # Scopes every request needs (on top of any an individual tool, resource or prompt needs).
    "REQUIRED_SCOPES": [],
    # An entry the user's permissions allow but the OAuth token's scopes do not: "list" it (a
    # call answers 403 insufficient_scope, and the client steps up: the spec's flow) or "hide" it.
    "UNSCOPED_ENTRIES": "list",
    # A human-readable name for the protected-resource metadata; None: SERVER_TITLE or SERVER_NAME.
    "RESOURCE_NAME": None,
    # 2026-07-28 cache hints (ttlMs): how long clients may keep server/discover and the lists,
    # and resources/read answers (per resource with cache_ttl_ms=). "private" whenever the
    # answer depends on the user (authentication on), "public" otherwise.
    "CACHE_TTL_MS": 60_000,
    "READ_CACHE_TTL_MS": 0,
    # Serve the 2024-11-05 HTTP+SSE transport beside Streamable HTTP (GET <endpoint>/sse, then
    # POST <endpoint>/messages/?session_id=...), for older clients and gateways.
    "HTTP_SSE": True,
    # 2026-07-28 subscriptions/listen: most resource URIs one stream may follow.
    "MAX_LISTEN_URIS": 100,
    # How POST requests are answered by default: "json" or "sse". A tool that takes a Context
    # (and so may send progress, logs or requests while it runs) is always answered with SSE.
    "RESPONSE_MODE": "json",
    "MAX_BODY_SIZE": 4 * 1024 * 1024,
    "MAX_BATCH_SIZE": 100,
    # Origins allowed besides the endpoint's own (exact "scheme://host[:port]", or "*").
    "ALLOWED_ORIGINS": [],
    # Seconds of inactivity after which a session expires.
    "SESSION_TTL": 24 * 3600,
    # Seconds a process may serve a session from memory before reading it again. Changes are
    # broadcast over the channel layer at once; this bounds staleness if a broadcast is lost.
    # 0 reads the session from the database on every request.
    "SESSION_CACHE_SECONDS": 30,
    # Bounds of that in-memory cache per process: entries, and approximate bytes (a session's
    # clientInfo and capabilities count fully). The least recently loaded go first.
    "SESSION_CACHE_MAX_ENTRIES": 10_000,
    "SESSION_CACHE_MAX_BYTES": 32 * 1024 * 1024,
    # What a client may say about itself in ``initialize`` (bytes as JSON, and nesting depth
    # of objects and arrays); more is refused with -32602 and nothing is stored.
    "MAX_CLIENT_INFO_BYTES": 4 * 1024,
    "MAX_CLIENT_CAPABILITIES_BYTES": 64 * 1024,
    "MAX_CLIENT_VALUE_DEPTH": 16,
    # Longest request id or progress token (characters) a client may send: both are echoed
    # into every event of the request's stream, and stored.
    "MAX_CLIENT_ID_LENGTH": 256,
    # Resumes (GET with Last-Event-ID) replay the store in pages of at most this many events
    # and bytes, each written out (and drained, where the server tells) before the next read.
    "REPLAY_PAGE_EVENTS": 256,
    "REPLAY_PAGE_BYTES": 256 * 1024,
    # Resumes replaying at once, per session, per user and per process; more are refused
    # with 429 (session, user) or 503 (process) and Retry-After.
    "MAX_RESUMES_PER_SESSION": 2,
    "MAX_RESUMES_PER_USER": 8,
    "MAX_RESUMES": 64,
    # Seconds a stream waits for a client that does not read before closing the connection
    # (the events stay stored; the client resumes with Last-Event-ID).
    "SSE_WRITE_TIMEOUT": 60,
    # The most one POST stream may hold; a request that would exceed it is answered with an
    # error and the stream ends.
    "MAX_STREAM_EVENTS": 100_000,
    "MAX_STREAM_BYTES": 32 * 1024 * 1024,
    # The endpoint's plain view (WSGI, or ASGI without the router) streams a call that sends
    # progress or logs as its own SSE answer while fewer than this many such answers are open in
    # the process; each holds a server thread and one for its database calls. Past it a call is
    # answered as JSON without its notifications, never made to wait.
    "PLAIN_STREAMS": 8,
    # Seconds such an answer may stream: then the call is cancelled and answered with an error
    # (-32603), so that a client that stopped reading, or left unseen (WSGI sees a disconnect
    # only when a write fails), holds no thread longer. None: no bound.
    "PLAIN_STREAM_SECONDS": 300,
    # Rate limits on tools/call and caps on what one caller holds open, counted in the cache
    # named by "CACHE" (shared by every process when it is Redis). A rate is "N/second",
    # "N/minute", "N/hour" or "N/day" (also "N/5m"); None turns one limit off. A user's dict
    # is merged over this one. README "Quotas and limits".
    "QUOTAS": {
        "CACHE": "default",
        "TOOL_CALLS": "600/minute",  # per user (anonymous: per client address)
        "TOOL_CALLS_PER_CLIENT": None,  # per OAuth client, all its users together
        "PER_TOOL": {},  # {"tool_name": "10/minute"}, per user
        "SESSIONS_PER_USER": 100,  # live sessions of an authenticated user
        "SESSIONS_PER_ADDRESS": 100,  # live sessions of anonymous callers from one client address
        "RUNNING_PER_SESSION": 32,  # tools/call running at once in one session
        # tools/call running at once for one user (anonymous: one client address)
        "RUNNING_PER_USER": 64,
        "STREAMS_PER_SESSION": 64,  # open SSE streams of one session (each streamed request is one)
        "STREAMS_PER_USER": 256,  # open SSE streams of one user (anonymous: client address)
        "PENDING_ELICITATIONS_PER_USER": 20,  # URL elicitations waiting for their page
        # Per user (anonymous: per client address): tasks working or waiting for input, tasks parked
        # waiting for the client's input, durable tasks created.
        "LIVE_TASKS_PER_USER": 100,
        "WAITING_TASKS_PER_USER": 20,
        "NEW_TASKS_PER_USER": "60/minute",
    },
    # Durable tasks (2026-07-28, the io.modelcontextprotocol/tasks extension; README "Durable
    # tasks"). The alias in Django's TASKS setting whose backend runs them (django.tasks, or the
    # django-tasks backport on Django 5.2), e.g. django-tasks-db's worker; None runs each task in
    # the web process that made it, still as a row that every process answers for.
    "TASKS_BACKEND": None,
    # How long a task is kept from its creation (ttlMs): tasks/get answers it until then, and
    # mcp_clearsessions deletes it after. None keeps tasks until deleted by hand.
    "TASK_TTL_MS": 24 * 3600 * 1000,
    # How often clients should poll tasks/get (pollIntervalMs), and the running process its row
    # (for answers and cancellation).
    "TASK_POLL_INTERVAL_MS": 1000,
    # Seconds between two heartbeats of a running task, and seconds without one after which the
    # task died with its process and is marked failed.
    "TASK_HEARTBEAT_SECONDS": 5,
    "TASK_HEARTBEAT_TIMEOUT": 30,
    # Seconds a task may wait for its client's answers (input_required, parked: no process
    # holds it) before it is failed with "input timed out"; each answer the client sends
    # restarts the wait.
    "TASK_INPUT_TIMEOUT": 3600,
    # Seconds a call of a task tool from a client without tasks waits for its task before it
    # answers with the task's id (tools task_status, task_result and task_cancel follow it).
    # None (the default) calls task tools directly for such clients. Under the client's own call
    # limit: Claude stops a call at 300 s (docs/howto/tasks.md, "Clients without tasks").
    "TASK_DEADLINE_SECONDS": None,
    # The most a task keeps, as JSON bytes: its payload (arguments, the answers so far and the
    # client's _meta; larger arguments or answers are refused with -32602 and nothing is kept),
    # and its result (a larger one fails the task). Both are kept until the task ends (the
    # payload) or is deleted (the result).
    "TASK_MAX_PAYLOAD_BYTES": 1024 * 1024,
    "TASK_MAX_RESULT_BYTES": 4 * 1024 * 1024,
    # Seconds that terminated or expired sessions (and their events) are kept for the admin
    # before ``mcp_clearsessions`` removes them.
    "SESSION_RETENTION": 7 * 24 * 3600,
    # Seconds an event is kept for replay, even in a live session.
    "EVENT_RETENTION": 24 * 3600,
    "PAGE_SIZE": 50,
    # Characters of a tools/call result's JSON beyond which it is cut, with a notice (near what
    # clients give their model: Claude Code 25,000 tokens, about 100,000 characters). None: off.
    "MAX_RESULT_CHARS": 100_000,
    # Scheme of model resources: "<scheme>://<app_label>/<name>/{pk}".
    "MODEL_URI_SCHEME": "django",
    "SSE_RETRY_MS": 1000,
    "SSE_KEEPALIVE_SECONDS": 15,
    # Close an SSE connection after this many seconds (the client resumes with Last-Event-ID,
    # 2025-11-25 SSE polling). Finite by default, so no connection outlives its credential
    # for long; None keeps connections open.
    "SSE_MAX_CONNECTION_SECONDS": 3600,
    # Seconds between two re-checks of an open SSE stream's credential (the configured
    # authentication re-run on the stream's request headers); a revoked or expired token,
    # or a logged-out Django session, ends the stream. 0 turns the re-check off.
    "SSE_REAUTH_SECONDS": 60,
    # Seconds a process's claim on a running request lasts unless renewed (it renews every
    # third of it while alive): a request whose claim lapsed died with its process, and its
    # stream is ended with an error on resume and when a process starts. Short, so a client
    # resuming the stream of a request whose host died hears so within about 1.33 leases
    # (the lease, then the next renewal-and-sweep of a live process).
    "REQUEST_LEASE_SECONDS": 10,
    # Seconds a request answered on a POST's SSE stream goes on running once its connection is
    # gone with no other connection on the stream: a client that resumes the stream (GET with
    # Last-Event-ID) within it keeps it; otherwise it is cancelled. 0 cancels at once; None never
    # does (it runs to its end). A request answered with JSON is cancelled as soon as its
    # connection goes, and so is a 2026-07-28 request (closing its stream is its cancellation).
    "DISCONNECT_GRACE_SECONDS": 30,
    # Seconds a server-to-client request (sampling, elicitation, ...) stays pending before it
    # is marked expired; None: CLIENT_REQUEST_TIMEOUT plus REQUEST_LEASE_SECONDS.
    "SERVER_REQUEST_TTL": None,
    # Which CHANNEL_LAYERS alias delivers events between processes.
    "CHANNEL_LAYER": "default",
    "EVENT_STORE_CLASS": "mcp_django.stores.DatabaseEventStore",
    # Minimum seconds between two progress notifications of one request; updates in between
    # are dropped (the final one, progress == total, always goes out).
    "PROGRESS_MIN_INTERVAL": 0.02,
    # Loggers whose records, emitted while a tool runs, are forwarded to the client as
    # notifications/message (e.g. ["myapp.tools"]). Empty: the bridge is off.
    "LOG_BRIDGE_LOGGERS": [],
    # Seconds a tool waits for the client to answer a request (sampling, elicitation, roots,
    # ping) before it sends notifications/cancelled and gives up.
    "CLIENT_REQUEST_TIMEOUT": 600,
    # Seconds a URL-mode elicitation page stays usable.
    "ELICITATION_TTL": 15 * 60,
    # Keys for encrypting users' secrets (the first encrypts, all decrypt); None derives them
    # from SECRET_KEY and SECRET_KEY_FALLBACKS.
    "SECRETS_KEYS": None,
    # Keys that seal the ``requestState`` of input-required results (2026-07-28): the first
    # seals, all open, so a key can be rotated out. Empty derives them from SECRET_KEY and
    # SECRET_KEY_FALLBACKS (with their own HKDF salt, so they never equal SECRETS_KEYS' keys).
    "REQUEST_STATE_KEYS": [],
    # Seconds a sealed requestState stays valid: short, since it is a bearer of the request.
    "REQUEST_STATE_TTL": 600,
    # Longest requestState (characters) the server seals or accepts; longer is refused unread.
    "MAX_REQUEST_STATE_BYTES": 64 * 1024,
    # Third-party OAuth providers a user can connect through a URL elicitation, by name:
    # {"github": {"authorize_url": ..., "token_url": ..., "client_id": ..., "client_secret": ...,
    #             "scopes": [...], "label": "GitHub"}}. Tools use ctx.require_connection(name).
    "CONNECT_PROVIDERS": {},
    # ctx.user_state / ctx.session_state limits: keys per user (or session), bytes per value.
    "STATE_MAX_KEYS": 100,
    "STATE_MAX_VALUE_BYTES": 64 * 1024,
    # Show exception text in tool error results (never tracebacks). None follows DEBUG.
    "TOOL_ERROR_DETAILS": None,
    # OpenTelemetry spans and metrics of every request (mcp_django.ops.tracing): "auto" traces when
    # opentelemetry-api is importable, True requires it (E040), False never imports it.
    "TRACING": "auto",
    # The audit trail: a ToolCall row (admin: "Tool calls") for every tools/call, on every
    # transport and revision, written in batches off the request's path. False turns it off.
    "AUDIT_TOOL_CALLS": True,
    # Days a ToolCall row is kept; mcp_clearsessions deletes older ones. None keeps them forever.
    "AUDIT_RETENTION_DAYS": 90,
    # Argument names whose values are never stored, at any depth, in any case or separator
    # ("apiKey", "API-KEY" and "api.key" are "api_key"), besides a tool's sensitive=[...], the
    # writeOnly properties of its input schema and every name holding a secret word
    # (audit.SECRET_WORDS: "db_password", "sessionToken", "pin", but not "spinning").
    "AUDIT_SENSITIVE_ARGUMENTS": [
        "password",
        "passwd",
        "passphrase",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "api_key",
        "apikey",
        "authorization",
        "cookie",
        "private_key",
        "credentials",
    ],
    # Argument names stored although a secret word is in them (a tool's "max_tokens"); a name
    # listed in AUDIT_SENSITIVE_ARGUMENTS, sensitive=[...] or writeOnly stays hidden.
    "AUDIT_ALLOWED_ARGUMENTS": [],
    # Largest arguments (bytes as JSON, after redaction) stored with a call; larger ones are
    # replaced by a marker giving their size.
    "AUDIT_MAX_ARGUMENTS_BYTES": 8 * 1024,
    # Calls waiting to be written, per process; beyond it new ones are dropped (counted and
    # logged), so a slow database never makes a request wait or the process grow.
    "AUDIT_BUFFER_SIZE": 10_000,
    # Seconds between two batched writes of the audit trail: after a crash (kill -9), calls
    # answered up to this long before it may have no row.
    "AUDIT_FLUSH_INTERVAL": 1.0,
    # True writes each call's row as it starts ("running") and its outcome before the answer
    # is sent, on the request's path: no answered call is missing after a crash, and a call a
    # crash cut off is marked "interrupted" once its lease (REQUEST_LEASE_SECONDS) lapses.
    "AUDIT_DURABLE": False,
}

IMPORT_STRINGS = frozenset({"EVENT_STORE_CLASS"})

AUTHENTICATION_ALIASES = {
    "none": "mcp_django.auth.base.NoAuthentication",
    "django": "mcp_django.auth.base.DjangoAuthentication",
    "oauth": "mcp_django.auth.oauth.OAuthAuthentication",
    "jwt": "mcp_django.auth.external.JWTAuthentication",
}


def perform_import(value: Any, setting_name: str) -> Any:
    """Import a dotted path, naming the setting in the error when it fails."""
    if value is None or not isinstance(value, str):
        return value
    try:
        return import_string(value)
    except ImportError as exc:
        raise ImportError(
            f"Could not import {value!r} for MCP_DJANGO[{setting_name!r}]: {exc}"
        ) from exc


T = TypeVar("T")


def _as_is(value: Any) -> Any:
    return value


class Setting(Generic[T]):
    """A typed accessor of one ``MCP_DJANGO`` key on :class:`MCPSettings`: ``max_body_size:
    Setting[int] = Setting("MAX_BODY_SIZE", int)`` reads the key (user value or default) and
    converts it, so callers, and mypy, know what each setting is."""

    def __init__(self, key: str, convert: Callable[[Any], T]) -> None:
        self.key = key
        self.convert = convert

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Setting[T]: ...
    @overload
    def __get__(self, instance: MCPSettings, owner: type | None = None) -> T: ...
    def __get__(self, instance: MCPSettings | None, owner: type | None = None) -> T | Setting[T]:
        if instance is None:
            return self  # the class attribute is the accessor
        return self.convert(instance.get(self.key))


def _string_list(value: Any) -> list[str]:
    """A list setting as a list; anything else (which a system check reports) as empty."""
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


class MCPSettings:
    """Lazy, cached access to ``settings.MCP_DJANGO`` with defaults."""

    def __init__(
        self, user_settings: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None
    ) -> None:
        self._explicit = user_settings
        self.defaults = defaults or DEFAULTS
        self._cached: set[str] = set()

    @property
    def user_settings(self) -> dict[str, Any]:
        if not hasattr(self, "_user_settings"):
            self._user_settings = (
                self._explicit
                if self._explicit is not None
                else getattr(settings, "MCP_DJANGO", {}) or {}
            )
        return self._user_settings

    def get(self, name: str) -> Any:
        if name not in self.defaults:
            raise AttributeError(f"Invalid MCP_DJANGO setting: {name!r}")
        if name in self.__dict__:
            return self.__dict__[name]
        value = self.user_settings.get(name, self.defaults[name])
        if name in IMPORT_STRINGS:
            value = perform_import(value, name)
        self._cached.add(name)
        self.__dict__[name] = value
        return value

    if not TYPE_CHECKING:
        # Only reached for names that are not accessors: an unknown key is an AttributeError
        # naming the setting. Hidden from mypy, so that a misspelt accessor is a type error
        # rather than Any; every key has a typed accessor below (tests/test_conf.py).

        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):
                raise AttributeError(name)
            return self.get(name)

    def reload(self) -> None:
        for name in self._cached:
            self.__dict__.pop(name, None)
        self._cached.clear()
        if hasattr(self, "_user_settings"):
            del self._user_settings

    # Typed accessors, so that callers (and mypy) know what each setting is.
    server_name: Setting[str] = Setting("SERVER_NAME", str)

    @property
    def server_version(self) -> str:
        value = self.get("SERVER_VERSION")
        if value is None:
            return __version__
        return str(value)

    response_mode: Setting[str] = Setting("RESPONSE_MODE", str)
    max_body_size: Setting[int] = Setting("MAX_BODY_SIZE", int)
    max_batch_size: Setting[int] = Setting("MAX_BATCH_SIZE", int)
    allowed_origins: Setting[list[str]] = Setting("ALLOWED_ORIGINS", list)
    session_ttl: Setting[int] = Setting("SESSION_TTL", int)
    page_size: Setting[int] = Setting("PAGE_SIZE", int)
    max_result_chars: Setting[int | None] = Setting("MAX_RESULT_CHARS", _as_is)
    sse_retry_ms: Setting[int] = Setting("SSE_RETRY_MS", int)
    sse_keepalive_seconds: Setting[float] = Setting("SSE_KEEPALIVE_SECONDS", float)
    cache_ttl_ms: Setting[int] = Setting("CACHE_TTL_MS", int)
    read_cache_ttl_ms: Setting[int] = Setting("READ_CACHE_TTL_MS", int)
    max_listen_uris: Setting[int] = Setting("MAX_LISTEN_URIS", int)
    http_sse: Setting[bool] = Setting("HTTP_SSE", bool)

    @property
    def sse_max_connection_seconds(self) -> float | None:
        value = self.get("SSE_MAX_CONNECTION_SECONDS")
        return None if value is None else float(value)

    sse_reauth_seconds: Setting[float] = Setting("SSE_REAUTH_SECONDS", float)
    request_lease_seconds: Setting[float] = Setting("REQUEST_LEASE_SECONDS", float)

    @property
    def server_request_ttl(self) -> float:
        value = self.get("SERVER_REQUEST_TTL")
        if value is None:
            return self.client_request_timeout + self.request_lease_seconds
        return float(value)

    @property
    def disconnect_grace_seconds(self) -> float | None:
        value = self.get("DISCONNECT_GRACE_SECONDS")
        return None if value is None else float(value)

    progress_min_interval: Setting[float] = Setting("PROGRESS_MIN_INTERVAL", float)
    client_request_timeout: Setting[float] = Setting("CLIENT_REQUEST_TIMEOUT", float)

    @property
    def authentication_class(self) -> type:
        # Imported once per value, like the IMPORT_STRINGS (every request reads it).
        cached: type | None = self.__dict__.get("_authentication_class")
        if cached is not None:
            return cached
        value = self.get("AUTHENTICATION")
        path = AUTHENTICATION_ALIASES.get(value, value) if isinstance(value, str) else value
        # A dotted path or a class given directly; checks.py (E004) reports anything else.
        auth_class: type = perform_import(path, "AUTHENTICATION") if isinstance(path, str) else path
        self._cached.add("_authentication_class")
        self.__dict__["_authentication_class"] = auth_class
        return auth_class

    session_cache_seconds: Setting[float] = Setting("SESSION_CACHE_SECONDS", float)
    session_cache_max_entries: Setting[int] = Setting("SESSION_CACHE_MAX_ENTRIES", int)
    session_cache_max_bytes: Setting[int] = Setting("SESSION_CACHE_MAX_BYTES", int)
    max_client_info_bytes: Setting[int] = Setting("MAX_CLIENT_INFO_BYTES", int)
    max_client_capabilities_bytes: Setting[int] = Setting("MAX_CLIENT_CAPABILITIES_BYTES", int)
    max_client_value_depth: Setting[int] = Setting("MAX_CLIENT_VALUE_DEPTH", int)
    max_client_id_length: Setting[int] = Setting("MAX_CLIENT_ID_LENGTH", int)
    replay_page_events: Setting[int] = Setting("REPLAY_PAGE_EVENTS", int)
    replay_page_bytes: Setting[int] = Setting("REPLAY_PAGE_BYTES", int)
    max_resumes_per_session: Setting[int] = Setting("MAX_RESUMES_PER_SESSION", int)
    max_resumes_per_user: Setting[int] = Setting("MAX_RESUMES_PER_USER", int)
    max_resumes: Setting[int] = Setting("MAX_RESUMES", int)
    sse_write_timeout: Setting[float] = Setting("SSE_WRITE_TIMEOUT", float)
    max_stream_events: Setting[int] = Setting("MAX_STREAM_EVENTS", int)
    max_stream_bytes: Setting[int] = Setting("MAX_STREAM_BYTES", int)
    plain_streams: Setting[int] = Setting("PLAIN_STREAMS", int)

    @property
    def plain_stream_seconds(self) -> float | None:
        value = self.get("PLAIN_STREAM_SECONDS")
        return None if value is None else float(value)

    event_retention: Setting[int] = Setting("EVENT_RETENTION", int)
    event_store_class: Setting[Any] = Setting("EVENT_STORE_CLASS", _as_is)
    instructions: Setting[str | None] = Setting("INSTRUCTIONS", _as_is)
    log_bridge_loggers: Setting[list[str]] = Setting("LOG_BRIDGE_LOGGERS", _string_list)
    server_title: Setting[str | None] = Setting("SERVER_TITLE", _as_is)
    session_retention: Setting[int] = Setting("SESSION_RETENTION", int)
    tasks_backend: Setting[str | None] = Setting("TASKS_BACKEND", _as_is)
    task_ttl_ms: Setting[int | None] = Setting("TASK_TTL_MS", _as_is)
    task_poll_interval_ms: Setting[int] = Setting("TASK_POLL_INTERVAL_MS", int)
    task_heartbeat_seconds: Setting[float] = Setting("TASK_HEARTBEAT_SECONDS", float)
    task_heartbeat_timeout: Setting[float] = Setting("TASK_HEARTBEAT_TIMEOUT", float)
    task_input_timeout: Setting[float] = Setting("TASK_INPUT_TIMEOUT", float)
    task_deadline_seconds: Setting[float | None] = Setting("TASK_DEADLINE_SECONDS", _as_is)
    task_max_payload_bytes: Setting[int] = Setting("TASK_MAX_PAYLOAD_BYTES", int)
    task_max_result_bytes: Setting[int] = Setting("TASK_MAX_RESULT_BYTES", int)
    authentication: Setting[Any] = Setting("AUTHENTICATION", _as_is)
    authorization_servers: Setting[list[str] | None] = Setting("AUTHORIZATION_SERVERS", _as_is)
    channel_layer: Setting[str] = Setting("CHANNEL_LAYER", str)
    tracing: Setting[bool | str] = Setting("TRACING", _as_is)

    @property
    def connect_providers(self) -> dict[str, dict[str, Any]]:
        value = self.get("CONNECT_PROVIDERS")
        return value if isinstance(value, dict) else {}  # anything else is E015

    @property
    def quotas(self) -> dict[str, Any]:
        """``QUOTAS``, the user's keys merged over the defaults (a malformed value is E035's)."""
        value = self.get("QUOTAS")
        # Merged once per value (it is read several times per tools/call): callers may compare
        # the result by identity to tell that the setting changed.
        merged = self.__dict__.get("_quotas")
        if merged is None or merged[0] is not value:
            merged = self.__dict__["_quotas"] = (
                value,
                {**self.defaults["QUOTAS"], **(value if isinstance(value, dict) else {})},
            )
        return merged[1]

    elicitation_ttl: Setting[float] = Setting("ELICITATION_TTL", float)
    model_uri_scheme: Setting[str] = Setting("MODEL_URI_SCHEME", str)
    required_scopes: Setting[list[str]] = Setting("REQUIRED_SCOPES", _string_list)
    resource_name: Setting[str | None] = Setting("RESOURCE_NAME", _as_is)

    @property
    def resource_url(self) -> str | None:
        return self.get("RESOURCE_URL") or None

    scopes_supported: Setting[list[str]] = Setting("SCOPES_SUPPORTED", _string_list)
    trusted_issuers: Setting[Any] = Setting("TRUSTED_ISSUERS", _as_is)

    @property
    def jwt_user_hook(self) -> Callable[..., Any]:
        """JWT_USER_HOOK as the function, imported once per value: each verified token calls it."""
        cached: Callable[..., Any] | None = self.__dict__.get("_jwt_user_hook")
        if cached is not None:
            return cached
        hook: Callable[..., Any] = perform_import(self.get("JWT_USER_HOOK"), "JWT_USER_HOOK")
        self._cached.add("_jwt_user_hook")
        self.__dict__["_jwt_user_hook"] = hook
        return hook

    jwt_leeway: Setting[float] = Setting("JWT_LEEWAY", float)
    id_jag_issuers: Setting[Any] = Setting("ID_JAG_ISSUERS", _as_is)
    unscoped_entries: Setting[str] = Setting("UNSCOPED_ENTRIES", str)
    secrets_keys: Setting[Any] = Setting("SECRETS_KEYS", _as_is)
    request_state_keys: Setting[list[str]] = Setting("REQUEST_STATE_KEYS", _string_list)
    request_state_ttl: Setting[float] = Setting("REQUEST_STATE_TTL", float)
    max_request_state_bytes: Setting[int] = Setting("MAX_REQUEST_STATE_BYTES", int)
    state_max_keys: Setting[int] = Setting("STATE_MAX_KEYS", int)
    state_max_value_bytes: Setting[int] = Setting("STATE_MAX_VALUE_BYTES", int)

    @property
    def tool_error_details(self) -> bool:
        value = self.get("TOOL_ERROR_DETAILS")
        return bool(settings.DEBUG) if value is None else bool(value)

    audit_tool_calls: Setting[bool] = Setting("AUDIT_TOOL_CALLS", bool)

    @property
    def audit_retention_days(self) -> int | None:
        value = self.get("AUDIT_RETENTION_DAYS")
        return None if value is None else int(value)

    audit_sensitive_arguments: Setting[list[str]] = Setting(
        "AUDIT_SENSITIVE_ARGUMENTS", _string_list
    )
    audit_allowed_arguments: Setting[list[str]] = Setting("AUDIT_ALLOWED_ARGUMENTS", _string_list)
    audit_max_arguments_bytes: Setting[int] = Setting("AUDIT_MAX_ARGUMENTS_BYTES", int)
    audit_buffer_size: Setting[int] = Setting("AUDIT_BUFFER_SIZE", int)
    audit_flush_interval: Setting[float] = Setting("AUDIT_FLUSH_INTERVAL", float)
    audit_durable: Setting[bool] = Setting("AUDIT_DURABLE", bool)


mcp_settings = MCPSettings()


@receiver(setting_changed)
def reload_mcp_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_DJANGO":
        mcp_settings.reload()
