"""The URLconf side of the endpoint: the view that marks where MCP lives, and serves it there
when mcp_django's ASGI router is not in front.

Under ASGI with :class:`~mcp_django.routing.MCPRouter`, requests to the endpoint go to
:class:`~mcp_django.transport.consumers.MCPConsumer` and never reach this view; the router finds
the site and the transport through the view's ``mcp_site`` and ``mcp_transport``. Anywhere
else (WSGI, or ASGI without the router) the view answers itself:
:class:`~mcp_django.transport.plain.PlainEndpoint` serves what fits one request and one
response, and the 2024-11-05 HTTP+SSE transport, all of whose answers go on a held stream,
says that it needs the ASGI deployment.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from ..protocol.errors import INTERNAL_ERROR
from .plain import ASGI_HINT, PlainEndpoint
from .process_loop import process_loop

if TYPE_CHECKING:
    from ..registry.sites import MCPSite


#: The answer to the 2024-11-05 HTTP+SSE transport's paths reached without the router.
HTTP_SSE_WITHOUT_ROUTER_MESSAGE = (
    "The 2024-11-05 HTTP+SSE transport answers every request on a stream held open between "
    "requests, which this deployment cannot: its endpoint was reached without mcp_django's ASGI "
    "router (the project is served by WSGI, or its ASGI application does not wrap Django's). "
    f"Use the Streamable HTTP endpoint, or {ASGI_HINT}. manage.py check says what is missing."
)


def endpoint_view(site: MCPSite, transport: str = "streamable-http") -> Any:
    """Return the view for ``site``'s endpoint, tagged so the ASGI router can find the site and
    the transport it serves there ("streamable-http", or "sse" / "messages" for 2024-11-05).

    The view is a plain function, under WSGI and under ASGI alike: it hands the request to
    :class:`~mcp_django.transport.plain.PlainEndpoint` on this process's event loop
    (:mod:`~mcp_django.transport.process_loop`) and waits for the answer. A coroutine view
    would be run by Django under WSGI through ``async_to_sync``, a thread and a loop made and
    ended for each request. It is CSRF exempt (clients send no CSRF token; Origin is checked
    instead) and exempt from ``LoginRequiredMiddleware`` (the site's authentication policy
    answers 401 itself).
    """
    if transport == "streamable-http":
        plain = PlainEndpoint(site)

        def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
            return process_loop.run(plain(request))
    else:

        def mcp_endpoint(request: HttpRequest) -> HttpResponseBase:
            error = {"code": INTERNAL_ERROR, "message": HTTP_SSE_WITHOUT_ROUTER_MESSAGE}
            return JsonResponse(
                {"jsonrpc": "2.0", "id": None, "error": error},
                status=HTTPStatus.SERVICE_UNAVAILABLE,
            )

    view = csrf_exempt(mcp_endpoint)
    view.login_required = False  # type: ignore[attr-defined]
    view.mcp_site = site  # type: ignore[attr-defined]
    view.mcp_transport = transport  # type: ignore[attr-defined]
    return view
