"""The example site under gunicorn (WSGI): the endpoint's plain view serves the official SDK
client in the handshake era, in JSON answer mode."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests import asgi_servers

from .conftest import manage, run_server, server_env

pytestmark = pytest.mark.e2e


async def test_gunicorn_serves_the_sdk_client_with_the_plain_view(tmp_path: Path) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth="none")
    manage(env, "migrate", "--noinput")

    with run_server(
        env,
        tmp_path / "gunicorn.log",
        server="gunicorn",
        application=asgi_servers.WSGI_APPLICATION,
    ) as server:
        async with httpx2.AsyncClient(timeout=10) as http:
            async with Client(
                streamable_http_client(server.mcp_url, http_client=http),
                read_timeout_seconds=10,
                mode="legacy",
            ) as client:
                tools = (await client.list_tools()).tools
                result = await client.call_tool("search_books", {"query": "the"})

    assert "search_books" in {tool.name for tool in tools}
    assert result.is_error is False
    log = server.log()
    assert "Booting worker" in log  # gunicorn's own words: WSGI served it
    assert "Traceback" not in log, log
