"""The URLconf side of the endpoint: a view that marks where MCP lives.

Requests to it are served by :class:`~mcp_django.transport.consumers.MCPConsumer` once the
project's ASGI application is wrapped by :class:`~mcp_django.routing.MCPRouter`. Reaching this
view means the wrapper is missing, which is answered clearly instead of half-working.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from ..protocol.errors import INTERNAL_ERROR

if TYPE_CHECKING:
    from ..registry.sites import MCPSite


#: The answer to every request that reaches the endpoint without the router, on any path form.
WITHOUT_ROUTER_MESSAGE = (
    "This MCP endpoint was reached without mcp_django's ASGI router, so it cannot answer: the "
    "project is served by WSGI (runserver without daphne, gunicorn) or its ASGI application does "
    'not wrap Django\'s. Put "daphne" first in INSTALLED_APPS for runserver (or serve asgi.py '
    "with an ASGI server), and in asgi.py use "
    "application = mcp_django.routing.MCPRouter(get_asgi_application()). manage.py check says what "
    "is missing."
)


def endpoint_view(site: MCPSite, transport: str = "streamable-http") -> Any:
    """Return the view for ``site``'s endpoint, tagged so the ASGI router can find the site and
    the transport it serves there ("streamable-http", or "sse" / "messages" for 2024-11-05)."""

    @csrf_exempt
    def mcp_endpoint(request: HttpRequest) -> JsonResponse:
        error = {"code": INTERNAL_ERROR, "message": WITHOUT_ROUTER_MESSAGE}
        return JsonResponse(
            {"jsonrpc": "2.0", "id": None, "error": error}, status=HTTPStatus.SERVICE_UNAVAILABLE
        )

    mcp_endpoint.mcp_site = site  # type: ignore[attr-defined]
    mcp_endpoint.mcp_transport = transport  # type: ignore[attr-defined]
    return mcp_endpoint
