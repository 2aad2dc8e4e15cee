"""The example site under gunicorn's threaded workers (WSGI): the endpoint's plain view streams a
call's progress to the official SDK client, in both eras."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests import asgi_servers

from .conftest import ExampleServer, manage, run_server, server_env

pytestmark = pytest.mark.e2e

GTHREAD = ("--worker-class", "gthread", "--threads", "4")


@pytest.fixture(scope="module")
def gthread_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    workdir = tmp_path_factory.mktemp("e2e-gunicorn-gthread-stream")
    env = server_env(workdir / "example.sqlite3", auth="none")
    manage(env, "migrate", "--noinput")
    with run_server(
        env,
        workdir / "gunicorn.log",
        server="gunicorn",
        application=asgi_servers.WSGI_APPLICATION,
        options=GTHREAD,
    ) as server:
        yield server


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_gunicorn_gthread_streams_a_calls_progress_to_the_sdk_client(
    gthread_server: ExampleServer, mode: str
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with (
        httpx2.AsyncClient(timeout=10) as http,
        Client(
            streamable_http_client(gthread_server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode=mode,
        ) as client,
    ):
        # 50 ms apart: more than PROGRESS_MIN_INTERVAL, so no update is dropped.
        result = await client.call_tool(
            "countdown", {"n": 3, "interval_ms": 50}, progress_callback=on_progress
        )

    assert result.is_error is False
    assert progress == [(1, 3, "T-3"), (2, 3, "T-2"), (3, 3, "T-1")]
    log = gthread_server.log()
    assert "gthread" in log  # gunicorn's own words: its threaded workers served it
    assert "Traceback" not in log, log
