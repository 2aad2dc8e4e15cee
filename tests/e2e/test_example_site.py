"""The example library site, served by each server under test (daphne by default), driven by the
official MCP Python SDK client.

The client's default ``mode="auto"`` probes ``server/discover`` and, as this server serves
2026-07-28, speaks that revision (stateless). Tests of what both revisions offer run in each
(the ``era`` fixture: ``"legacy"`` forces the initialize handshake at 2025-11-25); tests of
sessions, ping and the GET stream are handshake-era only. A few tests drop to raw HTTP for what
the SDK hides (status codes, redirects, the GET stream).

Tests share one server and its database, so each leaves the demo data as it found it (what a
test borrows, it returns) and relies only on rows no other test changes.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date, timedelta
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    LoggingMessageNotificationParams,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

from .conftest import ExampleServer, connect_as

pytestmark = pytest.mark.e2e

# Demo data (example_site/library/management/commands/load_demo_data.py) this module relies on.
HOUND = "9780000500021"  # 1 copy, lent to alice: never available
TIME_MACHINE = "9780000300010"  # 3 copies, 1 lent to reader
PHANTASTES = "9780001300019"  # 1 copy, not on loan
PRINCESS = "9780001300026"  # 2 copies, not on loan
DOYLE = {"9780000500014", "9780000500021", "9780000500038"}
RESOURCE_NOT_FOUND = -32002  # 2025-11-25; 2026-07-28 retired it for -32602
INVALID_PARAMS = -32602
MODERN = "2026-07-28"
ACCEPT_BOTH = {"Accept": "application/json, text/event-stream"}

# The SDK deprecates the logging capability for the 2026-07-28 revision; on the 2025-11-25
# revision this server speaks, logging/setLevel is still how a client asks for log messages.
ignore_logging_deprecation = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


@pytest.fixture(params=["legacy", MODERN])
def era(request: pytest.FixtureRequest) -> str:
    """The revision a test's client speaks: the initialize handshake, or stateless 2026-07-28."""
    return str(request.param)


def connect(server: ExampleServer, era: str = "legacy", **kwargs: Any) -> Client:
    # A bounded read timeout: a server that never answers fails the test instead of hanging it.
    return Client(server.mcp_url, read_timeout_seconds=10, mode=era, **kwargs)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


# -- connecting ---------------------------------------------------------------------------------


async def test_client_in_auto_mode_discovers_and_speaks_2026_07_28(
    example_server: ExampleServer,
) -> None:
    async with connect(example_server, "auto") as client:
        assert client.protocol_version == MODERN
        assert client.server_info is not None and client.server_info.name == "example-library"
        capabilities = client.server_capabilities
        assert (
            capabilities.tools is not None
            and capabilities.resources is not None
            and capabilities.prompts is not None
        )
        assert (await client.call_tool("search_books", {"query": "Austen"})).structured_content


async def test_client_in_legacy_mode_gets_the_initialize_handshake(
    example_server: ExampleServer,
) -> None:
    async with connect(example_server, "legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None
        assert client.server_info.name == "example-library"
        assert client.server_info.title == "Example Library"
        assert client.instructions is not None and "lending library" in client.instructions
        capabilities = client.server_capabilities
        assert capabilities.tools is not None
        assert capabilities.resources is not None
        assert capabilities.prompts is not None
        assert capabilities.logging is not None
        assert capabilities.completions is not None


async def test_ping_is_answered(example_server: ExampleServer) -> None:
    async with connect(example_server, "legacy") as client:
        result = await client.session.send_ping()
        assert result.model_dump(exclude_none=True) == {}


async def test_session_is_kept_across_requests_and_deleted_when_the_client_exits(
    example_server: ExampleServer,
) -> None:
    seen: list[tuple[str, int, str | None]] = []

    async def remember(response: httpx2.Response) -> None:
        seen.append(
            (response.request.method, response.status_code, response.headers.get("mcp-session-id"))
        )

    async with httpx2.AsyncClient(event_hooks={"response": [remember]}, timeout=10) as http:
        async with Client(
            streamable_http_client(example_server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode="legacy",
        ) as client:
            await client.list_tools()
            await client.call_tool("search_books", {"query": "Austen"})
            await client.read_resource("library://catalogue/stats")
    session_ids = {sid for _, status, sid in seen if sid and status < 400}
    assert len(session_ids) == 1, seen
    (session_id,) = session_ids
    assert ("DELETE", 204, None) in seen

    async with httpx.AsyncClient(timeout=10) as raw:
        response = await raw.post(
            example_server.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={
                **ACCEPT_BOTH,
                "Mcp-Session-Id": session_id,
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
    assert response.status_code == 404


# -- tools ----------------------------------------------------------------------------------------


async def test_tools_are_listed_with_input_and_output_schemas(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {
        "search_books",
        "book_availability",
        "member_loans",
        "borrow_book",
        "return_book",
        "renew_loan",
    } <= set(tools)
    search = tools["search_books"]
    assert search.title == "Search the catalogue"
    assert search.annotations is not None and search.annotations.read_only_hint is True
    assert search.input_schema["properties"]["limit"]["maximum"] == 50
    assert search.output_schema is not None
    assert {"total", "books"} <= set(search.output_schema["properties"])
    renew = tools["renew_loan"]
    assert renew.input_schema["required"] == ["loan_id"]
    assert "ctx" not in renew.input_schema["properties"]


async def test_search_books_returns_structured_content_matching_its_text(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        result = await client.call_tool("search_books", {"query": "wells"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["total"] == 3
    assert {b["title"] for b in result.structured_content["books"]} == {
        "The Time Machine",
        "The War of the Worlds",
        "The Invisible Man",
    }
    assert json.loads(text_of(result)) == result.structured_content


async def test_search_books_filters_by_genre_and_limits(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        result = await client.call_tool("search_books", {"genre": "mystery", "limit": 2})
    assert result.structured_content is not None
    assert result.structured_content["total"] == 5
    assert len(result.structured_content["books"]) == 2
    assert {b["genre"] for b in result.structured_content["books"]} == {"mystery"}


async def test_search_books_refuses_an_overlong_query_as_invalid_arguments(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        schema = {t.name: t for t in (await client.list_tools()).tools}["search_books"].input_schema
        result = await client.call_tool("search_books", {"query": "a " * 50_000})
    assert schema["properties"]["query"]["maxLength"] == 200
    assert result.is_error
    assert text_of(result).startswith("Invalid arguments for tool 'search_books'")


async def test_book_availability_counts_copies_on_loan(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        result = await client.call_tool("book_availability", {"isbn": HOUND})
    assert result.structured_content is not None
    assert result.structured_content["copies"] == 1
    assert result.structured_content["available"] == 0
    assert date.fromisoformat(result.structured_content["next_due_on"]) >= date.today()


async def test_tool_error_is_an_is_error_result(example_server: ExampleServer, era: str) -> None:
    async with connect(example_server, era) as client:
        unknown = await client.call_tool("book_availability", {"isbn": "9999999999999"})
        no_copies = await client.call_tool(
            "borrow_book", {"isbn": HOUND, "member_username": "carol"}
        )
    assert unknown.is_error
    assert "No book with ISBN 9999999999999" in text_of(unknown)
    assert no_copies.is_error
    assert "No copies of 'The Hound of the Baskervilles' are available" in text_of(no_copies)


@pytest.mark.parametrize(
    ("tool", "arguments", "mentions"),
    [
        ("search_books", {"limit": 0}, "limit"),
        ("search_books", {"limit": "lots"}, "limit"),
        ("book_availability", {"isbn": "12-34"}, "isbn"),
        ("book_availability", {}, "isbn"),
        ("search_books", {"query": "x", "colour": "red"}, "colour"),
    ],
)
async def test_invalid_arguments_are_an_is_error_result(
    example_server: ExampleServer, tool: str, arguments: dict[str, Any], mentions: str, era: str
) -> None:
    async with connect(example_server, era) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert "Invalid arguments" in text_of(result)
    assert mentions in text_of(result)


@ignore_logging_deprecation
async def test_loan_lifecycle_reports_progress_and_logs(
    example_server: ExampleServer, era: str
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[LoggingMessageNotificationParams] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    # Logs are asked for with logging/setLevel in a session, and per request in 2026-07-28.
    async with connect(example_server, era, logging_callback=on_log, log_level="info") as client:
        if era != MODERN:
            await client.set_logging_level("info")
        borrowed = await client.call_tool(
            "borrow_book", {"isbn": PHANTASTES, "member_username": "carol"}
        )
        assert not borrowed.is_error, text_of(borrowed)
        loan = borrowed.structured_content
        assert loan is not None and loan["title"] == "Phantastes" and loan["returned_on"] is None
        try:
            renewed = await client.call_tool(
                "renew_loan", {"loan_id": loan["loan_id"], "days": 7}, progress_callback=on_progress
            )
            assert not renewed.is_error, text_of(renewed)
            assert renewed.structured_content is not None
            due_on = date.fromisoformat(loan["due_on"])
            assert date.fromisoformat(renewed.structured_content["due_on"]) == due_on + timedelta(
                days=7
            )
            loans = await client.call_tool("member_loans", {"member_username": "carol"})
            assert loans.structured_content is not None
            assert loan["loan_id"] in {
                item["loan_id"] for item in loans.structured_content["loans"]
            }
        finally:
            returned = await client.call_tool("return_book", {"loan_id": loan["loan_id"]})
        assert not returned.is_error, text_of(returned)
        assert (
            returned.structured_content is not None
            and returned.structured_content["returned_on"] is not None
        )
        again = await client.call_tool("return_book", {"loan_id": loan["loan_id"]})
        assert again.is_error and "already returned" in text_of(again)

    # The server may rate-limit progress (PROGRESS_MIN_INTERVAL), but sends the first and last.
    steps = [(value, total) for value, total, _ in progress]
    assert steps[0] == (0, 3) and steps[-1] == (3, 3), steps
    assert set(steps) <= {(0, 3), (1, 3), (2, 3), (3, 3)} and steps == sorted(steps), steps
    assert progress[-1][2] == "Renewed"
    messages = [str(log.data) for log in logs]
    assert any(m.startswith("Lending 9780001300019 to carol") for m in messages), messages
    assert any("renewed" in m for m in messages), messages
    assert any("back on the shelf" in m for m in messages), messages
    assert {log.logger for log in logs} == {"library"}


@ignore_logging_deprecation
async def test_log_messages_below_the_requested_level_are_not_sent(
    example_server: ExampleServer, era: str
) -> None:
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with connect(example_server, era, logging_callback=on_log, log_level="warning") as client:
        if era != MODERN:
            await client.set_logging_level("warning")
        result = await client.call_tool("borrow_book", {"isbn": HOUND, "member_username": "carol"})
    assert result.is_error
    # borrow_book logs "Lending ..." at info, then the refusal at warning.
    assert [log.level for log in logs] == ["warning"]
    assert "No copies" in str(logs[0].data)


# -- resources ------------------------------------------------------------------------------------


async def test_resources_and_templates_are_listed(example_server: ExampleServer, era: str) -> None:
    async with connect(example_server, era) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
    # Other apps of the example site register resources too: look for the library's own.
    assert ("library://catalogue/stats", "application/json") in [
        (r.uri, r.mime_type) for r in resources
    ]
    assert ("library://books/{isbn}", "book") in [(t.uri_template, t.name) for t in templates]


async def test_static_resource_is_read(example_server: ExampleServer, era: str) -> None:
    async with connect(example_server, era) as client:
        result = await client.read_resource("library://catalogue/stats")
    (contents,) = result.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.uri == "library://catalogue/stats"
    assert contents.mime_type == "application/json"
    stats = json.loads(contents.text)
    assert (stats["authors"], stats["books"], stats["members"]) == (13, 30, 4)
    assert stats["genres"]["mystery"] == {"label": "Mystery", "books": 5}


async def test_template_resource_is_read(example_server: ExampleServer, era: str) -> None:
    async with connect(example_server, era) as client:
        result = await client.read_resource(f"library://books/{HOUND}")
    (contents,) = result.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.uri == f"library://books/{HOUND}"
    record = json.loads(contents.text)
    assert record["title"] == "The Hound of the Baskervilles"
    assert record["author"]["name"] == "Arthur Conan Doyle"
    assert record["available"] == 0


async def test_reading_an_unknown_book_is_resource_not_found(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("library://books/9999999999999")
    # 2026-07-28 retired -32002: a missing resource is invalid params there, with its URI.
    assert caught.value.code == (INVALID_PARAMS if era == MODERN else RESOURCE_NOT_FOUND)
    assert caught.value.error.data == {"uri": "library://books/9999999999999"}


async def test_isbn_is_completed_from_its_prefix(example_server: ExampleServer, era: str) -> None:
    async with connect(example_server, era) as client:
        result = await client.complete(
            ResourceTemplateReference(uri="library://books/{isbn}"),
            {"name": "isbn", "value": "978000050"},
        )
    assert set(result.completion.values) == DOYLE
    assert result.completion.has_more is False


async def test_authors_are_exposed_through_model_mcp(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        templates = (await client.list_resource_templates()).resource_templates
        found = await client.call_tool("library_author_search", {"query": "Austen"})
        assert not found.is_error, text_of(found)
        assert found.structured_content is not None
        (author,) = found.structured_content["items"]
        result = await client.read_resource(f"django://library/author/{author['id']}")
        resources = (await client.list_resources()).resources
    assert "django://library/author/{pk}" in [t.uri_template for t in templates]
    assert author["name"] == "Jane Austen"
    (contents,) = result.contents
    assert isinstance(contents, TextResourceContents)
    assert json.loads(contents.text)["country"] == "England"
    assert f"django://library/author/{author['id']}" in [r.uri for r in resources]


# -- prompts --------------------------------------------------------------------------------------


async def test_prompt_is_listed_and_rendered_from_the_catalogue(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        result = await client.get_prompt(
            "recommend_books", {"interest": "mystery", "level": "enthusiast"}
        )
    arguments = {a.name: a.required for a in prompts["recommend_books"].arguments or []}
    assert arguments == {"interest": True, "level": False}
    (message,) = result.messages
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert "enthusiast reader interested in mystery" in message.content.text
    assert "The Hound of the Baskervilles by Arthur Conan Doyle" in message.content.text
    assert "Frankenstein" not in message.content.text


async def test_prompt_interest_is_completed_with_genres(
    example_server: ExampleServer, era: str
) -> None:
    async with connect(example_server, era) as client:
        interest = await client.complete(
            PromptReference(name="recommend_books"), {"name": "interest", "value": "sci"}
        )
        level = await client.complete(
            PromptReference(name="recommend_books"), {"name": "level", "value": "s"}
        )
    assert interest.completion.values == ["science-fiction", "science"]
    assert level.completion.values == ["scholar"]


# -- MCP_AUTH=django: the session cookie decides who calls ----------------------------------------


async def test_django_auth_refuses_a_client_that_is_not_logged_in(
    example_server_django_auth: ExampleServer,
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            example_server_django_auth.mcp_url, json=INITIALIZE, headers=ACCEPT_BOTH
        )
    assert response.status_code == 401


async def test_django_auth_lets_a_member_manage_only_their_own_loans(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "reader") as client:
        own = await client.call_tool("member_loans", {"member_username": "reader"})
        others = await client.call_tool("member_loans", {"member_username": "alice"})
        borrow_for_other = await client.call_tool(
            "borrow_book", {"isbn": PRINCESS, "member_username": "alice"}
        )
    assert not own.is_error, text_of(own)
    assert own.structured_content is not None
    assert [loan["title"] for loan in own.structured_content["loans"]] == ["The Time Machine"]
    for refused in (others, borrow_for_other):
        assert refused.is_error
        assert "signed in as 'reader'" in text_of(refused)


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_loan_ids_are_completed_and_read_only_from_the_users_own_loans(
    example_server_django_auth: ExampleServer, mode: str
) -> None:
    async with connect_as(example_server_django_auth, "admin") as admin:
        alices = (
            await admin.call_tool("member_loans", {"member_username": "alice"})
        ).structured_content
    assert alices is not None
    alice_loan = alices["loans"][0]["loan_id"]
    async with connect_as(example_server_django_auth, "reader", mode=mode) as client:
        own = (
            await client.call_tool(
                "member_loans", {"member_username": "reader", "include_returned": True}
            )
        ).structured_content
        # The completer takes ctx and filters by ctx.user: only the reader's loans are offered.
        completed = await client.complete(
            ResourceTemplateReference(uri="library://loans/{loan_id}"),
            {"name": "loan_id", "value": ""},
        )
        assert own is not None
        read = await client.read_resource(f"library://loans/{own['loans'][0]['loan_id']}")
        with pytest.raises(MCPError) as theirs:
            await client.read_resource(f"library://loans/{alice_loan}")
    # Both sides in numeric order: as strings, "10" would sort before "6".
    assert sorted(completed.completion.values, key=int) == sorted(
        (str(loan["loan_id"]) for loan in own["loans"]), key=int
    )
    assert str(alice_loan) not in completed.completion.values
    (contents,) = read.contents
    assert (
        isinstance(contents, TextResourceContents)
        and json.loads(contents.text)["member"] == "reader"
    )
    # Loan.DoesNotExist from the resource is "not found", never "Internal error".
    assert theirs.value.code == (INVALID_PARAMS if mode == MODERN else RESOURCE_NOT_FOUND)
    assert theirs.value.error.data == {"uri": f"library://loans/{alice_loan}"}


async def test_a_missing_loan_and_someone_elses_get_the_same_answer(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "admin") as admin:
        alices = (
            await admin.call_tool("member_loans", {"member_username": "alice"})
        ).structured_content
    assert alices is not None
    alice_loan = alices["loans"][0]["loan_id"]
    answers = []
    async with connect_as(example_server_django_auth, "reader") as client:
        for tool, arguments in (("return_book", {}), ("renew_loan", {"days": 7})):
            theirs = await client.call_tool(tool, {"loan_id": alice_loan, **arguments})
            missing = await client.call_tool(tool, {"loan_id": 987654, **arguments})
            assert theirs.is_error and missing.is_error
            answers.append(
                (
                    text_of(theirs).replace(str(alice_loan), "N"),
                    text_of(missing).replace("987654", "N"),
                )
            )
    for theirs_text, missing_text in answers:
        assert theirs_text == missing_text, (theirs_text, missing_text)


async def test_announcements_to_every_session_are_for_staff_only(
    example_server_django_auth: ExampleServer,
) -> None:
    announce = {"announce_list_changed", "announce_resource_updated"}
    async with connect_as(example_server_django_auth, "reader") as client:
        offered = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("announce_list_changed", {"kind": "tools"})
        with pytest.raises(MCPError) as refused_uri:
            await client.call_tool("announce_resource_updated", {"uri": "library://x"})
    assert not offered & announce
    # Exactly as for a tool that does not exist.
    assert "Unknown tool: announce_list_changed" in str(refused.value)
    assert "Unknown tool: announce_resource_updated" in str(refused_uri.value)
    async with connect_as(example_server_django_auth, "librarian") as staff:
        offered = {tool.name for tool in (await staff.list_tools()).tools}
        allowed = await staff.call_tool("announce_list_changed", {"kind": "tools"})
    assert announce <= offered
    assert not allowed.is_error, text_of(allowed)


async def test_django_auth_lets_staff_act_for_any_member(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "admin") as client:
        loans = await client.call_tool("member_loans", {"member_username": "alice"})
    assert not loans.is_error, text_of(loans)
    assert loans.structured_content is not None
    assert "The Hound of the Baskervilles" in [
        loan["title"] for loan in loans.structured_content["loans"]
    ]


# -- raw HTTP against the live server -------------------------------------------------------------


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "e2e-raw", "version": "0"},
    },
}


@asynccontextmanager
async def raw_session(
    server: ExampleServer, path: str = "/mcp"
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """Initialize over plain HTTP; yield the client and the headers later requests need."""
    async with httpx.AsyncClient(
        base_url=server.base_url, timeout=10, follow_redirects=False
    ) as http:
        response = await http.post(path, json=INITIALIZE, headers=ACCEPT_BOTH)
        assert response.status_code == 200, response.text
        headers = {
            "Mcp-Session-Id": response.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        yield http, headers


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_endpoint_answers_initialize_with_or_without_trailing_slash(
    example_server: ExampleServer, path: str
) -> None:
    async with httpx.AsyncClient(
        base_url=example_server.base_url, timeout=10, follow_redirects=False
    ) as http:
        response = await http.post(path, json=INITIALIZE, headers=ACCEPT_BOTH)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == "2025-11-25"
        session_id = response.headers["mcp-session-id"]
        deleted = await http.delete(
            path, headers={"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        )
        assert deleted.status_code == 204


async def test_get_stream_is_primed_and_held_open_until_the_session_is_deleted(
    example_server: ExampleServer,
) -> None:
    async with raw_session(example_server) as (http, headers):
        initialized = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**ACCEPT_BOTH, **headers},
        )
        assert initialized.status_code == 202
        async with http.stream(
            "GET", "/mcp", headers={"Accept": "text/event-stream", **headers}
        ) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert stream.headers["cache-control"] == "no-cache"
            assert stream.headers["x-accel-buffering"] == "no"
            chunks = stream.aiter_text()
            received = ""
            while "\n\n" not in received:
                received += await asyncio.wait_for(anext(chunks), 5)
            priming = received.split("\n\n")[0]
            # An id to resume from and a retry hint, with no data (2025-11-25 SSE polling).
            assert "id: " in priming and "retry: " in priming

            deleted = await http.delete("/mcp", headers=headers)
            assert deleted.status_code == 204

            async def drain() -> str:
                return "".join([chunk async for chunk in chunks])

            # The stream ends because the session ended: a hang here would mean it leaked.
            rest = await asyncio.wait_for(drain(), 5)
            assert "data:" not in rest


# -- last: the server's own view of the run -------------------------------------------------------


# An error line as Django's logging ("... ERROR ..."), uvicorn ("ERROR:    ...") or granian ("[ERROR] ...") writes it.
ERROR_LINE = re.compile(r" (ERROR|CRITICAL) |^(ERROR|CRITICAL):|\[(ERROR|CRITICAL)\]")


@pytest.mark.parametrize("server", ["example_server", "example_server_django_auth"])
def test_server_logged_no_errors(
    request: pytest.FixtureRequest, asgi_server: str, server: str
) -> None:
    # Runs last (file order) for each server: a tool that crashed, or a consumer that raised,
    # shows up here even when the client saw a well-formed answer.
    log = request.getfixturevalue(server).log()
    assert "Traceback" not in log, log
    assert not [line for line in log.splitlines() if ERROR_LINE.search(line)], log


def test_json_answers_carry_their_length_and_are_not_chunked(example_server: ExampleServer) -> None:
    """On the real server a JSON answer is one body with ``Content-Length`` (issue 45): Daphne
    and uvicorn write it at once, not as chunks with a closing chunk of their own."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Ada"}, "_meta": meta},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "greet",
    }
    with httpx.Client(timeout=10) as http:
        answer = http.post(example_server.mcp_url, json=body, headers=headers)
        refused = http.post(
            example_server.mcp_url,
            content=b"{",
            headers={**headers, "content-type": "application/json"},
        )
    for response in (answer, refused):
        assert response.headers["content-type"].startswith("application/json"), response.headers
        assert "transfer-encoding" not in response.headers, response.headers
        assert int(response.headers["content-length"]) == len(response.content)
    assert answer.status_code == 200 and "Ada" in answer.text, answer.text
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32700


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_chatgpts_search_and_fetch_with_the_official_client(
    example_server_django_auth: ExampleServer, mode: str
) -> None:
    """ChatGPT's pair, as its connectors call them, on the served example site: search gives ids,
    titles and URLs, fetch one document; a staff user's URL is the row's admin page, a member's
    (who may not open the admin) the row's resource URI."""
    found: dict[str, Any] = {}
    for username in ("admin", "reader"):
        async with connect_as(example_server_django_auth, username, mode=mode) as client:
            searched = await client.call_tool("search", {"query": "Time Machine"})
            assert not searched.is_error, text_of(searched)
            results = json.loads(text_of(searched))["results"]
            book = next(r for r in results if r["id"].startswith("library.book:"))
            fetched = await client.call_tool("fetch", {"id": book["id"]})
            assert not fetched.is_error, text_of(fetched)
            found[username] = (book, json.loads(text_of(fetched)))
    admin_book, admin_document = found["admin"]
    reader_book, reader_document = found["reader"]
    assert admin_book["id"] == reader_book["id"] and admin_book["id"].startswith("library.book:")
    assert re.search(r"/admin/library/book/\d+/change/$", admin_book["url"]), admin_book
    assert reader_book["url"] == f"django://library/book/{admin_book['id'].split(':')[1]}"
    for document in (admin_document, reader_document):
        assert document["id"] == admin_book["id"]
        assert document["title"] == admin_book["title"] == "The Time Machine (H. G. Wells)"
        assert json.loads(document["text"])["isbn"] == "9780000300010"
    assert reader_document["url"] == reader_book["url"]
