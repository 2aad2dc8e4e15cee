"""What a durable task may keep (the 2026-07-28 tasks extension): only arguments its tool accepts,
a payload and a result no larger than their settings, and no payload once it has ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from mcp_django import Context
from mcp_django.exceptions import InternalError
from mcp_django.models import Task
from mcp_django.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.tasks_wire import reached_by
from tests.test_checks import ids, settings_errors
from tests.test_task_tools import django_auth, note_site, staff_client
from tests.transport.conftest import mcp_settings
from tests.transport.test_stateless import body, headers

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
SCHEMA = {
    "type": "object",
    "properties": {"upto": {"type": "integer"}},
    "required": ["upto"],
    "additionalProperties": False,
}


def nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep: deeper than orjson (255) and json's defaults take."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def limits_site() -> MCPSite:
    mcp = MCPSite(name="task-limits")

    @mcp.tool(task="optional")
    def count(upto: int) -> str:
        return f"counted to {upto}"

    @mcp.tool(task="optional", input_schema=SCHEMA)
    def count_schema(upto: int) -> str:
        return f"counted to {upto}"

    @mcp.tool(task="optional")
    def keep(data: dict[str, Any]) -> str:
        return f"{len(json.dumps(data))} bytes"

    @mcp.tool(task="optional")
    def big(size: int) -> str:
        return "x" * size

    @mcp.tool(task="optional")
    def crashed() -> str:
        raise InternalError("the backing service is down")

    @mcp.tool(task="optional")
    async def sleepy() -> str:
        await asyncio.Event().wait()  # runs until cancelled
        return "woke"

    @mcp.tool(task="optional")
    async def named(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", NAME, key="name")
        return f"hello {(answer.content or {}).get('name')}"

    return mcp


@pytest.fixture
def client() -> Iterator[MCPTestClient]:
    with mcp_settings(TASK_POLL_INTERVAL_MS=50):
        yield MCPTestClient(MCPConsumer.as_asgi(site=limits_site()))


async def send(
    client: MCPTestClient,
    method: str,
    params: dict[str, Any],
    *,
    capabilities: dict[str, Any] = TASKS,
) -> Any:
    message = body(method, params, capabilities=capabilities)
    sent = headers(message)
    if method.startswith("tasks/"):
        sent["mcp-name"] = params["taskId"]
    # json, not orjson: the hostile arguments nest deeper than orjson writes.
    response = await client.post_raw(json.dumps(message).encode(), sent)
    return response.messages()[-1] if response.is_sse else response.json()


def answered(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without what differs between two requests anyway (their server info)."""
    if "result" in answer:
        return {"result": {k: v for k, v in answer["result"].items() if k != "_meta"}}
    return {"error": answer["error"]}


async def created(client: MCPTestClient, name: str, arguments: dict[str, Any] | None = None) -> str:
    answer = await send(client, "tools/call", {"name": name, "arguments": arguments or {}})
    assert answer["result"]["resultType"] == "task", answer
    return str(answer["result"]["taskId"])


async def reached(client: MCPTestClient, task_id: str, *statuses: str) -> dict[str, Any]:
    async def get() -> dict[str, Any]:
        return dict((await send(client, "tasks/get", {"taskId": task_id}))["result"])

    return await reached_by(get, task_id, statuses)


# -- arguments are validated before the row ---------------------------------------------------


@pytest.mark.parametrize("tool", ["count", "count_schema"])
async def test_a_deeply_nested_argument_gets_the_same_answer_as_a_task_as_without_and_no_row(
    client, tool
):
    arguments = {"upto": nested(300)}

    direct = await send(
        client, "tools/call", {"name": tool, "arguments": arguments}, capabilities={}
    )
    as_task = await send(client, "tools/call", {"name": tool, "arguments": arguments})

    assert (
        direct["result"]["isError"] is True
        and "Invalid arguments" in direct["result"]["content"][0]["text"]
    )
    assert answered(as_task) == answered(direct)
    assert await Task.objects.acount() == 0


@pytest.mark.parametrize("tool", ["count", "count_schema"])
async def test_arguments_the_tool_refuses_make_no_task(client, tool):
    direct = await send(
        client, "tools/call", {"name": tool, "arguments": {"upto": "three"}}, capabilities={}
    )
    as_task = await send(client, "tools/call", {"name": tool, "arguments": {"upto": "three"}})

    assert answered(as_task) == answered(direct)
    assert await Task.objects.acount() == 0


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("testapp_note_update", {"title": nested(300)}),
        ("testapp_note_make_high", {"pks": [nested(300)]}),
    ],
)
async def test_a_generated_tool_or_admin_action_refuses_bad_arguments_as_a_task_as_without(
    tool, arguments
):
    mcp = note_site(task_tools={"update": "optional"}, task_actions={"make_high": "optional"})
    with django_auth:
        client, _, note = await staff_client(mcp)
        if "title" in arguments:
            arguments = {"pk": note.pk, **arguments}

        direct = await send(
            client, "tools/call", {"name": tool, "arguments": arguments}, capabilities={}
        )
        as_task = await send(client, "tools/call", {"name": tool, "arguments": arguments})

    assert direct["result"]["isError"] is True, direct
    assert answered(as_task) == answered(direct)
    assert await Task.objects.acount() == 0


# -- bounded payloads and results -------------------------------------------------------------


async def test_arguments_larger_than_task_max_payload_bytes_are_refused_and_make_no_task(client):
    arguments = {"data": {"text": "x" * 4096}}

    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_MAX_PAYLOAD_BYTES=2048):
        refused = await send(client, "tools/call", {"name": "keep", "arguments": arguments})
        direct = await send(
            client, "tools/call", {"name": "keep", "arguments": arguments}, capabilities={}
        )

    assert refused["error"]["code"] == INVALID_PARAMS
    assert "TASK_MAX_PAYLOAD_BYTES (2048)" in refused["error"]["message"]
    assert direct["result"]["content"][0]["text"].endswith(
        "bytes"
    )  # only a task keeps its arguments
    assert await Task.objects.acount() == 0


async def test_valid_arguments_too_deep_to_store_are_refused_and_make_no_task(client):
    refused = await send(client, "tools/call", {"name": "keep", "arguments": {"data": nested(300)}})

    assert refused["error"]["code"] == INVALID_PARAMS
    assert "cannot be stored as JSON" in refused["error"]["message"]
    assert await Task.objects.acount() == 0


async def test_a_result_larger_than_task_max_result_bytes_fails_the_task_saying_so(client):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_MAX_RESULT_BYTES=1024):
        task_id = await created(client, "big", {"size": 4096})
        failed = await reached(client, task_id, "completed", "failed")

    assert failed["status"] == "failed" and "result" not in failed
    assert (
        failed["error"]["code"] == INTERNAL_ERROR
        and "TASK_MAX_RESULT_BYTES (1024)" in failed["error"]["message"]
    )
    row = await Task.objects.aget(pk=task_id)
    assert row.result is None


async def test_answers_larger_than_task_max_payload_bytes_are_refused_and_the_question_stays_open(
    client,
):
    task_id = await created(client, "named")
    await reached(client, task_id, "input_required")

    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_MAX_PAYLOAD_BYTES=2048):
        refused = await send(
            client,
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    "name": {"action": "accept", "content": {"name": "x" * 4096}},
                },
            },
        )

    assert (
        refused["error"]["code"] == INVALID_PARAMS
        and "TASK_MAX_PAYLOAD_BYTES (2048)" in refused["error"]["message"]
    )
    waiting = await send(client, "tasks/get", {"taskId": task_id})
    assert waiting["result"]["status"] == "input_required" and list(
        waiting["result"]["inputRequests"]
    ) == ["name"]
    await send(client, "tasks/cancel", {"taskId": task_id})


# -- no payload once a task has ended ---------------------------------------------------------


async def test_a_completed_task_keeps_no_payload_but_its_redacted_arguments(client):
    task_id = await created(client, "count", {"upto": 3})
    await reached(client, task_id, "completed")

    row = await Task.objects.aget(pk=task_id)
    assert row.payload == "" and row.arguments == {"upto": 3}


async def test_a_failed_task_keeps_no_payload(client):
    task_id = await created(client, "crashed")
    await reached(client, task_id, "failed")

    assert (await Task.objects.aget(pk=task_id)).payload == ""


async def test_a_cancelled_task_keeps_no_payload(client):
    task_id = await created(client, "sleepy")

    await send(client, "tasks/cancel", {"taskId": task_id})

    assert (await Task.objects.aget(pk=task_id)).payload == ""


async def test_an_expired_task_keeps_no_payload(client):
    task_id = await created(client, "named")
    await reached(client, task_id, "input_required")
    await Task.objects.filter(pk=task_id).aupdate(expires_at=timezone.now() - timedelta(seconds=1))

    failed = await send(client, "tasks/get", {"taskId": task_id})

    assert failed["result"]["status"] == "failed"
    assert (await Task.objects.aget(pk=task_id)).payload == ""


# -- the settings' checks ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["TASK_MAX_PAYLOAD_BYTES", "TASK_MAX_RESULT_BYTES"])
@pytest.mark.parametrize("value", [0, 1023, "1MB", True, None])
def test_e260_a_task_byte_cap_must_be_an_integer_of_at_least_1024(name, value):
    assert "mcp_django.E260" in ids(settings_errors(**{name: value}))
    assert "mcp_django.E260" not in ids(settings_errors(**{name: 1024}))
