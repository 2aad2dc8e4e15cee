"""Reference for bench/live.py: the official SDK's MCPServer with the same notification burst.

Run: python bench/reference_live.py --port 8124
"""

from __future__ import annotations

import argparse
import time

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("bench-reference-live", log_level="WARNING")


@server.tool()
async def notify_burst(ctx: Context, n: int = 1000) -> str:
    """Send n log notifications as fast as possible, each with its send time."""
    for i in range(n):
        await ctx.info({"i": i, "t": time.time()})
    return f"sent {n}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = server.streamable_http_app(
        streamable_http_path="/mcp", json_response=False, stateless_http=False, host="127.0.0.1"
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
