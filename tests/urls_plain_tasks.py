"""A project whose MCP site has a tool that may run as a durable task, for the plain view
(tests/transport/test_plain.py)."""

import asyncio
import threading

from django.urls import path

from mcp_django import Context
from mcp_django.registry.sites import MCPSite

tasks_site = MCPSite(name="plain-tasks")


@tasks_site.tool(task="optional")
async def count(ctx: Context, upto: int = 3) -> str:
    """Count, reporting progress."""
    for i in range(1, upto + 1):
        await ctx.report_progress(i, upto)
    return f"counted to {upto}"


#: What lets every running ``hold`` task end (set by the test, from any thread).
let_go = threading.Event()


@tasks_site.tool(task="optional")
async def hold() -> str:
    """Run until the test lets it go."""
    while not let_go.is_set():
        await asyncio.sleep(0.01)
    return "let go"


urlpatterns = [path("mcp/", tasks_site.urls)]
