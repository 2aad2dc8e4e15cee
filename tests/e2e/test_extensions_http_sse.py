"""Skills and MCP Apps over the 2024-11-05 HTTP+SSE transport (``/mcp/sse``): the same engine
serves the extensions there as on Streamable HTTP and stdio (test_skills_live, test_apps_live),
driven by the official SDK's SSE client."""

from __future__ import annotations

import hashlib

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.client.sse import sse_client
from mcp.types import TextResourceContents

from .conftest import ExampleServer
from .test_apps_live import APP_URI, MIME_TYPE, PHANTASTES, UI_EXTENSION, all_tools
from .test_skills_live import EXTENSION as SKILLS_EXTENSION
from .test_skills_live import file_bytes, raw

pytestmark = pytest.mark.e2e


async def test_an_sse_client_gets_the_skills_and_the_app(example_server: ExampleServer) -> None:
    transport = sse_client(f"{example_server.mcp_url}/sse")
    extensions = [advertise(UI_EXTENSION, {"mimeTypes": [MIME_TYPE]})]
    async with Client(
        transport, mode="legacy", read_timeout_seconds=20, extensions=extensions
    ) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.extensions is not None
        assert capabilities.extensions[SKILLS_EXTENSION] == {"directoryRead": True}
        assert UI_EXTENSION in capabilities.extensions

        listed = {entry["uri"]: entry for entry in (await raw(client, "skills/list"))["skills"]}
        entry = listed["skill://lend-and-renew/SKILL.md"]
        assert (await raw(client, "skills/get", {"uri": entry["uri"]}))["skill"] == entry
        for resource in entry["resources"]:
            (contents,) = (await client.read_resource(resource["uri"])).contents
            data = file_bytes(contents)
            assert (
                len(data) == resource["size"]
                and "sha256:" + hashlib.sha256(data).hexdigest() == resource["digest"]
            )

        tool = (await all_tools(client))["book_availability"]
        assert tool.meta is not None and tool.meta["ui"]["resourceUri"] == APP_URI
        (page,) = (await client.read_resource(APP_URI)).contents
        assert (
            isinstance(page, TextResourceContents)
            and page.mime_type == MIME_TYPE
            and '"ui/initialize"' in page.text
        )
        result = await client.call_tool("book_availability", {"isbn": PHANTASTES})
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["isbn"] == PHANTASTES
