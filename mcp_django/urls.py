"""URLs of the default site: ``path("mcp/", include("mcp_django.urls"))`` serves the endpoint at
``/mcp`` and ``/mcp/`` and the URL-elicitation pages below it. Under MCPRouter both paths reach
the consumer; without it (WSGI, or Django's bare ASGI handler) both reach the plain view,
since :func:`mcp_django.routing.serve_endpoint_without_slash` spares ``/mcp`` APPEND_SLASH.

``well_known_urlpatterns`` go in the project's root URLconf, outside any prefix: with OAuth,
they serve the endpoints' protected-resource metadata where the router does not (WSGI)::

    from mcp_django.urls import well_known_urlpatterns

    urlpatterns = [*well_known_urlpatterns, path("mcp/", include("mcp_django.urls")), ...]
"""

from .registry.sites import site
from .site_urls import well_known_urlpatterns as _well_known_urlpatterns

urlpatterns, app_name, _ = site.urls
well_known_urlpatterns = _well_known_urlpatterns()
