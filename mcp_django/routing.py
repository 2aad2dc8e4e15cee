"""ASGI wiring: send requests for MCP endpoints to the consumer, everything else to Django.

In ``asgi.py``::

    from django.core.asgi import get_asgi_application
    django_asgi_app = get_asgi_application()

    from mcp_django.routing import MCPRouter
    application = MCPRouter(django_asgi_app)

Where the endpoint lives is decided by the URLconf (``path("mcp/", include("mcp_django.urls"))``):
the router resolves each path once and remembers the answer, and serves ``/mcp`` as well as
``/mcp/``.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.urls import Resolver404, resolve, set_script_prefix

from .transport.daphne import remember_content_types


class MCPRouter:
    """An ASGI application that serves MCP endpoints itself and passes the rest on."""

    cache_size = 1024

    def __init__(self, application: Any) -> None:
        # app loading: the consumers reach the models, and an asgi.py may import this module
        # before get_asgi_application() has set Django up; by the time it builds the router,
        # Django is ready.
        from .transport.consumers import MCPConsumer
        from .transport.legacy_sse import HTTPSSEConsumer
        from .transport.metadata import MetadataConsumer, metadata_target

        # Under Daphne (Twisted imported by now): its Content-Type parsing, made cheap.
        remember_content_types()

        self.consumer, self.sse_consumer, self.metadata_consumer = (
            MCPConsumer,
            HTTPSSEConsumer,
            MetadataConsumer,
        )
        self.metadata_target = metadata_target
        self.application = application
        self._paths: OrderedDict[str, Any] = OrderedDict()
        self._apps: dict[tuple[int, str], Any] = {}

    def endpoint_for(self, path: str) -> Any:
        """Return the consumer application serving ``path``, or None for a non-MCP path."""
        if path in self._paths:
            self._paths.move_to_end(path)
            return self._paths[path]
        app = self._resolve(path)
        if app is None and not path.endswith("/"):
            # "/mcp" for an endpoint mounted at "mcp/": answer in place, since a POST cannot
            # follow APPEND_SLASH's redirect.
            app = self._resolve(path + "/")
        self._paths[path] = app
        if len(self._paths) > self.cache_size:
            self._paths.popitem(last=False)
        return app

    def _resolve(self, path: str) -> Any:
        try:
            match = resolve(path)
        except Resolver404:
            return None
        site = getattr(match.func, "mcp_site", None)
        return (
            self._app_for(site, getattr(match.func, "mcp_transport", "streamable-http"))
            if site is not None
            else None
        )

    def _app_for(self, site: Any, transport: str) -> Any:
        key = (id(site), transport)
        if key not in self._apps:
            if transport == "streamable-http":
                self._apps[key] = self.consumer.as_asgi(site=site)
            else:
                self._apps[key] = self.sse_consumer.as_asgi(site=site, kind=transport)
        return self._apps[key]

    def metadata_for(self, path: str, mount: str = "") -> Any:
        """The protected-resource metadata app for
        ``/.well-known/oauth-protected-resource[/<endpoint>]`` (``path`` below the script name
        ``mount``: :func:`~mcp_django.transport.metadata.metadata_target`), when the server
        authenticates with OAuth; None otherwise."""
        found = self.metadata_target(path, mount)
        if found is None:
            return None
        endpoint, site = found
        return self.metadata_consumer.as_asgi(endpoint_path=endpoint, site=site)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "lifespan" and not _handles_lifespan(self.application):
            # Django's handler refuses lifespan with an exception, and uvicorn then logs that
            # the protocol is unsupported: nothing here needs start-up work, so say it is done.
            return await _answer_lifespan(receive, send)
        if scope["type"] == "http":
            path = scope.get("path", "")
            # What Django's handler takes as the script name: root_path, or FORCE_SCRIPT_NAME.
            # uvicorn's --root-path puts it in front of "path" (as the ASGI spec says); Daphne's
            # does not.
            prefix = get_script_prefix(scope)
            path, mount = path.removeprefix(prefix) if prefix else path, prefix.rstrip("/")
            if mount:
                # As Django's handler does: reverse() (the root form of the metadata, the pages
                # of URL elicitations) then gives the public paths.
                set_script_prefix(mount)
            app = self.endpoint_for(path) or self.metadata_for(path, mount)
            if app is not None:
                consumer = getattr(app, "consumer_class", None)
                if consumer is not None:
                    # What the as_asgi() app does, without its frame held for each open stream.
                    return await consumer(**app.consumer_initkwargs)(scope, receive, send)
                return await app(scope, receive, send)
        return await self.application(scope, receive, send)


#: Where ASGI wrappers keep the application they wrap: functools.wraps (``__wrapped__``, first:
#: it also copies the wrapped object's own attributes), Django's static files handler and
#: Channels' origin validators (``application``), Channels' middleware (``inner``),
#: Starlette-style middleware (``app``).
WRAPPED_ATTRIBUTES = ("__wrapped__", "application", "inner", "app")


def routes_through_router(application: Any) -> bool | None:
    """Whether HTTP requests to ``application`` reach an :class:`MCPRouter`, looking through
    wrappers and Channels' ProtocolTypeRouter: True, False when they end in Django's own
    handler (or a protocol router without "http"), None when the chain ends in something this
    cannot see into (a function, a URLRouter, an unknown middleware)."""
    seen: set[int] = set()
    app = application
    while app is not None and id(app) not in seen:
        seen.add(id(app))
        if isinstance(app, MCPRouter):
            return True
        routes = getattr(app, "application_mapping", None)
        if isinstance(routes, dict):
            if "http" not in routes:
                return False
            app = routes["http"]
            continue
        inner = next(
            (w for w in (getattr(app, a, None) for a in WRAPPED_ATTRIBUTES) if w is not None), None
        )
        if inner is None:
            return False if isinstance(app, ASGIHandler) else None
        app = inner
    return None


def _handles_lifespan(application: Any) -> bool:
    """Whether the wrapped application speaks ASGI lifespan itself (Django's handler does not;
    a Channels ProtocolTypeRouter does when it routes "lifespan")."""
    if isinstance(application, ASGIHandler):
        return False
    routes = getattr(application, "application_mapping", None)
    if isinstance(routes, dict):
        return "lifespan" in routes
    return True  # something else: let it answer


async def _answer_lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _slash_form_of_endpoint(path_info: str) -> bool:
    return _is_slash_form(path_info, settings.ROOT_URLCONF)


@lru_cache(maxsize=1024)
def _is_slash_form(path_info: str, urlconf: str) -> bool:
    """Whether ``path_info`` is an MCP endpoint's path without its trailing slash (and
    resolves to nothing by itself) in ``urlconf``."""
    try:
        resolve(path_info, urlconf)
        return False
    except Resolver404:
        pass
    try:
        match = resolve(path_info + "/", urlconf)
    except Resolver404:
        return False
    return getattr(match.func, "mcp_site", None) is not None


def serve_endpoint_without_slash(
    sender: Any, environ: Any = None, scope: Any = None, **kwargs: Any
) -> None:
    """``request_started``: when Django itself serves the endpoint (WSGI, or ASGI without
    :class:`MCPRouter`), send ``/mcp`` to the ``/mcp/`` view, which serves it (the plain
    view, :mod:`mcp_django.transport.plain`). Otherwise APPEND_SLASH answers a POST with a 500
    (DEBUG) or a redirect that drops its body. Under the router this never sees an endpoint
    path: the router answers first."""
    if environ is not None:
        path = environ.get("PATH_INFO", "")
        if path and not path.endswith("/") and _slash_form_of_endpoint(path):
            environ["PATH_INFO"] = path + "/"
    elif scope is not None and scope.get("type") == "http":
        path, root = scope.get("path", ""), scope.get("root_path", "")
        path_info = path[len(root) :] if root and path.startswith(root) else path
        if path_info and not path_info.endswith("/") and _slash_form_of_endpoint(path_info):
            scope["path"] = path + "/"
