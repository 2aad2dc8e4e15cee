"""TASK_DEADLINE_SECONDS: long work for clients without tasks (Claude, Cursor), in both eras.

A task tool called by a client that takes no tasks runs as a task all the same; the call answers
the tool's own result when the task ends within the deadline, else a result naming the task,
which the generated tools task_status, task_result and task_cancel follow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.checks import Error, Warning

from mcp_django.checks.tasks import check_tasks
from mcp_django.models import Task
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.polling import until
from tests.transport.conftest import mcp_settings

from .test_tasks import WITH_TASKS, seen, send, task_site

pytestmark = pytest.mark.django_db(transaction=True)

RELATED = "io.modelcontextprotocol/related-task"
POLLING = {"task_status", "task_result", "task_cancel"}
NO_TASKS = {"elicitation": {"form": {}}}


def deadline(seconds: float | None, **extra: Any) -> Any:
    return mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_DEADLINE_SECONDS=seconds, **extra)


@pytest.fixture
def site() -> Iterator[MCPSite]:
    seen.clear()
    yield task_site()


def client_of(site: MCPSite, **options: Any) -> MCPTestClient:
    return MCPTestClient(MCPConsumer.as_asgi(site=site), **options)


async def modern(client: MCPTestClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 call from a client that does not declare the tasks extension."""
    return dict(
        await send(
            client, "tools/call", {"name": name, "arguments": arguments}, capabilities=NO_TASKS
        )
    )


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in result["content"] if b["type"] == "text")


def task_named(result: dict[str, Any]) -> str:
    return str(result["_meta"][RELATED]["taskId"])


async def test_off_by_default_nothing_changes(site):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50):
        client = client_of(site)
        await client.initialize(capabilities=NO_TASKS)
        names = {t["name"] for t in (await client.call("tools/list"))["tools"]}
        assert not names & POLLING
        assert text_of(await client.call_tool("count", {"upto": 2})) == "counted to 2"
    assert await Task.objects.acount() == 0


async def test_a_call_that_ends_in_time_answers_the_tools_result_from_its_task(site):
    with deadline(10):
        client = client_of(site)
        await client.initialize(capabilities=NO_TASKS)
        tools = {t["name"]: t for t in (await client.call("tools/list"))["tools"]}
        assert set(tools) >= POLLING
        assert tools["task_status"]["annotations"]["readOnlyHint"] is True
        assert tools["task_cancel"]["annotations"]["destructiveHint"] is True
        result = await client.call_tool("count", {"upto": 3})
        assert result["content"] == [{"type": "text", "text": "counted to 3"}]
        answer = await modern(client, "count", {"upto": 2})
        assert answer["result"]["content"] == [{"type": "text", "text": "counted to 2"}]
    tasks = [t async for t in Task.objects.order_by("created_at")]
    assert [(t.tool_name, t.status) for t in tasks] == [("count", "completed")] * 2


async def test_a_call_past_the_deadline_names_its_task_and_the_tools_follow_it(site):
    with deadline(0.2):
        client = client_of(site)
        await client.initialize(capabilities=NO_TASKS)
        result = await client.call_tool("sleepy", {})
        task_id = task_named(result)
        assert f"Still running as task {task_id}" in text_of(result)
        assert "task_status" in text_of(result) and not result.get("isError")
        await until(lambda: seen.get("sleepy") == "started", failure="sleepy never started")

        status = await client.call_tool("task_status", {"taskId": task_id})
        assert status["structuredContent"]["status"] == "working"
        assert status["structuredContent"]["taskId"] == task_id
        still = await client.call_tool("task_result", {"taskId": task_id})
        assert f"Still running as task {task_id}" in text_of(still)

        cancelled = await client.call_tool("task_cancel", {"taskId": task_id})
        assert text_of(cancelled) == f"Task {task_id} was cancelled."
        await until(lambda: seen.get("sleepy") == "stopped", failure="sleepy was not stopped")
        after = await client.call_tool("task_status", {"taskId": task_id})
        assert after["structuredContent"]["status"] == "cancelled"
        none = await client.call_tool("task_result", {"taskId": task_id})
        assert none["isError"] and "was cancelled" in text_of(none)
        again = await client.call_tool("task_cancel", {"taskId": task_id})
        assert again["isError"] and "already ended (cancelled)" in text_of(again)


async def test_a_required_task_tool_is_served_to_a_session_client_without_tasks(site):
    with deadline(5):
        session = client_of(site)
        await session.initialize(capabilities=NO_TASKS)
        result = await session.call_tool("broken", {})
        # A 2026-07-28 client can declare the extension on any request: it is told to (-32021).
        answer = await modern(client_of(site), "broken", {})
    # Without the option the session hears -32601 (a task is required); with it, the answer.
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "no luck"}]
    assert answer["error"]["code"] == -32021


async def test_a_failed_task_answers_its_error_as_the_plain_call_would(site):
    with deadline(5):
        client = client_of(site)
        await client.initialize(capabilities=NO_TASKS)
        with pytest.raises(JSONRPCErrorResponse) as failed:
            await client.call_tool("crashed", {})
    assert failed.value.response["error"] == {
        "code": -32603,
        "message": "the backing service is down",
    }


async def test_a_sessions_questions_are_relayed_on_the_calls_stream(site):
    def accept(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"ok": True}}

    with deadline(10):
        client = client_of(site, request_handlers={"elicitation/create": accept})
        await client.initialize(capabilities=NO_TASKS)
        result = await client.call_tool("ask", {})
    assert text_of(result) == "first={'ok': True}, second={'ok': True}"
    asked = client.last_server_requests
    assert sorted(r["params"]["message"] for r in asked) == ["First?", "Second?"]


async def test_a_2026_request_gets_the_tasks_questions_as_an_input_round(site):
    ok = {"action": "accept", "content": {"ok": True}}
    with deadline(10):
        client = client_of(site)
        asking = (await modern(client, "ask", {}))["result"]
        assert asking["resultType"] == "input_required"
        assert sorted(asking["inputRequests"]) == ["first", "second"]
        (task,) = [t async for t in Task.objects.all()]
        assert task.status == "input_required"
        # The retry brings the answers to the same task, which then ends within the deadline.
        retried = await send(
            client,
            "tools/call",
            {
                "name": "ask",
                "arguments": {},
                "inputResponses": {"first": ok, "second": ok},
                "requestState": asking["requestState"],
            },
            capabilities=NO_TASKS,
        )
    assert text_of(retried["result"]) == "first={'ok': True}, second={'ok': True}"
    assert await Task.objects.acount() == 1


async def test_a_question_nobody_here_can_answer_is_named_with_the_task(site):
    with deadline(0.3):
        client = client_of(site)
        asking = (await modern(client, "ask", {}))["result"]
        assert asking["resultType"] == "input_required"
        task = await Task.objects.aget()
        # task_result cannot ask in a round of its own: it names the question instead.
        result = (await modern(client, "task_result", {"taskId": task.pk}))["result"]
        assert "waiting for an answer this client cannot give" in text_of(result)
        await modern(client, "task_cancel", {"taskId": task.pk})
        assert (await Task.objects.aget(pk=task.pk)).status == "cancelled"


async def test_a_session_that_cannot_be_asked_gets_the_tools_answer_as_in_a_plain_call(site):
    with deadline(10):
        client = client_of(site)
        await client.initialize(capabilities={})  # no elicitation
        result = await client.call_tool("ask", {})
    assert result["isError"] is True
    assert "did not declare the 'elicitation' capability" in text_of(result)
    assert client.last_server_requests == []


async def test_a_client_with_tasks_calling_without_one_is_answered_directly(site):
    with deadline(0.2):
        session = client_of(site)
        await session.initialize(capabilities={"tasks": {}, **NO_TASKS})
        assert text_of(await session.call_tool("count", {"upto": 1})) == "counted to 1"
        declared = await send(
            client_of(site),
            "tools/call",
            {"name": "count", "arguments": {"upto": 1}},
            capabilities=WITH_TASKS,
        )
        assert declared["result"]["resultType"] == "task"  # the extension, as without the option
    assert await Task.objects.acount() == 1


async def test_another_users_task_is_no_task_of_theirs(site):
    User = get_user_model()
    owner = await sync_to_async(User.objects.create_user)("deadline-owner")
    stranger = await sync_to_async(User.objects.create_user)("deadline-stranger")
    with deadline(0.2, AUTHENTICATION="django"):
        mine, theirs = client_of(site), client_of(site)
        await mine.force_login(owner)
        await theirs.force_login(stranger)
        await mine.initialize(capabilities=NO_TASKS)
        await theirs.initialize(capabilities=NO_TASKS)
        task_id = task_named(await mine.call_tool("sleepy", {}))
        for name in POLLING:
            refused = await theirs.call_tool(name, {"taskId": task_id})
            unknown = await theirs.call_tool(name, {"taskId": "no-such-task"})
            assert refused["isError"] and text_of(refused).startswith("No task"), name
            assert text_of(unknown).startswith("No task"), name
        bad = await theirs.call_tool("task_status", {"taskId": 3})
        assert bad["isError"] and "taskId" in text_of(bad)
        assert (await Task.objects.aget(pk=task_id)).status == "working"
        await mine.call_tool("task_cancel", {"taskId": task_id})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, []),
        (240, []),
        (300, ["mcp_django.W261"]),
        (0, ["mcp_django.E262"]),
        ("240", ["mcp_django.E262"]),
    ],
)
def test_the_deadline_is_checked(value: Any, expected: list[str]) -> None:
    found = [
        m.id
        for m in check_tasks({"TASK_DEADLINE_SECONDS": value})
        if isinstance(m, (Error, Warning)) and m.id in ("mcp_django.E262", "mcp_django.W261")
    ]
    assert found == expected
