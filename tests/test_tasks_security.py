"""A task belongs to the user, and the OAuth client, that made it: anyone else's tasks/get,
tasks/update and tasks/cancel of its id answer -32602 exactly as for an unknown id, and leave
the task as it was (docs/howto/tasks.md, "Who sees a task"). It runs only while its user is
active and, made with an OAuth token, while a live token of that user and client holds its
scopes; tasks/update needs the tool's scopes, as a tools/call does."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_django import Context
from mcp_django.extensions.tasks import runner as taskrun
from mcp_django.models import Task
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.polling import until
from tests.tasks_wire import headers, message

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]

RESOURCE = "https://mcp.example.com/mcp"
GO_ON = {"go_on": {"action": "accept", "content": {"go": True}}}
CONFIRM = {"confirm": {"action": "accept", "content": {"go": True}}}
READ_WRITE = "notes:read notes:write"

#: The writes the test site's tools made, and what its holding tool saw.
written: list[str] = []
holding: dict[str, str] = {}


def _site() -> MCPSite:
    mcp = MCPSite(name="tasks-security")

    @mcp.tool(name="ask_first", task="optional")
    async def ask_first(ctx: Context) -> str:
        """Ask before going on: the task waits in input_required until its owner answers."""
        answer = await ctx.elicit(
            "Go on?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go_on"
        )
        return "went on" if answer.action == "accept" else "stopped"

    @mcp.tool(name="write_note", task="optional", scopes=["notes:write"])
    def write_note(text: str) -> str:
        """Write at once: the write a revoked token must never reach."""
        written.append(text)
        return "written"

    @mcp.tool(name="confirm_write", task="optional", scopes=["notes:write"])
    async def confirm_write(ctx: Context, text: str) -> str:
        """Ask, then write: the answer (tasks/update) is what lets the write happen."""
        answer = await ctx.elicit(
            "Write it?",
            {"type": "object", "properties": {"go": {"type": "boolean"}}},
            key="confirm",
        )
        if answer.action == "accept":
            written.append(text)
        return "done"

    @mcp.tool(name="hold_write", task="optional", scopes=["notes:write"])
    async def hold_write() -> str:
        """Run until cancelled, saying so."""
        holding["state"] = "running"
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            holding["state"] = "cancelled"
            raise
        return "never"

    return mcp


@pytest.fixture
def site() -> Iterator[MCPSite]:
    written.clear()
    holding.clear()
    yield _site()


@pytest.fixture
def django_auth() -> Iterator[None]:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        yield


def oauth_settings(**extra: Any) -> override_settings:
    return override_settings(
        MCP_DJANGO={
            **BASE_SETTINGS,
            "AUTHENTICATION": "oauth",
            "RESOURCE_URL": RESOURCE,
            "SCOPES_SUPPORTED": ["notes:read"],
            **extra,
        }
    )


@pytest.fixture
def oauth() -> Iterator[None]:
    with oauth_settings():
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
    assert (row.status, row.input_responses, row.cancel_requested, row.finished_at) == (
        "input_required",
        {},
        False,
        None,
    )
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
    as_alice, as_bob = (
        MCPTestClient(MCPConsumer.as_asgi(site=site)),
        MCPTestClient(MCPConsumer.as_asgi(site=site)),
    )
    await as_alice.force_login(alice)
    await as_bob.force_login(bob)
    task_id = await waiting_task(as_alice)
    cleanup.append((as_alice, task_id))
    await assert_unreachable(as_bob, as_alice, task_id)


@sync_to_async
def _tokens(username: str, *clients: str, scope: str = "notes:read") -> tuple[str, ...]:
    user = make_user(username)
    raws = []
    for name in clients:
        app, _ = Application.objects.get_or_create(
            name=name,
            defaults={
                "client_type": "public",
                "authorization_grant_type": "authorization-code",
                "redirect_uris": "http://127.0.0.1/cb",
            },
        )
        raw = secrets.token_urlsafe(30)
        AccessToken.objects.create(
            user=user,
            application=app,
            token=raw,
            scope=scope,
            expires=timezone.now() + timedelta(hours=1),
            resource=[RESOURCE],
        )
        raws.append(raw)
    return tuple(raws)


@pytest.mark.usefixtures("oauth")
async def test_the_same_users_other_oauth_client_cannot_reach_the_task(
    site: MCPSite, cleanup: list[Any]
) -> None:
    made_with, same_client, other_client = await _tokens(
        "carol", "desktop app", "desktop app", "web app"
    )

    def client(raw: str) -> MCPTestClient:
        return MCPTestClient(
            MCPConsumer.as_asgi(site=site), headers={"authorization": f"Bearer {raw}"}
        )

    owner = client(made_with)
    task_id = await waiting_task(owner)
    cleanup.append((owner, task_id))
    # Another token of the same client is the same client: it sees the task.
    assert (await result(client(same_client), "tasks/get", {"taskId": task_id}))[
        "status"
    ] == "input_required"
    await assert_unreachable(client(other_client), owner, task_id)


def token_client(site: MCPSite, raw: str) -> MCPTestClient:
    return MCPTestClient(MCPConsumer.as_asgi(site=site), headers={"authorization": f"Bearer {raw}"})


@sync_to_async
def revoke(raw: str) -> None:
    """Revoke a token as DOT's revocation endpoint does (the row is deleted)."""
    AccessToken.objects.get(token_checksum=hashlib.sha256(raw.encode()).hexdigest()).revoke()


async def narrow(raw: str, scope: str) -> None:
    """Give a token fewer scopes, as a refresh asking for less does."""
    await AccessToken.objects.filter(
        token_checksum=hashlib.sha256(raw.encode()).hexdigest()
    ).aupdate(scope=scope)


async def queued_task(client: MCPTestClient, name: str, arguments: dict[str, Any]) -> str:
    """Call a task tool with the TASKS alias "queued" as the backend (tests/settings.py): the
    row is written and enqueued, and nothing runs it until the test does."""
    with with_mcp(TASKS_BACKEND="queued"):
        created = await result(client, "tools/call", {"name": name, "arguments": arguments})
    assert created["resultType"] == "task" and created["status"] == "working", created
    return str(created["taskId"])


def with_mcp(**extra: Any) -> override_settings:
    """The MCP_DJANGO in force, with ``extra`` keys."""
    return override_settings(MCP_DJANGO={**settings.MCP_DJANGO, **extra})


async def run_as_a_worker(site: MCPSite, task_id: str) -> Task:
    """Run the task from its row as a worker's job would, to its end; the row then."""
    await asyncio.wait_for(taskrun.Runner(site, task_id).run(), 10)
    return await Task.objects.aget(pk=task_id)


@pytest.mark.usefixtures("oauth")
async def test_a_task_whose_token_was_revoked_before_a_worker_claimed_it_fails_without_writing(
    site: MCPSite,
) -> None:
    (raw,) = await _tokens("dave", "desktop app", scope=READ_WRITE)
    task_id = await queued_task(token_client(site, raw), "write_note", {"text": "secret plan"})

    await revoke(raw)
    ended = await run_as_a_worker(site, task_id)

    assert written == []
    assert ended.status == Task.Status.FAILED
    assert ended.error is not None and ended.error["message"] == "authorization revoked"


@pytest.mark.usefixtures("oauth")
async def test_a_task_runs_while_another_live_token_of_its_client_holds_its_scopes(
    site: MCPSite,
) -> None:
    made_with, _refreshed = await _tokens("erin", "desktop app", "desktop app", scope=READ_WRITE)
    task_id = await queued_task(token_client(site, made_with), "write_note", {"text": "kept"})

    await revoke(made_with)  # as a refresh does: the old token goes, the new one holds the scopes
    ended = await run_as_a_worker(site, task_id)

    assert ended.status == Task.Status.COMPLETED, ended.error
    assert written == ["kept"]


@pytest.mark.usefixtures("oauth")
async def test_a_task_whose_clients_live_token_lacks_its_scopes_fails_without_writing(
    site: MCPSite,
) -> None:
    made_with, narrowed = await _tokens("frank", "desktop app", "desktop app", scope=READ_WRITE)
    await narrow(narrowed, "notes:read")
    task_id = await queued_task(token_client(site, made_with), "write_note", {"text": "narrowed"})

    await revoke(made_with)
    ended = await run_as_a_worker(site, task_id)

    assert written == []
    assert (
        ended.status == Task.Status.FAILED
        and ended.error is not None
        and ended.error["message"] == "authorization revoked"
    )


@pytest.mark.usefixtures("oauth")
async def test_a_task_whose_token_expired_before_it_was_claimed_fails_without_writing(
    site: MCPSite,
) -> None:
    (raw,) = await _tokens("gina", "desktop app", scope=READ_WRITE)
    task_id = await queued_task(token_client(site, raw), "write_note", {"text": "late"})

    await AccessToken.objects.filter(user__username="gina").aupdate(
        expires=timezone.now() - timedelta(seconds=1)
    )
    ended = await run_as_a_worker(site, task_id)

    assert written == []
    assert (
        ended.status == Task.Status.FAILED
        and ended.error is not None
        and ended.error["message"] == "authorization revoked"
    )


@pytest.mark.usefixtures("django_auth")
async def test_a_session_task_whose_user_was_deactivated_before_it_was_claimed_fails_without_writing(
    site: MCPSite,
) -> None:
    user = await sync_to_async(make_user)("hank")
    client = MCPTestClient(MCPConsumer.as_asgi(site=site))
    await client.force_login(user)
    task_id = await queued_task(client, "write_note", {"text": "from the session"})

    await type(user)._default_manager.filter(pk=user.pk).aupdate(is_active=False)
    ended = await run_as_a_worker(site, task_id)

    assert written == []
    assert (
        ended.status == Task.Status.FAILED
        and ended.error is not None
        and ended.error["message"] == "authorization revoked"
    )


async def test_a_running_task_whose_token_is_revoked_is_cancelled_at_its_next_heartbeat(
    site: MCPSite,
) -> None:
    (raw,) = await _tokens("ivy", "desktop app", scope=READ_WRITE)
    with oauth_settings(TASK_POLL_INTERVAL_MS=20, TASK_HEARTBEAT_SECONDS=0.05):
        created = await result(
            token_client(site, raw), "tools/call", {"name": "hold_write", "arguments": {}}
        )
        task_id = str(created["taskId"])
        runner = taskrun._local[task_id].future
        assert runner is not None

        async def running() -> bool:
            return holding.get("state") == "running"

        await until(running, failure="the task never started")
        await revoke(raw)
        await asyncio.wait_for(runner, 10)

    ended = await Task.objects.aget(pk=task_id)
    assert holding["state"] == "cancelled"
    assert (
        ended.status == Task.Status.FAILED
        and ended.error is not None
        and ended.error["message"] == "authorization revoked"
    )


@pytest.mark.usefixtures("oauth")
async def test_tasks_update_from_a_token_lacking_the_tools_scopes_answers_403_step_up(
    site: MCPSite, cleanup: list[Any]
) -> None:
    made_with, read_only = await _tokens("jane", "desktop app", "desktop app", scope=READ_WRITE)
    await narrow(read_only, "notes:read")
    owner = token_client(site, made_with)
    created = await result(
        owner, "tools/call", {"name": "confirm_write", "arguments": {"text": "confirmed"}}
    )
    task_id = str(created["taskId"])
    cleanup.append((owner, task_id))

    async def asking() -> bool:
        return (await result(owner, "tasks/get", {"taskId": task_id}))["status"] == "input_required"

    await until(asking, failure="the task never asked")
    body = message("tasks/update", {"taskId": task_id, "inputResponses": CONFIRM})
    response = await token_client(site, read_only).post_raw(orjson.dumps(body), dict(headers(body)))

    assert response.status == 403
    challenge = response.headers.get("www-authenticate", "")
    assert (
        challenge.startswith('Bearer error="insufficient_scope"')
        and "notes:write" in challenge.split('scope="')[1]
    ), challenge
    row = await Task.objects.aget(pk=task_id)
    assert (row.status, row.input_responses) == ("input_required", {})
    assert written == []


@pytest.mark.usefixtures("oauth")
async def test_a_parked_task_whose_token_is_revoked_fails_at_once(site: MCPSite) -> None:
    (raw,) = await _tokens("kate", "desktop app", scope=READ_WRITE)
    task_id = await waiting_task(token_client(site, raw))  # parked: no runner holds it

    await revoke(raw)

    ended = await Task.objects.aget(pk=task_id)
    assert ended.status == Task.Status.FAILED
    assert ended.error is not None and ended.error["message"] == "authorization revoked"
    assert ended.payload == ""


@pytest.mark.usefixtures("oauth")
async def test_a_parked_task_outlives_a_refresh_that_keeps_its_scopes(
    site: MCPSite, cleanup: list[Any]
) -> None:
    made_with, refreshed = await _tokens("liam", "desktop app", "desktop app", scope=READ_WRITE)
    task_id = await waiting_task(token_client(site, made_with))
    cleanup.append((token_client(site, refreshed), task_id))

    await revoke(made_with)  # as a refresh does: the old token goes, the new one holds the scopes

    assert (await Task.objects.aget(pk=task_id)).status == Task.Status.INPUT_REQUIRED


# -- the 2025-11-25 form: the same rules in a handshake-era session ----------------------------


async def handshake_client(site: MCPSite, raw: str) -> MCPTestClient:
    """A 2025-11-25 session of the token ``raw`` (it asks its tasks with params.task)."""
    client = token_client(site, raw)
    await client.initialize(capabilities={"elicitation": {"form": {}}})
    return client


async def handshake_waiting_task(owner: MCPTestClient) -> str:
    created = await owner.call("tools/call", {"name": "ask_first", "arguments": {}, "task": {}})
    task_id = str(created["task"]["taskId"])

    async def asking() -> bool:
        return (await owner.call("tasks/get", {"taskId": task_id}))["status"] == "input_required"

    await until(asking, failure=f"task {task_id} never asked its question")
    return task_id


@pytest.mark.usefixtures("oauth")
async def test_in_the_2025_11_25_form_another_oauth_client_cannot_reach_the_task(
    site: MCPSite,
) -> None:
    made_with, other_client = await _tokens("mona", "desktop app", "web app")
    owner = await handshake_client(site, made_with)
    task_id = await handshake_waiting_task(owner)
    other = await handshake_client(site, other_client)
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        with pytest.raises(JSONRPCErrorResponse) as refused:
            await other.call(method, {"taskId": task_id})
        assert refused.value.response["error"] == {
            "code": -32602,
            "message": "Failed to retrieve task: Task not found",
        }
    assert (await other.call("tasks/list"))["tasks"] == []
    assert [t["taskId"] for t in (await owner.call("tasks/list"))["tasks"]] == [task_id]
    assert (await owner.call("tasks/cancel", {"taskId": task_id}))["status"] == "cancelled"


@pytest.mark.usefixtures("oauth")
async def test_in_the_2025_11_25_form_a_parked_task_whose_token_is_revoked_fails(
    site: MCPSite,
) -> None:
    (raw,) = await _tokens("nina", "desktop app", scope=READ_WRITE)
    task_id = await handshake_waiting_task(await handshake_client(site, raw))

    await revoke(raw)

    ended = await Task.objects.aget(pk=task_id)
    assert ended.status == Task.Status.FAILED
    assert ended.error is not None and ended.error["message"] == "authorization revoked"


@pytest.mark.usefixtures("oauth")
async def test_in_the_2025_11_25_form_tasks_result_needs_the_tools_scopes(site: MCPSite) -> None:
    made_with, read_only = await _tokens("omar", "desktop app", "desktop app", scope=READ_WRITE)
    await narrow(read_only, "notes:read")
    owner = await handshake_client(site, made_with)
    created = await owner.call(
        "tools/call", {"name": "confirm_write", "arguments": {"text": "confirmed"}, "task": {}}
    )
    task_id = str(created["task"]["taskId"])
    narrowed = await handshake_client(site, read_only)
    response = await narrowed.post(
        {"jsonrpc": "2.0", "id": 7, "method": "tasks/result", "params": {"taskId": task_id}}
    )
    assert response.status == 403
    challenge = response.headers.get("www-authenticate", "")
    assert "notes:write" in challenge.split('scope="')[1], challenge
    assert (await owner.call("tasks/cancel", {"taskId": task_id}))["status"] == "cancelled"
    assert written == []
