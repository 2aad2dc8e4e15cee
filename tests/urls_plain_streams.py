"""A project whose MCP site has a tool that reports progress and then waits until the test lets
it go, for the plain view's streamed answers (tests/transport/test_plain_stream.py)."""

import asyncio

from django.urls import path

from mcp_django import Context
from mcp_django.registry.sites import MCPSite

streams_site = MCPSite(name="plain-streams")

#: Each call of ``stall`` adds one entry: "cancelled" when its stream cut it off.
outcomes: list[str] = []


@streams_site.tool()
async def stall(ctx: Context) -> str:
    """Report some progress, then wait for ever (until cancelled)."""
    await ctx.report_progress(1, 2)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        outcomes.append("cancelled")
        raise
    return "never"


urlpatterns = [path("mcp/", streams_site.urls)]
