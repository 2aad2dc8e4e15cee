"""Streamed answers of the endpoint's plain view: a call's progress and logs, then its response,
as a StreamingHttpResponse, within PLAIN_STREAMS and PLAIN_STREAM_SECONDS. Under WSGI through
Django's test Client (the body read after the view returned, as a WSGI server reads it), under
ASGI through its AsyncClient."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.test import AsyncClient, Client

from mcp_django.extensions.tasks.handshake import not_waited_message
from mcp_django.models import Task, ToolCall
from mcp_django.ops.audit import buffer as audit_buffer
from mcp_django.protocol.errors import INTERNAL_ERROR
from mcp_django.protocol.sse import SSEEvent, parse_sse
from mcp_django.transport.plain_stream import cut_off_message, open_streams, result_wait_message
from tests import urls_plain_streams, urls_plain_tasks
from tests.polling import until_sync

from .conftest import mcp_settings
from .test_plain import call, in_session, initialize, post_modern
from .test_stateless import body, headers

# Committed: a stream's database calls (its audit row) run on a thread of its own, as under
# gunicorn, which would find the tables locked by a test's open transaction.
pytestmark = pytest.mark.django_db(transaction=True)

LET_GO = "tests.urls_plain_streams"


def events(response: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a streamed answer, read to its end, in order."""
    assert response.streaming
    return [
        event.json()
        for event in parse_sse(b"".join(response.streaming_content))
        if isinstance(event, SSEEvent)
    ]


def modern_call(name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    message = body("tools/call", {"name": name, "arguments": arguments}, log_level="info")
    message["params"]["_meta"].update(meta)
    return message


def session_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = call(name, arguments)
    message["params"]["_meta"] = {"progressToken": "p"}
    return message


@pytest.fixture
def held_streams() -> Iterator[None]:
    """Every streamed answer this process may hold is open (PLAIN_STREAMS=1, one taken)."""
    with mcp_settings(PLAIN_STREAMS=1):
        assert open_streams.take(1)
        try:
            yield
        finally:
            open_streams.give_back()


@pytest.fixture(autouse=True)
def _no_stream_left_open() -> Iterator[None]:
    yield
    assert open_streams.held == 0


@pytest.fixture
def stall_outcomes() -> Iterator[list[str]]:
    urls_plain_streams.outcomes.clear()
    yield urls_plain_streams.outcomes
    urls_plain_streams.outcomes.clear()


# --- streamed when the call asks for notifications ----------------------------------------------


def test_a_2026_call_asking_for_progress_and_logs_is_streamed_with_them_before_its_result():
    response = post_modern(Client(), modern_call("progress", {"steps": 2}, progressToken="p"))

    messages = events(response)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert [m.get("method") for m in messages] == [
        "notifications/message",
        "notifications/progress",
        "notifications/message",
        "notifications/progress",
        None,
    ]
    assert [m["params"]["progress"] for m in messages[1:4:2]] == [1, 2]
    assert messages[-1]["result"]["content"][0]["text"] == "done 2"
    assert messages[-1]["result"]["resultType"] == "complete"


def test_a_session_call_of_a_tool_that_streams_is_streamed_with_its_progress():
    client = Client()
    session_id = initialize(client)

    response = in_session(client, session_id, session_call("progress", {"steps": 2}))

    messages = events(response)
    assert response["Content-Type"] == "text/event-stream"
    progress = [
        m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"
    ]
    assert progress == [1, 2]
    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": messages[-1]["result"],
    }
    assert messages[-1]["result"]["content"][0]["text"] == "done 2"


def test_a_streamed_call_is_audited_by_the_writer_of_the_process_loop():
    client = Client()
    session_id = initialize(client)

    events(in_session(client, session_id, session_call("progress", {"steps": 2})))

    # Written after the answer, as under ASGI: by the writer's task on the process loop, whose
    # next round this flush does now.
    audit_buffer.flush()
    row = ToolCall.objects.get(tool_name="progress", session_id=session_id)
    assert row.outcome == ToolCall.Outcome.OK


def test_a_question_to_the_client_on_a_streamed_call_fails_naming_the_asgi_deployment():
    client = Client()
    session_id = initialize(client, {"sampling": {}}, "2025-11-25")

    messages = events(in_session(client, session_id, call("ask", {"question": "Why?"})))

    result = messages[-1]["result"]
    assert result["isError"] is True
    assert "ASGI" in result["content"][0]["text"]


async def test_under_asgi_without_the_router_the_call_is_streamed_by_an_async_body():
    message = modern_call("progress", {"steps": 2}, progressToken="p")
    sent = {k: v for k, v in headers(message).items() if v is not None}

    response = await AsyncClient().post(
        "/mcp/",
        orjson.dumps(message),
        content_type="application/json",
        headers={"accept": "application/json, text/event-stream", **sent},
    )
    chunks = [chunk async for chunk in response.streaming_content]

    assert response.is_async
    messages = [e.json() for e in parse_sse(b"".join(chunks)) if isinstance(e, SSEEvent)]
    assert [
        m["params"]["progress"] for m in messages if "params" in m and "progress" in m["params"]
    ] == [1, 2]
    assert messages[-1]["result"]["content"][0]["text"] == "done 2"


# --- answered as JSON -----------------------------------------------------------------------------


def test_a_2026_call_asking_for_no_notifications_is_answered_as_json():
    message = body("tools/call", {"name": "progress", "arguments": {"steps": 2}})

    response = post_modern(Client(), message)

    assert response["Content-Type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done 2"


def test_a_2026_call_is_answered_as_json_when_the_process_holds_plain_streams(held_streams):
    response = post_modern(Client(), modern_call("progress", {"steps": 2}, progressToken="p"))

    assert response["Content-Type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done 2"


def test_a_session_call_is_answered_as_json_when_the_process_holds_plain_streams(held_streams):
    client = Client()
    session_id = initialize(client)

    response = in_session(client, session_id, session_call("progress", {"steps": 2}))

    assert response["Content-Type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done 2"


def test_a_post_that_takes_no_stream_is_refused_as_the_transports_spec_says():
    # The spec makes every POST accept both answers (406): no call reaches the stream without it.
    response = Client().post(
        "/mcp/",
        orjson.dumps(modern_call("progress", {"steps": 2}, progressToken="p")),
        content_type="application/json",
        headers={"accept": "application/json"},
    )

    assert response.status_code == 406


# --- bounded: time, and a stream cut --------------------------------------------------------------


@pytest.mark.urls(LET_GO)
def test_a_2026_stream_past_plain_stream_seconds_ends_with_an_error_and_cancels_the_call(
    stall_outcomes,
):
    with mcp_settings(PLAIN_STREAM_SECONDS=0.05):
        messages = events(post_modern(Client(), modern_call("stall", {}, progressToken="p")))

    assert messages[0]["method"] == "notifications/progress"
    assert messages[-1]["error"] == {"code": INTERNAL_ERROR, "message": cut_off_message(0.05)}
    assert messages[-1]["id"] == 1
    assert stall_outcomes == ["cancelled"]


@pytest.mark.urls(LET_GO)
def test_a_session_stream_past_plain_stream_seconds_ends_with_an_error(stall_outcomes):
    client = Client()
    session_id = initialize(client)

    with mcp_settings(PLAIN_STREAM_SECONDS=0.05):
        messages = events(in_session(client, session_id, session_call("stall", {})))

    assert messages[-1]["error"]["code"] == INTERNAL_ERROR
    assert "PLAIN_STREAM_SECONDS" in messages[-1]["error"]["message"]
    assert stall_outcomes == ["cancelled"]


@pytest.mark.urls(LET_GO)
def test_a_stream_closed_before_its_end_cancels_the_call(stall_outcomes):
    response = post_modern(Client(), modern_call("stall", {}, progressToken="p"))
    body_chunks = iter(response.streaming_content)

    first = next(body_chunks)
    response.close()  # as a WSGI server does when a write fails

    [progress] = [e.json() for e in parse_sse(first) if isinstance(e, SSEEvent)]
    assert progress["method"] == "notifications/progress"
    assert stall_outcomes == ["cancelled"]
    assert open_streams.held == 0


@pytest.mark.urls(LET_GO)
def test_a_stream_whose_body_is_never_read_gives_back_its_place():
    response = post_modern(Client(), modern_call("stall", {}, progressToken="p"))

    response.close()

    assert open_streams.held == 0


# --- 2025-11-25 tasks/result: it waits for the task within the same bounds ------------------------


@pytest.fixture
def held_task() -> Iterator[tuple[Client, str, str]]:
    """A session (client, its id) and a 2025-11-25 task of ``hold`` it made, running on the
    process loop until the test is done with it."""
    urls_plain_tasks.let_go.clear()
    client = Client()
    with mcp_settings(TASKS_BACKEND=None, TASK_POLL_INTERVAL_MS=50):
        session_id = initialize(client, {"tasks": {}})
        created = in_session(
            client,
            session_id,
            {**call("hold", {}), "params": {"name": "hold", "arguments": {}, "task": {}}},
        ).json()["result"]
        try:
            yield client, session_id, created["task"]["taskId"]
        finally:
            urls_plain_tasks.let_go.set()
            until_sync(
                lambda: Task.objects.get(pk=created["task"]["taskId"]).status in Task.TERMINAL
            )


def task_result(client: Client, session_id: str, task_id: str) -> Any:
    return in_session(
        client,
        session_id,
        {"jsonrpc": "2.0", "id": 7, "method": "tasks/result", "params": {"taskId": task_id}},
    )


@pytest.mark.urls("tests.urls_plain_tasks")
def test_tasks_result_waits_on_its_own_stream_until_the_task_ends(held_task):
    client, session_id, task_id = held_task
    threading.Timer(0.2, urls_plain_tasks.let_go.set).start()

    messages = events(task_result(client, session_id, task_id))

    assert messages[-1]["id"] == 7
    assert messages[-1]["result"]["content"][0]["text"] == "let go"


@pytest.mark.urls("tests.urls_plain_tasks")
def test_tasks_result_past_plain_stream_seconds_says_to_poll_and_leaves_the_task_running(
    held_task,
):
    client, session_id, task_id = held_task

    with mcp_settings(PLAIN_STREAM_SECONDS=0.2):
        messages = events(task_result(client, session_id, task_id))

    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": INTERNAL_ERROR, "message": result_wait_message(0.2)},
    }
    assert Task.objects.get(pk=task_id).status == Task.Status.WORKING


@pytest.mark.urls("tests.urls_plain_tasks")
def test_tasks_result_answered_as_json_does_not_wait_for_a_live_task(held_task, held_streams):
    client, session_id, task_id = held_task

    response = task_result(client, session_id, task_id)

    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == {
        "code": INTERNAL_ERROR,
        "message": not_waited_message(task_id),
    }
    assert Task.objects.get(pk=task_id).status == Task.Status.WORKING


@pytest.mark.urls("tests.urls_plain_tasks")
def test_tasks_result_answered_as_json_gives_an_ended_tasks_result(held_task, held_streams):
    client, session_id, task_id = held_task
    urls_plain_tasks.let_go.set()
    until_sync(lambda: Task.objects.get(pk=task_id).status == Task.Status.COMPLETED)

    response = task_result(client, session_id, task_id)

    assert response["Content-Type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "let go"
