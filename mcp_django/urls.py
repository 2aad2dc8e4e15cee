"""URLs of the default site: ``path("mcp/", include("mcp_django.urls"))`` serves the endpoint at
``/mcp`` and ``/mcp/`` and the URL-elicitation pages below it. Under MCPRouter both paths reach
the consumer; without it (WSGI, or Django's bare ASGI handler) both reach the plain view,
since :func:`mcp_django.routing.serve_endpoint_without_slash` spares ``/mcp`` APPEND_SLASH."""

from .registry.sites import site

urlpatterns, app_name, _ = site.urls
