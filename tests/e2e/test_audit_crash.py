"""The audit trail through a crash: the real example site with ``AUDIT_DURABLE`` is killed with
SIGKILL (its whole process group) while a ``long_task`` runs, then started again on the same
SQLite database. Every call the SDK client got an answer for has its row; the call the crash
cut off gets an ``interrupted`` row once the new process sweeps the dead one's lapsed leases;
and the example site's own TaskRun row of that call is no longer "running". In the buffered
default the streamed call the crash cut off gets its ``interrupted`` row from the sweep too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import ExampleServer, connect_as, copy_database, manage, run_server, server_env
from .elicitation_helpers import WAIT
from .test_audit_live import marker, tool_calls

pytestmark = pytest.mark.e2e

#: A short lease, so the dead process's claims lapse within the test's bounded waits.
LEASE_SECONDS = "1.5"

#: The TaskRun rows and the running requests, as JSON.
RUNS = """
import json
from example_site.live.models import TaskRun
from mcp_django.models import RunningRequest
runs = [{"pk": r.pk, "status": r.status, "reason": getattr(r, "reason", ""), "request_id": r.request_id} for r in TaskRun.objects.order_by("pk")]
print(json.dumps({"runs": runs, "claims": RunningRequest.objects.count()}))
"""


def runs(env: dict[str, str]) -> dict[str, Any]:
    return dict(json.loads(manage(env, "shell", "-v0", "-c", RUNS)))


def wait_until(read: Any, done: Any) -> Any:
    """``read()`` once ``done`` of it, or its last value after WAIT seconds (each read is a
    ``manage.py shell``: the loop needs no pause)."""
    deadline = time.monotonic() + WAIT
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value


def crash(server: ExampleServer) -> None:
    """SIGKILL to the server's whole process group: no atexit, no flush, no goodbye."""
    assert server.process is not None
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=WAIT)


async def test_a_crash_loses_no_answered_call_and_interrupts_the_running_one(
    asgi_server: str, demo_database: Path, tmp_path: Path
) -> None:
    env = {
        **server_env(copy_database(demo_database, tmp_path / "crash.sqlite3"), auth="none"),
        "MCP_AUDIT_DURABLE": "1",
        "MCP_REQUEST_LEASE_SECONDS": LEASE_SECONDS,
    }
    answered = [marker() for _ in range(12)]
    with run_server(env, tmp_path / "before.log", server=asgi_server) as server:
        async with (
            connect_as(server, "librarian", mode="legacy") as long_client,
            connect_as(server, "librarian") as client,
        ):
            long_call = asyncio.ensure_future(long_client.call_tool("long_task", {"seconds": 600}))
            # Running, and claimed by its process: the TaskRun row and the lease are written.
            # (Read from a thread: the client's task must go on meanwhile.)
            state = await asyncio.to_thread(
                wait_until, lambda: runs(env), lambda s: s["runs"] and s["claims"]
            )
            assert (
                state["runs"] and state["runs"][0]["status"] == "running" and state["claims"] == 1
            ), (state, server.log()[-3000:])
            # Answered right before the crash: buffered, these rows would still be in memory.
            for query in answered:
                assert not (await client.call_tool("search_books", {"query": query})).is_error
            crash(server)
            long_call.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(long_call, WAIT)
        (run,) = state["runs"]

    # (a) No flush ran, yet every answered call has its row.
    for query in answered:
        (row,) = tool_calls(env, query)
        assert (row["tool"], row["outcome"]) == ("search_books", "ok")
    (cut,) = [c for c in tool_calls(env) if c["tool"] == "long_task"]
    assert cut["outcome"] == "running" and cut["request_id"] == run["request_id"]

    with run_server(env, tmp_path / "after.log", server=asgi_server) as server:
        # (b) The new process sweeps the dead one's lapsed leases: the call is interrupted.
        calls = wait_until(
            lambda: [c for c in tool_calls(env) if c["tool"] == "long_task"],
            lambda c: c[0]["outcome"] != "running",
        )
        assert [(c["outcome"], c["error"]) for c in calls] == [
            ("interrupted", "the server process stopped while the call ran")
        ]
        # (c) and the example site's TaskRun says so to a reader of live://runs/{id}.
        state = wait_until(lambda: runs(env), lambda s: s["runs"][0]["status"] != "running")
        assert state["runs"][0]["status"] == "interrupted" and state["claims"] == 0
        async with connect_as(server, "librarian") as client:
            read = await client.read_resource(f"live://runs/{run['pk']}")
        shown = json.loads(read.contents[0].text)
        assert shown["status"] == "interrupted" and "stopped" in shown["reason"]


async def test_in_the_buffered_default_a_streamed_call_a_crash_cut_off_is_interrupted_after_the_sweep(
    asgi_server: str, demo_database: Path, tmp_path: Path
) -> None:
    # No AUDIT_DURABLE: the running call has no row, only its claim, which carries its record.
    env = {
        **server_env(copy_database(demo_database, tmp_path / "buffered.sqlite3"), auth="none"),
        "MCP_REQUEST_LEASE_SECONDS": LEASE_SECONDS,
    }
    with run_server(env, tmp_path / "before.log", server=asgi_server) as server:
        async with connect_as(server, "librarian", mode="legacy") as long_client:
            long_call = asyncio.ensure_future(long_client.call_tool("long_task", {"seconds": 600}))
            state = await asyncio.to_thread(
                wait_until, lambda: runs(env), lambda s: s["runs"] and s["claims"]
            )
            assert state["runs"] and state["claims"] == 1, (state, server.log()[-3000:])
            crash(server)
            long_call.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(long_call, WAIT)
        (run,) = state["runs"]
    assert [
        c for c in tool_calls(env) if c["tool"] == "long_task"
    ] == []  # buffered: nothing on record yet

    with run_server(env, tmp_path / "after.log", server=asgi_server):
        calls = wait_until(lambda: [c for c in tool_calls(env) if c["tool"] == "long_task"], bool)
        assert [(c["outcome"], c["error"], c["request_id"]) for c in calls] == [
            ("interrupted", "the server process stopped while the call ran", run["request_id"])
        ]
        assert wait_until(lambda: runs(env), lambda s: s["claims"] == 0)["claims"] == 0
