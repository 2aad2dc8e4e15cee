"""Durable tasks in the admin (read-only, a cancel action that stops a running task) and in the
bus's sweep after dead processes (a task whose process died fails, polled or not)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_django import crypto
from mcp_django.extensions.tasks import runner as taskrun
from mcp_django.extensions.tasks import store as taskstore
from mcp_django.models import Session, Task, ToolCall
from mcp_django.protocol.modern import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)
from mcp_django.registry.sites import MCPSite
from mcp_django.signals import sweeping
from mcp_django.stores import SessionStore
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import make_user

CHANGELIST = "admin:mcp_django_task_changelist"
MODERN = "2026-07-28"
Status = Task.Status


def make_task(tool_name: str = "report", **fields: Any) -> Task:
    """A task row as taskrun.open_task writes it (nothing runs it)."""
    defaults: dict[str, Any] = {
        "site_name": "mcp",
        "user_id": None,
        "owner": "anon",
        "payload": crypto.encrypt("{}"),
    }
    task = taskstore.create(tool_name=tool_name, **{**defaults, **fields})
    return task


def change_url(task: Task) -> str:
    return reverse("admin:mcp_django_task_change", args=[quote(task.pk)])


def cancel(client: Client, *tasks: Task) -> Any:
    return client.post(
        reverse(CHANGELIST),
        {"action": "cancel_tasks", "_selected_action": [t.pk for t in tasks]},
        follow=True,
    )


def texts(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# -- the screens ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_changelist_shows_status_user_client_tool_and_progress(admin_client, admin_user):
    task = make_task("nightly_report", user_id=admin_user.pk, client_id="claude-desktop")
    Task.objects.filter(pk=task.pk).update(progress=3, total=10)
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    content = response.content.decode()
    for shown in (
        "nightly_report",
        "claude-desktop",
        admin_user.username,
        "3 of 10 (30%)",
        "working",
        task.pk[:10],
    ):
        assert shown in content


@pytest.mark.django_db
def test_changelist_filters_by_status_and_searches_by_tool_id_and_username(
    admin_client, admin_user
):
    live = make_task("alpha", user_id=admin_user.pk)
    done = make_task("beta")
    taskstore.finish(done.pk, Status.COMPLETED, result={"content": []})

    def shown(params: dict[str, str]) -> list[str]:
        response = admin_client.get(reverse(CHANGELIST), params)
        assert response.status_code == 200
        return [t.pk for t in response.context["cl"].queryset]

    assert shown({"status__exact": "completed"}) == [done.pk]
    assert shown({"tool_name__exact": "alpha"}) == [live.pk]
    assert shown({"q": "beta"}) == [done.pk]
    assert shown({"q": live.pk}) == [live.pk]
    assert shown({"q": admin_user.username}) == [live.pk]


@pytest.mark.django_db
def test_detail_shows_redacted_arguments_result_text_and_links_to_its_audit_rows(admin_client):
    task = make_task("lookup", arguments={"query": "books", "api_key": "[redacted]"})
    taskstore.finish(
        task.pk,
        Status.COMPLETED,
        result={"content": [{"type": "text", "text": "42 books found"}], "isError": True},
    )
    ToolCall.objects.create(
        started_at=timezone.now(), tool_name="lookup", outcome="ok", duration_ms=1, task_id=task.pk
    )
    ToolCall.objects.create(
        started_at=timezone.now(), tool_name="lookup", outcome="ok", duration_ms=1
    )
    response = admin_client.get(change_url(task))
    assert response.status_code == 200
    content = response.content.decode()
    assert "[redacted]" in content and "books" in content
    assert "42 books found" in content
    assert 'alt="True"' in content  # the tool error flag
    calls_url = reverse("admin:mcp_django_toolcall_changelist") + f"?task_id={task.pk}"
    assert calls_url in content and "1 call in the audit trail" in content
    calls = admin_client.get(calls_url)
    assert calls.status_code == 200
    assert [c.task_id for c in calls.context["cl"].queryset] == [task.pk]


@pytest.mark.django_db
def test_detail_links_to_the_session_when_the_task_has_one(admin_client):
    session = SessionStore().create(
        site_name="mcp",
        user_id=None,
        protocol_version="2025-11-25",
        client_info={},
        capabilities={},
    )
    with_session = make_task(session=Session.objects.get(pk=session.pk))
    content = admin_client.get(change_url(with_session)).content.decode()
    assert reverse("admin:mcp_django_session_change", args=[quote(session.pk)]) in content
    without = admin_client.get(change_url(make_task())).content.decode()
    field = without.split("field-session_link")[1].split("field-tool_name")[0]
    assert "<a " not in field and "-" in field


@pytest.mark.django_db
def test_tool_call_detail_links_to_its_task_and_names_a_deleted_one(admin_client):
    task = make_task()
    linked = ToolCall.objects.create(
        started_at=timezone.now(), tool_name="report", outcome="ok", duration_ms=1, task_id=task.pk
    )
    gone = ToolCall.objects.create(
        started_at=timezone.now(), tool_name="report", outcome="ok", duration_ms=1, task_id="t-gone"
    )
    content = admin_client.get(
        reverse("admin:mcp_django_toolcall_change", args=[linked.pk])
    ).content.decode()
    assert change_url(task) in content
    content = admin_client.get(
        reverse("admin:mcp_django_toolcall_change", args=[gone.pk])
    ).content.decode()
    assert "t-gone (deleted)" in content


@pytest.mark.django_db
def test_tasks_cannot_be_added_or_changed_but_a_superuser_may_delete_them(admin_client):
    task = make_task(status_message="busy")
    assert admin_client.get(reverse("admin:mcp_django_task_add")).status_code == 403
    page = admin_client.get(change_url(task))
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    admin_client.post(change_url(task), {"status": "completed", "status_message": "edited"})
    task.refresh_from_db()
    assert (task.status, task.status_message) == (Status.WORKING, "busy")
    response = admin_client.post(
        reverse("admin:mcp_django_task_delete", args=[quote(task.pk)]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Task.objects.filter(pk=task.pk).exists()


@pytest.mark.django_db
def test_staff_without_the_view_permission_is_refused():
    make_user("clerk", is_staff=True)
    client = Client()
    client.login(username="clerk", password="pw")
    assert client.get(reverse(CHANGELIST)).status_code == 403


@pytest.mark.django_db
def test_staff_who_may_only_view_tasks_cannot_cancel_them():
    make_user("viewer", "view_task", app_label="mcp_django", is_staff=True)
    task = make_task()
    client = Client()
    client.login(username="viewer", password="pw")
    page = client.get(reverse(CHANGELIST))
    assert page.status_code == 200 and "cancel_tasks" not in page.content.decode()
    cancel(client, task)
    task.refresh_from_db()
    assert task.status == Status.WORKING


# -- the cancel action ----------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_action_cancels_live_tasks_and_counts_those_already_ended(admin_client):
    working, waiting, done = make_task(), make_task(), make_task()
    taskstore.park(
        waiting.pk, {"q1": {"method": "elicitation/create", "params": {}}}, {}, {}, lambda cap: {}
    )
    taskstore.finish(done.pk, Status.COMPLETED, result={"content": []})
    response = cancel(admin_client, working, waiting, done)
    assert texts(response) == ["2 tasks cancelled; 1 had already ended."]
    statuses = dict(Task.objects.values_list("pk", "status"))
    assert statuses == {
        working.pk: Status.CANCELLED,
        waiting.pk: Status.CANCELLED,
        done.pk: Status.COMPLETED,
    }
    assert Task.objects.get(pk=waiting.pk).input_requests == {}


def tasks_request(name: str) -> tuple[bytes, dict[str, str | None]]:
    """A 2026-07-28 tools/call from a client that declares the tasks extension."""
    meta = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_INFO: {"name": "t", "version": "1"},
        META_CLIENT_CAPABILITIES: {"extensions": {taskrun.TASKS_EXTENSION: {}}},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": meta},
    }
    return orjson.dumps(message), {
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }


@pytest.mark.django_db(transaction=True)
async def test_cancel_action_stops_a_task_running_in_this_process(
    admin_client, fresh_channel_layer
):
    started, stopped = asyncio.Event(), asyncio.Event()
    mcp = MCPSite(name="tasks-admin")

    @mcp.tool(task="optional")
    async def slow() -> str:
        """Runs until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    response = await MCPTestClient(MCPConsumer.as_asgi(site=mcp)).post_raw(*tasks_request("slow"))
    task_id = response.json()["result"]["taskId"]
    runner = taskrun._local[task_id]
    await asyncio.wait_for(started.wait(), 5)

    task = await Task.objects.aget(pk=task_id)
    answer = await sync_to_async(cancel)(admin_client, task)
    assert texts(answer) == ["1 task cancelled."]
    assert runner.future is not None
    await asyncio.wait_for(runner.future, 5)
    assert stopped.is_set()
    task = await Task.objects.aget(pk=task_id)
    assert (task.status, task.cancel_requested) == (Status.CANCELLED, True)


# -- the sweep after dead processes ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_sweep_fails_a_task_whose_heartbeat_is_old_and_leaves_a_beating_one():
    long_ago = timezone.now() - timedelta(hours=1)
    dead = await sync_to_async(make_task)(heartbeat_at=long_ago, worker="gone:1")
    alive = await sync_to_async(make_task)(heartbeat_at=timezone.now(), worker="here:1")
    await sweeping.asend(sender=None)
    dead = await Task.objects.aget(pk=dead.pk)
    assert dead.status == Status.FAILED
    assert dead.error is not None and "stopped" in dead.error["message"]
    assert (await Task.objects.aget(pk=alive.pk)).status == Status.WORKING
