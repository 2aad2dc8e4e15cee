"""register_admin(): an admin site's models, permissions and actions over MCP."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.http import HttpResponse

from mcp_django.protocol.errors import INVALID_PARAMS
from mcp_django.registry.admin_bridge import AdminModelMCP
from mcp_django.registry.sites import MCPSite
from tests.testapp.models import Note


class NoteAdmin(admin.ModelAdmin):
    list_display = ["title", "priority"]
    search_fields = ["title"]
    actions = ["make_high", "export_csv"]

    @admin.action(description="Mark as high priority", permissions=["change"])
    def make_high(self, request: Any, queryset: Any) -> None:
        updated = queryset.update(priority="high")
        self.message_user(request, f"{updated} notes marked high.")

    @admin.action(description="Export as CSV")
    def export_csv(self, request: Any, queryset: Any) -> HttpResponse:
        return HttpResponse("title\n", content_type="text/csv")

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).filter(owner=request.user)


def _sites(**options: Any) -> tuple[admin.AdminSite, MCPSite]:
    admin_site = admin.AdminSite(name="test-admin")
    admin_site.register(Note, NoteAdmin)
    mcp_site = MCPSite(name="admin-mcp")
    mcp_site.register_admin(admin_site, **options)
    return admin_site, mcp_site


def _request(user: User) -> Any:
    from django.test import RequestFactory

    request = RequestFactory().post("/mcp")
    request.user = user
    return request


def _user(username: str, *codenames: str, is_staff: bool = True) -> User:
    """A user the admin site lets in (unless ``is_staff=False``), holding these permissions."""
    user = User.objects.create_user(username, password="pw", is_staff=is_staff)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="testapp")
        )
    return User.objects.get(pk=user.pk)


def test_admin_actions_become_tools_named_after_app_model_and_action() -> None:
    _, mcp_site = _sites()
    names = [t.name for t in mcp_site.get_tools()]
    assert "testapp_note_make_high" in names
    assert "testapp_note_delete_selected" not in names  # only when opted in
    assert "testapp_note_search" in names and "testapp_note_get" in names


def test_delete_selected_is_exposed_only_when_opted_in() -> None:
    _, mcp_site = _sites(include_delete_selected=True)
    tool = mcp_site.get_tool("testapp_note_delete_selected")
    assert tool is not None and tool.annotations["destructiveHint"] is True


def test_action_answering_with_a_response_is_reported_at_check_time() -> None:
    _, mcp_site = _sites()
    assert mcp_site.get_tool("testapp_note_export_csv") is None
    warnings = [e for e in mcp_site.check() if e.id == "mcp_django.W101"]
    assert len(warnings) == 1 and "export_csv" in warnings[0].msg


def test_model_admin_fields_search_and_queryset_are_reused() -> None:
    _, mcp_site = _sites()
    model_mcp = mcp_site.get_model_mcp(Note)
    assert model_mcp.fields == ["title", "priority"]
    assert model_mcp.search_fields == ("title",)


def test_an_expression_in_the_admin_ordering_is_left_out_of_the_search_orderings() -> None:
    # ModelAdmin.ordering may hold expressions; they have no name a client could pass, and as
    # enum values they made tools/list unserialisable.
    from django.db.models import F

    from mcp_django.protocol.jsonrpc import encode

    class OrderedNoteAdmin(NoteAdmin):
        ordering = [F("priority").desc(), "title"]

    admin_site = admin.AdminSite(name="ordered-admin")
    admin_site.register(Note, OrderedNoteAdmin)
    mcp_site = MCPSite(name="ordered-mcp")
    mcp_site.register_admin(admin_site)
    assert mcp_site.get_model_mcp(Note).ordering == ("title",)
    search = mcp_site.get_tool("testapp_note_search")
    assert search is not None
    assert search.definition()["inputSchema"]["properties"]["ordering"]["enum"] == ["title"]
    encode(search.definition())


@pytest.mark.django_db
def test_action_runs_on_the_users_rows_with_the_admin_permission() -> None:
    _, mcp_site = _sites()
    editor = _user("editor", "view_note", "change_note")
    stranger = _user("stranger", "view_note", "change_note")
    mine = Note.objects.create(owner=editor, title="mine")
    theirs = Note.objects.create(owner=stranger, title="theirs")
    tool = mcp_site.get_tool("testapp_note_make_high")
    result = tool._call({"pks": [mine.pk, theirs.pk]}, _request(editor))
    assert result["structuredContent"] == {"affected": 1, "messages": ["1 notes marked high."]}
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert (mine.priority, theirs.priority) == ("high", "low")


@pytest.mark.django_db
def test_action_is_hidden_and_refused_without_its_permission() -> None:
    from mcp_django.protocol.errors import InvalidParamsError

    _, mcp_site = _sites()
    reader = _user("reader", "view_note")
    note = Note.objects.create(owner=reader, title="n")
    tool = mcp_site.get_tool("testapp_note_make_high")
    assert not tool.is_visible(_request(reader))
    with pytest.raises(InvalidParamsError) as exc:
        tool._call({"pks": [note.pk]}, _request(reader))
    assert exc.value.code == INVALID_PARAMS


@pytest.mark.django_db
def test_delete_selected_writes_the_admin_history() -> None:
    _, mcp_site = _sites(include_delete_selected=True)
    user = _user("deleter", "view_note", "delete_note")
    note = Note.objects.create(owner=user, title="doomed")
    result = mcp_site.get_tool("testapp_note_delete_selected")._call(
        {"pks": [note.pk]}, _request(user)
    )
    assert result["structuredContent"]["affected"] == 1
    assert not Note.objects.filter(pk=note.pk).exists()
    assert LogEntry.objects.filter(object_id=str(note.pk), action_flag=3).exists()


@pytest.mark.django_db
def test_admin_model_rows_follow_the_model_admin_queryset() -> None:
    _, mcp_site = _sites()
    user = _user("lister", "view_note")
    other = _user("other", "view_note")
    Note.objects.create(owner=user, title="visible")
    Note.objects.create(owner=other, title="hidden")
    page = mcp_site.get_model_mcp(Note).list_page(_request(user), None, 10)
    assert [d["name"] for _pk, d in page] == ["visible"]


@pytest.mark.django_db
def test_action_without_allowed_permissions_still_needs_the_changelist_permission() -> None:
    class OpenActionAdmin(NoteAdmin):
        actions = ["touch"]

        @admin.action(description="Touch")
        def touch(self, request: Any, queryset: Any) -> None:
            queryset.update(body="touched")

    admin_site = admin.AdminSite(name="open-admin")
    admin_site.register(Note, OpenActionAdmin)
    mcp_site = MCPSite(name="open-mcp")
    mcp_site.register_admin(admin_site)
    tool = mcp_site.get_tool("testapp_note_touch")
    assert not tool.is_visible(_request(_user("nobody")))
    assert tool.is_visible(_request(_user("viewer", "view_note")))


# --- what the bridge exposes by default ---------------------------------------------------


def test_register_admin_never_exposes_mcp_django_models_and_leaves_credentials_out_by_default() -> (
    None
):
    from django.contrib.auth.models import Group
    from django.contrib.sessions.models import Session as DjangoSession
    from oauth2_provider.models import AccessToken, Application

    from mcp_django.models import Event, Session

    mcp_site = MCPSite(name="default-admin-mcp")
    mcp_site.register_admin(admin.site)  # mcp_django/admin.py and oauth2_provider register here
    exposed = {m.model for m in mcp_site.get_model_mcps()}
    assert Session in admin.site._registry and AccessToken in admin.site._registry
    assert not exposed & {
        Session,
        Event,
        User,
        Group,
        Permission,
        DjangoSession,
        AccessToken,
        Application,
    }
    assert not [
        t
        for t in mcp_site.get_tools()
        if t.name.startswith(("mcp_django_", "oauth2_provider_", "auth_"))
    ]


def test_credential_models_are_exposed_when_named_in_models() -> None:
    admin_site = admin.AdminSite(name="users-admin")
    admin_site.register(User)
    admin_site.register(Note, NoteAdmin)
    mcp_site = MCPSite(name="users-mcp")
    mcp_site.register_admin(admin_site, models=[User, "testapp.Note"])
    assert {m.model for m in mcp_site.get_model_mcps()} == {User, Note}


@pytest.mark.parametrize("named", ["mcp_django.Session", "mcp_django.event", "model"])
def test_naming_an_mcp_django_model_in_models_is_improperly_configured(named: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from mcp_django.models import Event

    with pytest.raises(ImproperlyConfigured):
        MCPSite(name="refused").register_admin(
            admin.site, models=[Event if named == "model" else named]
        )


def test_registering_an_mcp_django_model_directly_is_improperly_configured() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from mcp_django.models import Event

    with pytest.raises(ImproperlyConfigured):
        MCPSite(name="refused").register(Event)


def test_a_model_named_in_models_but_not_on_the_admin_site_is_a_check_warning() -> None:
    _, mcp_site = _sites(models=[Note, "testapp.missing"])
    warnings = [e for e in mcp_site.check() if e.id == "mcp_django.W120"]
    assert len(warnings) == 1 and "testapp.missing" in warnings[0].msg


# --- registration order ---------------------------------------------------------------------


def test_an_explicit_registration_after_register_admin_replaces_the_bridge_entry() -> None:
    from mcp_django.registry.options import ModelMCP

    class NoteMCP(ModelMCP):
        tools = ("search", "get", "create")

    _, mcp_site = _sites()
    mcp_site.register(Note, NoteMCP)
    assert type(mcp_site.get_model_mcp(Note)) is NoteMCP
    names = {t.name for t in mcp_site.get_tools()}
    assert {"testapp_note_create", "testapp_note_make_high"} <= names


def test_an_explicit_registration_before_register_admin_is_kept_and_actions_are_added() -> None:
    from mcp_django.registry.options import ModelMCP

    admin_site = admin.AdminSite(name="order-admin")
    admin_site.register(Note, NoteAdmin)
    mcp_site = MCPSite(name="order-mcp")

    @mcp_site.register(Note)
    class NoteMCP(ModelMCP):
        tools = ("search", "get", "create")

    mcp_site.register_admin(admin_site)
    assert type(mcp_site.get_model_mcp(Note)) is NoteMCP
    assert mcp_site.get_tool("testapp_note_make_high") is not None


def test_models_registered_on_the_admin_site_after_register_admin_are_exposed() -> None:
    # mcp_django before django.contrib.admin in INSTALLED_APPS: mcp.py runs on an empty admin site.
    admin_site = admin.AdminSite(name="late-admin")
    mcp_site = MCPSite(name="late-mcp")
    mcp_site.register_admin(admin_site)
    assert mcp_site.get_capabilities().get("tools") is None
    assert "tools/call" not in mcp_site.get_handlers()
    admin_site.register(Note, NoteAdmin)
    assert isinstance(mcp_site.get_model_mcp(Note), AdminModelMCP)
    assert "tools/call" in mcp_site.get_handlers() and "resources" in mcp_site.get_capabilities()
    assert mcp_site.get_tool("testapp_note_make_high") is not None
    assert [e.id for e in mcp_site.check() if e.id == "mcp_django.W101"] == ["mcp_django.W101"]


def test_an_admin_action_clashing_with_a_tool_name_is_a_check_error_not_an_exception() -> None:
    admin_site = admin.AdminSite(name="clash-admin")
    mcp_site = MCPSite(name="clash-mcp")
    mcp_site.tool(name="testapp_note_make_high")(lambda: "mine")
    mcp_site.register_admin(admin_site)
    admin_site.register(Note, NoteAdmin)
    assert mcp_site.get_tool("testapp_note_make_high").func() == "mine"
    assert [e.id for e in mcp_site.check() if e.id == "mcp_django.E120"] == ["mcp_django.E120"]


def test_admin_models_are_exposed_when_mcp_django_comes_before_the_admin_in_installed_apps() -> (
    None
):
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import django; django.setup()\n"
        "from django.conf import settings; from mcp_django import site\n"
        "assert settings.INSTALLED_APPS.index('mcp_django') < settings.INSTALLED_APPS.index('django.contrib.admin')\n"
        "print(site.get_tool('testapp_note_touch') is not None, sorted(m.opts.label for m in site.get_model_mcps()))\n"
    )
    env = {**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "tests.settings_mcp_before_admin"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True ['testapp.Note']"


def test_applying_the_bridge_announces_only_admin_registrations_made_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_django.server import notifications

    submitted: list[Any] = []
    monkeypatch.setattr(
        notifications, "schedule", lambda key, function, args, item=None: submitted.append(args[1:])
    )
    admin_site = admin.AdminSite(name="news-admin")
    admin_site.register(User)
    mcp_site = MCPSite(name="news-mcp")
    mcp_site.serving = True  # the first request arrives before the bridge was applied
    mcp_site.register_admin(admin_site)
    mcp_site.get_tools()
    assert submitted == []
    admin_site.register(Note, NoteAdmin)
    mcp_site.get_tools()
    assert sorted(submitted) == [("prompts",), ("resources",), ("tools",)]


# --- who the admin site lets in ---------------------------------------------------------------


def _client(mcp_site: MCPSite) -> Any:
    from mcp_django.testing import MCPTestClient
    from mcp_django.transport.consumers import MCPConsumer

    return MCPTestClient(MCPConsumer.as_asgi(site=mcp_site))


async def _bridge_entries_seen_and_used_by(user: User, note: Note) -> dict[str, Any]:
    """Everything of the bridge a user lists, and how its tools, rows and template answer."""
    mcp_site = _sites()[1]
    client = _client(mcp_site)
    await client.force_login(user)
    await client.initialize()
    template = "django://testapp/note/{pk}"
    seen: dict[str, Any] = {
        "tools": sorted(
            t["name"]
            for t in (await client.call("tools/list"))["tools"]
            if t["name"].startswith("testapp_note_")
        ),
        "templates": [
            t["uriTemplate"]
            for t in (await client.call("resources/templates/list"))["resourceTemplates"]
        ],
        "rows": [r["uri"] for r in (await client.call("resources/list"))["resources"]],
    }
    calls = {
        "get": ("tools/call", {"name": "testapp_note_get", "arguments": {"pk": note.pk}}),
        "action": (
            "tools/call",
            {"name": "testapp_note_make_high", "arguments": {"pks": [note.pk]}},
        ),
        "read": ("resources/read", {"uri": f"django://testapp/note/{note.pk}"}),
        "complete": (
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": template},
                "argument": {"name": "pk", "value": ""},
            },
        ),
    }
    for key, (method, params) in calls.items():
        answer = await client.request(method, params)
        seen[key] = answer.get("error") or answer["result"]
    return seen


@pytest.mark.django_db(transaction=True)
async def test_a_user_the_admin_site_does_not_let_in_sees_and_uses_none_of_the_bridge_entries() -> (
    None
):
    from asgiref.sync import sync_to_async
    from django.test import override_settings

    from mcp_django.protocol.errors import RESOURCE_NOT_FOUND
    from tests.conftest import BASE_SETTINGS

    # The view and change permissions, but not staff: Django's admin would not let them log in.
    user = await sync_to_async(_user)("clerk", "view_note", "change_note", is_staff=False)
    note = await Note.objects.acreate(owner=user, title="mine")
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        seen = await _bridge_entries_seen_and_used_by(user, note)
    assert (seen["tools"], seen["templates"], seen["rows"]) == ([], [], [])
    # Each answers as for a name that does not exist, like any entry the gate hides.
    assert (seen["get"]["code"], seen["get"]["message"]) == (
        INVALID_PARAMS,
        "Unknown tool: testapp_note_get",
    )
    assert (seen["action"]["code"], seen["action"]["message"]) == (
        INVALID_PARAMS,
        "Unknown tool: testapp_note_make_high",
    )
    assert seen["read"]["code"] == RESOURCE_NOT_FOUND
    assert seen["complete"]["code"] == INVALID_PARAMS
    await note.arefresh_from_db()
    assert note.priority == "low"


@pytest.mark.django_db(transaction=True)
async def test_a_staff_user_with_the_same_permissions_sees_and_uses_the_bridge_entries() -> None:
    from asgiref.sync import sync_to_async
    from django.test import override_settings

    from tests.conftest import BASE_SETTINGS

    user = await sync_to_async(_user)("clerk", "view_note", "change_note")
    note = await Note.objects.acreate(owner=user, title="mine")
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        seen = await _bridge_entries_seen_and_used_by(user, note)
    assert seen["tools"] == ["testapp_note_get", "testapp_note_make_high", "testapp_note_search"]
    assert seen["templates"] == ["django://testapp/note/{pk}"] and seen["rows"] == [
        f"django://testapp/note/{note.pk}"
    ]
    assert seen["get"]["structuredContent"]["title"] == "mine"
    assert seen["action"]["structuredContent"] == {
        "affected": 1,
        "messages": ["1 notes marked high."],
    }
    assert '"mine"' in seen["read"]["contents"][0]["text"]
    assert seen["complete"]["completion"]["values"] == [str(note.pk)]


class DeskAdminSite(admin.AdminSite):
    """An admin site for the front desk: its group, staff or not, and no one else."""

    def has_permission(self, request: Any) -> bool:
        return bool(request.user.is_active and request.user.groups.filter(name="desk").exists())


@pytest.mark.django_db
def test_an_admin_site_overriding_has_permission_decides_who_sees_the_bridge_entries() -> None:
    from django.contrib.auth.models import Group

    from mcp_django.server.entries import Access, gate

    admin_site = DeskAdminSite(name="desk-admin")
    admin_site.register(Note, NoteAdmin)
    mcp_site = MCPSite(name="desk-mcp")
    mcp_site.register_admin(admin_site)
    volunteer = _user("volunteer", "view_note", "change_note", is_staff=False)
    volunteer.groups.add(Group.objects.create(name="desk"))
    staff = _user("staff", "view_note", "change_note")
    note = Note.objects.create(owner=volunteer, title="desk note")
    model_mcp = mcp_site.get_model_mcp(Note)
    entries = [
        model_mcp,
        mcp_site.get_tool("testapp_note_get"),
        mcp_site.get_tool("testapp_note_make_high"),
    ]
    assert [gate(e, _request(volunteer)) for e in entries] == [Access.VISIBLE] * 3
    assert [gate(e, _request(staff)) for e in entries] == [Access.HIDDEN] * 3
    assert model_mcp.get_object(_request(volunteer), note.pk) == note
    assert model_mcp.complete_pk(_request(staff), "") == []


# --- primary keys: their schema, and malformed ones ---------------------------------------------


class TicketAdmin(admin.ModelAdmin):
    actions = ["close"]

    @admin.action(description="Close", permissions=["change"])
    def close(self, request: Any, queryset: Any) -> None:
        queryset.update(done=True)


def _ticket_site() -> MCPSite:
    from tests.testapp.models import Ticket

    admin_site = admin.AdminSite(name="ticket-admin")
    admin_site.register(Ticket, TicketAdmin)
    mcp_site = MCPSite(name="ticket-mcp")
    mcp_site.register_admin(admin_site)
    return mcp_site


def test_admin_action_and_model_tools_give_a_uuid_key_its_type_and_format() -> None:
    mcp_site = _ticket_site()
    action, get = mcp_site.get_tool("testapp_ticket_close"), mcp_site.get_tool("testapp_ticket_get")
    assert action.input_schema["properties"]["pks"]["items"] == {"type": "string", "format": "uuid"}
    assert get.input_schema["properties"]["pk"] == {
        "type": "string",
        "format": "uuid",
        "description": "Primary key of the ticket.",
    }
    _, note_site = _sites()
    assert note_site.get_tool("testapp_note_make_high").input_schema["properties"]["pks"][
        "items"
    ] == {"type": "integer"}


@pytest.mark.django_db(transaction=True)
async def test_a_malformed_key_is_an_invalid_argument_of_the_action_and_of_the_model_tools() -> (
    None
):
    from asgiref.sync import sync_to_async
    from django.test import override_settings

    from tests.conftest import BASE_SETTINGS
    from tests.testapp.models import Ticket

    user = await sync_to_async(_user)("desk", "view_ticket", "change_ticket")
    ticket = await Ticket.objects.acreate(title="printer")
    client = _client(_ticket_site())
    await client.force_login(user)
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        await client.initialize()
        action = await client.request(
            "tools/call",
            {"name": "testapp_ticket_close", "arguments": {"pks": [str(ticket.pk), "not-a-uuid"]}},
        )
        get = await client.request(
            "tools/call", {"name": "testapp_ticket_get", "arguments": {"pk": "not-a-uuid"}}
        )
        await ticket.arefresh_from_db()
        assert not ticket.done  # the refused call ran on no row, not even the good key's
        closed = await client.call_tool("testapp_ticket_close", {"pks": [str(ticket.pk)]})
    # A tool error naming the bad key, like any argument the schema refuses; not -32603.
    assert "error" not in action and action["result"]["isError"] is True
    assert (
        action["result"]["content"][0]["text"]
        == "Invalid arguments:\npks.1: “not-a-uuid” is not a valid UUID."
    )
    assert "error" not in get and get["result"]["isError"] is True
    assert (
        get["result"]["content"][0]["text"]
        == "Invalid arguments:\npk: “not-a-uuid” is not a valid UUID."
    )
    assert closed["structuredContent"]["affected"] == 1
    await ticket.arefresh_from_db()
    assert ticket.done


# --- one bridge per model of an admin site ------------------------------------------------------


def test_register_admin_twice_with_the_same_admin_site_raises_already_registered_naming_it() -> (
    None
):
    from mcp_django.exceptions import AlreadyRegistered

    admin_site, mcp_site = _sites()
    with pytest.raises(
        AlreadyRegistered,
        match=r"The admin site 'test-admin' is already registered on MCPSite\(name='admin-mcp'\)",
    ):
        mcp_site.register_admin(admin_site)
    with pytest.raises(AlreadyRegistered, match="register_admin\\(\\) was called twice"):
        mcp_site.register_admin(admin_site, actions=False)
    assert "mcp_django.E120" not in {e.id for e in mcp_site.check()}
    assert mcp_site.get_tool("testapp_note_make_high") is not None  # the first call stands


def test_register_admin_naming_a_model_an_earlier_call_names_raises_already_registered() -> None:
    from mcp_django.exceptions import AlreadyRegistered

    admin_site, mcp_site = _sites(models=[Note])
    with pytest.raises(
        AlreadyRegistered, match=r"'test-admin' is already registered .* for testapp\.note:"
    ):
        mcp_site.register_admin(
            admin_site, models=["testapp.Note"], tools=("search", "get", "update")
        )


def test_register_admin_calls_of_one_admin_site_may_share_its_models_out() -> None:
    # One admin site, each model bridged once with its own options: Ticket writable, the rest not.
    from tests.testapp.models import Ticket

    admin_site = admin.AdminSite(name="shared-admin")
    mcp_site = MCPSite(name="shared-mcp")
    mcp_site.register_admin(admin_site)  # the rest, whatever the admin site registers later
    mcp_site.register_admin(admin_site, models=[Ticket], tools=("search", "get", "update"))
    admin_site.register(Note, NoteAdmin)
    admin_site.register(Ticket, TicketAdmin)
    names = {t.name for t in mcp_site.get_tools()}
    assert {
        "testapp_ticket_update",
        "testapp_ticket_close",
        "testapp_note_get",
        "testapp_note_make_high",
    } <= names
    assert "testapp_note_update" not in names
    assert [e.id for e in mcp_site.check() if e.id == "mcp_django.E120"] == []


def test_a_call_without_models_that_already_exposed_a_model_keeps_it() -> None:
    from mcp_django.exceptions import AlreadyRegistered

    admin_site, mcp_site = _sites()
    with pytest.raises(
        AlreadyRegistered, match=r"for testapp\.note: register_admin\(\) was called twice"
    ):
        mcp_site.register_admin(admin_site, models=[Note], tools=("search", "get", "update"))


def test_the_same_model_and_action_on_two_bridged_admin_sites_is_e120_naming_the_other_admin_site() -> (
    None
):
    _, mcp_site = _sites()
    second = admin.AdminSite(name="second-admin")
    second.register(Note, NoteAdmin)
    mcp_site.register_admin(second)
    errors = [e for e in mcp_site.check() if e.id == "mcp_django.E120"]
    assert len(errors) == 1 and "testapp_note_make_high" in errors[0].msg
    assert (
        "'test-admin'" in errors[0].hint
        and "models=" in errors[0].hint
        and "Rename" not in errors[0].hint
    )


# --- which rows an admin action acts on (issue 42) -----------------------------------------


class OpenNoteAdmin(NoteAdmin):
    """The admin lets staff act on every note (no get_queryset of its own)."""

    def get_queryset(self, request: Any) -> Any:
        return admin.ModelAdmin.get_queryset(self, request)


def _owner_only_site(**options: Any) -> MCPSite:
    from mcp_django.registry.options import ModelMCP

    admin_site = admin.AdminSite(name="open-notes-admin")
    admin_site.register(Note, OpenNoteAdmin)
    mcp_site = MCPSite(name="owner-notes-mcp")

    @mcp_site.register(Note)
    class OwnNotesMCP(ModelMCP):
        def get_queryset(self, request: Any) -> Any:
            return Note.objects.filter(owner=request.user)

    mcp_site.register_admin(admin_site, **options)
    return mcp_site


@pytest.mark.django_db
def test_an_admin_action_acts_on_the_model_admin_rows_by_default() -> None:
    mcp_site = _owner_only_site()
    editor = _user("editor", "view_note", "change_note")
    theirs = Note.objects.create(owner=_user("owner"), title="theirs")
    result = mcp_site.get_tool("testapp_note_make_high")._call(
        {"pks": [theirs.pk]}, _request(editor)
    )
    assert result["structuredContent"]["affected"] == 1


@pytest.mark.django_db
def test_with_action_rows_model_mcp_an_action_skips_rows_the_model_mcp_hides() -> None:
    mcp_site = _owner_only_site(action_rows="model_mcp")
    editor = _user("editor", "view_note", "change_note")
    mine = Note.objects.create(owner=editor, title="mine")
    theirs = Note.objects.create(owner=_user("owner"), title="theirs")
    tool = mcp_site.get_tool("testapp_note_make_high")
    result = tool._call({"pks": [mine.pk, theirs.pk]}, _request(editor))
    assert result["structuredContent"] == {"affected": 1, "messages": ["1 notes marked high."]}
    theirs.refresh_from_db()
    assert theirs.priority == "low"


@pytest.mark.django_db
def test_a_row_the_model_mcp_hides_answers_as_a_key_that_does_not_exist() -> None:
    mcp_site = _owner_only_site(action_rows="model_mcp")
    editor = _user("editor", "view_note", "change_note")
    theirs = Note.objects.create(owner=_user("owner"), title="theirs")
    tool = mcp_site.get_tool("testapp_note_make_high")
    hidden = tool._call({"pks": [theirs.pk]}, _request(editor))
    missing = tool._call({"pks": [theirs.pk + 1000]}, _request(editor))
    assert hidden == missing and hidden["isError"] is True


def test_action_rows_takes_admin_or_model_mcp_only() -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="action_rows"):
        MCPSite(name="rows-mcp").register_admin(
            admin.AdminSite(name="rows-admin"), action_rows="modelmcp"
        )


def test_actions_on_admin_rows_of_a_model_whose_model_mcp_chooses_its_rows_is_w230() -> None:
    warnings = [e for e in _owner_only_site().check() if e.id == "mcp_django.W230"]
    assert len(warnings) == 1
    assert "get_queryset" in warnings[0].msg and 'action_rows="model_mcp"' in warnings[0].hint


def test_w230_is_quiet_when_actions_follow_the_model_mcp_or_it_keeps_the_defaults() -> None:
    from mcp_django.registry.options import ModelMCP

    assert not [
        e for e in _owner_only_site(action_rows="model_mcp").check() if e.id == "mcp_django.W230"
    ]
    admin_site = admin.AdminSite(name="plain-notes-admin")
    admin_site.register(Note, OpenNoteAdmin)
    mcp_site = MCPSite(name="plain-notes-mcp")
    mcp_site.register(Note, ModelMCP)
    mcp_site.register_admin(admin_site)
    assert not [e for e in mcp_site.check() if e.id == "mcp_django.W230"]


# --- choosing the actions of a ModelAdmin (issue 42) ----------------------------------------


def _one_admin_site(model_admin_class: type[admin.ModelAdmin], **options: Any) -> MCPSite:
    admin_site = admin.AdminSite(name="choice-admin")
    admin_site.register(Note, model_admin_class)
    mcp_site = MCPSite(name="choice-mcp")
    mcp_site.register_admin(admin_site, **options)
    return mcp_site


def test_mcp_actions_on_a_model_admin_exposes_only_the_actions_it_names_and_silences_w101() -> None:
    class ChosenAdmin(NoteAdmin):
        mcp_actions = ["make_high"]

    mcp_site = _one_admin_site(ChosenAdmin)
    assert mcp_site.get_tool("testapp_note_make_high") is not None
    assert not [e for e in mcp_site.check() if e.id == "mcp_django.W101"]


def test_mcp_actions_leaving_an_action_out_hides_its_tool() -> None:
    class NoneChosenAdmin(NoteAdmin):
        mcp_actions: list[str] = []

    assert _one_admin_site(NoneChosenAdmin).get_tool("testapp_note_make_high") is None


def test_an_action_marked_expose_false_is_left_out_of_the_bridge_and_not_reported() -> None:
    from mcp_django import mcp_action

    class MarkedAdmin(NoteAdmin):
        @admin.action(description="Export as CSV")
        @mcp_action(expose=False)
        def export_csv(self, request: Any, queryset: Any) -> HttpResponse:
            return HttpResponse("title\n", content_type="text/csv")

    mcp_site = _one_admin_site(MarkedAdmin)
    assert mcp_site.get_tool("testapp_note_export_csv") is None
    assert mcp_site.get_tool("testapp_note_make_high") is not None
    assert not [e for e in mcp_site.check() if e.id == "mcp_django.W101"]


def test_a_site_wide_action_marked_expose_false_is_left_out_of_every_model_admin() -> None:
    from mcp_django import mcp_action

    @mcp_action(expose=False)
    def archive(modeladmin: Any, request: Any, queryset: Any) -> None:
        queryset.update(body="archived")

    admin_site = admin.AdminSite(name="wide-admin")
    admin_site.add_action(archive)
    admin_site.register(Note, NoteAdmin)
    mcp_site = MCPSite(name="wide-mcp")
    mcp_site.register_admin(admin_site)
    assert mcp_site.get_tool("testapp_note_archive") is None


def test_mcp_actions_naming_an_action_the_model_admin_does_not_offer_is_w231() -> None:
    class TypoAdmin(NoteAdmin):
        mcp_actions = ["make_high", "make_hihg"]

    warnings = [e for e in _one_admin_site(TypoAdmin).check() if e.id == "mcp_django.W231"]
    assert len(warnings) == 1 and "make_hihg" in warnings[0].msg


def test_mcp_actions_that_is_not_a_list_of_names_is_e230_and_exposes_no_action() -> None:
    class StringAdmin(NoteAdmin):
        mcp_actions = "make_high"

    mcp_site = _one_admin_site(StringAdmin)
    assert mcp_site.get_tool("testapp_note_make_high") is None
    assert [e.id for e in mcp_site.check() if e.id.startswith("mcp_django.E23")] == [
        "mcp_django.E230"
    ]


# --- what an admin action tool claims about itself (issue 42) ------------------------------


def test_an_admin_action_is_announced_destructive_with_no_open_world_claim_by_default() -> None:
    _, mcp_site = _sites()
    annotations = mcp_site.get_tool("testapp_note_make_high").definition()["annotations"]
    assert annotations == {"readOnlyHint": False, "destructiveHint": True}


def test_an_admin_action_declared_with_mcp_action_is_announced_as_declared() -> None:
    from mcp_django import mcp_action

    class DeclaredAdmin(NoteAdmin):
        actions = ["make_high", "notify"]

        @admin.action(description="Mark as high priority", permissions=["change"])
        @mcp_action(destructive=False, open_world=False)
        def make_high(self, request: Any, queryset: Any) -> None:
            queryset.update(priority="high")

        @admin.action(description="Notify the owners")
        @mcp_action(open_world=True)
        def notify(self, request: Any, queryset: Any) -> None:
            pass

    mcp_site = _one_admin_site(DeclaredAdmin)
    assert mcp_site.get_tool("testapp_note_make_high").definition()["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "openWorldHint": False,
    }
    assert mcp_site.get_tool("testapp_note_notify").definition()["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "openWorldHint": True,
    }


def test_a_plain_attribute_on_the_action_function_declares_it_too() -> None:
    def archive(modeladmin: Any, request: Any, queryset: Any) -> None:
        queryset.update(body="archived")

    archive.mcp_destructive = False  # type: ignore[attr-defined]
    archive.mcp_open_world = True  # type: ignore[attr-defined]  # it calls another service
    admin_site = admin.AdminSite(name="attr-admin")
    admin_site.add_action(archive)
    admin_site.register(Note, NoteAdmin)
    mcp_site = MCPSite(name="attr-mcp")
    mcp_site.register_admin(admin_site)
    assert mcp_site.get_tool("testapp_note_archive").definition()["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "openWorldHint": True,
    }


def test_delete_selected_stays_destructive_and_closed_world() -> None:
    _, mcp_site = _sites(include_delete_selected=True)
    annotations = mcp_site.get_tool("testapp_note_delete_selected").definition()["annotations"]
    assert annotations == {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}


# --- callable list_display columns (issue 42) -------------------------------------------------


def owner_name(obj: Note) -> str:
    return obj.owner.get_username()


owner_name.short_description = "Owner"  # type: ignore[attr-defined]  # the pre-@admin.display way


def body(obj: Note) -> str:
    """A display named like a field of the model: rows carry the field under that name."""
    return obj.body.upper()


class ShowcaseNoteAdmin(admin.ModelAdmin):
    list_display = [
        "title",
        "title_length",
        "is_high",
        owner_name,
        "get_priority_display",
        "checked_on",
        "__str__",
        lambda obj: obj.title,
        body,
    ]

    def get_queryset(self, request: Any) -> Any:
        from django.db.models.functions import Length

        return super().get_queryset(request).annotate(title_len=Length("title"))

    @admin.display(description="Title length", ordering="title_len")
    def title_length(self, obj: Note) -> int:
        return obj.title_len  # type: ignore[attr-defined]  # the queryset's annotation

    @admin.display(boolean=True, description="High priority")
    def is_high(self, obj: Note) -> bool:
        return obj.priority == "high"

    @admin.display(description="Checked on")
    def checked_on(self, obj: Note) -> Any:
        import datetime

        return datetime.date(2026, 11, 28)


def _showcase_site(**options: Any) -> MCPSite:
    admin_site = admin.AdminSite(name="showcase-admin")
    admin_site.register(Note, ShowcaseNoteAdmin)
    mcp_site = MCPSite(name="showcase-mcp")
    mcp_site.register_admin(admin_site, **options)
    return mcp_site


SHOWCASE_COLUMNS = {
    "title_length": 5,
    "is_high": True,
    "owner_name": "ada",
    "get_priority_display": "High",
    "checked_on": "2026-11-28",
}


@pytest.mark.django_db
def test_search_rows_carry_the_callable_list_display_columns_over_an_annotated_queryset() -> None:
    mcp_site = _showcase_site()
    ada = _user("ada", "view_note")
    note = Note.objects.create(owner=ada, title="hello", priority="high")
    result = mcp_site.get_tool("testapp_note_search")._call({}, _request(ada))
    assert result["structuredContent"]["items"] == [
        {"id": note.pk, "title": "hello", **SHOWCASE_COLUMNS}
    ]


@pytest.mark.django_db
def test_get_and_resource_rows_carry_the_callable_list_display_columns() -> None:
    mcp_site = _showcase_site()
    ada = _user("ada", "view_note")
    note = Note.objects.create(owner=ada, title="hello", priority="high")
    result = mcp_site.get_tool("testapp_note_get")._call({"pk": note.pk}, _request(ada))
    assert result["structuredContent"] == {"id": note.pk, "title": "hello", **SHOWCASE_COLUMNS}
    model_mcp = mcp_site.get_model_mcp(Note)
    assert (
        model_mcp.serialize(model_mcp.get_object(_request(ada), note.pk))
        == result["structuredContent"]
    )


@pytest.mark.django_db
def test_a_row_written_through_the_bridge_is_read_back_through_the_admin_queryset() -> None:
    mcp_site = _showcase_site(tools=("search", "get", "update"))
    ada = _user("ada", "view_note", "change_note")
    note = Note.objects.create(owner=ada, title="hello")
    result = mcp_site.get_tool("testapp_note_update")._call(
        {"pk": note.pk, "title": "hi"}, _request(ada)
    )
    assert result["structuredContent"]["title_length"] == 2


def test_the_output_schema_describes_display_columns_with_their_titles_and_booleans() -> None:
    from jsonschema import Draft202012Validator

    schema = _showcase_site().get_tool("testapp_note_get").definition()["outputSchema"]
    properties = schema["properties"]
    assert properties["title_length"] == {"title": "Title length"}
    assert properties["owner_name"]["title"] == "Owner"
    assert properties["is_high"] == {
        "title": "High priority",
        "anyOf": [{"type": "boolean"}, {"type": "null"}],
    }
    Draft202012Validator(schema).validate({"id": 1, "title": "hello", **SHOWCASE_COLUMNS})


def test_list_display_columns_the_rows_leave_out_are_w232_saying_why() -> None:
    warnings = [e for e in _showcase_site().check() if e.id == "mcp_django.W232"]
    assert len(warnings) == 2
    lambda_warning, clash_warning = warnings
    assert (
        "entry 7 (ShowcaseNoteAdmin.<lambda>)" in lambda_warning.msg
        and "no name" in lambda_warning.msg
    )
    assert (
        "has body," in clash_warning.msg
        and "a field of testapp.Note has that name" in clash_warning.msg
    )
    assert "__str__" not in " ".join(w.msg for w in warnings)
