"""Reference MCP server on the official Python SDK (mcp 2.x), same surface as bench.surface.

Run: python bench/reference_server.py --port 8123 [--json | --sse]
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("bench-reference", log_level="WARNING")
MAX_NOTIFICATIONS = 10_000


@server.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
async def notify(ctx: Context, count: int) -> str:
    """Send `count` log notifications on the request's stream, then answer."""
    if not 0 <= count <= MAX_NOTIFICATIONS:
        raise ValueError(f"count must be between 0 and {MAX_NOTIFICATIONS}")
    for i in range(count):
        await ctx.info({"i": i})
    return f"sent {count}"


@server.resource("bench://hello", name="hello", mime_type="text/plain")
def hello() -> str:
    return "Hello, bench!"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--json", dest="json_response", action="store_true", default=True)
    mode.add_argument("--sse", dest="json_response", action="store_false")
    args = parser.parse_args()

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=args.json_response,
        stateless_http=False,
        # The memory case opens 5,000 sessions; the SDK default cap is 10,000, keep headroom explicit.
        max_sessions=20_000,
        host=args.host,
    )
    # Single process, no access log: access logging would bias against whichever server logs.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        backlog=8192,
    )


if __name__ == "__main__":
    main()
