"""``check_settings``: the ``MCP_DJANGO`` dict itself (a dict, known keys, not under another
name) and its generic keys, then each wing's keys through the checks of its module here."""

from __future__ import annotations

import os
import re
from contextlib import suppress
from difflib import get_close_matches
from importlib import import_module
from typing import Any

from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from ..auth.base import BaseAuthentication
from ..conf import AUTHENTICATION_ALIASES, DEFAULTS
from ..protocol.negotiation import normalize_origin
from ..stores import BaseEventStore
from .auth import check_oauth
from .id_jag import check_id_jag
from .ops import check_audit, check_quota_cache_shared, check_quotas, check_tracing
from .server import (
    check_asgi,
    check_channel_layer,
    check_limits,
    check_request_state,
    check_server,
)
from .service_clients import check_service_clients
from .tasks import check_tasks
from .values import user_settings

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


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    user = user_settings()
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
                hint='Use "none", "django", or the dotted path of a '
                "mcp_django.auth.base.BaseAuthentication subclass.",
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
        "PLAIN_STREAM_SECONDS",
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
                hint="Without a lease every running request would look orphaned; keep the default "
                "(60) unless you know why.",
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
                "MCP_DJANGO['SECRETS_KEYS'] must be None or a non-empty list of strings of 32 "
                "characters or more.",
                hint="Generate one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(48))'",
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
                hint='Use lower-case letters, digits, "+", "-" or ".", starting with a letter '
                '(e.g. "django").',
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
    errors += check_limits(user)
    errors += check_quotas(user)
    errors += check_audit(user)
    errors += check_request_state(user)
    errors += check_oauth(user, auth)
    errors += check_service_clients()
    errors += check_id_jag(user)
    errors += check_channel_layer(user)
    errors += check_quota_cache_shared(user)
    errors += check_asgi()
    errors += check_server()
    errors += check_tracing(user)
    errors += check_tasks(user)
    if auth == "none" and not settings.DEBUG:
        errors.append(
            Warning(
                "MCP_DJANGO['AUTHENTICATION'] is 'none' while DEBUG is False: anyone who reaches "
                "the endpoint can use it.",
                hint='Use "django" (the session cookie), "oauth" (hosted clients such as Claude '
                'and ChatGPT), "jwt" (your identity provider\'s tokens) or your own '
                'authentication class in production; "none" is for local development and '
                "conformance runs.",
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
            f"The setting {name!r} looks like mcp_django's settings, which are read from "
            "MCP_DJANGO only: every mcp_django setting keeps its default.",
            hint=f"Rename {name} to MCP_DJANGO "
            "(upper-case: Django reads upper-case settings only).",
            id="mcp_django.W181",
        )
        for name in sorted(found)
    ]
