"""The example site under uvicorn: MCPRouter answers the lifespan protocol, and the official
client works as under Daphne."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mcp import Client

from .conftest import ROOT, manage, server_env, stop_process

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_uvicorn_serves_mcp_with_lifespan_answered(tmp_path: Path) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth="none")
    manage(env, "migrate", "--noinput")
    port = _free_port()
    log_path = tmp_path / "uvicorn.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--lifespan", "auto", "example_site.asgi:application"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while "Application startup complete" not in log_path.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.05)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=10) as client:
            assert (await client.list_tools()).tools
        assert httpx.get(f"http://127.0.0.1:{port}/admin/login/", timeout=5).status_code == 200
    finally:
        stop_process(process)
    log = log_path.read_text(errors="replace")
    assert "ASGI 'lifespan' protocol appears unsupported" not in log, log  # uvicorn's words without the router's answer
    assert "Waiting for application shutdown" in log and "Application shutdown complete" in log
