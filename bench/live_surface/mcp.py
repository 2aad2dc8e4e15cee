"""Tools for bench/live.py: bursts of notifications, each carrying the time it was sent."""

import time

from mcp_django import Context, site


@site.tool()
async def notify_burst(ctx: Context, n: int = 1000) -> str:
    """Send n log notifications as fast as possible, each with its send time."""
    for i in range(n):
        await ctx.log.info({"i": i, "t": time.time()})
    return f"sent {n}"
