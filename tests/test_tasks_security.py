"""A task belongs to the user, and the OAuth client, that made it: anyone else's tasks/get,
tasks/update and tasks/cancel of its id answer -32602 exactly as for an unknown id, and leave
the task as it was (docs/howto/tasks.md, "Who sees a task")."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_django import Context, taskrun
from mcp_django.models import Task
from mcp_django.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.polling import until
from tests.tasks_wire import headers, message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

RESOURCE = "https://mcp.example.com/mcp"
GO_ON = {"go_on": {"action": "accept", "content": {"go": True}}}


def _site() -> MCPSite:
    mcp = MCPSite(name="tasks-security")

    @mcp.tool(name="ask_first", task="optional")
    async def ask_first(ctx: Context) -> str:
        """Ask before going on: the task waits in input_required until its owner answers."""
        answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go_on")
        return "went on" if answer.action == "accept" else "stopped"

    return mcp


@pytest.fixture
def site() -> MCPSite:
    return _site()


@pytest.fixture
def django_auth() -> Iterator[None]:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        yield


@pytest.fixture
def oauth() -> Iterator[None]:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "oauth", "RESOURCE_URL": RESOURCE, "SCOPES_SUPPORTED": ["notes:read"]}):
        yield


async def send(client: MCPTestClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request (tasks extension declared); the JSON-RPC response."""
    body = message(method, params)
    response = await client.post_raw(orjson.dumps(body), dict(headers(body)))
    answers = [m for m in response.messages() if m.get("id") == body["id"]]
    assert answers, response.body
    return dict(answers[0])


async def result(client: MCPTestClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = await send(client, method, params)
    assert "result" in answer, answer
    return dict(answer["result"])


async def waiting_task(owner: MCPTestClient) -> str:
    """A task of ``owner``'s, running and waiting for its answer (bounded wait)."""
    created = await result(owner, "tools/call", {"name": "ask_first", "arguments": {}})
    assert created["resultType"] == "task", created
    task_id = str(created["taskId"])

    async def asking() -> bool:
        return (await result(owner, "tasks/get", {"taskId": task_id}))["status"] == "input_required"

    await until(asking, failure=f"task {task_id} never asked its question")
    return task_id


@pytest.fixture
async def cleanup() -> AsyncIterator[list[tuple[MCPTestClient, str]]]:
    """Tasks to cancel by their owner at the end, their runners (in this loop) waited for."""
    owned: list[tuple[MCPTestClient, str]] = []
    yield owned
    for owner, task_id in owned:
        await send(owner, "tasks/cancel", {"taskId": task_id})
        runner = taskrun._local.get(task_id)
        if runner is not None and runner.future is not None:
            await asyncio.wait_for(runner.future, 10)


async def assert_unreachable(other: MCPTestClient, owner: MCPTestClient, task_id: str) -> None:
    """``other`` gets from each tasks/* method what an unknown id gets; the owner's task is untouched."""
    row_before = await Task.objects.aget(pk=task_id)
    for method, params in [
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": GO_ON}),
        ("tasks/cancel", {}),
    ]:
        foreign = await send(other, method, {"taskId": task_id, **params})
        unknown = await send(other, method, {"taskId": "no-such-task", **params})
        assert "result" not in foreign, (method, foreign)
        assert foreign["error"]["code"] == -32602, (method, foreign)
        assert foreign["error"] == unknown["error"], (method, foreign, unknown)

    seen = await result(owner, "tasks/get", {"taskId": task_id})
    assert seen["status"] == "input_required", seen
    assert list(seen["inputRequests"]) == ["go_on"]
    row = await Task.objects.aget(pk=task_id)
    assert (row.status, row.input_responses, row.cancel_requested, row.finished_at) == ("input_required", {}, False, None)
    assert row.updated_at == row_before.updated_at

    # The owner still can: answering it lets the task finish.
    await result(owner, "tasks/update", {"taskId": task_id, "inputResponses": GO_ON})

    async def ended() -> dict[str, Any] | None:
        task = await result(owner, "tasks/get", {"taskId": task_id})
        return task if task["status"] not in ("working", "input_required") else None

    done = await until(ended, failure=f"task {task_id} never ended")
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "went on"}]


@pytest.mark.usefixtures("django_auth")
async def test_another_users_task_id_is_an_unknown_id(site: MCPSite, cleanup: list[Any]) -> None:
    alice, bob = await sync_to_async(make_user)("alice"), await sync_to_async(make_user)("bob")
    as_alice, as_bob = MCPTestClient(MCPConsumer.as_asgi(site=site)), MCPTestClient(MCPConsumer.as_asgi(site=site))
    await as_alice.force_login(alice)
    await as_bob.force_login(bob)
    task_id = await waiting_task(as_alice)
    cleanup.append((as_alice, task_id))
    await assert_unreachable(as_bob, as_alice, task_id)


@sync_to_async
def _tokens(username: str, *clients: str) -> tuple[str, ...]:
    user = make_user(username)
    raws = []
    for name in clients:
        app, _ = Application.objects.get_or_create(
            name=name, defaults={"client_type": "public", "authorization_grant_type": "authorization-code", "redirect_uris": "http://127.0.0.1/cb"}
        )
        raw = secrets.token_urlsafe(30)
        AccessToken.objects.create(
            user=user, application=app, token=raw, scope="notes:read", expires=timezone.now() + timedelta(hours=1), resource=[RESOURCE]
        )
        raws.append(raw)
    return tuple(raws)


@pytest.mark.usefixtures("oauth")
async def test_the_same_users_other_oauth_client_cannot_reach_the_task(site: MCPSite, cleanup: list[Any]) -> None:
    made_with, same_client, other_client = await _tokens("carol", "desktop app", "desktop app", "web app")

    def client(raw: str) -> MCPTestClient:
        return MCPTestClient(MCPConsumer.as_asgi(site=site), headers={"authorization": f"Bearer {raw}"})

    owner = client(made_with)
    task_id = await waiting_task(owner)
    cleanup.append((owner, task_id))
    # Another token of the same client is the same client: it sees the task.
    assert (await result(client(same_client), "tasks/get", {"taskId": task_id}))["status"] == "input_required"
    await assert_unreachable(client(other_client), owner, task_id)
