"""A tool written once answers a client of either revision: the official SDK client, forced to the
initialize handshake (2025-11-25) or speaking 2026-07-28, gets the same results from tools that
ask the user (form elicitation), the client's LLM (sampling) and its roots, and that report
progress. In 2025-11-25 the questions are requests on the call's stream; in 2026-07-28 they are
input-required results the client answers by retrying, on a new POST each time."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

from .conftest import ExampleServer

pytestmark = pytest.mark.e2e

ERAS = ["legacy", "2026-07-28"]


class Answers:
    """The client's side: what it answers, and what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(f"elicit:{params.message}")
        fields = params.requested_schema.get("properties", {})
        content: dict[str, Any] = {}
        for name, schema in fields.items():
            content[name] = {"boolean": True, "string": "Alice"}.get(schema.get("type"), "Alice")
        return ElicitResult(action="accept", content=content)

    async def sample(self, context: Any, params: Any) -> CreateMessageResult:
        self.asked.append("sample")
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text="Hello there!"),
            model="test-model",
        )

    async def roots(self, context: Any) -> ListRootsResult:
        self.asked.append("roots")
        return ListRootsResult(roots=[Root(uri="file:///work/library", name="Library")])


def client(server: ExampleServer, http: Any, mode: str, answers: Answers, **kwargs: Any) -> Client:
    return Client(
        streamable_http_client(server.mcp_url, http_client=http),
        read_timeout_seconds=10,
        mode=mode,
        elicitation_callback=answers.elicit,
        sampling_callback=answers.sample,
        list_roots_callback=answers.roots,
        **kwargs,
    )


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.mark.parametrize("mode", ERAS)
async def test_a_form_elicitation_is_answered_in_both_eras(
    example_server: ExampleServer, mode: str
) -> None:
    answers = Answers()
    async with (
        httpx2.AsyncClient(timeout=10) as http,
        client(example_server, http, mode, answers) as session,
    ):
        result = await session.call_tool("confirm_reservation", {"title": "Emma"})
        assert session.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert not result.is_error, text_of(result)
    assert result.structured_content == {
        "title": "Emma",
        "action": "accept",
        "confirmed": True,
        "note": "Alice",
    }
    assert answers.asked == ["elicit:Reserve Emma?"]


@pytest.mark.parametrize("mode", ERAS)
async def test_questions_asked_at_once_and_one_after_another(
    example_server: ExampleServer, mode: str
) -> None:
    answers = Answers()
    async with (
        httpx2.AsyncClient(timeout=10) as http,
        client(example_server, http, mode, answers) as session,
    ):
        together = await session.call_tool("test_input_required_result_multiple_inputs", {})
        rounds = await session.call_tool("test_input_required_result_multi_round", {})
    assert text_of(together) == "name=Alice, greeting=Hello there!, roots=file:///work/library"
    assert text_of(rounds) == "Alice likes Alice"
    assert sorted(answers.asked[:3]) == ["elicit:What is your name?", "roots", "sample"]
    assert answers.asked[3:] == [
        "elicit:Step 1: What is your name?",
        "elicit:Step 2: What is your favorite color?",
    ]


@pytest.mark.parametrize("mode", ERAS)
async def test_progress_reaches_the_caller_in_both_eras(
    example_server: ExampleServer, mode: str
) -> None:
    seen: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with (
        httpx2.AsyncClient(timeout=10) as http,
        client(example_server, http, mode, Answers()) as session,
    ):
        result = await session.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
    assert not result.is_error, text_of(result)
    assert len(seen) >= 3 and seen == sorted(seen)


async def test_listen_hears_a_list_change_made_by_another_call(
    example_server: ExampleServer,
) -> None:
    import asyncio

    async with (
        httpx2.AsyncClient(timeout=10) as http,
        client(example_server, http, "2026-07-28", Answers()) as session,
    ):
        async with session.listen(
            tools_list_changed=True, prompts_list_changed=True
        ) as subscription:
            assert (
                subscription.honored.tools_list_changed
                and subscription.honored.prompts_list_changed
            )
            await session.call_tool("test_trigger_prompt_change", {})
            event = await asyncio.wait_for(anext(aiter(subscription)), 10)
    assert "prompt" in type(event).__name__.lower() or "prompts" in repr(event)
