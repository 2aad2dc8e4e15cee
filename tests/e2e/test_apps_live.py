"""The example site's MCP App (``book_availability``'s UI), as a host that supports the
``io.modelcontextprotocol/ui`` extension finds it with the official MCP Python SDK client: the
extension declared, the tool's ``_meta.ui.resourceUri``, the ``ui://`` resource read as
``text/html;profile=mcp-app`` with its ``_meta.ui``, and the result the app renders; in both
protocol eras, over Streamable HTTP and over stdio. tests/browser/test_apps_ui.py runs the app
itself in a browser host."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.client.stdio import stdio_client
from mcp.types import TextResourceContents

from .conftest import ExampleDatabase, ExampleServer
from .test_stdio import command

pytestmark = pytest.mark.e2e

UI_EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
APP_URI = "ui://library/availability.html"
PHANTASTES = "9780001300019"  # 1 copy, not on loan (demo data)


@pytest.fixture(params=["legacy", "auto"])
def era(request: pytest.FixtureRequest) -> str:
    """The initialize handshake (2025-11-25), or server/discover then stateless 2026-07-28."""
    return str(request.param)


def host(server: ExampleServer, era: str) -> Client:
    """A client that says it renders MCP Apps, as an Apps host does (ext-apps spec, capability negotiation)."""
    return Client(
        server.mcp_url,
        read_timeout_seconds=10,
        mode=era,
        extensions=[advertise(UI_EXTENSION, {"mimeTypes": [MIME_TYPE]})],
    )


async def all_tools(client: Client) -> dict[str, Any]:
    tools: dict[str, Any] = {}
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.update({t.name: t for t in page.tools})
        cursor = page.next_cursor
        if not cursor:
            return tools


async def test_a_host_finds_reads_and_feeds_the_availability_app(
    example_server: ExampleServer, era: str
) -> None:
    async with host(example_server, era) as client:
        assert client.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.extensions is not None
        assert UI_EXTENSION in capabilities.extensions

        tool = (await all_tools(client))["book_availability"]
        assert tool.meta is not None and tool.meta["ui"] == {"resourceUri": APP_URI}

        listed = [r for r in (await client.list_resources()).resources if r.uri == APP_URI]
        assert [r.mime_type for r in listed] == [MIME_TYPE]

        (contents,) = (await client.read_resource(APP_URI)).contents
        assert isinstance(contents, TextResourceContents)
        assert contents.mime_type == MIME_TYPE
        assert contents.meta == {"ui": {"prefersBorder": True}}
        html = contents.text
        assert html.startswith("<!DOCTYPE html>")
        assert '"ui/initialize"' in html and '"tools/call"' in html  # the app's own JSON-RPC client
        assert (
            "<script src" not in html and "<link" not in html
        )  # inline: the host's CSP allows no origin

        # What the host hands the app in ui/notifications/tool-result: the structured result.
        result = await client.call_tool("book_availability", {"isbn": PHANTASTES})
        assert not result.is_error
        assert result.structured_content is not None
        assert result.structured_content["isbn"] == PHANTASTES
        assert {"title", "copies", "on_loan", "available", "next_due_on"} <= set(
            result.structured_content
        )


# "auto" discovers the server (server/discover), then speaks 2026-07-28 (see test_skills_live).
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stdio_host_gets_the_same_app_as_the_given_user(
    example_database: ExampleDatabase, mode: str
) -> None:
    # manage.py mcp_stdio: the same site, the same gate (reader may use book_availability), in each era.
    extensions = [advertise(UI_EXTENSION, {"mimeTypes": [MIME_TYPE]})]
    transport = stdio_client(command(example_database, "--user", "reader"))
    async with Client(
        transport, mode=mode, read_timeout_seconds=20, extensions=extensions
    ) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert UI_EXTENSION in (client.server_capabilities.extensions or {})
        assert (await all_tools(client))["book_availability"].meta["ui"]["resourceUri"] == APP_URI
        (contents,) = (await client.read_resource(APP_URI)).contents
    assert isinstance(contents, TextResourceContents)
    assert contents.mime_type == MIME_TYPE and "ui/initialize" in contents.text
