"""The URL patterns of an MCP site: its endpoint and its URL-elicitation pages.

They live above the registry (the views know the site, the site does not import the views):
``MCPSite.get_urls`` calls :func:`site_urlpatterns`, which mcp_django's ``AppConfig.ready``
hands to ``MCPSite``, as the admin builds its URLs on demand in ``AdminSite.get_urls``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.urls import path

from .elicitation import connect, views
from .transport.endpoint import endpoint_view
from .transport.health import health_view

if TYPE_CHECKING:
    from .registry.sites import MCPSite


def site_urlpatterns(site: MCPSite) -> list[Any]:
    # The router also serves the endpoint without its trailing slash.
    return [
        path("", endpoint_view(site), name="endpoint"),
        # The 2024-11-05 HTTP+SSE transport (MCP_DJANGO["HTTP_SSE"]).
        path("sse/", endpoint_view(site, "sse"), name="sse"),
        path("messages/", endpoint_view(site, "messages"), name="messages"),
        path(
            "elicitations/<str:elicitation_id>/secret/",
            views.SecretElicitationView.as_view(site=site),
            name="elicit-secret",
        ),
        path(
            "elicitations/<str:elicitation_id>/confirm/",
            views.ConfirmElicitationView.as_view(site=site),
            name="elicit-confirm",
        ),
        path(
            "elicitations/<str:elicitation_id>/connect/",
            connect.ConnectElicitationView.as_view(site=site),
            name="elicit-connect",
        ),
        path(
            "connect/callback/",
            connect.ConnectCallbackView.as_view(site=site),
            name="connect-callback",
        ),
        # Readiness for load balancers (database and channel layer); a Django view, off the MCP
        # path.
        path("health/", health_view(), name="health"),
    ]
