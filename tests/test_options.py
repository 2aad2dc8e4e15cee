"""ModelMCP: models as resources and generated tools, with Django permissions on every row."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_django import ModelMCP
from mcp_django.exceptions import AlreadyRegistered, NotRegistered
from mcp_django.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_django.registry.sites import MCPSite, site
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient
from tests.conftest import make_user, mcp_settings_fixture
from tests.testapp.models import Note

DJANGO_AUTH = {"AUTHENTICATION": "django", "SERVER_NAME": "mcp-django-tests"}
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


django_authentication = mcp_settings_fixture(**DJANGO_AUTH)


def _user(username: str, *perms: str) -> User:
    return make_user(username, *perms)


async def _client_for(user: User) -> MCPTestClient:
    client = MCPTestClient()
    await client.force_login(user)
    await client.initialize()
    return client


@pytest.fixture
async def alice() -> User:
    return await sync_to_async(_user)(
        "alice", "view_note", "add_note", "change_note", "delete_note"
    )


@pytest.fixture
async def bob() -> User:
    return await sync_to_async(_user)("bob", "view_note")


async def _notes(owner: User, *titles: str) -> list[Note]:
    return [await Note.objects.acreate(owner=owner, title=t, body=f"about {t}") for t in titles]


# -- registration --------------------------------------------------------------------------


def test_register_abstract_model_raises_improperly_configured() -> None:
    from django.db import models

    class Base(models.Model):
        class Meta:
            abstract = True
            app_label = "testapp"

    with pytest.raises(ImproperlyConfigured, match="abstract"):
        MCPSite().register(Base)


def test_register_twice_raises_already_registered_naming_the_options_class() -> None:
    fresh = MCPSite()
    fresh.register(Note)
    with pytest.raises(AlreadyRegistered, match="Note"):
        fresh.register(Note)


def test_register_decorator_uses_the_given_model_mcp() -> None:
    fresh = MCPSite()

    @fresh.register(Note)
    class CustomNoteMCP(ModelMCP):
        tools = ["get"]

    assert isinstance(fresh.get_model_mcp(Note), CustomNoteMCP)
    assert [t.name for t in fresh.get_tools()] == ["testapp_note_get"]
    fresh.unregister(Note)
    assert not fresh.is_registered(Note)
    with pytest.raises(NotRegistered):
        fresh.unregister(Note)


def test_a_model_mcp_generic_over_its_model_registers_like_a_plain_one() -> None:
    # ModelMCP[Note] is for type checkers (self.model, get_queryset); at run time it is ModelMCP.
    fresh = MCPSite()

    @fresh.register(Note)
    class TypedNoteMCP(ModelMCP[Note]):
        tools = ["get"]

    model_mcp = fresh.get_model_mcp(Note)
    assert isinstance(model_mcp, TypedNoteMCP) and isinstance(model_mcp, ModelMCP)
    assert model_mcp.model is Note
    assert [t.name for t in fresh.get_tools()] == ["testapp_note_get"]


def test_unknown_field_is_reported_by_a_system_check() -> None:
    fresh = MCPSite()
    fresh.register(
        Note,
        fields=["title", "nope"],
        search_fields=["missing__thing"],
        tools=["search", "explode"],
    )
    ids = sorted(e.id for e in fresh.check())
    assert ids == ["mcp_django.E102", "mcp_django.E103", "mcp_django.E104"]


# -- resources -----------------------------------------------------------------------------


async def test_templates_list_has_one_template_per_model(alice: User) -> None:
    client = await _client_for(alice)
    result = await client.call("resources/templates/list")
    assert {"uriTemplate": "django://testapp/note/{pk}"}.items() <= next(
        t for t in result["resourceTemplates"] if t["uriTemplate"].startswith("django://")
    ).items()


async def test_resources_list_shows_only_the_users_rows(alice: User, bob: User) -> None:
    mine = await _notes(alice, "alpha", "beta")
    await _notes(bob, "secret")
    client = await _client_for(alice)
    result = await client.call("resources/list")
    uris = [r["uri"] for r in result["resources"] if r["uri"].startswith("django://")]
    assert uris == [f"django://testapp/note/{n.pk}" for n in mine]


async def test_resources_list_pages_with_keyset_cursors(alice: User) -> None:
    notes = await _notes(alice, *[f"n{i}" for i in range(7)])
    client = await _client_for(alice)
    seen: list[str] = []
    cursor = None
    with override_settings(MCP_DJANGO={**DJANGO_AUTH, "PAGE_SIZE": 3}):
        for _ in range(10):
            result = await client.call("resources/list", {"cursor": cursor} if cursor else {})
            seen += [r["uri"] for r in result["resources"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
    model_uris = [u for u in seen if u.startswith("django://")]
    assert model_uris == [f"django://testapp/note/{n.pk}" for n in notes]
    assert len(seen) == len(set(seen))


async def test_resources_list_is_refused_with_a_cursor_from_nowhere(alice: User) -> None:
    client = await _client_for(alice)
    with pytest.raises(JSONRPCErrorResponse) as exc:
        await client.call("resources/list", {"cursor": "eyJzIjo5OX0"})  # {"s":99}
    assert exc.value.code == INVALID_PARAMS


async def test_read_returns_the_row_as_json(alice: User) -> None:
    (note,) = await _notes(alice, "alpha")
    client = await _client_for(alice)
    result = await client.call("resources/read", {"uri": f"django://testapp/note/{note.pk}"})
    content = result["contents"][0]
    assert content["mimeType"] == "application/json"
    assert '"title":"alpha"' in content["text"]


async def test_forbidden_row_is_indistinguishable_from_a_missing_one(
    alice: User, bob: User
) -> None:
    (note,) = await _notes(alice, "private")
    client = await _client_for(bob)
    answers = []
    for pk in (note.pk, 999999):
        with pytest.raises(JSONRPCErrorResponse) as exc:
            await client.call("resources/read", {"uri": f"django://testapp/note/{pk}"})
        answers.append((exc.value.code, exc.value.message.replace(str(pk), "<pk>")))
    assert answers[0] == answers[1]
    assert answers[0][0] == RESOURCE_NOT_FOUND


async def test_completion_suggests_only_visible_pks_matching_search_fields(
    alice: User, bob: User
) -> None:
    mine = await _notes(alice, "django tips", "other")
    await _notes(bob, "django secrets")
    client = await _client_for(alice)
    result = await client.call(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "django://testapp/note/{pk}"},
            "argument": {"name": "pk", "value": "djan"},
        },
    )
    assert result["completion"]["values"] == [str(mine[0].pk)]


@pytest.mark.parametrize("page_size", [5, 30])
def test_listing_costs_a_bounded_number_of_queries_whatever_the_page_size(
    page_size: int, django_assert_num_queries: Any
) -> None:
    from django.test import RequestFactory

    from mcp_django.server.handlers import _list_resources_page

    owner = _user("carol", "view_note")
    Note.objects.bulk_create([Note(owner=owner, title=f"n{i}") for i in range(40)])
    request = RequestFactory().get("/")
    request.user = owner
    request.user.has_perm("testapp.view_note")  # permissions are cached after the first check
    with django_assert_num_queries(1):
        page = _list_resources_page(site, request, None, page_size)
    assert len(page["resources"]) == page_size


# -- generated tools -------------------------------------------------------------------------


async def test_tools_list_shows_only_tools_the_user_may_use(alice: User, bob: User) -> None:
    alice_tools = {
        t["name"] for t in (await (await _client_for(alice)).call("tools/list"))["tools"]
    }
    bob_tools = {t["name"] for t in (await (await _client_for(bob)).call("tools/list"))["tools"]}
    generated = {f"testapp_note_{a}" for a in ("search", "get", "create", "update", "delete")}
    assert generated <= alice_tools
    assert bob_tools & generated == {"testapp_note_search", "testapp_note_get"}


async def test_create_schema_comes_from_the_serializer(alice: User) -> None:
    tools = (await (await _client_for(alice)).call("tools/list"))["tools"]
    create = next(t for t in tools if t["name"] == "testapp_note_create")
    props = create["inputSchema"]["properties"]
    assert props["title"] == {"type": "string", "maxLength": 100, "description": "A short title."}
    assert props["priority"]["enum"] == ["low", "high"]
    assert "owner" not in props  # read-only
    assert create["inputSchema"]["required"] == ["title"]
    assert create["outputSchema"]["type"] == "object"


async def test_create_validation_errors_list_each_field(alice: User) -> None:
    client = await _client_for(alice)
    result = await client.call_tool(
        "testapp_note_create", {"title": "x" * 101, "priority": "urgent"}
    )
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "title" in text and "priority" in text


async def test_create_update_delete_write_the_admin_history(alice: User) -> None:
    client = await _client_for(alice)
    created = await client.call_tool("testapp_note_create", {"title": "fresh", "priority": "high"})
    assert created.get("isError") is not True, created
    pk = created["structuredContent"]["id"]
    updated = await client.call_tool("testapp_note_update", {"pk": pk, "body": "changed"})
    assert updated["structuredContent"]["body"] == "changed"
    deleted = await client.call_tool("testapp_note_delete", {"pk": pk})
    assert deleted["structuredContent"] == {"deleted": True, "pk": pk}
    flags = await sync_to_async(
        lambda: list(
            LogEntry.objects.filter(object_id=str(pk))
            .order_by("pk")
            .values_list("action_flag", flat=True)
        )
    )()
    assert flags == [1, 2, 3]


async def test_search_filters_orders_and_bounds_the_limit(alice: User) -> None:
    await _notes(alice, "b-note", "a-note", "c-other")
    client = await _client_for(alice)
    result = await client.call_tool(
        "testapp_note_search", {"query": "note", "ordering": "-title", "limit": 1}
    )
    items = result["structuredContent"]["items"]
    assert [i["title"] for i in items] == ["b-note"]
    following = await client.call_tool(
        "testapp_note_search",
        {
            "query": "note",
            "ordering": "-title",
            "limit": 1,
            "cursor": result["structuredContent"]["nextCursor"],
        },
    )
    assert [i["title"] for i in following["structuredContent"]["items"]] == ["a-note"]
    too_many = await client.call_tool("testapp_note_search", {"limit": 10_000})
    assert too_many["isError"] is True


async def test_user_without_change_permission_cannot_call_update(alice: User, bob: User) -> None:
    (note,) = await _notes(bob, "bob's")
    client = await _client_for(bob)
    with pytest.raises(JSONRPCErrorResponse) as exc:
        await client.call_tool("testapp_note_update", {"pk": note.pk, "title": "hacked"})
    assert exc.value.code == INVALID_PARAMS
    assert (await Note.objects.aget(pk=note.pk)).title == "bob's"


async def test_update_of_another_users_row_answers_like_a_missing_row(
    alice: User, bob: User
) -> None:
    (note,) = await _notes(bob, "bob's")
    client = await _client_for(alice)
    result = await client.call_tool("testapp_note_update", {"pk": note.pk, "title": "hacked"})
    missing = await client.call_tool("testapp_note_update", {"pk": 999999, "title": "hacked"})
    assert result["isError"] and missing["isError"]
    assert result["content"][0]["text"].replace(str(note.pk), "<pk>") == missing["content"][0][
        "text"
    ].replace("999999", "<pk>")
    assert (await Note.objects.aget(pk=note.pk)).title == "bob's"


async def test_saving_a_registered_model_notifies_subscribed_sessions(alice: User) -> None:
    (note,) = await _notes(alice, "watched")
    client = await _client_for(alice)
    uri = f"django://testapp/note/{note.pk}"
    await client.call("resources/subscribe", {"uri": uri})
    async with await client.open_stream() as stream:
        note.title = "changed elsewhere"
        await note.asave()  # a change outside MCP (admin, shell, another process)
        message: dict[str, Any] = await stream.next_message(timeout=5)
    assert message == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri},
    }


def test_default_site_registers_the_test_model() -> None:
    assert site.is_registered(Note)


async def test_search_pages_by_position_so_new_rows_do_not_shift_pages(alice: User) -> None:
    await _notes(alice, "a1", "a2", "a3")
    client = await _client_for(alice)
    first = await client.call_tool("testapp_note_search", {"ordering": "title", "limit": 2})
    assert [i["title"] for i in first["structuredContent"]["items"]] == ["a1", "a2"]
    await _notes(alice, "a0")  # sorts before the cursor: an offset would repeat "a2"
    second = await client.call_tool(
        "testapp_note_search",
        {"ordering": "title", "limit": 2, "cursor": first["structuredContent"]["nextCursor"]},
    )
    assert [i["title"] for i in second["structuredContent"]["items"]] == ["a3"]
    assert second["structuredContent"]["nextCursor"] is None


@pytest.mark.parametrize("limit", [5, 40])
def test_search_costs_a_bounded_number_of_queries_whatever_the_limit(
    limit: int, django_assert_num_queries: Any
) -> None:
    from django.test import RequestFactory

    owner = _user("dave", "view_note")
    Note.objects.bulk_create([Note(owner=owner, title=f"n{i:02}") for i in range(50)])
    request = RequestFactory().get("/")
    request.user = owner
    request.user.has_perm("testapp.view_note")
    tool = site.get_tool("testapp_note_search")
    with django_assert_num_queries(1):
        result = tool._search({"limit": limit, "ordering": "title"}, request)
    assert len(result["structuredContent"]["items"]) == limit


async def test_model_uri_scheme_is_configurable(alice: User) -> None:
    (note,) = await _notes(alice, "schemed")
    client = await _client_for(alice)
    with override_settings(MCP_DJANGO={**DJANGO_AUTH, "MODEL_URI_SCHEME": "notes"}):
        templates = (await client.call("resources/templates/list"))["resourceTemplates"]
        read = await client.call("resources/read", {"uri": f"notes://testapp/note/{note.pk}"})
    assert "notes://testapp/note/{pk}" in [t["uriTemplate"] for t in templates]
    assert '"title":"schemed"' in read["contents"][0]["text"]


# -- related keys: only rows the user may see ------------------------------------------------


def _restricted_specimen_site() -> MCPSite:
    """Specimens per owner (``twin`` points at a specimen), and a tag nobody may see."""
    from tests.testapp.models import Specimen, Tag

    class SpecimenMCP(ModelMCP):
        tools = ["search", "create", "update"]
        filter_fields = ["twin"]

        def get_queryset(self, request: Any) -> Any:
            return super().get_queryset(request).filter(owner=request.user)

    class TagMCP(ModelMCP):
        def get_queryset(self, request: Any) -> Any:
            return super().get_queryset(request).exclude(slug="secret")

    mcp = MCPSite()
    mcp.register(Specimen, SpecimenMCP)
    mcp.register(Tag, TagMCP)
    return mcp


def _as(user: User) -> Any:
    from django.test import RequestFactory

    request = RequestFactory().post("/")
    request.user = user
    return request


def _tool(mcp: MCPSite, action: str) -> Any:
    from tests.testapp.models import Specimen

    return next(t for t in mcp._registry[Specimen].get_generated_tools() if t.action == action)


def _error_text(result: dict[str, Any], key: Any) -> str:
    """An error result's text, the key it names replaced, so two answers compare as shapes."""
    assert result.get("isError"), result
    return (
        result["content"][0]["text"].replace(f'"{key}"', '"<key>"').replace(f"'{key}'", "'<key>'")
    )


@pytest.fixture
def two_owners() -> tuple[User, User, Any, Any]:
    from tests.testapp.models import Specimen

    mine = User.objects.create_superuser("mine", "mine@example.com", "x")
    theirs = User.objects.create_superuser("theirs", "theirs@example.com", "x")
    return (
        mine,
        theirs,
        Specimen.objects.create(char="my row", owner=mine),
        Specimen.objects.create(char="their row", owner=theirs),
    )


def test_create_refuses_a_related_key_the_user_may_not_see_as_one_that_does_not_exist(
    two_owners: Any,
) -> None:
    from tests.testapp.models import Specimen

    mine, _theirs, _my_row, their_row = two_owners
    mcp = _restricted_specimen_site()
    hidden = _tool(mcp, "create")._call(
        {"char": "new", "owner": mine.pk, "twin": their_row.pk}, _as(mine)
    )
    missing = _tool(mcp, "create")._call(
        {"char": "new", "owner": mine.pk, "twin": 987654}, _as(mine)
    )
    assert _error_text(hidden, their_row.pk) == _error_text(missing, 987654)
    assert "twin: Invalid pk" in hidden["content"][0]["text"]
    assert not Specimen.objects.filter(char="new").exists()


def test_update_refuses_to_point_a_row_at_a_related_row_the_user_may_not_see(
    two_owners: Any,
) -> None:
    mine, _theirs, my_row, their_row = two_owners
    mcp = _restricted_specimen_site()
    hidden = _tool(mcp, "update")._call({"pk": my_row.pk, "twin": their_row.pk}, _as(mine))
    missing = _tool(mcp, "update")._call({"pk": my_row.pk, "twin": 987654}, _as(mine))
    assert _error_text(hidden, their_row.pk) == _error_text(missing, 987654)
    my_row.refresh_from_db()
    assert my_row.twin_id is None


def test_a_many_to_many_key_the_user_may_not_see_is_refused_as_one_that_does_not_exist(
    two_owners: Any,
) -> None:
    from tests.testapp.models import Tag

    mine, _theirs, my_row, _their_row = two_owners
    Tag.objects.create(slug="secret")
    Tag.objects.create(slug="public")
    mcp = _restricted_specimen_site()
    hidden = _tool(mcp, "update")._call({"pk": my_row.pk, "tags": ["public", "secret"]}, _as(mine))
    missing = _tool(mcp, "update")._call(
        {"pk": my_row.pk, "tags": ["public", "nosuchtag"]}, _as(mine)
    )
    allowed = _tool(mcp, "update")._call({"pk": my_row.pk, "tags": ["public"]}, _as(mine))
    assert _error_text(hidden, "secret") == _error_text(missing, "nosuchtag")
    assert not allowed.get("isError"), allowed
    assert list(my_row.tags.values_list("slug", flat=True)) == ["public"]


def test_a_search_filter_on_a_related_row_the_user_may_not_see_matches_nothing(
    two_owners: Any,
) -> None:
    from tests.testapp.models import Specimen

    mine, _theirs, my_row, their_row = two_owners
    # A row of hers that points at one she may not see (set in code, not through MCP).
    Specimen.objects.filter(pk=my_row.pk).update(twin=their_row)
    mcp = _restricted_specimen_site()
    by_twin = _tool(mcp, "search")._call({"twin": their_row.pk}, _as(mine))
    by_missing = _tool(mcp, "search")._call({"twin": 987654}, _as(mine))
    assert by_twin["structuredContent"]["items"] == by_missing["structuredContent"]["items"] == []


def test_a_search_filter_on_a_read_only_field_is_not_marked_read_only() -> None:
    mcp = MCPSite()
    mcp.register(
        Note,
        type(
            "NoteMCP",
            (ModelMCP,),
            {"tools": ["search", "get"], "read_only_fields": ["owner"], "filter_fields": ["owner"]},
        ),
    )
    (search, _get) = mcp._registry[Note].get_generated_tools()
    assert search.input_schema["properties"]["owner"]
    assert "readOnly" not in search.input_schema["properties"]["owner"]
    # The record's own schema still says clients may not write it.
    assert (
        mcp._registry[Note].field_schemas(writable=False)["properties"]["owner"]["readOnly"] is True
    )
