"""URLs of the default site: ``path("mcp", include("mcp_django.urls"))`` serves ``/mcp`` and ``/mcp/``."""

from .sites import site

urlpatterns, app_name, _ = site.urls
