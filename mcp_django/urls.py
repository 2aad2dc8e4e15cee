"""URLs of the default site: ``path("mcp/", include("mcp_django.urls"))`` serves the endpoint at
``/mcp`` and ``/mcp/`` (with the ASGI router) and the URL-elicitation pages below it."""

from .sites import site

urlpatterns, app_name, _ = site.urls
