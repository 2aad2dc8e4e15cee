"""A project whose MCP site declares a scope of its own (the protected-resource metadata names it)."""

from django.urls import path

from mcp_django.registry.sites import MCPSite

scoped_site = MCPSite(name="scoped")


@scoped_site.prompt(scopes=["notes:admin"])
def audit() -> str:
    """Review the notes."""
    return "Review the notes."


urlpatterns = [path("scoped/", scoped_site.urls)]
