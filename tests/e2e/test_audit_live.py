"""The audit trail of the real example site, driven by the official SDK client: a ``tools/call``
over Streamable HTTP in both eras, over stdio and over the 2024-11-05 HTTP+SSE transport, each
read back from the server's database as a ToolCall row; and a secret typed into a URL-elicitation
page, which appears in no row."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.asgi_servers import free_port

from .conftest import ExampleDatabase, ExampleServer, connect_as, manage, run_server, server_env
from .elicitation_helpers import WAIT, Browser, Recorder, mcp_client

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

#: Every ToolCall whose arguments or tool name mention ``marker`` (or every row, for ""), as JSON.
ROWS = """
import json
from django.db.models import Q
from mcp_django.models import ToolCall
marker = {marker!r}
calls = ToolCall.objects.order_by("pk")
if marker:
    calls = calls.filter(Q(arguments__query=marker) | Q(arguments__title=marker))
print(json.dumps([{{
    "tool": c.tool_name, "outcome": c.outcome, "user": c.username, "session": c.session_id, "transport": c.transport,
    "revision": c.protocol_version, "arguments": c.arguments, "error": c.error, "client": c.client_id,
    "request_id": c.request_id, "trace_id": c.trace_id, "duration_ms": c.duration_ms,
}} for c in calls]))
"""


def tool_calls(env: dict[str, str], marker: str = "") -> list[dict[str, Any]]:
    return list(json.loads(manage(env, "shell", "-v0", "-c", ROWS.format(marker=marker))))


def wait_for_calls(
    env: dict[str, str], marker: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The rows for ``marker`` once ``done(rows)``: the server writes its trail in batches, about a
    second after the calls (each read is a ``manage.py shell``, so the loop needs no pause)."""
    deadline = time.monotonic() + WAIT
    while True:
        calls = tool_calls(env, marker)
        if done(calls) or time.monotonic() > deadline:
            return calls


def marker() -> str:
    return "audit-" + secrets.token_hex(6)


def cookie_header(server: ExampleServer, username: str) -> dict[str, str]:
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in server.login(username).items())}


async def test_streamable_http_calls_are_audited_in_both_eras_with_the_denied_ones(
    example_server_django_auth: ExampleServer,
) -> None:
    server = example_server_django_auth
    legacy, modern, refused = marker(), marker(), marker()
    async with connect_as(server, "librarian", mode="legacy") as client:
        found = await client.call_tool("search_books", {"query": legacy})
        session_revision = client.protocol_version
    async with connect_as(server, "librarian") as client:
        await client.call_tool("search_books", {"query": modern})
        assert client.protocol_version == "2026-07-28"
    async with connect_as(server, "reader", mode="legacy") as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("library_book_create", {"title": refused})
    assert not found.is_error

    (old,) = wait_for_calls(server.env, legacy, lambda rows: len(rows) == 1)
    assert (old["tool"], old["outcome"], old["user"], old["transport"]) == (
        "search_books",
        "ok",
        "librarian",
        "streamable-http",
    )
    assert (
        old["revision"] == session_revision == "2025-11-25"
        and old["session"]
        and old["arguments"] == {"query": legacy}
    )
    assert old["request_id"] and old["duration_ms"] > 0

    (new,) = wait_for_calls(server.env, modern, lambda rows: len(rows) == 1)
    assert (new["outcome"], new["user"], new["revision"], new["session"]) == (
        "ok",
        "librarian",
        "2026-07-28",
        "",
    )

    (denied,) = wait_for_calls(server.env, refused, lambda rows: len(rows) == 1)
    assert (denied["tool"], denied["outcome"], denied["user"]) == (
        "library_book_create",
        "denied",
        "reader",
    )
    assert denied["error"] == "not permitted: the user may not use this tool"


def stdio(database: ExampleDatabase, username: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_stdio", "--user", username],
        env={**database.env, "MCP_AUTH": "django"},
        cwd=str(ROOT),
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_stdio_call_is_audited_when_the_process_ends(
    example_database: ExampleDatabase, mode: str, tmp_path: Path
) -> None:
    query = marker()
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(
            stdio_client(stdio(example_database, "librarian"), errlog=errlog),
            mode=mode,
            read_timeout_seconds=WAIT,
        ) as client:
            result = await client.call_tool("search_books", {"query": query})
            revision = client.protocol_version
    assert not result.is_error
    # The process wrote its buffer when it exited (or earlier): the row is there already.
    (call,) = tool_calls(example_database.env, query)
    assert (call["tool"], call["outcome"], call["user"], call["transport"], call["revision"]) == (
        "search_books",
        "ok",
        "librarian",
        "stdio",
        revision,
    )
    assert bool(call["session"]) == (mode == "legacy")  # 2026-07-28 has no session


async def test_an_http_sse_call_is_audited(example_server_django_auth: ExampleServer) -> None:
    server = example_server_django_auth
    query = marker()
    transport = sse_client(f"{server.mcp_url}/sse", headers=cookie_header(server, "librarian"))
    async with Client(transport, mode="legacy", read_timeout_seconds=WAIT) as client:
        result = await client.call_tool("search_books", {"query": query})
        revision = client.protocol_version
    assert not result.is_error
    (call,) = wait_for_calls(server.env, query, lambda rows: len(rows) == 1)
    assert (call["outcome"], call["user"], call["transport"], call["revision"]) == (
        "ok",
        "librarian",
        "sse",
        revision,
    )
    assert call["session"]


# -- a secret typed into a page never reaches the trail ---------------------------------------------

#: One user per revision: a secret is kept for its user, and each test must be sent to the page.
USERS = {"legacy": "hedy", "2026-07-28": "katherine"}
SETUP = """
from django.contrib.auth import get_user_model
from example_site.library.models import Member
for name in {users!r}:
    Member.objects.create(user=get_user_model().objects.create_user(name, name + "@example.com", name + "-pw"))
"""
PRIDE = "9780000100016"


@pytest.fixture(scope="module")
def elicitation_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    """The example site with Django sessions at a URL it knows in advance (the pages' URLs are
    built from MCP_RESOURCE_URL), on a database of its own."""
    workdir = tmp_path_factory.mktemp("audit-elicitation")
    port = free_port()
    env = {
        **server_env(workdir / "example.sqlite3", auth="django"),
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "load_demo_data")
    manage(env, "shell", "-v0", "-c", SETUP.format(users=list(USERS.values())))
    with run_server(env, workdir / "server.log", port=port) as site:
        yield site


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_secret_typed_into_a_url_elicitation_page_appears_in_no_tool_call(
    elicitation_site: ExampleServer, mode: str
) -> None:
    site = elicitation_site
    username = USERS[mode]
    secret = f"rv-audit-{mode}-" + secrets.token_hex(16)
    recorder = Recorder()
    async with Browser({site.base_url: (username, f"{username}-pw")}) as browser:
        await browser.sign_in(site.base_url)
        async with mcp_client(site, site.login(username), recorder, mode=mode) as client:
            call = asyncio.ensure_future(client.call_tool("book_reviews", {"isbn": PRIDE}))
            try:
                request = await recorder.next_url_request()
                page = await browser.visit(request.url)
                assert "Done." in (await browser.submit(page, "accept", secret=secret)).text
                result = await asyncio.wait_for(call, WAIT)
            finally:
                call.cancel()
            # Only then call the secret's tool again: the key is reused, the call recorded as well.
            again = await client.call_tool("book_reviews", {"isbn": PRIDE})
    assert not result.is_error and not again.is_error

    def recorded(rows: list[dict[str, Any]]) -> bool:
        mine = [
            r
            for r in rows
            if r["tool"] == "book_reviews"
            and r["user"] == username
            and r["revision"] == client_revision
        ]
        return len([r for r in mine if r["outcome"] == "ok"]) >= 2

    client_revision = "2025-11-25" if mode == "legacy" else mode
    rows = wait_for_calls(site.env, "", recorded)
    assert recorded(rows), rows
    mine = [
        r
        for r in rows
        if r["tool"] == "book_reviews"
        and r["user"] == username
        and r["revision"] == client_revision
    ]
    assert all(r["arguments"] == {"isbn": PRIDE} for r in mine)
    if mode != "legacy":  # the page was an input request; the SDK's retry is a call of its own
        assert [r["outcome"] for r in mine][:1] == ["input_required"]
    # Every column of every row of the trail, and the whole database file: the secret is in none.
    assert secret not in json.dumps(rows)
    dumped = manage(
        site.env,
        "shell",
        "-v0",
        "-c",
        "from mcp_django.models import ToolCall; print(list(ToolCall.objects.values()))",
    )
    assert "book_reviews" in dumped and secret not in dumped
