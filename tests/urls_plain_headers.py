"""A project whose MCP site has a tool mirroring its arguments into ``Mcp-Param-*`` headers
(``x-mcp-header``), for the plain view's property tests (tests/transport/test_fuzz_plain.py):
without one, the view never reads those headers."""

from django.urls import path

from mcp_django.registry.sites import MCPSite

headers_site = MCPSite(name="plain-headers")

MIRRORED_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"},
        "where": {
            "type": "object",
            "properties": {"city": {"type": "string", "x-mcp-header": "City"}},
        },
    },
}


@headers_site.tool(input_schema=MIRRORED_SCHEMA)
def mirrored(
    region: str = "", count: int = 0, dry: bool | None = None, where: dict | None = None
) -> str:
    """Say what it was called with."""
    return f"{region} {count} {dry} {where}"


urlpatterns = [path("mcp/", headers_site.urls)]
