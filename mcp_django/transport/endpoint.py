"""The URLconf side of the endpoint: a view that marks where MCP lives.

Requests to it are served by :class:`~mcp_django.transport.consumers.MCPConsumer` once the
project's ASGI application is wrapped by :class:`~mcp_django.routing.MCPRouter`. Reaching this
view means the wrapper is missing, which is answered clearly instead of half-working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

if TYPE_CHECKING:
    from ..sites import MCPSite


def endpoint_view(site: MCPSite) -> Any:
    """Return the view for ``site``'s endpoint, tagged so the ASGI router can find the site."""

    @csrf_exempt
    def mcp_endpoint(request: HttpRequest) -> JsonResponse:
        return JsonResponse(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": -32603,
                    "message": "The MCP endpoint needs mcp_django's ASGI router: in asgi.py use "
                    "application = mcp_django.routing.MCPRouter(get_asgi_application()) and serve it with an ASGI server.",
                },
            },
            status=503,
        )

    mcp_endpoint.mcp_site = site  # type: ignore[attr-defined]
    return mcp_endpoint
