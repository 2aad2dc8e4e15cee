"""``manage.py mcp_stdio`` driven by the official SDK's stdio client, which spawns it as a desktop
or IDE client would: the example site's tools, resources and prompts with a user's permissions,
progress, a form elicitation, and a refusal, in both eras; and a clear error for a bad user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ElicitResult, TextContent

from tests.polling import until

from .conftest import ExampleDatabase, tool_names

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def command(server: ExampleDatabase, *args: str, auth: str = "django") -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_stdio", *args],
        env={**server.env, "MCP_AUTH": auth},
        cwd=str(ROOT),
    )


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_stdio_client_uses_the_site_as_the_given_user(
    example_database: ExampleDatabase, mode: str, tmp_path: Path
) -> None:
    progress: list[float] = []
    asked: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True, "note": "by stdio"})

    errlog = (tmp_path / "stderr.log").open("w")
    async with Client(
        stdio_client(command(example_database, "--user", "librarian"), errlog=errlog),
        mode=mode,
        read_timeout_seconds=20,
        elicitation_callback=elicit,
    ) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        names = await tool_names(client)
        found = await client.call_tool("search_books", {"query": "wells"})
        stats = await client.read_resource("library://catalogue/stats")
        prompt = await client.get_prompt("recommend_books", {"interest": "mystery"})
        counted = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
        reserved = await client.call_tool("confirm_reservation", {"title": "Emma"})
    errlog.close()
    assert "library_book_create" in names  # the librarian's permissions
    assert found.structured_content and found.structured_content["books"]
    assert stats.contents and prompt.messages
    assert not counted.is_error and len(progress) >= 3
    assert reserved.structured_content == {
        "title": "Emma",
        "action": "accept",
        "confirmed": True,
        "note": "by stdio",
    }
    assert asked == ["Reserve Emma?"]


async def test_a_user_without_the_permission_is_refused(example_database: ExampleDatabase) -> None:
    async with Client(
        stdio_client(command(example_database, "--user", "reader")), read_timeout_seconds=20
    ) as client:
        names = await tool_names(client)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("library_book_create", {"title": "X"})
    assert "library_book_create" not in names
    assert "Unknown tool" in str(refused.value)  # as for a tool that does not exist


@pytest.mark.parametrize(
    "args",
    [
        ["--user", "Librarian@Example.com"],
        ["--user", "librarian@example.com", "--user-field", "email"],
    ],
)
async def test_a_stdio_client_can_name_its_user_by_email(
    example_database: ExampleDatabase, args: list[str]
) -> None:
    async with Client(
        stdio_client(command(example_database, *args)), read_timeout_seconds=20
    ) as client:
        names = await tool_names(client)
        found = await client.call_tool("search_books", {"query": "wells"})
    assert "library_book_create" in names  # the librarian's permissions, found by address
    assert found.structured_content and found.structured_content["books"]


def test_an_unknown_user_or_a_missing_one_is_a_clear_error(
    example_database: ExampleDatabase,
) -> None:
    for args, expected in (
        (["--user", "nobody-here"], "No user 'nobody-here'"),
        ([], "requires a user"),
    ):
        done = subprocess.run(
            [sys.executable, "manage.py", "mcp_stdio", *args],
            cwd=ROOT,
            env={**example_database.env, "MCP_AUTH": "django"},
            input=b"",
            capture_output=True,
            timeout=60,
        )
        assert done.returncode != 0
        assert expected in done.stderr.decode(), done.stderr.decode()
        assert done.stdout == b""  # stdout carries JSON-RPC only


def test_a_database_without_mcp_djangos_migrations_is_refused_with_what_to_run(
    example_database: ExampleDatabase, tmp_path: Path
) -> None:
    # Before: the first request failed on a missing table, nothing was answered or logged, and
    # the command ended with status 0.
    env = {
        **example_database.env,
        "MCP_AUTH": "none",
        "SQLITE_PATH": str(tmp_path / "never-migrated.sqlite3"),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env=env,
        input=_lines(INIT, INITIALIZED),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert (
        "mcp_django.0001_initial" in done.stderr.decode()
        and "manage.py migrate" in done.stderr.decode()
    ), done.stderr.decode()
    assert done.stdout == b""


def _lines(*messages: dict[str, Any]) -> bytes:
    import json

    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "pipe", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_end_of_input_lets_the_last_call_answer_then_exits(
    example_database: ExampleDatabase,
) -> None:
    import json

    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "search_books", "arguments": {"query": "wells"}},
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env={**example_database.env, "MCP_AUTH": "none"},
        input=_lines(INIT, INITIALIZED, call) + b"not json\n",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, None, 2] or [a.get("id") for a in answers] == [
        1,
        2,
        None,
    ]
    by_id = {a.get("id"): a for a in answers}
    assert by_id[2]["result"]["structuredContent"]["books"]
    assert by_id[None]["error"]["code"] == -32700  # the bad line, answered; the others unharmed


def test_sigterm_cancels_what_runs_and_ends_the_session(example_database: ExampleDatabase) -> None:
    import json
    import signal

    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "long_task", "arguments": {"seconds": 30}},
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env={**example_database.env, "MCP_AUTH": "none"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(_lines(INIT, INITIALIZED, call))
    process.stdin.flush()
    session_answer = json.loads(process.stdout.readline())
    assert session_answer["id"] == 1
    started = json.loads(process.stdout.readline())  # long_task logs its TaskRun row as it starts
    assert (
        started["method"] == "notifications/message"
        and started["params"]["data"]["status"] == "running"
    ), started
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    assert b'"id":2' not in out  # a cancelled request gets no answer
    # Nothing lost: the session row says it ended, and the tool recorded its cancellation.
    # This call's own run, by the pk it logged: the database is shared with other tests' runs.
    run = started["params"]["data"]["run"]
    script = (
        "from mcp_django.models import Session; from example_site.live.models import TaskRun; "
        "s = Session.objects.filter(transport='stdio').latest('created_at'); "
        f"print(s.terminated_at is not None, TaskRun.objects.get(pk={int(run)}).status)"
    )
    from .conftest import manage

    assert manage(
        {**example_database.env, "MCP_AUTH": "none"}, "shell", "-v0", "-c", script
    ).split() == ["True", "cancelled"]


async def test_changes_reach_a_stdio_client_in_both_eras(example_database: ExampleDatabase) -> None:
    import asyncio

    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        heard.append(message)

    # A session hears the site's announcements (here: a tool that announces a list change).
    async with Client(
        stdio_client(command(example_database, auth="none")),
        mode="legacy",
        read_timeout_seconds=20,
        message_handler=on_message,
    ) as client:
        await client.call_tool("test_trigger_tool_change", {})
        await until(
            lambda: any("ToolListChanged" in type(m).__name__ for m in heard),
            failure=lambda: f"no list change in {heard}",
        )

    # 2026-07-28: subscriptions/listen on the pipe.
    async with Client(
        stdio_client(command(example_database, auth="none")),
        mode="2026-07-28",
        read_timeout_seconds=20,
    ) as client:
        async with client.listen(prompts_list_changed=True) as subscription:
            await client.call_tool("test_trigger_prompt_change", {})
            event = await asyncio.wait_for(anext(aiter(subscription)), 10)
    assert "prompt" in repr(event).lower()


def test_a_2025_03_26_batch_is_answered_as_one_array(example_database: ExampleDatabase) -> None:
    import json

    init = {**INIT, "params": {**INIT["params"], "protocolVersion": "2025-03-26"}}
    batch = [
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "tools/call",
            "params": {"name": "search_books", "arguments": {"query": "wells"}},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1},
        },
        {"jsonrpc": "2.0", "id": "b", "method": "ping"},
    ]
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env={**example_database.env, "MCP_AUTH": "none"},
        input=_lines(init, INITIALIZED) + json.dumps(batch).encode() + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    first, answers = (json.loads(line) for line in done.stdout.splitlines())
    assert first["result"]["protocolVersion"] == "2025-03-26"
    assert [a["id"] for a in answers] == ["a", "b"]
    assert answers[0]["result"]["structuredContent"]["books"] and answers[1]["result"] == {}


def test_logs_roots_and_cancellation_in_both_directions_on_a_raw_pipe(
    example_database: ExampleDatabase,
) -> None:
    """As a client that speaks the pipe itself: logging/setLevel then log messages, a roots/list
    question answered, a client cancel (no answer follows), and a question the client leaves
    unanswered past CLIENT_REQUEST_TIMEOUT, which the server cancels with notifications/cancelled."""
    import json
    import time

    env = {**example_database.env, "MCP_AUTH": "none", "MCP_CLIENT_REQUEST_TIMEOUT": "2"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None

    def send(*messages: dict[str, Any]) -> None:
        process.stdin.write(_lines(*messages))
        process.stdin.flush()

    def read_until(predicate: Any) -> list[dict[str, Any]]:
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = json.loads(process.stdout.readline())
            seen.append(message)
            if predicate(message):
                return seen
        raise AssertionError(seen)

    try:
        init = {**INIT, "params": {**INIT["params"], "capabilities": {"roots": {}, "sampling": {}}}}
        send(
            init,
            INITIALIZED,
            {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}},
        )
        read_until(lambda m: m.get("id") == 2)
        send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "test_tool_with_logging", "arguments": {}},
            }
        )
        logged = read_until(lambda m: m.get("id") == 3)
        assert [m["params"]["data"] for m in logged if m.get("method") == "notifications/message"][
            :3
        ] == ["Tool execution started", "Tool processing data", "Tool execution completed"]

        send(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "test_input_required_result_list_roots", "arguments": {}},
            }
        )
        (question,) = read_until(lambda m: m.get("method") == "roots/list")
        send(
            {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"roots": [{"uri": "file:///shelf", "name": "Shelf"}]},
            }
        )
        (rooted,) = read_until(lambda m: m.get("id") == 4)
        assert "file:///shelf" in rooted["result"]["content"][0]["text"]

        send(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "test_missing_capability", "arguments": {}},
            }
        )
        asked = read_until(lambda m: m.get("method") == "sampling/createMessage")[-1]
        cancelled = read_until(lambda m: m.get("method") == "notifications/cancelled")[
            -1
        ]  # nobody answered in time
        assert (
            cancelled["params"]["requestId"] == asked["id"]
            and cancelled["params"]["reason"] == "timed out"
        )
        assert read_until(lambda m: m.get("id") == 5)[-1]["result"]["isError"]

        send(
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tools/call",
                "params": {"name": "long_task", "arguments": {"seconds": 30}},
            }
        )
        read_until(
            lambda m: (
                m.get("method") == "notifications/message" and m["params"].get("logger") == "live"
            )
        )  # it runs
        send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}},
            {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        )
        answered = read_until(lambda m: m.get("id") == 7)
        assert not any(m.get("id") == 6 for m in answered)  # a cancelled request gets no answer
    finally:
        _, err = process.communicate(timeout=30)  # closes stdin: end of input
    assert process.returncode == 0, err.decode()


def test_hostile_lines_are_refused_one_by_one_and_the_pipe_goes_on(
    example_database: ExampleDatabase,
) -> None:
    import json

    huge = (
        b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"'
        + b"x" * (5 * 1024 * 1024)
        + b'"}}\n'
    )
    partial = b'{"jsonrpc":"2.0","id":10,"method":"ping"}{"jsonrpc":"2.0","id":\n'
    ping = {"jsonrpc": "2.0", "id": 11, "method": "ping"}
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp_stdio"],
        cwd=ROOT,
        env={**example_database.env, "MCP_AUTH": "none"},
        input=_lines(INIT, INITIALIZED) + b"{not json\n" + huge + partial + _lines(ping),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["id"] == 1
    errors = [a["error"] for a in answers[1:4]]
    assert errors[0]["code"] == -32700  # not JSON
    assert (
        errors[1]["code"] == -32600 and "exceeds" in errors[1]["message"]
    )  # bounded like the HTTP body
    assert errors[2]["code"] == -32700  # a message with a partial one glued to it
    assert answers[4] == {"jsonrpc": "2.0", "id": 11, "result": {}}  # and the pipe goes on
