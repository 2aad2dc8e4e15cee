"""The bench surface's echo tool on django-mcpz, as bench/surface/mcp.py declares it on ours."""

import msgspec
from django_mcpz.server import MCPServer, public

server = MCPServer(name="bench-peer", version="1", auth=public)


class EchoParams(msgspec.Struct):
    text: str


@server.tool(description="Echo the text back.", read_only=True)
def echo(request, params: EchoParams) -> str:
    # A str goes out as one text content block, as ours and the reference answer.
    return params.text
