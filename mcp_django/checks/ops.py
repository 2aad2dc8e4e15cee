"""Checks of the ops wing's settings (mcp_django.ops): tracing, the audit trail, quotas, and
the cache they count in."""

from __future__ import annotations

from contextlib import suppress
from difflib import get_close_matches
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache
from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from ..conf import DEFAULTS
from ..ops import tracing
from ..ops.quotas.backends import has_atomic_incr
from ..ops.quotas.limits import CAP_KEYS, QUOTA_KEYS, RATE_KEYS, parse_rate
from ..registry.sites import all_sites
from .values import positive_number


def check_tracing(user: dict[str, Any]) -> list[CheckMessage]:
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


def check_audit(user: dict[str, Any]) -> list[CheckMessage]:
    """Settings of the audit trail (mcp_django.ops.audit)."""
    errors: list[CheckMessage] = []
    enabled = user.get("AUDIT_TOOL_CALLS", DEFAULTS["AUDIT_TOOL_CALLS"])
    if not isinstance(enabled, bool):
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_TOOL_CALLS'] must be True or False, not {enabled!r}.",
                hint='True records every tools/call in the admin\'s "Tool calls"; False turns the '
                "trail off.",
                id="mcp_django.E030",
            )
        )
    durable = user.get("AUDIT_DURABLE", DEFAULTS["AUDIT_DURABLE"])
    if not isinstance(durable, bool):
        errors.append(
            Error(
                f"MCP_DJANGO['AUDIT_DURABLE'] must be True or False, not {durable!r}.",
                hint="True writes each call's row before it is answered (no call lost to a crash); "
                "False buffers them.",
                id="mcp_django.E029",
            )
        )
    days = user.get("AUDIT_RETENTION_DAYS", DEFAULTS["AUDIT_RETENTION_DAYS"])
    if days is not None and (not isinstance(days, int) or isinstance(days, bool) or days <= 0):
        errors.append(
            Error(
                "MCP_DJANGO['AUDIT_RETENTION_DAYS'] must be a positive number of days or None, "
                f"not {days!r}.",
                hint="mcp_clearsessions deletes tool calls older than this; None keeps them "
                "forever.",
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
                hint='e.g. ["password", "token", "api_key"]: their values are never stored, at any '
                "depth.",
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
                hint='e.g. ["max_tokens"]: names stored although a secret word ("token") is in '
                "them.",
                id="mcp_django.E028",
            )
        )
    size = user.get("AUDIT_MAX_ARGUMENTS_BYTES", DEFAULTS["AUDIT_MAX_ARGUMENTS_BYTES"])
    if not isinstance(size, int) or isinstance(size, bool) or size < 64:
        errors.append(
            Error(
                "MCP_DJANGO['AUDIT_MAX_ARGUMENTS_BYTES'] must be an integer of at least 64, not "
                f"{size!r}.",
                hint="Larger arguments are stored as a marker with their size; the default is "
                f"{DEFAULTS['AUDIT_MAX_ARGUMENTS_BYTES']}.",
                id="mcp_django.E033",
            )
        )
    buffer = user.get("AUDIT_BUFFER_SIZE", DEFAULTS["AUDIT_BUFFER_SIZE"])
    interval = user.get("AUDIT_FLUSH_INTERVAL", DEFAULTS["AUDIT_FLUSH_INTERVAL"])
    if (
        not isinstance(buffer, int)
        or isinstance(buffer, bool)
        or buffer <= 0
        or not positive_number(interval)
    ):
        errors.append(
            Error(
                "MCP_DJANGO['AUDIT_BUFFER_SIZE'] must be a positive integer and "
                f"AUDIT_FLUSH_INTERVAL a positive number of seconds, not {buffer!r} and "
                f"{interval!r}.",
                hint=f"The defaults are {DEFAULTS['AUDIT_BUFFER_SIZE']} calls and "
                f"{DEFAULTS['AUDIT_FLUSH_INTERVAL']} second.",
                id="mcp_django.E034",
            )
        )
    return errors


def check_quotas(user: dict[str, Any]) -> list[CheckMessage]:
    """``QUOTAS`` (mcp_django.ops.quotas.limits): its shape, rates, caps, cache, and the tools it
    names."""
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
                    hint='Write "N/second", "N/minute", "N/hour" or "N/day" (or "N/5m"); None '
                    "turns the limit off.",
                    id="mcp_django.E036",
                )
            )
    for key in CAP_KEYS:
        cap = quotas[key]
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0):
            errors.append(
                Error(
                    f"MCP_DJANGO['QUOTAS'][{key!r}] must be a positive integer or None, not "
                    f"{cap!r}.",
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
                hint="Name a CACHES alias that keeps counters; with several processes, one they "
                "share (Redis).",
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
                    f"MCP_DJANGO['QUOTAS']['PER_TOOL'] names {name!r}, which no MCP site "
                    "registers.",
                    hint=hint,
                    id="mcp_django.E039",
                )
            )
    return errors


#: Channel layers that live in one process; any other (channels_redis...) says the project
#: runs, or is meant to run, several.
IN_PROCESS_LAYERS = (
    "channels.layers.InMemoryChannelLayer",
    "mcp_django.transport.layers.InMemoryChannelLayer",
)


def check_quota_cache_shared(user: dict[str, Any]) -> list[CheckMessage]:
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
    where = (
        f"CHANNEL_LAYERS[{layer_alias!r}] ({layer_backend}) serves several processes, but "
        f"MCP_DJANGO['QUOTAS']['CACHE'] {alias!r}"
    )
    if cache_backend.endswith(".LocMemCache"):
        return [
            Warning(
                f"{where} is a LocMemCache, which each process keeps to itself: every quota and "
                "cap then holds per process (TOOL_CALLS, RUNNING_PER_*, STREAMS_PER_*, and "
                "SESSIONS_PER_* under concurrent initializes), so n processes allow n times each.",
                hint="Point QUOTAS['CACHE'] at a cache the processes share, such as Django's "
                "RedisCache on the Redis the channel layer uses. If the project really runs "
                'one process, add "mcp_django.W185" to SILENCED_SYSTEM_CHECKS.',
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
                    f"{where} is a {backend.__name__}, whose incr reads a counter and writes it "
                    "back: two processes counting at once can both take the last unit of a quota "
                    "or cap (each process counts one at a time).",
                    hint="Use a cache that counts atomically and that the processes share: "
                    "Django's RedisCache, or memcached.",
                    id="mcp_django.W186",
                )
            ]
    return []
