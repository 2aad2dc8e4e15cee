"""One visibility and scope gate for every method: what a user without a permission or a token
without a scope may list, call, read, get, complete and subscribe to (``handlers.gate``)."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_django.checks import check_settings
from mcp_django.models import Subscription
from mcp_django.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_django.registry.changes import anotify_resource_updated
from mcp_django.registry.options import ModelMCP
from mcp_django.registry.sites import MCPSite, site
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user, mcp_settings_fixture
from tests.testapp.models import Note
from tests.transport.test_stateless import body, post

RESOURCE = "https://mcp.example.com/mcp"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]
OAUTH = {
    "AUTHENTICATION": "oauth",
    "RESOURCE_URL": RESOURCE,
    "SCOPES_SUPPORTED": ["notes:read", "notes:write"],
}
oauth_settings = mcp_settings_fixture(**OAUTH)


def _token(user: Any, scope: str) -> str:
    app, _ = Application.objects.get_or_create(
        name="gate tests",
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
    return raw


@sync_to_async
def _user_with_token(username: str, scope: str, *codenames: str) -> tuple[Any, str]:
    user = make_user(username, *codenames)
    return user, _token(user, scope)


def _write(text: str) -> str:
    """Write something."""
    return f"wrote {text}"


def _topics(value: str) -> list[str]:
    return [t for t in ("django", "databases") if t.startswith(value)]


def _explain(topic: str) -> str:
    """Explain a topic."""
    return f"Explain {topic}."


def _secret_item(item_id: int) -> dict[str, int]:
    """One secret item."""
    return {"id": item_id}


class ScopedNoteMCP(ModelMCP):
    read_scopes = ["notes:read"]

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).filter(owner_id=getattr(request.user, "pk", None))


def _gated_site() -> MCPSite:
    """Entries gated by scopes, by permissions, or by both, and a model with read scopes."""
    mcp = MCPSite(name="gates")
    mcp.tool(_write, name="scoped_only", scopes=["notes:write"])
    mcp.tool(_write, name="hidden_scoped", permission="testapp.delete_note", scopes=["notes:write"])
    mcp.tool(_write, name="allowed_scoped", permission="testapp.view_note", scopes=["notes:write"])
    mcp.prompt(_explain, name="scoped_prompt", scopes=["notes:write"], complete={"topic": _topics})
    mcp.resource(
        "secret://items/{item_id}",
        name="secret",
        permission="testapp.delete_note",
        complete={"item_id": lambda v: ["1"]},
    )(_secret_item)
    mcp.register(Note, ScopedNoteMCP)
    return mcp


async def _client(raw: str, mcp_site: MCPSite | None = None) -> MCPTestClient:
    application = MCPConsumer.as_asgi(site=mcp_site) if mcp_site is not None else None
    client = MCPTestClient(application, headers={"authorization": f"Bearer {raw}"})
    await client.initialize()
    return client


async def _error(client: MCPTestClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(
        {"jsonrpc": "2.0", "id": client.next_id(), "method": method, "params": params}
    )
    assert response.status == 200, response.body
    body = response.json()
    assert "error" in body, body
    return dict(body["error"])


# -- lists ------------------------------------------------------------------------------------


def _hide() -> Any:
    """Run under UNSCOPED_ENTRIES="hide": entries the token's scopes do not allow are not listed."""
    return override_settings(MCP_DJANGO={**BASE_SETTINGS, **OAUTH, "UNSCOPED_ENTRIES": "hide"})


async def _tool_names(raw: str, mcp_site: MCPSite) -> set[str]:
    return {t["name"] for t in (await (await _client(raw, mcp_site)).call("tools/list"))["tools"]}


async def test_tool_the_user_may_use_is_listed_to_a_token_lacking_its_scope_by_default() -> None:
    # The step-up flow: a client that only calls listed tools must see it to reach the 403.
    mcp_site = MCPSite(name="scopes-only")
    mcp_site.tool(_write, name="scoped_only", scopes=["notes:write"])
    _, without = await _user_with_token("alice", "notes:read")
    assert "scoped_only" in await _tool_names(without, mcp_site)


async def test_tool_hidden_by_permissions_is_not_listed_whatever_the_scopes() -> None:
    _, without = await _user_with_token("alice", "notes:read")
    _, with_scope = await _user_with_token("bob", "notes:read notes:write")
    assert "hidden_scoped" not in await _tool_names(without, _gated_site())
    assert "hidden_scoped" not in await _tool_names(with_scope, _gated_site())


async def test_prompt_and_model_template_are_listed_to_a_token_lacking_their_scopes_by_default() -> (
    None
):
    _, raw = await _user_with_token("viewer", "notes:write", "view_note")
    client = await _client(raw, _gated_site())
    assert "scoped_prompt" in {p["name"] for p in (await client.call("prompts/list"))["prompts"]}
    templates = (await (await _client(raw, _gated_site())).call("resources/templates/list"))[
        "resourceTemplates"
    ]
    assert "django://testapp/note/{pk}" in {t["uriTemplate"] for t in templates}


async def test_tool_needing_only_a_scope_is_listed_only_to_tokens_holding_it_when_hidden() -> None:
    # No entry declares Django permissions: the case where the gate used to be skipped.
    mcp_site = MCPSite(name="scopes-only")
    mcp_site.tool(_write, name="scoped_only", scopes=["notes:write"])
    _, without = await _user_with_token("alice", "notes:read")
    _, with_scope = await _user_with_token("bob", "notes:read notes:write")
    with _hide():
        assert "scoped_only" not in await _tool_names(without, mcp_site)
        assert "scoped_only" in await _tool_names(with_scope, mcp_site)


async def test_prompt_needing_a_scope_is_not_listed_to_a_token_without_it_when_hidden() -> None:
    _, raw = await _user_with_token("alice", "notes:read")
    with _hide():
        client = await _client(raw, _gated_site())
        assert "scoped_prompt" not in {
            p["name"] for p in (await client.call("prompts/list"))["prompts"]
        }


async def _modern_tools_list(raw: str, mcp_site: MCPSite) -> dict[str, Any]:
    client = MCPTestClient(
        MCPConsumer.as_asgi(site=mcp_site), headers={"authorization": f"Bearer {raw}"}
    )
    response = await post(client, body("tools/list"))
    assert response.status == 200, response.body
    return dict(response.json()["result"])


async def test_lists_keep_their_cache_hint_when_every_token_of_a_user_sees_the_same_list() -> None:
    _, raw = await _user_with_token("alice", "notes:read", "view_note")
    result = await _modern_tools_list(raw, _gated_site())
    assert "allowed_scoped" in {t["name"] for t in result["tools"]}
    assert (result["ttlMs"], result["cacheScope"]) == (60_000, "private")


async def test_lists_that_hide_by_scope_are_not_kept_so_a_stepped_up_token_sees_its_list_at_once() -> (
    None
):
    _, raw = await _user_with_token("alice", "notes:read", "view_note")
    with _hide():
        result = await _modern_tools_list(raw, _gated_site())
    assert "allowed_scoped" not in {t["name"] for t in result["tools"]}
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


def test_unscoped_entries_must_be_list_or_hide() -> None:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "UNSCOPED_ENTRIES": "show"}):
        assert "mcp_django.E045" in [e.id for e in check_settings()]
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "UNSCOPED_ENTRIES": "hide"}):
        assert "mcp_django.E045" not in [e.id for e in check_settings()]


async def test_model_template_is_listed_only_to_users_with_view_permission() -> None:
    mcp_site = _gated_site()
    _, nobody = await _user_with_token("nobody", "notes:read")
    _, viewer = await _user_with_token("viewer", "notes:read", "view_note")
    hidden = (await (await _client(nobody, mcp_site)).call("resources/templates/list"))[
        "resourceTemplates"
    ]
    shown = (await (await _client(viewer, mcp_site)).call("resources/templates/list"))[
        "resourceTemplates"
    ]
    assert "django://testapp/note/{pk}" not in {t["uriTemplate"] for t in hidden}
    assert "secret://items/{item_id}" not in {t["uriTemplate"] for t in hidden}
    assert "django://testapp/note/{pk}" in {t["uriTemplate"] for t in shown}


async def test_model_template_is_not_listed_to_a_token_without_its_read_scopes_when_hidden() -> (
    None
):
    _, raw = await _user_with_token("viewer", "notes:write", "view_note")
    with _hide():
        templates = (await (await _client(raw, _gated_site())).call("resources/templates/list"))[
            "resourceTemplates"
        ]
    assert "django://testapp/note/{pk}" not in {t["uriTemplate"] for t in templates}


# -- calls, reads and the step-up 403 -----------------------------------------------------


async def test_hidden_tool_called_by_a_token_lacking_its_scope_answers_unknown_tool() -> None:
    _, raw = await _user_with_token("alice", "notes:read")
    client = await _client(raw, _gated_site())
    error = await _error(
        client, "tools/call", {"name": "hidden_scoped", "arguments": {"text": "x"}}
    )
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Unknown tool: hidden_scoped"


async def test_tool_the_user_may_use_called_by_a_token_lacking_its_scope_answers_403_step_up() -> (
    None
):
    _, raw = await _user_with_token("alice", "notes:read", "view_note")
    client = await _client(raw, _gated_site())
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "allowed_scoped", "arguments": {"text": "x"}},
        }
    )
    assert response.status == 403
    challenge = response.headers.get("www-authenticate", "")
    assert (
        challenge.startswith('Bearer error="insufficient_scope"')
        and 'scope="notes:write"' in challenge
    )


async def test_hidden_model_row_read_by_a_token_lacking_read_scopes_answers_not_found() -> None:
    user, raw = await _user_with_token("alice", "notes:write")
    note = await Note.objects.acreate(owner=user, title="mine")
    error = await _error(
        await _client(raw, _gated_site()),
        "resources/read",
        {"uri": f"django://testapp/note/{note.pk}"},
    )
    assert error["code"] == RESOURCE_NOT_FOUND


async def test_model_row_read_by_a_viewer_whose_token_lacks_read_scopes_answers_403_step_up() -> (
    None
):
    user, raw = await _user_with_token("alice", "notes:write", "view_note")
    note = await Note.objects.acreate(owner=user, title="mine")
    client = await _client(raw, _gated_site())
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "resources/read",
            "params": {"uri": f"django://testapp/note/{note.pk}"},
        }
    )
    assert response.status == 403
    assert 'scope="notes:read"' in response.headers.get("www-authenticate", "")


# -- completion -------------------------------------------------------------------------------


async def test_completion_of_a_prompt_whose_scope_the_token_lacks_answers_like_an_unknown_prompt() -> (
    None
):
    _, raw = await _user_with_token("alice", "notes:read")
    client = await _client(raw, _gated_site())
    argument = {"name": "topic", "value": "d"}
    refused = await _error(
        client,
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "scoped_prompt"}, "argument": argument},
    )
    unknown = await _error(
        client,
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "no_such_prompt"}, "argument": argument},
    )
    assert refused["code"] == unknown["code"] == INVALID_PARAMS
    assert refused["message"] == "Unknown prompt: scoped_prompt"


@pytest.mark.parametrize("uri", ["django://testapp/note/{pk}", "secret://items/{item_id}"])
async def test_completion_of_a_hidden_template_answers_like_an_unknown_template(uri: str) -> None:
    _, raw = await _user_with_token("alice", "notes:read")
    client = await _client(raw, _gated_site())
    argument = {"name": "pk" if "{pk}" in uri else "item_id", "value": ""}
    refused = await _error(
        client,
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": uri}, "argument": argument},
    )
    assert refused["code"] == INVALID_PARAMS
    assert refused["message"] == f"Unknown resource template: {uri}"


async def test_completion_of_the_model_template_still_works_for_a_viewer() -> None:
    user, raw = await _user_with_token("viewer", "notes:read", "view_note")
    note = await Note.objects.acreate(owner=user, title="mine")
    client = await _client(raw, _gated_site())
    result = await client.call(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "django://testapp/note/{pk}"},
            "argument": {"name": "pk", "value": ""},
        },
    )
    assert result["completion"]["values"] == [str(note.pk)]


# -- subscriptions ----------------------------------------------------------------------------


async def test_subscribe_to_a_row_the_user_may_not_read_is_refused_and_nothing_is_announced() -> (
    None
):
    _, raw = await _user_with_token("alice", "notes:read", "view_note")
    bob = await sync_to_async(make_user)("bob", "view_note")
    theirs = await Note.objects.acreate(owner=bob, title="bob's")
    uri = f"django://testapp/note/{theirs.pk}"
    error = await _error(await _client(raw), "resources/subscribe", {"uri": uri})
    assert error["code"] == RESOURCE_NOT_FOUND
    assert not await Subscription.objects.filter(uri=uri).aexists()
    assert await anotify_resource_updated(site, uri) == 0


async def test_subscribe_to_a_hidden_template_is_refused() -> None:
    _, raw = await _user_with_token("alice", "notes:read")
    error = await _error(
        await _client(raw, _gated_site()), "resources/subscribe", {"uri": "secret://items/1"}
    )
    assert error["code"] == RESOURCE_NOT_FOUND
    assert not await Subscription.objects.aexists()


async def test_subscribe_to_an_own_row_is_kept() -> None:
    user, raw = await _user_with_token("alice", "notes:read", "view_note")
    mine = await Note.objects.acreate(owner=user, title="mine")
    uri = f"django://testapp/note/{mine.pk}"
    assert await (await _client(raw)).call("resources/subscribe", {"uri": uri}) == {}
    assert await Subscription.objects.filter(uri=uri).aexists()


async def test_a_subscription_stops_announcing_once_its_user_loses_the_right_to_read() -> None:
    user, raw = await _user_with_token("alice", "notes:read", "view_note")
    mine = await Note.objects.acreate(owner=user, title="mine")
    other = await Note.objects.acreate(owner=user, title="also mine")
    client = await _client(raw)
    for note in (mine, other):
        assert (
            await client.call("resources/subscribe", {"uri": f"django://testapp/note/{note.pk}"})
            == {}
        )
    assert await anotify_resource_updated(site, f"django://testapp/note/{mine.pk}") == 1

    # The row moves to someone else: its announcements stop, the other row's go on.
    bob = await sync_to_async(make_user)("bob", "view_note")
    mine.owner = bob
    await mine.asave()
    assert await anotify_resource_updated(site, f"django://testapp/note/{mine.pk}") == 0
    assert await anotify_resource_updated(site, f"django://testapp/note/{other.pk}") == 1

    # The view permission goes: nothing more is announced, though the subscription stays.
    await sync_to_async(user.user_permissions.clear)()
    assert await anotify_resource_updated(site, f"django://testapp/note/{other.pk}") == 0
    assert await Subscription.objects.filter(uri=f"django://testapp/note/{other.pk}").aexists()


# -- control characters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("resources/read", {"uri": "test://items/1\x00"}),
        ("resources/subscribe", {"uri": "test://items/1\x00"}),
        ("resources/subscribe", {"uri": "test://hello\x1b"}),
        ("resources/unsubscribe", {"uri": "test://items/1\x00"}),
        (
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": "test://items/{item_id}\x00"},
                "argument": {"name": "item_id", "value": ""},
            },
        ),
        (
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": "test://items/{item_id}"},
                "argument": {"name": "item_id", "value": "1\x00"},
            },
        ),
        ("tools/call", {"name": "add\x00", "arguments": {"a": 1, "b": 2}}),
        ("prompts/get", {"name": "explain\x00", "arguments": {"topic": "x"}}),
    ],
)
async def test_control_characters_in_a_uri_or_name_are_invalid_params_and_nothing_is_stored(
    method: str, params: dict[str, Any]
) -> None:
    _, raw = await _user_with_token("alice", "notes:read")
    error = await _error(await _client(raw), method, params)
    assert error["code"] == INVALID_PARAMS
    assert "control characters" in error["message"]
    assert not await Subscription.objects.aexists()


class SearchableNoteMCP(ScopedNoteMCP):
    search_fields = ["title"]


async def test_search_and_fetch_give_nothing_of_a_model_to_a_token_lacking_its_read_scopes() -> (
    None
):
    """ChatGPT's pair reads rows as the model's own tools do: a token without the model's
    read_scopes finds none of its rows and cannot fetch one by id, though its user may view them;
    the same user's token with the scope finds and fetches the row."""
    mcp = MCPSite(name="search-gates")
    mcp.register(Note, SearchableNoteMCP)
    mcp.search_fetch = True
    user, without = await _user_with_token("alice", "notes:write", "view_note")
    with_scope = await sync_to_async(_token)(user, "notes:read")
    note = await Note.objects.acreate(owner=user, title="Quarterly plan")
    note_id = f"testapp.note:{note.pk}"

    async def search_and_fetch(raw: str) -> tuple[list[Any], dict[str, Any]]:
        client = await _client(raw, mcp)
        found = await client.call("tools/call", {"name": "search", "arguments": {"query": "plan"}})
        fetched = await client.call("tools/call", {"name": "fetch", "arguments": {"id": note_id}})
        return found["structuredContent"]["results"], fetched

    results, fetched = await search_and_fetch(without)
    assert results == []
    assert fetched["isError"] and "No record" in fetched["content"][0]["text"]
    results, fetched = await search_and_fetch(with_scope)
    assert [r["id"] for r in results] == [note_id]
    assert not fetched.get("isError") and fetched["structuredContent"]["title"] == str(note)
