"""The example library's long task, ``export_catalogue``, in both eras and with a real worker.

In a session (2025-11-25) it streams its progress and asks for the format over SSE; at
2026-07-28 without the tasks extension it asks with an input-required round; with the
extension it is a durable task: progress becomes the task's ``statusMessage``, the question
``input_required`` answered with ``tasks/update``. The last test runs it the way
``MCP_TASKS_BACKEND=database make run`` does: Daphne and django-tasks-db's ``db_worker``, side
by side under ``example_site/with_worker.py``, on a SQLite file of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, EmbeddedResource, TextContent, TextResourceContents

from tests import asgi_servers

from .conftest import ROOT, ExampleServer, _wait_until_ready, copy_database, manage, server_env

pytestmark = pytest.mark.e2e

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
BOOKS = 30  # the demo data's catalogue
MYSTERY = 5  # ... of which mysteries
WAIT = 30.0  # seconds a task may take to reach the next state
_ids = itertools.count(1)


# -- through the SDK client: a session, and 2026-07-28 without tasks ----------------------------


class Asked:
    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.questions: list[str] = []

    async def elicit(self, context: Any, params: Any) -> ElicitResult:
        self.questions.append(params.message)
        assert params.requested_schema["properties"]["format"]["enum"] == ["csv", "json"]
        return ElicitResult(action="accept", content={"format": self.fmt})


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_export_catalogue_asks_the_format_and_reports_progress_in_both_eras(
    example_server: ExampleServer, mode: str
) -> None:
    asked = Asked("json")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with (
        httpx2.AsyncClient(timeout=10) as http,
        Client(
            streamable_http_client(example_server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode=mode,
            elicitation_callback=asked.elicit,
        ) as client,
    ):
        result = await client.call_tool(
            "export_catalogue", {"genre": "mystery"}, progress_callback=on_progress
        )
    assert not result.is_error, result
    assert asked.questions == [f"Export {MYSTERY} books: in which format?"]
    assert result.structured_content is not None
    assert (
        result.structured_content["exported"] == MYSTERY
        and result.structured_content["format"] == "json"
    )
    assert (
        result.structured_content["genres"] == {"mystery": MYSTERY}
        and not result.structured_content["truncated"]
    )
    resource = next(
        block.resource for block in result.content if isinstance(block, EmbeddedResource)
    )
    assert isinstance(resource, TextResourceContents)
    assert (
        str(resource.uri) == "library://exports/catalogue-mystery.json"
        and resource.mime_type == "application/json"
    )
    exported = json.loads(resource.text)
    assert len(exported) == MYSTERY and {row["genre"] for row in exported} == {"mystery"}
    assert any(
        isinstance(block, TextContent) and "Exported 5 of 5 books as JSON" in block.text
        for block in result.content
    )
    # Progress reaches the caller in both eras (in the session on the call's stream, at
    # 2026-07-28 on the request's own SSE answer); the last one says the export is complete.
    assert progress and progress[-1][:2] == (MYSTERY, MYSTERY), progress
    assert [value for value, _, _ in progress] == sorted(value for value, _, _ in progress)


async def test_a_declined_export_exports_nothing(example_server: ExampleServer) -> None:
    async def decline(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async with Client(
        example_server.mcp_url, read_timeout_seconds=10, mode="legacy", elicitation_callback=decline
    ) as client:
        result = await client.call_tool("export_catalogue", {})
    assert not result.is_error
    assert result.structured_content == {"exported": 0, "matching": BOOKS, "format": None}


# -- raw 2026-07-28 requests declaring the tasks extension --------------------------------------


def message(method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {TASKS: {}},
        },
        "io.modelcontextprotocol/clientInfo": {"name": "example-tasks-tests", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**params, "_meta": meta},
    }


async def rpc(http: httpx.AsyncClient, url: str, method: str, **params: Any) -> dict[str, Any]:
    """Send one 2026-07-28 request (with its mirror headers) and return its result."""
    body = message(method, params)
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        "mcp-name": str(name),
    }
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        answers = [
            json.loads(line[5:])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        answer = next(a for a in answers if a.get("id") == body["id"])
    else:
        answer = response.json()
    assert "result" in answer, answer
    return dict(answer["result"])


async def poll(
    http: httpx.AsyncClient, url: str, task_id: str, until: set[str], seen: list[dict[str, Any]]
) -> dict[str, Any]:
    """tasks/get until the task's status is one of ``until`` (bounded by WAIT)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        task = await rpc(http, url, "tasks/get", taskId=task_id)
        seen.append(task)
        if task["status"] in until:
            return task
        assert task["status"] == "working", task
        await asyncio.sleep(0.1)  # the client's poll interval, bounded by the deadline
    pytest.fail(f"task {task_id} is still {seen[-1]['status']!r} after {WAIT} s", pytrace=False)


async def export_as_task(url: str, fmt: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """Run export_catalogue as a task to its end: (task id, the final task, every task seen)."""
    seen: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=10) as http:
        created = await rpc(http, url, "tools/call", name="export_catalogue", arguments={})
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        waiting = await poll(http, url, task_id, {"input_required"}, seen)
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == f"Export {BOOKS} books: in which format?"
        assert (
            waiting["statusMessage"] == f"{BOOKS} books to export"
        )  # progress before the question
        await rpc(
            http,
            url,
            "tasks/update",
            taskId=task_id,
            inputResponses={key: {"action": "accept", "content": {"format": fmt}}},
        )
        done = await poll(http, url, task_id, {"completed", "failed", "cancelled"}, seen)
    return task_id, done, seen


def assert_complete_export(done: dict[str, Any], fmt: str) -> None:
    assert done["status"] == "completed", done
    result = done["result"]
    assert not result.get("isError"), result
    assert (
        result["structuredContent"]["exported"] == BOOKS
        and result["structuredContent"]["format"] == fmt
    )
    (resource,) = [block["resource"] for block in result["content"] if block["type"] == "resource"]
    assert resource["uri"] == f"library://exports/catalogue.{fmt}"
    lines = resource["text"].splitlines()
    assert (
        lines[0] == "isbn,title,author,published,genre,copies,available" and len(lines) == BOOKS + 1
    )


async def test_export_catalogue_as_a_task_asks_through_the_task(
    example_server: ExampleServer,
) -> None:
    _, done, seen = await export_as_task(example_server.mcp_url, "csv")
    assert_complete_export(done, "csv")
    assert {task["status"] for task in seen} <= {"working", "input_required", "completed"}


# -- with a real worker: MCP_TASKS_BACKEND=database, as `make run` starts it --------------------


@contextlib.contextmanager
def site_with_worker(
    env: dict[str, str], log_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Daphne and db_worker under example_site/with_worker.py (what `make run` runs), in a
    process group of their own that is killed at the end whatever happens."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "example_site.with_worker",
                "--",
                *asgi_servers.server_command("daphne", 0),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process, _wait_until_ready(process, log_path)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # Ctrl-C: with_worker stops both
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


TASK_ROW = """
import json
from mcp_django.models import Task
from django_tasks_db.models import DBTaskResult
task = Task.objects.get(pk={task_id!r})
job = DBTaskResult.objects.get(pk=task.backend_task_id)
print(json.dumps({{"status": task.status, "backend": task.backend, "worker": task.worker, "tool": task.tool_name,
                  "job": job.status, "finished": task.finished_at is not None}}))
"""


async def test_a_db_worker_runs_the_export_task_that_daphne_made(
    demo_database: Path, tmp_path: Path
) -> None:
    env = {
        **server_env(copy_database(demo_database, tmp_path / "example.sqlite3"), auth="none"),
        "MCP_TASKS_BACKEND": "database",
    }
    manage(env, "migrate", "--noinput")  # django_tasks_db's tables, as `make run` does first
    with site_with_worker(env, tmp_path / "site.log") as (process, base_url):
        task_id, done, _ = await export_as_task(f"{base_url}/mcp", "csv")
        assert_complete_export(done, "csv")
        row = json.loads(
            manage(env, "shell", "-v0", "-c", TASK_ROW.format(task_id=task_id))
            .strip()
            .splitlines()[-1]
        )
        assert (
            row["status"] == "completed" and row["finished"] and row["tool"] == "export_catalogue"
        )
        assert row["backend"] == "default" and row["job"] == "SUCCESSFUL"
        # The task ran in the worker, not in Daphne: the row names the db_worker process.
        children = asgi_servers.children(process.pid)  # Linux (/proc); empty elsewhere
        worker_pid = int(row["worker"].rpartition(":")[2])
        if children:
            assert len(children) == 2 and worker_pid in children, (children, row)
            assert b"db_worker" in Path(f"/proc/{worker_pid}/cmdline").read_bytes().split(b"\0")
        # Ctrl-C stops both processes, and with_worker exits.
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]
