"""ASGI applications wired in the ways projects do, for the checks on ASGI_APPLICATION
(mcp_django.W173 and W172): each is named by its dotted path in ``override_settings``."""

from __future__ import annotations

import functools
from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.test import override_settings

from tests.asgi import application as router
from tests.asgi import django_asgi_app


class StarletteStyleMiddleware:
    """Keeps what it wraps in ``app``, as Starlette's middleware do."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@functools.wraps(router)
async def decorated(scope: Any, receive: Any, send: Any) -> None:
    await router(scope, receive, send)


async def opaque(scope: Any, receive: Any, send: Any) -> None:
    """A function that calls the router, which no check can see."""
    await router(scope, receive, send)


# The router anywhere in the chain (no message).
protocol_router = ProtocolTypeRouter(
    {"http": router, "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter([])))}
)
channels_middleware = ProtocolTypeRouter({"http": AuthMiddlewareStack(router)})
with override_settings(STATIC_URL="/static/"):  # read when the handler is built, as runserver does
    static_files = ASGIStaticFilesHandler(router)  # type: ignore[arg-type]  # stubs say ASGIHandler; any ASGI app works
    static_files_without_mcp = ASGIStaticFilesHandler(django_asgi_app)
starlette_style = StarletteStyleMiddleware(router)
# Django's handler alone, however wrapped (W173).
protocol_router_without_mcp = ProtocolTypeRouter({"http": AuthMiddlewareStack(django_asgi_app)})
websocket_only = ProtocolTypeRouter({"websocket": URLRouter([])})
# Nothing to look into (W172).
url_router = ProtocolTypeRouter({"http": URLRouter([])})
