"""MAX_RESULT_CHARS: a tools/call result too large for the client's model is cut with a notice
(a list page with a cursor right after its last item kept), never dropped and never a transport
error; the audit trail records the cut, in both protocol eras."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import RequestFactory, override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_django import Image, ModelMCP, ToolResult
from mcp_django.checks.server import check_limits
from mcp_django.models import ToolCall
from mcp_django.ops.audit import buffer as audit_buffer
from mcp_django.registry.sites import MCPSite
from mcp_django.registry.sites import site as default_site
from mcp_django.server.sizing import MIN_RESULT_CHARS, Cut, fit_result, size
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.fuzzing import examples
from tests.test_audit import modern, modern_headers
from tests.test_tasks import reached, start
from tests.testapp.models import Note


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def last_text(result: dict[str, Any]) -> str:
    return str(result["content"][-1]["text"])


# -- the generic cut -------------------------------------------------------------------------


def test_a_result_within_the_limit_or_with_no_limit_is_left_as_it_is() -> None:
    result = {"content": [text("x" * 5000)]}
    assert fit_result(result, 10_000) == (result, False)
    assert fit_result(result, None) == (result, False)


def test_a_long_text_is_cut_at_the_limit_with_a_notice_saying_by_how_much() -> None:
    result = {"content": [text("a" * 412_345)]}
    fitted, cut = fit_result(result, 100_000)
    assert cut and isinstance(fitted, Cut) and size(fitted) <= 100_000
    kept, notice = fitted["content"]
    assert kept["text"] == "a" * len(kept["text"]) and len(kept["text"]) > 99_000
    assert notice["text"].startswith(
        f"[Result cut: {size(result):,} characters, over this server's limit of 100,000 "
        "(MAX_RESULT_CHARS)."
    )
    assert "cut short" in notice["text"]


def test_text_full_of_escapes_is_measured_as_sent() -> None:
    fitted, cut = fit_result({"content": [text('"\n\x01' * 3000)]}, 2000)
    assert cut and size(fitted) <= 2000
    assert fitted["content"][0]["text"].startswith('"\n\x01')


def test_an_image_that_does_not_fit_is_replaced_by_the_notice_naming_it() -> None:
    image = {"type": "image", "data": "A" * 8000, "mimeType": "image/png"}
    fitted, cut = fit_result({"content": [text("caption"), image, text("after")]}, 2000)
    assert cut and size(fitted) <= 2000
    assert fitted["content"][0] == text("caption")
    assert all(block["type"] == "text" for block in fitted["content"])
    assert "content blocks left out: 1 image, 1 text" in last_text(fitted)


def test_structured_content_is_kept_whole_when_only_the_text_is_cut() -> None:
    data = {"rows": list(range(100))}
    result = {"content": [text("y" * 10_000)], "structuredContent": data}
    fitted, cut = fit_result(result, 3000)
    assert cut and fitted["structuredContent"] == data and size(fitted) <= 3000
    assert "structuredContent is complete" in last_text(fitted)


def test_structured_content_too_large_to_fit_becomes_a_tool_error_not_a_broken_object() -> None:
    data = {"rows": ["z" * 100] * 100}
    fitted, cut = fit_result({"content": [text("ok")], "structuredContent": data}, 2000)
    assert cut and fitted["isError"] is True and "structuredContent" not in fitted
    assert "cannot be cut without breaking the tool's output schema" in last_text(fitted)


blocks = st.one_of(
    st.builds(text, st.text(max_size=3000)),
    st.builds(
        lambda data, mime: {"type": "image", "data": data, "mimeType": mime},
        st.text("ABCD+/", max_size=3000),
        st.sampled_from(["image/png", "image/jpeg"]),
    ),
    st.builds(
        lambda uri, body: {"type": "resource", "resource": {"uri": uri, "text": body}},
        st.text(max_size=50),
        st.text(max_size=3000),
    ),
)


@settings(max_examples=examples(200), deadline=None)
@given(
    content=st.lists(blocks, max_size=8),
    structured=st.none() | st.dictionaries(st.text(max_size=10), st.text(max_size=400)),
    limit=st.integers(MIN_RESULT_CHARS, 6000),
)
def test_a_fitted_result_never_exceeds_the_limit_and_stays_valid_json(
    content: list[dict[str, Any]], structured: dict[str, Any] | None, limit: int
) -> None:
    result: dict[str, Any] = {"content": content}
    if structured is not None:
        result["structuredContent"] = structured
    fitted, cut = fit_result(result, limit)
    assert cut == (size(result) > limit)
    assert size(fitted) <= limit
    assert orjson.loads(orjson.dumps(fitted)) == fitted
    if cut:
        assert last_text(fitted).startswith(("[Result cut:", "[Result too large:"))
        if not fitted.get("isError") and structured is not None:
            assert fitted["structuredContent"] == structured


# -- a search page, cut by the search tool with a cursor right after the last item kept ------


def _searcher(ordering: str) -> Any:
    class NotesMCP(ModelMCP):
        fields = ["title", "body"]
        search_limit = 50
        tools = ["search"]

    NotesMCP.ordering = [ordering]
    mcp = MCPSite(name=f"notes-{ordering}")
    mcp.register(Note, NotesMCP)
    return next(t for t in mcp._registry[Note].get_generated_tools() if t.action == "search")


def _walk(tool: Any, request: Any, limit: int) -> tuple[list[str], int]:
    """Every title the search returns, page after page; and how many pages were cut."""
    titles: list[str] = []
    cut_pages = 0
    cursor = None
    for _ in range(100):
        arguments: dict[str, Any] = {"limit": 20}
        if cursor is not None:
            arguments["cursor"] = cursor
        with override_settings(MCP_DJANGO={**BASE_SETTINGS, "MAX_RESULT_CHARS": limit}):
            result = tool._call(arguments, request)
        assert not result.get("isError"), result
        assert size(result) <= limit
        page = result["structuredContent"]
        titles += [item["title"] for item in page["items"]]
        cursor = page["nextCursor"]
        if isinstance(result, Cut):
            cut_pages += 1
            assert f'call again with cursor "{cursor}" for the rest' in last_text(result)
        if cursor is None:
            return titles, cut_pages
    raise AssertionError("the walk never ended")


@pytest.mark.django_db
@pytest.mark.parametrize("ordering", ["title", "owner__username"])  # keyset, then offset paging
def test_walking_every_cut_page_sees_each_row_once_in_order(ordering: str) -> None:
    owner = User.objects.create_user("walker")
    Note.objects.bulk_create(
        [Note(owner=owner, title=f"n{i:03}", body="b" * (40 + 37 * (i % 5))) for i in range(73)]
    )
    request = RequestFactory().get("/")
    request.user = User.objects.create_superuser("root", "root@example.com", "x")
    tool = _searcher(ordering)
    titles, cut_pages = _walk(tool, request, 2500)
    assert titles == [f"n{i:03}" for i in range(73)]  # none lost, none repeated
    assert cut_pages > 3
    assert _walk(tool, request, 10**6) == (titles, 0)


@pytest.mark.django_db
def test_a_row_too_large_alone_is_a_tool_error_naming_the_cursor_that_skips_it() -> None:
    owner = User.objects.create_user("big")
    Note.objects.bulk_create(
        [Note(owner=owner, title="a", body="x" * 3000), Note(owner=owner, title="b")]
    )
    request = RequestFactory().get("/")
    request.user = User.objects.create_superuser("root", "root@example.com", "x")
    tool = _searcher("title")
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "MAX_RESULT_CHARS": 2000}):
        refused = tool._call({}, request)
        assert refused["isError"] is True and "the first item alone does not fit" in last_text(
            refused
        )
        skip = last_text(refused).split('cursor "')[1].split('"')[0]
        rest = tool._call({"cursor": skip}, request)
    assert [item["title"] for item in rest["structuredContent"]["items"]] == ["b"]


# -- through tools/call, both eras, and the audit trail ---------------------------------------


def big_site() -> MCPSite:
    mcp = MCPSite(name="big")

    @mcp.tool()
    def dump(count: int) -> str:
        """A long text."""
        return "w" * count

    @mcp.tool()
    def picture() -> ToolResult:
        """An image too large for the limit."""
        return ToolResult(content=["a view", Image(base64.b64encode(b"\x89PNG" * 3000).decode())])

    return mcp


async def audit_rows() -> list[ToolCall]:
    assert await audit_buffer.aflush() == 0
    return [call async for call in ToolCall.objects.order_by("started_at", "pk")]


@pytest.mark.django_db(transaction=True)
async def test_a_session_call_is_answered_cut_and_the_trail_says_so() -> None:
    audit_buffer.writer.discard()
    client = MCPTestClient(MCPConsumer.as_asgi(site=big_site()))
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "MAX_RESULT_CHARS": 1500}):
        await client.initialize()
        small = await client.call_tool("dump", {"count": 10})
        big = await client.call_tool("dump", {"count": 50_000})
        picture = await client.call_tool("picture", {})
        calls = await audit_rows()
    assert small["content"] == [text("w" * 10)]
    assert size(big) <= 1500 and not big.get("isError")
    assert big["content"][0]["text"].startswith("www") and "[Result cut: 50,0" in last_text(big)
    assert picture["content"][0] == text("a view") and "1 image" in last_text(picture)
    assert [(c.tool_name, c.outcome, c.result_cut) for c in calls] == [
        ("dump", ToolCall.Outcome.OK, False),
        ("dump", ToolCall.Outcome.OK, True),
        ("picture", ToolCall.Outcome.OK, True),
    ]


@pytest.mark.django_db(transaction=True)
async def test_a_2026_07_28_call_is_answered_cut_and_the_trail_says_so() -> None:
    audit_buffer.writer.discard()
    client = MCPTestClient(MCPConsumer.as_asgi(site=big_site()))
    message = modern("tools/call", {"name": "dump", "arguments": {"count": 9000}})
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "MAX_RESULT_CHARS": 1500}):
        response = await client.post(message, modern_headers(message))
        (call,) = await audit_rows()
    result = response.json()["result"]
    assert response.status == 200 and "[Result cut: 9,0" in last_text(result)
    assert (call.protocol_version, call.result_cut) == ("2026-07-28", True)


@pytest.mark.django_db(transaction=True)
async def test_a_search_cut_by_the_tool_itself_is_recorded_as_cut() -> None:
    audit_buffer.writer.discard()
    user = await sync_to_async(make_user)("reader", "view_note")
    await Note.objects.abulk_create(
        [Note(owner=user, title=f"t{i:02}", body="q" * 200) for i in range(20)]
    )
    client = MCPTestClient(MCPConsumer.as_asgi(site=default_site))
    await client.force_login(user)
    with override_settings(
        MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django", "MAX_RESULT_CHARS": 2000}
    ):
        await client.initialize()
        page = await client.call_tool("testapp_note_search", {"limit": 20})
        (call,) = await audit_rows()
    assert 0 < len(page["structuredContent"]["items"]) < 20
    assert page["structuredContent"]["nextCursor"] in last_text(page)
    assert call.result_cut is True


@pytest.mark.django_db(transaction=True)
async def test_a_tasks_stored_result_is_cut_like_a_plain_calls() -> None:
    mcp = MCPSite(name="big-tasks")

    @mcp.tool(task="optional")
    def long_task() -> str:
        """A long text, as a task."""
        return "t" * 20_000

    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    with override_settings(
        MCP_DJANGO={**BASE_SETTINGS, "TASK_POLL_INTERVAL_MS": 50, "MAX_RESULT_CHARS": 2000}
    ):
        created = await start(client, "long_task")
        done = await reached(client, created["taskId"], "completed")
    assert size(done["result"]) <= 2000
    assert done["result"]["content"][0]["text"].startswith("ttt")
    assert "[Result cut: 20,0" in last_text(done["result"])


# -- the setting's check ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 999, -5, "100000", True, 1.5e5])
def test_a_bad_limit_is_reported(value: Any) -> None:
    errors = check_limits({"MAX_RESULT_CHARS": value})
    assert [e.id for e in errors] == ["mcp_django.E152"]


@pytest.mark.parametrize("value", [None, 1000, 150_000])
def test_a_good_limit_passes(value: Any) -> None:
    assert check_limits({"MAX_RESULT_CHARS": value}) == []
