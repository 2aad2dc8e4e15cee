"""System checks for everything a user can get wrong in configuration (ids mcp_django.E/W0xx)."""

from __future__ import annotations

import math
import os
import re
import sys
from contextlib import suppress
from difflib import get_close_matches
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import ENVIRONMENT_VARIABLE, settings
from django.contrib.auth import load_backend
from django.contrib.auth.models import AnonymousUser
from django.core.cache import BaseCache
from django.core.checks import CheckMessage, Error, Warning
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.http import HttpRequest
from django.urls import URLResolver, get_resolver
from django.utils.module_loading import import_string

from .auth.base import BaseAuthentication, NoAuthentication
from .conf import AUTHENTICATION_ALIASES, DEFAULTS, mcp_settings
from .extensions.skills import APP_FOLDER, Skill, discover
from .ops import tracing
from .ops.quotas.backends import has_atomic_incr
from .ops.quotas.limits import CAP_KEYS, QUOTA_KEYS, RATE_KEYS, parse_rate
from .protocol.negotiation import normalize_origin
from .registry.sites import all_sites
from .registry.sites import site as default_site
from .routing import routes_through_router
from .stores import BaseEventStore
from .tables import MIGRATE_HINT, missing_tables_message, sessions_database, unapplied_migrations

POSITIVE_INTS = (
    "MAX_BODY_SIZE",
    "MAX_BATCH_SIZE",
    "SESSION_TTL",
    "SESSION_RETENTION",
    "EVENT_RETENTION",
    "PAGE_SIZE",
    "SSE_RETRY_MS",
    "ELICITATION_TTL",
    "STATE_MAX_KEYS",
    "STATE_MAX_VALUE_BYTES",
)


def _user_settings() -> Any:
    return getattr(settings, "MCP_DJANGO", {})


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    user = _user_settings()
    if not isinstance(user, dict):
        return [
            Error(
                "MCP_DJANGO must be a dict.",
                hint="Set MCP_DJANGO = {...} in your settings.",
                id="mcp_django.E001",
            )
        ]
    errors: list[CheckMessage] = _check_setting_name()
    for key in user:
        if key not in DEFAULTS:
            close = get_close_matches(str(key), DEFAULTS, n=1)
            hint = (
                f"Did you mean {close[0]!r}?"
                if close
                else f"Valid keys: {', '.join(sorted(DEFAULTS))}."
            )
            errors.append(
                Error(f"Unknown MCP_DJANGO setting {key!r}.", hint=hint, id="mcp_django.E002")
            )
    mode = user.get("RESPONSE_MODE", DEFAULTS["RESPONSE_MODE"])
    if mode not in ("json", "sse"):
        errors.append(
            Error(
                f"MCP_DJANGO['RESPONSE_MODE'] is {mode!r}.",
                hint='Use "json" or "sse".',
                id="mcp_django.E003",
            )
        )
    unscoped = user.get("UNSCOPED_ENTRIES", DEFAULTS["UNSCOPED_ENTRIES"])
    if unscoped not in ("list", "hide"):
        errors.append(
            Error(
                f"MCP_DJANGO['UNSCOPED_ENTRIES'] is {unscoped!r}.",
                hint='Use "list" (the spec\'s step-up flow) or "hide".',
                id="mcp_django.E045",
            )
        )
    auth = user.get("AUTHENTICATION", DEFAULTS["AUTHENTICATION"])
    auth_path = AUTHENTICATION_ALIASES.get(auth, auth) if isinstance(auth, str) else auth
    try:
        auth_class = import_string(auth_path) if isinstance(auth_path, str) else auth_path
        if not (isinstance(auth_class, type) and issubclass(auth_class, BaseAuthentication)):
            raise TypeError("not a BaseAuthentication subclass")
    except (ImportError, TypeError) as exc:
        errors.append(
            Error(
                f"MCP_DJANGO['AUTHENTICATION'] {auth!r} is not usable: {exc}.",
                hint='Use "none", "django", or the dotted path of a mcp_django.auth.base.BaseAuthentication subclass.',
                id="mcp_django.E004",
            )
        )
    for key in POSITIVE_INTS:
        value = user.get(key, DEFAULTS[key])
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            errors.append(
                Error(
                    f"MCP_DJANGO[{key!r}] must be a positive integer, not {value!r}.",
                    id="mcp_django.E005",
                )
            )
    for key in (
        "SSE_KEEPALIVE_SECONDS",
        "SSE_MAX_CONNECTION_SECONDS",
        "CLIENT_REQUEST_TIMEOUT",
        "PROGRESS_MIN_INTERVAL",
        "SESSION_CACHE_SECONDS",
        "SSE_REAUTH_SECONDS",
        "SERVER_REQUEST_TTL",
        "DISCONNECT_GRACE_SECONDS",
    ):
        value = user.get(key, DEFAULTS[key])
        if value is not None and (
            not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0
        ):
            errors.append(
                Error(
                    f"MCP_DJANGO[{key!r}] must be a non-negative number or None, not {value!r}.",
                    id="mcp_django.E017",
                )
            )
    lease = user.get("REQUEST_LEASE_SECONDS", DEFAULTS["REQUEST_LEASE_SECONDS"])
    if not isinstance(lease, (int, float)) or isinstance(lease, bool) or lease <= 0:
        errors.append(
            Error(
                f"MCP_DJANGO['REQUEST_LEASE_SECONDS'] must be a positive number, not {lease!r}.",
                hint="Without a lease every running request would look orphaned; keep the default (60) unless you know why.",
                id="mcp_django.E160",
            )
        )
    keys = user.get("SECRETS_KEYS")
    if keys is not None and (
        not isinstance(keys, (list, tuple))
        or not keys
        or not all(isinstance(k, str) and len(k) >= 32 for k in keys)
    ):
        errors.append(
            Error(
                "MCP_DJANGO['SECRETS_KEYS'] must be None or a non-empty list of strings of 32 characters or more.",
                hint="Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(48))'",
                id="mcp_django.E014",
            )
        )
    providers = user.get("CONNECT_PROVIDERS", {})
    if not isinstance(providers, dict):
        errors.append(
            Error(
                "MCP_DJANGO['CONNECT_PROVIDERS'] must be a dict of provider name to settings.",
                id="mcp_django.E015",
            )
        )
    else:
        for name, config in providers.items():
            missing = [
                k
                for k in ("authorize_url", "token_url", "client_id")
                if not isinstance(config, dict) or not config.get(k)
            ]
            if missing:
                errors.append(
                    Error(
                        f"MCP_DJANGO['CONNECT_PROVIDERS'][{name!r}] lacks {', '.join(missing)}.",
                        id="mcp_django.E018",
                    )
                )
    scheme = user.get("MODEL_URI_SCHEME", DEFAULTS["MODEL_URI_SCHEME"])
    if not isinstance(scheme, str) or not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
        errors.append(
            Error(
                f"MCP_DJANGO['MODEL_URI_SCHEME'] is {scheme!r}, which is not a URI scheme.",
                hint='Use lower-case letters, digits, "+", "-" or ".", starting with a letter (e.g. "django").',
                id="mcp_django.E016",
            )
        )
    bridge = user.get("LOG_BRIDGE_LOGGERS", [])
    if not isinstance(bridge, (list, tuple)) or not all(isinstance(n, str) and n for n in bridge):
        errors.append(
            Error(
                "MCP_DJANGO['LOG_BRIDGE_LOGGERS'] must be a list of logger names.",
                id="mcp_django.E010",
            )
        )
    origins = user.get("ALLOWED_ORIGINS", [])
    if not isinstance(origins, (list, tuple)) or not all(isinstance(o, str) for o in origins):
        errors.append(
            Error("MCP_DJANGO['ALLOWED_ORIGINS'] must be a list of strings.", id="mcp_django.E006")
        )
    else:
        for origin in origins:
            if origin != "*" and normalize_origin(origin) is None:
                errors.append(
                    Error(
                        f"MCP_DJANGO['ALLOWED_ORIGINS'] has {origin!r}, which is not an origin.",
                        hint='Write origins as "https://host[:port]".',
                        id="mcp_django.E019",
                    )
                )
    store = user.get("EVENT_STORE_CLASS", DEFAULTS["EVENT_STORE_CLASS"])
    try:
        store_class = import_string(store) if isinstance(store, str) else store
        if not (isinstance(store_class, type) and issubclass(store_class, BaseEventStore)):
            raise TypeError("not a BaseEventStore subclass")
    except (ImportError, TypeError) as exc:
        errors.append(
            Error(
                f"MCP_DJANGO['EVENT_STORE_CLASS'] {store!r} is not usable: {exc}.",
                id="mcp_django.E007",
            )
        )
    errors += _check_limits(user)
    errors += _check_quotas(user)
    errors += _check_audit(user)
    errors += _check_request_state(user)
    errors += _check_oauth(user, auth)
    errors += _check_channel_layer(user)
    errors += _check_quota_cache_shared(user)
    errors += _check_asgi()
    errors += _check_server()
    errors += _check_tracing(user)
    errors += _check_tasks(user)
    if auth == "none" and not settings.DEBUG:
        errors.append(
            Warning(
                "MCP_DJANGO['AUTHENTICATION'] is 'none' while DEBUG is False: anyone who reaches the endpoint can use it.",
                hint='Use "django" or your own authentication class in production; "none" is for local development and conformance runs.',
                id="mcp_django.W002",
            )
        )
    return errors


def _check_setting_name() -> list[CheckMessage]:
    """A settings dict meant for mcp_django under another name (``DJANGO_MCP``, ``MCPDJANGO``,
    ``mcp_django``...) is never read: every setting silently keeps its default. Only while
    ``MCP_DJANGO`` is unset, and only dicts: a near name (difflib) or a name with "MCP" in it whose
    keys are mcp_django settings. The settings module is read too, for names Django skips
    (it keeps upper-case names only)."""
    if hasattr(settings, "MCP_DJANGO"):
        return []

    def candidate(name: str) -> bool:
        return name != "MCP_DJANGO" and (
            "MCP" in name.upper()
            or bool(get_close_matches(name.upper(), ["MCP_DJANGO"], n=1, cutoff=0.6))
        )

    # Only candidates are read: reading a deprecated setting warns (Django 6.1: EMAIL_BACKEND).
    values: dict[str, Any] = {
        name: getattr(settings, name, None)
        for name in dir(settings)
        if name.isupper() and candidate(name)
    }
    # None under override_settings (and settings.configure()): the environment still names it.
    module_name = getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(ENVIRONMENT_VARIABLE)
    if module_name:
        with suppress(ImportError):
            values.update(
                {
                    k: v
                    for k, v in vars(import_module(module_name)).items()
                    if not k.startswith("_") and k not in values and candidate(k)
                }
            )
    found = []
    for name, value in values.items():
        if not isinstance(value, dict):
            continue
        near = get_close_matches(name.upper(), ["MCP_DJANGO"], n=1, cutoff=0.6)
        if near or any(key in DEFAULTS for key in value):
            found.append(name)
    return [
        Warning(
            f"The setting {name!r} looks like mcp_django's settings, which are read from MCP_DJANGO only: "
            "every mcp_django setting keeps its default.",
            hint=f"Rename {name} to MCP_DJANGO (upper-case: Django reads upper-case settings only).",
            id="mcp_django.W181",
        )
        for name in sorted(found)
    ]


def _check_tracing(user: dict[str, Any]) -> list[CheckMessage]:
    value = user.get("TRACING", DEFAULTS["TRACING"])
    if not (isinstance(value, bool) or value == "auto"):
        return [
            Error(
                f"MCP_DJANGO['TRACING'] is {value!r}.",
                hint='Use "auto", True or False.',
                id="mcp_django.E041",
            )
        ]
    # Only when asked for: with "auto" a missing API just means no tracing, and with False
    # OpenTelemetry is never imported, not even here.
    if value is True and not tracing.is_available():
        return [
            Error(
                "MCP_DJANGO['TRACING'] is True, but opentelemetry-api is not installed.",
                hint='pip install "django-mcp-site[tracing]", or set TRACING to "auto" or False.',
                id="mcp_django.E040",
            )
        ]
    return []


#: Bounds on what a client may make the server hold (mcp_django.E150).
LIMITS = (
    "SESSION_CACHE_MAX_ENTRIES",
    "SESSION_CACHE_MAX_BYTES",
    "MAX_CLIENT_INFO_BYTES",
    "MAX_CLIENT_CAPABILITIES_BYTES",
    "MAX_CLIENT_VALUE_DEPTH",
    "MAX_CLIENT_ID_LENGTH",
    "REPLAY_PAGE_EVENTS",
    "REPLAY_PAGE_BYTES",
    "MAX_RESUMES_PER_SESSION",
    "MAX_RESUMES_PER_USER",
    "MAX_RESUMES",
    "MAX_STREAM_EVENTS",
    "MAX_STREAM_BYTES",
)


def _check_tasks(user: dict[str, Any]) -> list[CheckMessage]:
    """Durable tasks: the TASKS backend that runs them, and their timings."""
    errors: list[CheckMessage] = []
    backend = user.get("TASKS_BACKEND", DEFAULTS["TASKS_BACKEND"])
    if backend is not None:
        framework = next(
            (name for name in ("django.tasks", "django_tasks") if find_spec(name) is not None), None
        )
        if framework is None:
            errors.append(
                Error(
                    f"MCP_DJANGO['TASKS_BACKEND'] is {backend!r}, but Django's task framework is not installed.",
                    hint="On Django 5.2 install the backport (pip install 'mcp_django[tasks]') and add \"django_tasks\" to INSTALLED_APPS; "
                    "Django 6 has django.tasks. Or set TASKS_BACKEND to None to run tasks in the web process.",
                    id="mcp_django.E046",
                )
            )
        else:
            task_backends = import_module(framework).task_backends
            if not isinstance(backend, str) or backend not in getattr(settings, "TASKS", {}):
                errors.append(
                    Error(
                        f"MCP_DJANGO['TASKS_BACKEND'] is {backend!r}, which is not an alias of the TASKS setting.",
                        hint='Name a TASKS alias, e.g. "default" with {"BACKEND": "django_tasks_db.DatabaseBackend"}; '
                        "None runs tasks in the web process that made them.",
                        id="mcp_django.E048",
                    )
                )
            else:
                try:
                    task_backends[backend]
                except Exception as exc:
                    errors.append(
                        Error(
                            f"The TASKS backend {backend!r} cannot be loaded: {exc}.",
                            id="mcp_django.E049",
                        )
                    )
    ttl = user.get("TASK_TTL_MS", DEFAULTS["TASK_TTL_MS"])
    poll = user.get("TASK_POLL_INTERVAL_MS", DEFAULTS["TASK_POLL_INTERVAL_MS"])
    beat = user.get("TASK_HEARTBEAT_SECONDS", DEFAULTS["TASK_HEARTBEAT_SECONDS"])
    timeout = user.get("TASK_HEARTBEAT_TIMEOUT", DEFAULTS["TASK_HEARTBEAT_TIMEOUT"])
    whole = [
        (name, value)
        for name, value in (("TASK_TTL_MS", ttl), ("TASK_POLL_INTERVAL_MS", poll))
        if not (value is None and name == "TASK_TTL_MS")
        and (not isinstance(value, int) or isinstance(value, bool) or value <= 0)
    ]
    for name, value in whole:
        errors.append(
            Error(
                f"MCP_DJANGO[{name!r}] must be a positive integer of milliseconds, not {value!r}.",
                hint="None keeps tasks until deleted by hand." if name == "TASK_TTL_MS" else None,
                id="mcp_django.E047",
            )
        )
    if not _positive_number(beat) or not _positive_number(timeout) or timeout < 2 * beat:
        errors.append(
            Error(
                f"MCP_DJANGO['TASK_HEARTBEAT_TIMEOUT'] ({timeout!r}) must be a number of seconds at least twice TASK_HEARTBEAT_SECONDS ({beat!r}).",
                hint="A running task renews its heartbeat every TASK_HEARTBEAT_SECONDS; one missed beat must not fail it.",
                id="mcp_django.E050",
            )
        )
    return errors + _check_task_bounds(user, ttl)


#: The smallest payload or result cap: a task's payload carries the client's _meta too.
MIN_TASK_BYTES = 1024


def _check_task_bounds(user: dict[str, Any], ttl: Any) -> list[CheckMessage]:
    """What a task keeps (payload, result) and how long it waits for its client."""
    errors: list[CheckMessage] = []
    for name in ("TASK_MAX_PAYLOAD_BYTES", "TASK_MAX_RESULT_BYTES"):
        value = user.get(name, DEFAULTS[name])
        if not isinstance(value, int) or isinstance(value, bool) or value < MIN_TASK_BYTES:
            errors.append(
                Error(
                    f"MCP_DJANGO[{name!r}] must be an integer of at least {MIN_TASK_BYTES} bytes, not {value!r}.",
                    hint=f"Larger ones are refused (payload) or fail the task (result); the default is {DEFAULTS[name]}.",
                    id="mcp_django.E260",
                )
            )
    waited = user.get("TASK_INPUT_TIMEOUT", DEFAULTS["TASK_INPUT_TIMEOUT"])
    if not _positive_number(waited):
        errors.append(
            Error(
                f"MCP_DJANGO['TASK_INPUT_TIMEOUT'] must be a positive number of seconds, not {waited!r}.",
                hint=f"A task waiting for its client's input longer than this is failed; the default is {DEFAULTS['TASK_INPUT_TIMEOUT']}.",
                id="mcp_django.E261",
            )
        )
    elif _positive_number(ttl) and waited * 1000 >= ttl:
        errors.append(
            Warning(
                f"MCP_DJANGO['TASK_INPUT_TIMEOUT'] ({waited!r} s) is not shorter than TASK_TTL_MS ({ttl!r} ms): "
                "a task waiting for input expires before it can time out.",
                hint='Give TASK_INPUT_TIMEOUT fewer seconds than the TTL, so that a client that does not answer hears "input timed out".',
                id="mcp_django.W260",
            )
        )
    return errors


def _check_limits(user: dict[str, Any]) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for key in LIMITS:
        value = user.get(key, DEFAULTS[key])
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            errors.append(
                Error(
                    f"MCP_DJANGO[{key!r}] must be a positive integer, not {value!r}.",
                    hint=f"Remove it to use the default, {DEFAULTS[key]!r}.",
                    id="mcp_django.E150",
                )
            )
    timeout = user.get("SSE_WRITE_TIMEOUT", DEFAULTS["SSE_WRITE_TIMEOUT"])
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        errors.append(
            Error(
                f"MCP_DJANGO['SSE_WRITE_TIMEOUT'] must be a positive number of seconds, not {timeout!r}.",
                hint="A stream must give up on a client that reads nothing; the default is 60.",
                id="mcp_django.E151",
            )
        )
    if errors:
        return errors
    page, stream = (
        user.get("REPLAY_PAGE_BYTES", DEFAULTS["REPLAY_PAGE_BYTES"]),
        user.get("MAX_STREAM_BYTES", DEFAULTS["MAX_STREAM_BYTES"]),
    )
    if page > stream:
        errors.append(
            Warning(
                f"MCP_DJANGO['REPLAY_PAGE_BYTES'] ({page}) is larger than MAX_STREAM_BYTES ({stream}).",
                hint="A replay page never needs to hold more than a whole stream; lower REPLAY_PAGE_BYTES.",
                id="mcp_django.W150",
            )
        )
    body = user.get("MAX_BODY_SIZE", DEFAULTS["MAX_BODY_SIZE"])
    for key in ("MAX_CLIENT_INFO_BYTES", "MAX_CLIENT_CAPABILITIES_BYTES"):
        if (
            isinstance(body, int)
            and not isinstance(body, bool)
            and 0 < body < user.get(key, DEFAULTS[key])
        ):
            errors.append(
                Warning(
                    f"MCP_DJANGO[{key!r}] is larger than MAX_BODY_SIZE ({body}), which bounds it first.",
                    hint=f"Lower {key} to what you mean to keep per session.",
                    id="mcp_django.W151",
                )
            )
    return errors


def _positive_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _check_audit(user: dict[str, Any]) -> list[CheckMessage]:
    """Settings of the audit trail (mcp_django.ops.audit)."""
    errors: list[CheckMessage] = []
    enabled = user.get("AUDIT_TOOL_CALLS", DEFAULTS["AUDIT_TOOL_CALLS"])
    if not isinstance(enabled, bool):
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_TOOL_CALLS'] must be True or False, not {enabled!r}.",
                hint='True records every tools/call in the admin\'s "Tool calls"; False turns the trail off.',
                id="mcp_django.E030",
            )
        )
    durable = user.get("AUDIT_DURABLE", DEFAULTS["AUDIT_DURABLE"])
    if not isinstance(durable, bool):
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_DURABLE'] must be True or False, not {durable!r}.",
                hint="True writes each call's row before it is answered (no call lost to a crash); False buffers them.",
                id="mcp_django.E029",
            )
        )
    days = user.get("AUDIT_RETENTION_DAYS", DEFAULTS["AUDIT_RETENTION_DAYS"])
    if days is not None and (not isinstance(days, int) or isinstance(days, bool) or days <= 0):
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_RETENTION_DAYS'] must be a positive number of days or None, not {days!r}.",
                hint="mcp_clearsessions deletes tool calls older than this; None keeps them forever.",
                id="mcp_django.E031",
            )
        )
    names = user.get("AUDIT_SENSITIVE_ARGUMENTS", DEFAULTS["AUDIT_SENSITIVE_ARGUMENTS"])
    if (
        isinstance(names, str)
        or not isinstance(names, (list, tuple))
        or not all(isinstance(n, str) and n.strip() for n in names)
    ):
        errors.append(
            Error(
                "MCP_DJANGO['AUDIT_SENSITIVE_ARGUMENTS'] must be a list of argument names.",
                hint='e.g. ["password", "token", "api_key"]: their values are never stored, at any depth.',
                id="mcp_django.E032",
            )
        )
    allowed = user.get("AUDIT_ALLOWED_ARGUMENTS", DEFAULTS["AUDIT_ALLOWED_ARGUMENTS"])
    if (
        isinstance(allowed, str)
        or not isinstance(allowed, (list, tuple))
        or not all(isinstance(n, str) and n.strip() for n in allowed)
    ):
        errors.append(
            Error(
                "MCP_DJANGO['AUDIT_ALLOWED_ARGUMENTS'] must be a list of argument names.",
                hint='e.g. ["max_tokens"]: names stored although a secret word ("token") is in them.',
                id="mcp_django.E028",
            )
        )
    size = user.get("AUDIT_MAX_ARGUMENTS_BYTES", DEFAULTS["AUDIT_MAX_ARGUMENTS_BYTES"])
    if not isinstance(size, int) or isinstance(size, bool) or size < 64:
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_MAX_ARGUMENTS_BYTES'] must be an integer of at least 64, not {size!r}.",
                hint=f"Larger arguments are stored as a marker with their size; the default is {DEFAULTS['AUDIT_MAX_ARGUMENTS_BYTES']}.",
                id="mcp_django.E033",
            )
        )
    buffer = user.get("AUDIT_BUFFER_SIZE", DEFAULTS["AUDIT_BUFFER_SIZE"])
    interval = user.get("AUDIT_FLUSH_INTERVAL", DEFAULTS["AUDIT_FLUSH_INTERVAL"])
    if (
        not isinstance(buffer, int)
        or isinstance(buffer, bool)
        or buffer <= 0
        or not _positive_number(interval)
    ):
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_BUFFER_SIZE'] must be a positive integer and AUDIT_FLUSH_INTERVAL a positive "
                f"number of seconds, not {buffer!r} and {interval!r}.",
                hint=f"The defaults are {DEFAULTS['AUDIT_BUFFER_SIZE']} calls and {DEFAULTS['AUDIT_FLUSH_INTERVAL']} second.",
                id="mcp_django.E034",
            )
        )
    return errors


def _check_quotas(user: dict[str, Any]) -> list[CheckMessage]:
    """``QUOTAS`` (mcp_django.ops.quotas.limits): its shape, rates, caps, cache, and the tools it names."""
    raw = user.get("QUOTAS", {})
    shape: list[tuple[str, str]] = []  # (message, hint) of each problem with the dict itself
    if not isinstance(raw, dict):
        shape.append(
            (
                "MCP_DJANGO['QUOTAS'] must be a dict.",
                "Give only the keys you change; the others keep their defaults.",
            )
        )
        raw = {}
    for key in raw:
        if key not in QUOTA_KEYS:
            close = get_close_matches(str(key), QUOTA_KEYS, n=1)
            shape.append(
                (
                    f"Unknown MCP_DJANGO['QUOTAS'] key {key!r}.",
                    f"Did you mean {close[0]!r}?"
                    if close
                    else f"Valid keys: {', '.join(sorted(QUOTA_KEYS))}.",
                )
            )
    quotas = {**DEFAULTS["QUOTAS"], **raw}
    per_tool = quotas["PER_TOOL"]
    if not isinstance(per_tool, dict) or not all(isinstance(name, str) for name in per_tool):
        shape.append(
            (
                "MCP_DJANGO['QUOTAS']['PER_TOOL'] must be a dict of tool name to rate.",
                'For example {"search_books": "10/minute"}.',
            )
        )
        per_tool = {}
    errors: list[CheckMessage] = [
        Error(message, hint=hint, id="mcp_django.E035") for message, hint in shape
    ]
    rates = [(f"[{key!r}]", quotas[key]) for key in RATE_KEYS if quotas[key] is not None]
    for where, rate in rates + [
        (f"['PER_TOOL'][{name!r}]", rate) for name, rate in per_tool.items()
    ]:
        try:
            parse_rate(rate)
        except ValueError as exc:
            errors.append(
                Error(
                    f"MCP_DJANGO['QUOTAS']{where}: {exc}.",
                    hint='Write "N/second", "N/minute", "N/hour" or "N/day" (or "N/5m"); None turns the limit off.',
                    id="mcp_django.E036",
                )
            )
    for key in CAP_KEYS:
        cap = quotas[key]
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0):
            errors.append(
                Error(
                    f"MCP_DJANGO['QUOTAS'][{key!r}] must be a positive integer or None, not {cap!r}.",
                    hint=f"None turns the cap off; the default is {DEFAULTS['QUOTAS'][key]!r}.",
                    id="mcp_django.E037",
                )
            )
    alias = quotas["CACHE"]
    backends = getattr(settings, "CACHES", {"default": {}})
    problem = None
    if not isinstance(alias, str) or alias not in backends:
        problem = f"MCP_DJANGO['QUOTAS']['CACHE'] is {alias!r}, which is not in CACHES."
    elif str(backends[alias].get("BACKEND", "")).endswith(".DummyCache"):
        problem = f"MCP_DJANGO['QUOTAS']['CACHE'] {alias!r} is a DummyCache, which counts nothing."
    if problem is not None:
        errors.append(
            Error(
                problem,
                hint="Name a CACHES alias that keeps counters; with several processes, one they share (Redis).",
                id="mcp_django.E038",
            )
        )
    errors += _check_quota_tools(per_tool)
    return errors


def _check_quota_tools(per_tool: dict[str, Any]) -> list[CheckMessage]:
    """A ``PER_TOOL`` entry for a tool no site registers limits nothing: most likely a typo."""
    if not per_tool:
        return []
    known = {tool.name for site in list(all_sites) for tool in site.get_tools()}
    errors: list[CheckMessage] = []
    for name in per_tool:
        if name not in known:
            close = get_close_matches(name, known, n=1)
            hint = (
                f"Did you mean {close[0]!r}?"
                if close
                else "Use the name clients see in tools/list."
            )
            errors.append(
                Error(
                    f"MCP_DJANGO['QUOTAS']['PER_TOOL'] names {name!r}, which no MCP site registers.",
                    hint=hint,
                    id="mcp_django.E039",
                )
            )
    return errors


#: Smallest MAX_REQUEST_STATE_BYTES that holds a sealed state with a little payload.
MIN_REQUEST_STATE_BYTES = 256


def _check_request_state(user: dict[str, Any]) -> list[CheckMessage]:
    """Settings of the sealed ``requestState`` of input-required results (2026-07-28)."""
    errors: list[CheckMessage] = []
    keys = user.get("REQUEST_STATE_KEYS", DEFAULTS["REQUEST_STATE_KEYS"])
    # Short keys are guessable offline from any token; the same bar as SECRETS_KEYS (E014).
    if not isinstance(keys, (list, tuple)) or not all(
        isinstance(k, str) and len(k) >= 32 for k in keys
    ):
        errors.append(
            Error(
                "MCP_DJANGO['REQUEST_STATE_KEYS'] must be a list of strings of 32 characters or more (empty: derive from SECRET_KEY).",
                hint="Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(48))'",
                id="mcp_django.E020",
            )
        )
    ttl = user.get("REQUEST_STATE_TTL", DEFAULTS["REQUEST_STATE_TTL"])
    if (
        not isinstance(ttl, (int, float))
        or isinstance(ttl, bool)
        or not math.isfinite(ttl)
        or ttl <= 0
    ):
        errors.append(
            Error(
                f"MCP_DJANGO['REQUEST_STATE_TTL'] must be a positive number of seconds, not {ttl!r}.",
                hint="A state that never expires can be replayed forever, and 0 expires at once; the default is 600.",
                id="mcp_django.E021",
            )
        )
    size = user.get("MAX_REQUEST_STATE_BYTES", DEFAULTS["MAX_REQUEST_STATE_BYTES"])
    if not isinstance(size, int) or isinstance(size, bool) or size < MIN_REQUEST_STATE_BYTES:
        errors.append(
            Error(
                f"MCP_DJANGO['MAX_REQUEST_STATE_BYTES'] must be an integer of at least {MIN_REQUEST_STATE_BYTES}, not {size!r}.",
                hint=f"Less cannot hold a sealed state; remove it to use the default, {DEFAULTS['MAX_REQUEST_STATE_BYTES']!r}.",
                id="mcp_django.E022",
            )
        )
    return errors


def _check_oauth(user: dict[str, Any], auth: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for key in ("SCOPES_SUPPORTED", "REQUIRED_SCOPES", "AUTHORIZATION_SERVERS"):
        value = user.get(key, DEFAULTS[key])
        if value is not None and (
            not isinstance(value, (list, tuple))
            or not all(isinstance(v, str) and v and " " not in v for v in value)
        ):
            errors.append(
                Error(
                    f"MCP_DJANGO[{key!r}] must be a list of strings without spaces.",
                    id="mcp_django.E013",
                )
            )
    resource = user.get("RESOURCE_URL")
    if resource is not None:
        parts = urlsplit(str(resource))
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            errors.append(
                Error(
                    f"MCP_DJANGO['RESOURCE_URL'] is {resource!r}, which is not an absolute http(s) URI without a fragment.",
                    hint='Give the endpoint\'s public URL, e.g. "https://api.example.com/mcp".',
                    id="mcp_django.E012",
                )
            )
    if auth != "oauth":
        return errors
    if not apps.is_installed("oauth2_provider"):
        errors.append(
            Error(
                "MCP_DJANGO['AUTHENTICATION'] is 'oauth' but django-oauth-toolkit is not installed.",
                hint="pip install django-oauth-toolkit and add 'oauth2_provider' to INSTALLED_APPS.",
                id="mcp_django.E011",
            )
        )
    if resource is None and not settings.DEBUG:
        errors.append(
            Warning(
                "MCP_DJANGO['RESOURCE_URL'] is not set: the audience of tokens is checked against a URL built from each request.",
                hint="Set it to the endpoint's public URL, so the check holds behind proxies and cannot follow the Host header.",
                id="mcp_django.W005",
            )
        )
    return errors


def _check_channel_layer(user: dict[str, Any]) -> list[CheckMessage]:
    alias = user.get("CHANNEL_LAYER", DEFAULTS["CHANNEL_LAYER"])
    layers = getattr(settings, "CHANNEL_LAYERS", None)
    if not layers:
        return [
            Warning(
                "CHANNEL_LAYERS is not set: mcp_django uses a process-local in-memory layer.",
                hint="That only works with one server process. Configure channels_redis to run several.",
                id="mcp_django.W001",
            )
        ]
    if alias not in layers:
        return [
            Error(
                f"MCP_DJANGO['CHANNEL_LAYER'] is {alias!r}, which is not in CHANNEL_LAYERS.",
                id="mcp_django.E008",
            )
        ]
    return _check_redis_socket_timeout(alias, layers[alias])


#: Channel layers that live in one process; any other (channels_redis...) says the project
#: runs, or is meant to run, several.
IN_PROCESS_LAYERS = (
    "channels.layers.InMemoryChannelLayer",
    "mcp_django.transport.layers.InMemoryChannelLayer",
)


def _check_quota_cache_shared(user: dict[str, Any]) -> list[CheckMessage]:
    """Quotas and caps count in ``QUOTAS["CACHE"]``: a project whose channel layer spans
    processes needs that cache shared by them, and counting atomically, for its limits to hold
    across the processes (mcp_django.ops.quotas.limits)."""
    layer_alias = user.get("CHANNEL_LAYER", DEFAULTS["CHANNEL_LAYER"])
    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get(layer_alias)
    layer_backend = str(layer.get("BACKEND", "")) if isinstance(layer, dict) else ""
    quotas = user.get("QUOTAS", {})
    alias = quotas.get("CACHE", DEFAULTS["QUOTAS"]["CACHE"]) if isinstance(quotas, dict) else None
    cache = getattr(settings, "CACHES", {}).get(alias) if isinstance(alias, str) else None
    if not layer_backend or layer_backend in IN_PROCESS_LAYERS or not isinstance(cache, dict):
        return []  # one process, or a mistake other checks report (E008, E035, E038)
    cache_backend = str(cache.get("BACKEND", ""))
    where = f"CHANNEL_LAYERS[{layer_alias!r}] ({layer_backend}) serves several processes, but MCP_DJANGO['QUOTAS']['CACHE'] {alias!r}"
    if cache_backend.endswith(".LocMemCache"):
        return [
            Warning(
                f"{where} is a LocMemCache, which each process keeps to itself: every quota and cap then holds per process "
                "(TOOL_CALLS, RUNNING_PER_*, STREAMS_PER_*, and SESSIONS_PER_* under concurrent initializes), so n processes allow n times each.",
                hint="Point QUOTAS['CACHE'] at a cache the processes share, such as Django's RedisCache on the Redis the channel layer uses. "
                'If the project really runs one process, add "mcp_django.W185" to SILENCED_SYSTEM_CHECKS.',
                id="mcp_django.W185",
            )
        ]
    with suppress(ImportError):
        backend = import_string(cache_backend)
        if (
            isinstance(backend, type)
            and issubclass(backend, BaseCache)
            and not has_atomic_incr(backend)
        ):
            return [
                Warning(
                    f"{where} is a {backend.__name__}, whose incr reads a counter and writes it back: two processes counting "
                    "at once can both take the last unit of a quota or cap (each process counts one at a time).",
                    hint="Use a cache that counts atomically and that the processes share: Django's RedisCache, or memcached.",
                    id="mcp_django.W186",
                )
            ]
    return []


def _check_redis_socket_timeout(alias: str, layer: Any) -> list[CheckMessage]:
    """channels_redis waits for messages with a blocking BZPOPMIN of ``brpop_timeout`` (5 s);
    redis-py 8 times a socket read out after 5 s unless told otherwise, so an idle consumer's
    receive fails with TimeoutError every few seconds (django/channels_redis#422)."""
    try:
        backend = import_string(layer.get("BACKEND", ""))
    except (ImportError, AttributeError):
        return []
    # By name: importing channels_redis (and redis, which imports OpenTelemetry) for a project
    # that does not use it would cost every `check` that start-up.
    if not any(
        f"{c.__module__}.{c.__qualname__}" == "channels_redis.core.RedisChannelLayer"
        for c in getattr(backend, "__mro__", ())
    ):
        return []
    import redis  # optional dependency (the redis extra), installed with channels_redis

    if int(redis.__version__.split(".", 1)[0]) < 8:
        return []  # no socket timeout by default before 8.0
    hosts = (layer.get("CONFIG") or {}).get("hosts") or [("localhost", 6379)]
    brpop = getattr(backend, "brpop_timeout", 5)
    short = [
        host for host in hosts
        if not isinstance(host, dict) or (host.get("socket_timeout", 5) is not None and host.get("socket_timeout", 5) <= brpop)
    ]  # fmt: skip
    if not short:
        return []
    return [
        Warning(
            f"CHANNEL_LAYERS[{alias!r}] uses channels_redis with redis-py {redis.__version__}, whose socket timeout (5 s unless "
            f"set) is not longer than the layer's {brpop} s blocking receive: idle streams and consumers fail with TimeoutError.",
            hint='Give each host a longer socket timeout, e.g. "hosts": [{"address": "redis://...", "socket_timeout": 15}].',
            id="mcp_django.W006",
        )
    ]


#: What to write in asgi.py, for every check about the ASGI wiring.
ROUTER_HINT = "In asgi.py: application = mcp_django.routing.MCPRouter(get_asgi_application()), and set ASGI_APPLICATION to it."


def _check_asgi() -> list[CheckMessage]:
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        if "daphne" not in settings.INSTALLED_APPS:
            return []  # nothing points at ASGI at all: W171 says so, with both lines to add
        # daphne's runserver refuses to start without it.
        return [
            Warning(
                "ASGI_APPLICATION is not set; the MCP endpoint is served only under ASGI with mcp_django's router.",
                hint=ROUTER_HINT,
                id="mcp_django.W003",
            )
        ]
    try:
        app = import_string(path)
    except ImportError as exc:
        return [
            Error(f"ASGI_APPLICATION {path!r} cannot be imported: {exc}.", id="mcp_django.E009")
        ]
    routed = routes_through_router(app)
    if routed is False:
        return [
            Error(
                f"ASGI_APPLICATION {path!r} serves HTTP with Django's handler alone, not through mcp_django.routing.MCPRouter: "
                "every MCP request gets a 503 saying so.",
                hint=ROUTER_HINT,
                id="mcp_django.E172",
            )
        ]
    if routed is None:
        return [
            Warning(
                f"Cannot tell whether ASGI_APPLICATION {path!r} routes HTTP through mcp_django.routing.MCPRouter.",
                hint=ROUTER_HINT
                + " If a wrapper of your own hides it, keep the wrapped application in an "
                '"application", "inner" or "app" attribute, or add "mcp_django.W172" to SILENCED_SYSTEM_CHECKS.',
                id="mcp_django.W172",
            )
        ]
    return []


def _check_server() -> list[CheckMessage]:
    """Without daphne, runserver serves WSGI; without ASGI_APPLICATION too, nothing in the
    settings points at an ASGI server, so the project most likely runs WSGI only."""
    if "daphne" in settings.INSTALLED_APPS or getattr(settings, "ASGI_APPLICATION", None):
        return []
    return [
        Warning(
            "This project is served by WSGI only ('daphne' is not in INSTALLED_APPS and ASGI_APPLICATION is not set): "
            "`manage.py runserver` and gunicorn answer every MCP request with a 503 saying that it needs an ASGI server.",
            hint='Put "daphne" first in INSTALLED_APPS and set ASGI_APPLICATION = "<project>.asgi.application". '
            "If you serve asgi.py with uvicorn or hypercorn, set ASGI_APPLICATION to it all the same, so that "
            "its wiring is checked too.",
            id="mcp_django.W171",
        )
    ]


def _endpoint_routes() -> list[tuple[Any, str]]:
    """``(site, prefix)`` for each URL of ROOT_URLCONF that reaches an MCP site's endpoint;
    ``prefix`` is the route of the includes above it, joined (``"mcp/"``)."""
    found: list[tuple[Any, str]] = []

    def walk(patterns: Any, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern).removeprefix("^"))
            else:
                site = getattr(pattern.callback, "mcp_site", None)
                if (
                    site is not None
                    and getattr(pattern.callback, "mcp_transport", None) == "streamable-http"
                ):
                    found.append((site, prefix))

    walk(get_resolver().url_patterns, "")
    return found


def check_urls(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An MCP site that no URL reaches answers nothing: POST /mcp gets Django's HTML 404."""
    try:
        routes = _endpoint_routes()
    except Exception:
        return []
    routed = {site.name for site, _ in routes}
    hint = 'In your ROOT_URLCONF: urlpatterns += [path("mcp/", include("mcp_django.urls"))].'
    messages: list[CheckMessage] = []
    if default_site.name not in routed:
        messages.append(
            Error(
                "No URL routes to the MCP endpoint, so clients get a 404.",
                hint=hint,
                id="mcp_django.E170",
            )
        )
    for other in list(all_sites):
        if (
            other.name != default_site.name
            and other.name not in routed
            and (other.get_tools() or other.get_model_mcps())
        ):
            messages.append(
                Warning(
                    f"No URL routes to the endpoint of the MCP site {other.name!r}.",
                    hint='Route it in your ROOT_URLCONF, as admin.site.urls: path("<prefix>/", <that site>.urls).',
                    obj=other,
                    id="mcp_django.W170",
                )
            )
    messages += _check_prefixes(routes)
    messages += _check_empty_sites(routes)
    return messages


#: Module names (besides ``mcp``) where registrations are put by mistake, in an app or its ``mcp/``.
LOOKALIKE_MODULES = ("mcp_tools", "mcp_server", "mcp_site", "mcp_registry", "mcps", "tools")
# What registrations look like in source: ``@site.tool``, ``site.register(...)``, ``register_admin(...)``.
REGISTRATION_RE = re.compile(
    r"\.(tool|resource|prompt|register|register_admin)\(|@(tool|resource|prompt|register)\b|mcp_django"
)


def _unloaded_registrations() -> list[str]:
    """``app/module.py`` paths that look like MCP registrations but that nothing imported."""
    found: list[str] = []
    for config in apps.get_app_configs():
        if config.name == "mcp_django" or not config.path:
            continue
        root = Path(config.path)
        candidates = [root / f"{name}.py" for name in LOOKALIKE_MODULES]
        candidates += sorted((root / "mcp").glob("*.py")) if (root / "mcp").is_dir() else []
        for path in candidates:
            module = ".".join([config.name, *path.relative_to(root).with_suffix("").parts])
            if module.endswith(".__init__") or module in sys.modules or not path.is_file():
                continue
            try:
                source = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if REGISTRATION_RE.search(source):
                found.append(f"{config.label}/{path.relative_to(root).as_posix()}")
    return found


def _check_empty_sites(routes: list[tuple[Any, str]]) -> list[CheckMessage]:
    """A routed site with nothing registered: most often the registrations sit in a module that
    autodiscovery never imports (``tools.py``, ``mcp_tools.py``), so the server is empty."""
    messages: list[CheckMessage] = []
    for site in {site for site, _ in routes}:
        if (
            site.get_tools()
            or site.get_resources()
            or site.get_resource_templates()
            or site.get_prompts()
            or site.get_model_mcps()
        ):
            continue
        unloaded = _unloaded_registrations()
        hint = (
            "Autodiscovery imports the module mcp of each installed app (<app>/mcp.py or <app>/mcp/__init__.py), and "
            "only with the default AppConfig (not SimpleMcpDjangoConfig); register there, or import your module from it."
        )
        if unloaded:
            hint += f" Not imported, and they look like registrations: {', '.join(unloaded)}."
        messages.append(
            Warning(
                f"The MCP site {site.name!r} has no tools, resources or prompts: clients see an empty server.",
                hint=hint,
                obj=site,
                id="mcp_django.W182",
            )
        )
    return messages


def _check_prefixes(routes: list[tuple[Any, str]]) -> list[CheckMessage]:
    """``path("mcp", include(...))``: Django joins the prefix and each route as they are, so the
    endpoint answers at /mcp but its other URLs become /mcpsse/, /mcphealth/, /mcpelicitations/.
    Reported rather than mended: the site cannot tell its prefix from inside the include, and a
    route that began with "/" would double the slash under the usual "mcp/"."""
    messages: list[CheckMessage] = []
    for site, prefix in routes:
        if prefix and not prefix.endswith("/"):
            shown = prefix.removesuffix("$")
            messages.append(
                Error(
                    f"The MCP site {site.name!r} is included at {shown!r}, without a trailing slash: its other URLs become "
                    f"/{shown}sse/, /{shown}health/ and /{shown}elicitations/..., which no client or probe looks for.",
                    hint=f'End the prefix with a slash: path("{shown}/", include(...)). Clients may still call /{shown} without it.',
                    obj=site,
                    id="mcp_django.E180",
                )
            )
    return messages


def check_sites(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for site in list(all_sites):
        errors.extend(site.check(app_configs))
    errors += _check_permission_sources()
    return errors


def _model_entries() -> list[Any]:
    """Every ModelMCP of every site (admin-bridged models included): the entries that the
    user's model permissions gate."""
    return [model_mcp for site in list(all_sites) for model_mcp in site.get_model_mcps()]


def _check_permission_sources() -> list[CheckMessage]:
    """Model entries are gated by ``user.has_perm``, which Django answers only from backends
    that implement it: without one (or in trial mode, as the anonymous user) they vanish silently."""
    entries = _model_entries()
    if not entries:
        return []
    try:
        auth_class = mcp_settings.authentication_class
    except Exception:
        return []  # check_settings reports an AUTHENTICATION that does not resolve
    if issubclass(auth_class, NoAuthentication):
        return [message for site in list(all_sites) for message in _check_anonymous_entries(site)]
    try:
        backends = [load_backend(path) for path in settings.AUTHENTICATION_BACKENDS]
    except ImportError:
        return []  # Django's own checks and the first request report a backend that does not import.
    if any(hasattr(backend, "has_perm") for backend in backends):
        return []
    return [
        Warning(
            f"No authentication backend can grant model permissions (none has has_perm), so only superusers "
            f"see the {len(entries)} model entr{'y' if len(entries) == 1 else 'ies'} (ModelMCP, register_admin).",
            hint="Add 'django.contrib.auth.backends.ModelBackend' to AUTHENTICATION_BACKENDS, or implement "
            "has_perm(user_obj, perm, obj=None) in one of your backends.",
            id="mcp_django.W210",
        )
    ]


def _check_anonymous_entries(site: Any) -> list[CheckMessage]:
    """Trial mode: ask each model entry of ``site`` its own hook, as the gate will, whether an
    anonymous caller sees it."""
    request = HttpRequest()
    request.user = AnonymousUser()
    hidden: list[str] = []
    for entry in site.get_model_mcps():
        try:
            visible = entry.has_permission(request)
        except Exception:
            visible = False  # a hook that fails for an anonymous user hides the entry too
        if not visible:
            hidden.append(entry.opts.label)
    if not hidden:
        return []
    shown = ", ".join(sorted(set(hidden))[:10]) + (", ..." if len(set(hidden)) > 10 else "")
    return [
        Warning(
            f'AUTHENTICATION is "none": the anonymous caller holds no permissions, so {len(hidden)} model '
            f"entr{'y' if len(hidden) == 1 else 'ies'} of the MCP site {site.name!r} {'is' if len(hidden) == 1 else 'are'} "
            f"hidden from every client: {shown}.",
            hint="To open a ModelMCP for a trial, override its has_view_permission (and has_add/change/delete_permission "
            "for writes) to return True when request.user.is_anonymous; admin-bridged models follow the admin "
            'site, which admits only staff. Or sign in: AUTHENTICATION = "django".',
            obj=site,
            id="mcp_django.W211",
        )
    ]


def check_skills(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every skill as it is on disk (E190-E196, W190), once however many sites serve it, and
    the app-folder skills another app's folder of the same name hides (W191)."""
    configs = list(apps.get_app_configs()) if app_configs is None else list(app_configs)
    skills: list[Skill] = discover(configs)
    if app_configs is None:
        skills += [s for mcp_site in list(all_sites) for s in mcp_site.get_skills()]
    messages: list[CheckMessage] = []
    seen: set[Path] = set()
    for skill in skills:
        where = skill.directory.resolve()
        if where in seen:
            continue
        seen.add(where)
        for problem in skill.problems():
            kind = Error if problem.is_error else Warning
            message = (
                f"The skill {skill.name!r} ({skill.origin}, {skill.directory}): {problem.message}"
            )
            messages.append(kind(message, hint=problem.hint, obj=skill, id=problem.id))
    first: dict[str, str] = {}
    for app_config in configs:
        folder = Path(app_config.path) / APP_FOLDER
        names = (
            sorted(
                c.name for c in folder.iterdir() if c.is_dir() and not c.name.startswith((".", "_"))
            )
            if folder.is_dir()
            else []
        )
        for name in names:
            if name in first:
                messages.append(
                    Warning(
                        f"The skill {name!r} of app {app_config.label} is hidden by the one of app {first[name]}, earlier in INSTALLED_APPS.",
                        hint="Rename one of the folders, or order INSTALLED_APPS so that the one to serve comes first (as for templates).",
                        obj=f"{app_config.path}/{APP_FOLDER}/{name}",
                        id="mcp_django.W191",
                    )
                )
            else:
                first[name] = app_config.label
    return messages


def check_deployment(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    user = _user_settings()
    origins = user.get("ALLOWED_ORIGINS", []) if isinstance(user, dict) else []
    # A malformed value is E006's to report; this check must not crash on it.
    if isinstance(origins, (list, tuple)) and "*" in origins:
        return [
            Warning(
                "MCP_DJANGO['ALLOWED_ORIGINS'] contains '*': any web page can call the MCP endpoint from a browser.",
                hint="List the origins of your own web clients instead.",
                id="mcp_django.W004",
            )
        ]
    return []


#: Settings a project sets when a reverse proxy is in front of it (mcp_django.W184).
PROXY_SETTINGS = ("SECURE_PROXY_SSL_HEADER", "USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT")


def check_proxy(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``check --deploy``: Daphne facing clients by itself. Daphne (Twisted) spools a whole request
    body to a temporary file before the application sees it, and has no header, body or
    keep-alive timeout, so MAX_BODY_SIZE cannot protect it: a proxy must. The signal: "daphne"
    installed and none of the settings a proxy in front calls for (TLS ends at the proxy, so
    Django needs SECURE_PROXY_SSL_HEADER to know a request was HTTPS; a proxy that sets the
    public host needs USE_X_FORWARDED_HOST). Without "daphne", the ASGI server in use is
    unknown, and uvicorn or granian read the body as the application asks for it."""
    if "daphne" not in settings.INSTALLED_APPS or any(
        getattr(settings, name, None) for name in PROXY_SETTINGS
    ):
        return []
    return [
        Warning(
            '"daphne" is in INSTALLED_APPS and no setting says a reverse proxy is in front (SECURE_PROXY_SSL_HEADER, '
            "USE_X_FORWARDED_HOST and USE_X_FORWARDED_PORT are unset). Daphne by itself writes any request body to a "
            "temporary file before MCP_DJANGO['MAX_BODY_SIZE'] is checked, and never times out slow headers, bodies or "
            "idle keep-alive connections.",
            hint='Put nginx or Caddy in front with the limits in the deploy how-to ("In front of the server"), and set '
            'SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") when TLS ends there. If Daphne is only your '
            'development server (runserver), add "mcp_django.W184" to SILENCED_SYSTEM_CHECKS in production settings.',
            id="mcp_django.W184",
        )
    ]


def check_migrations(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``check --deploy``: mcp_django's migrations not applied on the database that holds
    sessions. Django warns of unapplied migrations only when runserver starts; a server started
    otherwise answers its first MCP request with a missing table."""
    using = sessions_database()
    try:
        pending = unapplied_migrations(using)
    except (DatabaseError, ImproperlyConfigured):
        return []  # no database here (a build step, CI without one): nothing to tell
    if not pending:
        return []
    return [
        Warning(missing_tables_message(pending, using), hint=MIGRATE_HINT, id="mcp_django.W183")
    ]
