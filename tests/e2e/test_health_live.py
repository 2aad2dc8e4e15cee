"""The readiness view and tracing on the real example site: ``/mcp/health/`` answers 200 (503
naming the migrations on a database where ``migrate`` never ran, where the official client's
``initialize`` gets a JSON-RPC error saying to run it), and with ``OTEL_TRACES_EXPORTER=console``
a tools/call from the official client prints its span, parented on the client's trace context,
to the server's log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client, MCPError

from .conftest import ExampleServer, run_server, server_env

pytestmark = pytest.mark.e2e

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
SPAN_TIMEOUT = 10.0


def test_health_answers_200_on_the_example_site(example_server: ExampleServer) -> None:
    response = httpx.get(f"{example_server.base_url}/mcp/health/", timeout=10)
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "migrations": "ok", "channel_layer": "ok"},
    }
    assert response.headers["cache-control"] == "no-store"


@pytest.fixture(scope="module")
def unmigrated_server(
    asgi_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    """The example site on a new SQLite file, started without ``manage.py migrate``."""
    workdir = tmp_path_factory.mktemp(f"e2e-unmigrated-{asgi_server}")
    env = server_env(workdir / "never-migrated.sqlite3", auth="none")
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as server:
        yield server


def test_health_is_503_and_names_the_migrations_when_migrate_never_ran(
    unmigrated_server: ExampleServer,
) -> None:
    response = httpx.get(f"{unmigrated_server.base_url}/mcp/health/", timeout=10)
    assert response.status_code == 503
    body = response.json()
    assert body["checks"] == {"database": "ok", "migrations": "unapplied", "channel_layer": "ok"}
    assert body["unapplied_migrations"][0] == "mcp_django.0001_initial"
    assert "manage.py migrate" in body["hint"]


async def test_initialize_without_migrate_is_a_json_rpc_error_saying_to_run_migrate(
    unmigrated_server: ExampleServer,
) -> None:
    response = httpx.post(
        unmigrated_server.mcp_url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "e2e", "version": "1"},
            },
        },
        headers={"Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    assert (
        response.json()["error"]["code"] == -32603
        and "manage.py migrate" in response.json()["error"]["message"]
    )
    # The SDK raises it from its task group, wrapped.
    with pytest.RaisesGroup(
        pytest.RaisesExc(MCPError, match="manage.py migrate"), flatten_subgroups=True
    ):
        async with Client(unmigrated_server.mcp_url, read_timeout_seconds=10, mode="legacy"):
            pass


@pytest.fixture(scope="module")
def traced_server(example_server: ExampleServer) -> Iterator[ExampleServer]:
    """A second process on the same database, printing its spans on the console."""
    env = {**example_server.env, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    log_path = example_server.log_path.with_name(f"{example_server.server}-otel.log")
    with run_server(env, log_path, server=example_server.server) as server:
        yield server


def printed_spans(log: str) -> list[dict[str, Any]]:
    """The JSON objects ConsoleSpanExporter printed (one per span, each starting a line)."""
    decoder = json.JSONDecoder()
    spans = []
    for start in (
        i for i, char in enumerate(log) if char == "{" and (i == 0 or log[i - 1] == "\n")
    ):
        try:
            value, _ = decoder.raw_decode(log, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "context" in value and "attributes" in value:
            spans.append(value)
    return spans


def wait_for_span(server: ExampleServer, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + SPAN_TIMEOUT
    while True:
        found = [s for s in printed_spans(server.log()) if s.get("name") == name]
        if found:
            return found[-1]
        if time.monotonic() > deadline:
            pytest.fail(
                f"no span {name!r} in the server log:\n{server.log()[-3000:]}", pytrace=False
            )
        time.sleep(0.05)  # bounded by the deadline above


async def test_tools_call_prints_its_span_with_the_clients_trace(
    traced_server: ExampleServer,
) -> None:
    async with Client(traced_server.mcp_url, read_timeout_seconds=10) as client:
        result = await client.call_tool(
            "search_books",
            {"query": "Austen"},
            meta={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
        )
        assert result.structured_content
    span = wait_for_span(traced_server, "tools/call search_books")
    assert span["kind"] == "SpanKind.SERVER"
    assert span["attributes"]["mcp.method.name"] == "tools/call"
    assert span["attributes"]["gen_ai.tool.name"] == "search_books"
    assert span["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert span["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert span["parent_id"] == f"0x{PARENT_ID}"
    assert span["resource"]["attributes"]["service.name"] == "example-library"
