"""Checks of the server's settings and wiring: bounds on what a client may make it hold, the
sealed request state, the channel layer (and redis-py's socket timeout under it), the ASGI
application, and whether anything points at an ASGI server at all."""

from __future__ import annotations

import math
import os
from typing import Any

from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.checks import CheckMessage, Error, Info, Warning
from django.utils.module_loading import import_string

from ..conf import DEFAULTS
from ..registry.sites import all_sites
from ..routing import routes_through_router
from ..server.sizing import MIN_RESULT_CHARS
from .values import user_settings

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
    "PLAIN_STREAMS",
)


def _check_result_limit(user: dict[str, Any]) -> list[CheckMessage]:
    value = user.get("MAX_RESULT_CHARS", DEFAULTS["MAX_RESULT_CHARS"])
    if value is None or (
        isinstance(value, int) and not isinstance(value, bool) and value >= MIN_RESULT_CHARS
    ):
        return []
    return [
        Error(
            f"MCP_DJANGO['MAX_RESULT_CHARS'] must be None or an integer of at least "
            f"{MIN_RESULT_CHARS}, not {value!r}.",
            hint="None turns the limit off; a result needs room for its notice. The default "
            f"is {DEFAULTS['MAX_RESULT_CHARS']}.",
            id="mcp_django.E152",
        )
    ]


def check_limits(user: dict[str, Any]) -> list[CheckMessage]:
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
                "MCP_DJANGO['SSE_WRITE_TIMEOUT'] must be a positive number of seconds, not "
                f"{timeout!r}.",
                hint="A stream must give up on a client that reads nothing; the default is 60.",
                id="mcp_django.E151",
            )
        )
    errors.extend(_check_result_limit(user))
    if errors:
        return errors
    page, stream = (
        user.get("REPLAY_PAGE_BYTES", DEFAULTS["REPLAY_PAGE_BYTES"]),
        user.get("MAX_STREAM_BYTES", DEFAULTS["MAX_STREAM_BYTES"]),
    )
    if page > stream:
        errors.append(
            Warning(
                f"MCP_DJANGO['REPLAY_PAGE_BYTES'] ({page}) is larger than MAX_STREAM_BYTES "
                f"({stream}).",
                hint="A replay page never needs to hold more than a whole stream; lower "
                "REPLAY_PAGE_BYTES.",
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
                    f"MCP_DJANGO[{key!r}] is larger than MAX_BODY_SIZE ({body}), which bounds it "
                    "first.",
                    hint=f"Lower {key} to what you mean to keep per session.",
                    id="mcp_django.W151",
                )
            )
    return errors


#: Smallest MAX_REQUEST_STATE_BYTES that holds a sealed state with a little payload.
MIN_REQUEST_STATE_BYTES = 256


def check_request_state(user: dict[str, Any]) -> list[CheckMessage]:
    """Settings of the sealed ``requestState`` of input-required results (2026-07-28)."""
    errors: list[CheckMessage] = []
    keys = user.get("REQUEST_STATE_KEYS", DEFAULTS["REQUEST_STATE_KEYS"])
    # Short keys are guessable offline from any token; the same bar as SECRETS_KEYS (E014).
    if not isinstance(keys, (list, tuple)) or not all(
        isinstance(k, str) and len(k) >= 32 for k in keys
    ):
        errors.append(
            Error(
                "MCP_DJANGO['REQUEST_STATE_KEYS'] must be a list of strings of 32 characters or "
                "more (empty: derive from SECRET_KEY).",
                hint="Generate one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(48))'",
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
                "MCP_DJANGO['REQUEST_STATE_TTL'] must be a positive number of seconds, not "
                f"{ttl!r}.",
                hint="A state that never expires can be replayed forever, and 0 expires at once; "
                "the default is 600.",
                id="mcp_django.E021",
            )
        )
    size = user.get("MAX_REQUEST_STATE_BYTES", DEFAULTS["MAX_REQUEST_STATE_BYTES"])
    if not isinstance(size, int) or isinstance(size, bool) or size < MIN_REQUEST_STATE_BYTES:
        errors.append(
            Error(
                "MCP_DJANGO['MAX_REQUEST_STATE_BYTES'] must be an integer of at least "
                f"{MIN_REQUEST_STATE_BYTES}, not {size!r}.",
                hint="Less cannot hold a sealed state; remove it to use the default, "
                f"{DEFAULTS['MAX_REQUEST_STATE_BYTES']!r}.",
                id="mcp_django.E022",
            )
        )
    return errors


def check_channel_layer(user: dict[str, Any]) -> list[CheckMessage]:
    alias = user.get("CHANNEL_LAYER", DEFAULTS["CHANNEL_LAYER"])
    layers = getattr(settings, "CHANNEL_LAYERS", None)
    if not layers:
        if served_by_wsgi_only():
            # The plain view holds no stream, so the layer carries nothing between its
            # processes: several WSGI workers need no Redis (docs/howto/deploy.md, "Under WSGI").
            return []
        return [
            Warning(
                "CHANNEL_LAYERS is not set: mcp_django uses a process-local in-memory layer.",
                hint="That only works with one server process. Configure channels_redis to run "
                "several.",
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
        host
        for host in hosts
        if not isinstance(host, dict)
        or (host.get("socket_timeout", 5) is not None and host.get("socket_timeout", 5) <= brpop)
    ]
    if not short:
        return []
    return [
        Warning(
            f"CHANNEL_LAYERS[{alias!r}] uses channels_redis with redis-py {redis.__version__}, "
            f"whose socket timeout (5 s unless set) is not longer than the layer's {brpop} s "
            "blocking receive: idle streams and consumers fail with TimeoutError.",
            hint='Give each host a longer socket timeout, e.g. "hosts": [{"address": '
            '"redis://...", "socket_timeout": 15}].',
            id="mcp_django.W006",
        )
    ]


#: What to write in asgi.py, for every check about the ASGI wiring.
ROUTER_HINT = (
    "In asgi.py: application = mcp_django.routing.MCPRouter(get_asgi_application()), and set "
    "ASGI_APPLICATION to it."
)


def check_asgi() -> list[CheckMessage]:
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        if "daphne" not in settings.INSTALLED_APPS:
            return []  # nothing points at ASGI at all: I171 says so, with both lines to add
        # daphne's runserver refuses to start without it.
        return [
            Warning(
                "ASGI_APPLICATION is not set; the MCP endpoint is served only under ASGI with "
                "mcp_django's router.",
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
            Warning(
                f"ASGI_APPLICATION {path!r} serves HTTP with Django's handler alone, not through "
                "mcp_django.routing.MCPRouter: the MCP endpoint is served by its plain view, "
                f"as under WSGI. {PLAIN_VIEW_SERVES} {needs_asgi_sentence()}",
                hint=ROUTER_HINT,
                id="mcp_django.W173",
            )
        ]
    if routed is None:
        return [
            Warning(
                f"Cannot tell whether ASGI_APPLICATION {path!r} routes HTTP through "
                "mcp_django.routing.MCPRouter.",
                hint=ROUTER_HINT
                + " If a wrapper of your own hides it, keep the wrapped application in an "
                '"application", "inner" or "app" attribute, or add "mcp_django.W172" to '
                "SILENCED_SYSTEM_CHECKS.",
                id="mcp_django.W172",
            )
        ]
    return []


#: What the endpoint's plain view serves (transport.plain): said by every check about a
#: deployment without the router.
PLAIN_VIEW_SERVES = (
    "It serves every 2026-07-28 request, and the handshake era in JSON answer mode: each answer "
    "is one JSON body, except that a call sending progress or logs is answered on an SSE stream "
    "of its own (within MCP_DJANGO['PLAIN_STREAMS'] and ['PLAIN_STREAM_SECONDS'])."
)


def needs_asgi() -> list[str]:
    """What the settings and the registered sites use that only the ASGI deployment (with
    MCPRouter) serves: everything that needs a stream held between requests."""
    needs = [
        "notifications of list and resource changes (the GET stream, subscriptions/listen) and "
        "resuming a stream (Last-Event-ID)"
    ]
    streaming = sorted(
        {tool.name for site in list(all_sites) for tool in site.get_tools() if tool.streams}
    )
    if streaming:
        needs.append(
            "the questions that the tools taking a Context "
            f"({shown_names(streaming)}) ask the client in a handshake-era session"
        )
    tasked = sorted(
        {
            tool.name
            for site in list(all_sites)
            for tool in site.get_tools()
            if tool.task_support != "forbidden"
        }
    )
    if tasked:
        needs.append(
            "a 2025-11-25 client's tasks/result waiting past PLAIN_STREAM_SECONDS for the end of "
            f"a task of {shown_names(tasked)}, and the questions those tasks ask it"
        )
    user = user_settings()
    if isinstance(user, dict) and user.get("HTTP_SSE"):
        needs.append("the 2024-11-05 HTTP+SSE transport (MCP_DJANGO['HTTP_SSE'])")
    return needs


def shown_names(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` of ``names``, and how many more."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def needs_asgi_sentence() -> str:
    return "Only the ASGI deployment serves " + "; ".join(needs_asgi()) + "."


def served_by_wsgi_only() -> bool:
    """Without daphne, runserver serves WSGI; without ASGI_APPLICATION too, nothing in the
    settings points at an ASGI server, so the project most likely runs WSGI only: its endpoint
    is the plain view."""
    return "daphne" not in settings.INSTALLED_APPS and not getattr(
        settings, "ASGI_APPLICATION", None
    )


def project_asgi_application() -> str:
    """Where startproject put asgi.py: beside settings.py, in the settings module's top
    package (``mysite.settings``, or ``config.settings.production`` with split settings)."""
    # override_settings hides SETTINGS_MODULE (None); the environment still names it.
    module = (
        getattr(settings, "SETTINGS_MODULE", None)
        or os.environ.get(ENVIRONMENT_VARIABLE)
        or "<project>"
    )
    return module.split(".")[0] + ".asgi.application"


def _to_asgi_hint() -> str:
    """How a WSGI-only project turns on what needs the ASGI deployment (I171, I174)."""
    return (
        f'For those, put "daphne" first in INSTALLED_APPS, set ASGI_APPLICATION = '
        f'"{project_asgi_application()}", and in that asgi.py write application = '
        "mcp_django.routing.MCPRouter(get_asgi_application()). If you serve asgi.py with "
        "uvicorn or granian, set ASGI_APPLICATION all the same, so that its wiring is "
        "checked too."
    )


def check_server() -> list[CheckMessage]:
    """A project served by WSGI only is told, in a line, that its endpoint is the plain view
    (Info). Django prints an Info on every management command, so the list of what the site
    uses that needs ASGI waits for ``check --deploy`` (I174)."""
    if not served_by_wsgi_only():
        return []
    return [
        Info(
            "This project is served by WSGI only ('daphne' is not in INSTALLED_APPS and "
            "ASGI_APPLICATION is not set): the MCP endpoint is served by its plain view, which "
            "answers what fits one request and one response; `manage.py check --deploy` lists "
            "what this site uses that needs the ASGI deployment.",
            hint=_to_asgi_hint() + ' Once WSGI is your choice, add "mcp_django.I171" to '
            "SILENCED_SYSTEM_CHECKS.",
            id="mcp_django.I171",
        )
    ]


def check_server_deploy() -> list[CheckMessage]:
    """``check --deploy`` of a project served by WSGI only: what its plain view serves, and
    what this site uses that only the ASGI deployment serves (Info)."""
    if not served_by_wsgi_only():
        return []
    return [
        Info(
            "Served by WSGI only, the MCP endpoint is its plain view. "
            f"{PLAIN_VIEW_SERVES} {needs_asgi_sentence()}",
            hint=_to_asgi_hint(),
            id="mcp_django.I174",
        )
    ]
