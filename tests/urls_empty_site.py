"""A project whose routed MCP site has nothing registered (system check W182)."""

from django.urls import path

from mcp_django.registry.sites import MCPSite

empty_site = MCPSite(name="empty")

urlpatterns = [path("empty/", empty_site.urls)]
