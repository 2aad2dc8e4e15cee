"""Model tools and admin actions as durable tasks: ``ModelMCP.task_tools`` and
``register_admin(task_actions=...)`` (the 2026-07-28 tasks extension)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_django import ModelMCP
from mcp_django.extensions.tasks import runner as taskrun
from mcp_django.models import Task
from mcp_django.protocol.errors import INVALID_PARAMS
from mcp_django.protocol.modern import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.test_adminsite import NoteAdmin
from tests.testapp.models import Note

MODERN = "2026-07-28"
WITH_TASKS: dict[str, Any] = {"extensions": {taskrun.TASKS_EXTENSION: {}}}


def note_site(**options: Any) -> MCPSite:
    """A site with Note as a model (tools get and update) and through its admin (make_high)."""
    mcp_site = MCPSite(name="task-tools")
    admin_site = admin.AdminSite(name="task-tools-admin")
    admin_site.register(Note, NoteAdmin)
    mcp_site.register_admin(
        admin_site, models=[Note], task_actions=options.pop("task_actions", None)
    )
    attrs = {"tools": ["get", "update"], **options}
    mcp_site.register(Note, type("NoteMCP", (ModelMCP,), attrs))
    return mcp_site


def definition(mcp_site: MCPSite, name: str) -> dict[str, Any]:
    tool = mcp_site.get_tool(name)
    assert tool is not None, name
    return tool.definition()


# -- definitions and configuration ------------------------------------------------------------


def test_task_tools_give_the_named_generated_tools_their_task_support() -> None:
    mcp_site = note_site(task_tools={"update": "required"})
    assert definition(mcp_site, "testapp_note_update")["execution"] == {"taskSupport": "required"}
    assert "execution" not in definition(mcp_site, "testapp_note_get")


def test_task_tools_all_makes_every_generated_tool_optional() -> None:
    mcp_site = note_site(task_tools="__all__")
    assert definition(mcp_site, "testapp_note_get")["execution"] == {"taskSupport": "optional"}
    assert definition(mcp_site, "testapp_note_update")["execution"] == {"taskSupport": "optional"}


def test_task_actions_give_the_named_admin_actions_their_task_support() -> None:
    assert definition(note_site(task_actions={"make_high": "optional"}), "testapp_note_make_high")[
        "execution"
    ] == {"taskSupport": "optional"}
    assert definition(note_site(task_actions="__all__"), "testapp_note_make_high")["execution"] == {
        "taskSupport": "optional"
    }
    assert "execution" not in definition(note_site(), "testapp_note_make_high")


def test_a_task_tools_value_that_is_no_task_support_is_e106() -> None:
    mcp_site = note_site(task_tools={"update": "yes"})
    errors = [e for e in mcp_site.check() if e.id == "mcp_django.E106"]
    assert len(errors) == 1 and "'update'" in errors[0].msg and "'yes'" in errors[0].msg
    assert "execution" not in definition(
        mcp_site, "testapp_note_update"
    )  # called plainly until fixed
    assert [
        e.id for e in note_site(task_tools=["update"]).check() if e.id == "mcp_django.E106"
    ] == ["mcp_django.E106"]


def test_a_task_tools_key_that_is_not_an_offered_tool_is_e107() -> None:
    errors = [
        e for e in note_site(task_tools={"delete": "optional"}).check() if e.id == "mcp_django.E107"
    ]
    assert len(errors) == 1 and "'delete'" in errors[0].msg


@pytest.mark.parametrize("option", [["make_high"], {"make_high": "sometimes"}])
def test_task_actions_of_the_wrong_shape_are_improperly_configured(option: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="task_actions"):
        MCPSite(name="wrong").register_admin(
            admin.AdminSite(name="wrong-admin"), task_actions=option
        )


def test_task_actions_naming_no_action_of_the_bridged_admins_is_w121() -> None:
    warnings = [
        e
        for e in note_site(task_actions={"make_low": "optional"}).check()
        if e.id == "mcp_django.W121"
    ]
    assert len(warnings) == 1 and "'make_low'" in warnings[0].msg
    assert not [
        e
        for e in note_site(task_actions={"make_high": "optional"}).check()
        if e.id == "mcp_django.W121"
    ]


# -- calls --------------------------------------------------------------------------------------


def modern(
    method: str, params: dict[str, Any], capabilities: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """A 2026-07-28 request, and the headers that mirror it."""
    meta = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: capabilities,
        META_CLIENT_INFO: {"name": "tasks", "version": "1"},
    }
    headers: dict[str, str | None] = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    elif method.startswith("tasks/"):
        headers["mcp-name"] = params["taskId"]
    return {**params, "_meta": meta}, headers


async def ask(
    client: MCPTestClient,
    method: str,
    params: dict[str, Any],
    capabilities: dict[str, Any] = WITH_TASKS,
) -> dict[str, Any]:
    sent, headers = modern(method, params, capabilities)
    answer = await client.request(method, sent, headers=headers)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def settled(client: MCPTestClient, task_id: str) -> dict[str, Any]:
    """``tasks/get`` of the task once its runner (in this loop) has ended it."""
    runner = taskrun._local.get(task_id)
    if runner is not None and runner.future is not None:
        await asyncio.wait_for(asyncio.shield(runner.future), 5)
    return await ask(client, "tasks/get", {"taskId": task_id})


async def staff_client(mcp_site: MCPSite) -> tuple[MCPTestClient, Any, Note]:
    user = await sync_to_async(make_user)("clerk", "view_note", "change_note", is_staff=True)
    note = await Note.objects.acreate(owner=user, title="mine")
    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp_site))
    await client.force_login(user)
    return client, user, note


django_auth = override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"})


@pytest.mark.django_db(transaction=True)
async def test_an_admin_action_called_with_the_extension_is_a_task_completing_with_the_actions_answer() -> (
    None
):
    mcp_site = note_site(task_actions={"make_high": "optional"})
    with django_auth:
        client, _, note = await staff_client(mcp_site)
        listed = await ask(client, "tools/list", {})
        created = await ask(
            client,
            "tools/call",
            {"name": "testapp_note_make_high", "arguments": {"pks": [note.pk]}},
        )
        assert (created["resultType"], created["status"]) == ("task", "working")
        task = await settled(client, created["taskId"])
    action = next(t for t in listed["tools"] if t["name"] == "testapp_note_make_high")
    assert action["execution"] == {"taskSupport": "optional"}
    assert task["status"] == "completed"
    assert task["result"]["structuredContent"] == {
        "affected": 1,
        "messages": ["1 notes marked high."],
    }
    await note.arefresh_from_db()
    assert note.priority == "high"
    # Its statusMessage while it ran said how many rows it works on (the row keeps the total).
    assert (await Task.objects.aget(pk=created["taskId"])).total == 1


@pytest.mark.django_db(transaction=True)
async def test_a_generated_tool_called_with_the_extension_is_a_task_completing_with_the_tools_answer() -> (
    None
):
    mcp_site = note_site(task_tools={"update": "optional"})
    with django_auth:
        client, _, note = await staff_client(mcp_site)
        created = await ask(
            client,
            "tools/call",
            {"name": "testapp_note_update", "arguments": {"pk": note.pk, "title": "renamed"}},
        )
        task = await settled(client, created["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["structuredContent"]["title"] == "renamed"
    await note.arefresh_from_db()
    assert note.title == "renamed"


@pytest.mark.django_db(transaction=True)
async def test_the_same_calls_without_the_extension_are_answered_directly() -> None:
    mcp_site = note_site(task_tools={"update": "optional"}, task_actions={"make_high": "optional"})
    with django_auth:
        client, _, note = await staff_client(mcp_site)
        action = await ask(
            client,
            "tools/call",
            {"name": "testapp_note_make_high", "arguments": {"pks": [note.pk]}},
            {},
        )
        update = await ask(
            client,
            "tools/call",
            {"name": "testapp_note_update", "arguments": {"pk": note.pk, "title": "renamed"}},
            {},
        )
    assert (action["resultType"], update["resultType"]) == ("complete", "complete")
    assert action["structuredContent"] == {"affected": 1, "messages": ["1 notes marked high."]}
    assert update["structuredContent"]["title"] == "renamed"


@pytest.mark.django_db(transaction=True)
async def test_a_user_who_lost_the_actions_permission_before_the_task_ran_gets_a_failed_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mcp_site = note_site(task_actions={"make_high": "optional"})
    held: list[tuple[Any, ...]] = []

    async def hold(*args: Any) -> None:
        held.append(args)  # the row is written; the runner starts below, after the revocation

    start = taskrun.start
    monkeypatch.setattr(taskrun, "start", hold)
    with django_auth:
        client, user, note = await staff_client(mcp_site)
        created = await ask(
            client,
            "tools/call",
            {"name": "testapp_note_make_high", "arguments": {"pks": [note.pk]}},
        )
        change = await Permission.objects.aget(
            codename="change_note", content_type__app_label="testapp"
        )
        await sync_to_async(user.user_permissions.remove)(change)
        (args,) = held
        await start(*args)
        task = await settled(client, created["taskId"])
    assert task["status"] == "failed"
    assert task["error"] == {
        "code": INVALID_PARAMS,
        "message": "Unknown tool: testapp_note_make_high",
    }
    await note.arefresh_from_db()
    assert note.priority == "low"
