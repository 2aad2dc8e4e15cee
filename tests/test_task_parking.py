"""A durable task waiting for its client's input is parked: its run ends (no worker, no running
slot held while the client thinks), the row keeps its questions and answers so far, and the
answer that completes them runs it again, replaying the tool with every answer."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.utils import timezone

from mcp_django import Context
from mcp_django.extensions.tasks import runner as taskrun
from mcp_django.models import Task
from mcp_django.protocol.errors import QUOTA_EXCEEDED
from mcp_django.registry.sites import MCPSite
from mcp_django.signals import sweeping
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.polling import until
from tests.test_checks import ids, settings_errors
from tests.test_tasks import get, reached
from tests.transport.conftest import mcp_settings
from tests.transport.test_stateless import body, headers

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}

#: How often each tool's first line ran, by name.
runs: dict[str, int] = {}


def parking_site() -> MCPSite:
    mcp = MCPSite(name="task-parking")

    @mcp.tool(task="optional")
    async def named(ctx: Context) -> str:
        runs["named"] = runs.get("named", 0) + 1
        await ctx.report_progress(1, 2, "Looked the names up")
        answer = await ctx.elicit("Name?", NAME, key="name")
        return f"hello {(answer.content or {}).get('name')}"

    @mcp.tool(task="optional")
    async def twice(ctx: Context) -> str:
        runs["twice"] = runs.get("twice", 0) + 1
        first = await ctx.elicit("First name?", NAME)
        second = await ctx.elicit("Last name?", NAME)
        return f"{(first.content or {}).get('name')} {(second.content or {}).get('name')}"

    @mcp.tool(task="optional")
    def quick() -> str:
        return "quick"

    return mcp


@pytest.fixture
def client() -> Iterator[MCPTestClient]:
    runs.clear()
    with mcp_settings(TASK_POLL_INTERVAL_MS=50):
        yield MCPTestClient(MCPConsumer.as_asgi(site=parking_site()))


async def send(client: MCPTestClient, method: str, params: dict[str, Any]) -> Any:
    message = body(method, params, capabilities=TASKS)
    sent = headers(message)
    if method.startswith("tasks/"):
        sent["mcp-name"] = params["taskId"]
    response = await client.post_raw(orjson.dumps(message), sent)
    return response.messages()[-1] if response.is_sse else response.json()


async def created(client: MCPTestClient, name: str) -> str:
    # Bounded: with a worker backend that runs jobs inline, a job that held on to its task
    # until the client answered would never let this call answer.
    answer = await asyncio.wait_for(send(client, "tools/call", {"name": name, "arguments": {}}), 10)
    assert answer["result"]["resultType"] == "task", answer
    return str(answer["result"]["taskId"])


async def answer(client: MCPTestClient, task_id: str, key: str, name: str) -> None:
    reply = {key: {"action": "accept", "content": {"name": name}}}
    acknowledged = await asyncio.wait_for(
        send(client, "tasks/update", {"taskId": task_id, "inputResponses": reply}), 10
    )
    assert "result" in acknowledged, acknowledged


async def no_run_holds(task_id: str) -> bool:
    """Whether no runner in this process holds the task (its run ended when it parked)."""
    runner = taskrun._local.get(task_id)
    return runner is None or runner.future is None or runner.future.done()


# -- the in-loop runner (TASKS_BACKEND = None) --------------------------------------------------


async def test_a_waiting_task_holds_no_running_slot_so_another_task_completes_while_it_waits(
    client,
):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, QUOTAS={"RUNNING_PER_USER": 1}):
        waiting_id = await created(client, "named")
        waiting = await reached(client, waiting_id, "input_required")
        await until(lambda: no_run_holds(waiting_id), failure="the waiting task's run never ended")

        quick_id = await created(client, "quick")
        quick = await reached(client, quick_id, "completed", "failed")

        still = await get(client, waiting_id)
        await answer(client, waiting_id, "name", "Ada")
        done = await reached(client, waiting_id, "completed", "failed")

    assert waiting["statusMessage"] == "Looked the names up" and list(waiting["inputRequests"]) == [
        "name"
    ]
    assert quick["status"] == "completed" and quick["result"]["content"][0]["text"] == "quick"
    assert still["status"] == "input_required"
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "hello Ada"
    assert runs["named"] == 2  # asked, then replayed with the answer


async def test_a_parked_task_keeps_its_questions_and_answers_so_far_and_replays_each_round(client):
    task_id = await created(client, "twice")
    first = await reached(client, task_id, "input_required")
    await answer(client, task_id, "elicitation-1", "Ada")

    second = await reached(client, task_id, "input_required")
    row = await Task.objects.aget(pk=task_id)
    parked = orjson.dumps(await sync_to_async(_row_values)(task_id))
    await answer(client, task_id, "elicitation-2", "Lovelace")
    done = await reached(client, task_id, "completed", "failed")

    assert list(first["inputRequests"]) == ["elicitation-1"] and list(second["inputRequests"]) == [
        "elicitation-2"
    ]
    assert row.heartbeat_at is None and row.asked_keys == ["elicitation-1", "elicitation-2"]
    # The answers so far are kept encrypted: nowhere outside the Fernet tokens (whose base64 may
    # spell "Ada" by chance, about one run in a thousand).
    assert b"Ada" not in re.sub(rb"gAAAAA[A-Za-z0-9_=-]+", b"", parked)
    assert re.search(rb"gAAAAA[A-Za-z0-9_=-]+", parked)  # the answers are there, as a token
    assert done["result"]["content"][0]["text"] == "Ada Lovelace"
    assert runs["twice"] == 3


def _row_values(pk: str) -> list[Any]:
    return list(Task.objects.filter(pk=pk).values_list())


# -- the django.tasks backend (task_worker.run_mcp_task) ----------------------------------------


async def test_with_a_worker_backend_a_waiting_task_ends_its_job_and_an_answer_enqueues_it_again(
    client,
):
    with (
        override_settings(TASKS=IMMEDIATE),
        mcp_settings(TASK_POLL_INTERVAL_MS=50, TASKS_BACKEND="default"),
    ):
        # The immediate backend runs each job inside the call that enqueues it: a job that
        # waited for the client would never end, and the call never answer.
        waiting_id = await created(client, "named")
        waiting = await get(client, waiting_id)
        quick_id = await created(client, "quick")
        quick = await get(client, quick_id)
        await answer(client, waiting_id, "name", "Ada")
        done = await get(client, waiting_id)

    assert (
        waiting["status"] == "input_required" and waiting["statusMessage"] == "Looked the names up"
    )
    assert quick["status"] == "completed"
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "hello Ada"
    row = await Task.objects.aget(pk=waiting_id)
    assert row.backend == "default" and row.payload == ""


# -- the cap on waiting tasks, and the input timeout ---------------------------------------------


async def test_waiting_tasks_are_capped_per_user(client):
    with mcp_settings(TASK_POLL_INTERVAL_MS=50, QUOTAS={"WAITING_TASKS_PER_USER": 1}):
        first_id = await created(client, "named")
        await reached(client, first_id, "input_required")

        second_id = await created(client, "named")
        refused = await reached(client, second_id, "input_required", "failed")

    assert refused["status"] == "failed"
    assert refused["error"]["code"] == QUOTA_EXCEEDED and refused["error"]["data"] == {
        "limit": "WAITING_TASKS_PER_USER"
    }
    assert (await get(client, first_id))["status"] == "input_required"
    assert (await Task.objects.aget(pk=second_id)).payload == ""


async def test_a_task_waiting_longer_than_task_input_timeout_fails_on_read(client):
    task_id = await created(client, "named")
    await reached(client, task_id, "input_required")

    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_INPUT_TIMEOUT=60):
        await Task.objects.filter(pk=task_id).aupdate(
            updated_at=timezone.now() - timedelta(seconds=61)
        )
        failed = await get(client, task_id)

    assert (
        failed["status"] == "failed"
        and failed["error"]["message"] == "Input timed out: no answer for 60 s"
    )
    assert "inputRequests" not in failed


async def test_the_sweep_fails_a_task_waiting_longer_than_task_input_timeout(client):
    waited_id = await created(client, "named")
    fresh_id = await created(client, "named")
    await reached(client, waited_id, "input_required")
    await reached(client, fresh_id, "input_required")

    with mcp_settings(TASK_POLL_INTERVAL_MS=50, TASK_INPUT_TIMEOUT=60):
        await Task.objects.filter(pk=waited_id).aupdate(
            updated_at=timezone.now() - timedelta(seconds=61)
        )
        await sweeping.asend(sender=None)

    waited = await Task.objects.aget(pk=waited_id)
    assert (
        waited.status == Task.Status.FAILED
        and waited.error is not None
        and "Input timed out" in waited.error["message"]
    )
    assert (await Task.objects.aget(pk=fresh_id)).status == Task.Status.INPUT_REQUIRED


# -- the settings' checks ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, "1h", None, float("inf")])
def test_e261_task_input_timeout_must_be_a_positive_number_of_seconds(value):
    assert "mcp_django.E261" in ids(settings_errors(TASK_INPUT_TIMEOUT=value))
    assert "mcp_django.E261" not in ids(settings_errors(TASK_INPUT_TIMEOUT=0.5))


def test_w260_a_task_input_timeout_not_shorter_than_the_ttl_is_reported():
    assert "mcp_django.W260" in ids(settings_errors(TASK_INPUT_TIMEOUT=3600, TASK_TTL_MS=3_600_000))
    assert "mcp_django.W260" not in ids(
        settings_errors(TASK_INPUT_TIMEOUT=3599, TASK_TTL_MS=3_600_000)
    )
    assert "mcp_django.W260" not in ids(settings_errors(TASK_INPUT_TIMEOUT=3600, TASK_TTL_MS=None))


def test_waiting_tasks_per_user_is_a_quota_cap_checked_as_the_others():
    assert settings_errors(QUOTAS={"WAITING_TASKS_PER_USER": 5}) == []
    assert "mcp_django.E037" in ids(settings_errors(QUOTAS={"WAITING_TASKS_PER_USER": 0}))
