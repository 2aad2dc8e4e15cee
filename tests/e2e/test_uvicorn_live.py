"""The example site under uvicorn: MCPRouter answers the lifespan protocol, and the official
client works as under Daphne."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from mcp import Client

from .conftest import manage, run_server, server_env

pytestmark = pytest.mark.e2e


async def test_uvicorn_serves_mcp_with_lifespan_answered(tmp_path: Path) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth="none")
    manage(env, "migrate", "--noinput")
    with run_server(env, tmp_path / "uvicorn.log", server="uvicorn") as server:
        async with Client(server.mcp_url, read_timeout_seconds=10) as client:
            assert (await client.list_tools()).tools
        assert httpx.get(f"{server.base_url}/admin/login/", timeout=5).status_code == 200
    log = server.log()
    assert "Application startup complete" in log
    assert "ASGI 'lifespan' protocol appears unsupported" not in log, (
        log
    )  # uvicorn's words without the router's answer
    assert "Waiting for application shutdown" in log and "Application shutdown complete" in log
