"""URLs of the default site: ``path("mcp/", include("mcp_django.urls"))`` serves the endpoint at
``/mcp`` and ``/mcp/`` and the URL-elicitation pages below it. Under MCPRouter both paths reach
the consumer; without it (WSGI, or Django's bare ASGI handler) both reach the plain view,
since :func:`mcp_django.routing.serve_endpoint_without_slash` spares ``/mcp`` APPEND_SLASH.

``well_known_urlpatterns`` go in the project's root URLconf, outside any prefix: with OAuth,
they serve the endpoints' protected-resource metadata where the router does not (WSGI)::

    from mcp_django.urls import well_known_urlpatterns

    urlpatterns = [*well_known_urlpatterns, path("mcp/", include("mcp_django.urls")), ...]
"""

from django.urls import re_path

from .registry.sites import site
from .transport.metadata import protected_resource_metadata_view

urlpatterns, app_name, _ = site.urls

#: Each endpoint's RFC 9728 metadata at the host's root: ``/.well-known/oauth-protected-resource``,
#: bare or followed by the endpoint's public path. Under MCPRouter the router answers first.
well_known_urlpatterns = [
    re_path(
        r"^\.well-known/oauth-protected-resource(?:/.*)?$",
        protected_resource_metadata_view,
        name="mcp-protected-resource-metadata",
    )
]
