"""MCP Apps (``io.modelcontextprotocol/ui``): ``@site.tool(ui=...)`` lists ``_meta.ui`` on the tool,
serves the template as a ``ui://`` resource behind the tool's gate, declares the extension, and
checks the template at start-up; in both protocol eras."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_django import UI
from mcp_django.exceptions import AlreadyRegistered
from mcp_django.extensions.mcp_apps import MIME_TYPE, UI_EXTENSION, UIResource
from mcp_django.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.test_gates import OAUTH, _user_with_token
from tests.test_gates import _client as oauth_client
from tests.transport.test_stateless import body, post

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]

BOARD = "testapp/ui/board.html"
BOARD_URI = f"ui://{BOARD}"


def show_board(board_id: int) -> dict[str, Any]:
    """Show a board."""
    return {"board_id": board_id, "cards": 3}


def move_card(card_id: int) -> str:
    """Move a card."""
    return f"moved {card_id}"


def _client(mcp: MCPSite) -> MCPTestClient:
    return MCPTestClient(MCPConsumer.as_asgi(site=mcp))


async def _handshake(
    mcp: MCPSite,
    method: str,
    params: dict[str, Any] | None = None,
    client: MCPTestClient | None = None,
) -> dict[str, Any]:
    client = client or _client(mcp)
    if client.session_id is None:
        await client.initialize()
    return await client.call(method, params or {})


async def _stateless(
    mcp: MCPSite,
    method: str,
    params: dict[str, Any] | None = None,
    client: MCPTestClient | None = None,
) -> dict[str, Any]:
    response = await post(client or _client(mcp), body(method, params))
    assert response.status == 200, response.body
    answer: dict[str, Any] = response.json()
    return answer


ERAS = pytest.mark.parametrize("era", ["handshake", "stateless"])


async def _ask(
    era: str,
    mcp: MCPSite,
    method: str,
    params: dict[str, Any] | None = None,
    client: MCPTestClient | None = None,
) -> dict[str, Any]:
    """The result of ``method`` in ``era`` (raises on an error answer)."""
    if era == "handshake":
        return await _handshake(mcp, method, params, client)
    answer = await _stateless(mcp, method, params, client)
    assert "result" in answer, answer
    return dict(answer["result"])


# -- the tool's listing -------------------------------------------------------------------------


@ERAS
async def test_a_tool_with_a_ui_lists_its_resource_uri_in_both_eras(era: str) -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD)
    mcp.tool(move_card, ui=UI(BOARD), meta={"example.com/owner": "cards"})
    tools = {t["name"]: t for t in (await _ask(era, mcp, "tools/list"))["tools"]}
    assert tools["show_board"]["_meta"] == {
        "ui": {"resourceUri": BOARD_URI},
        "ui/resourceUri": BOARD_URI,
    }
    # The tool's own _meta stays beside the UI's keys.
    assert tools["move_card"]["_meta"]["example.com/owner"] == "cards"
    assert tools["move_card"]["_meta"]["ui"]["resourceUri"] == BOARD_URI


async def test_visibility_is_listed_as_the_extension_names_it() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(move_card, ui=UI(BOARD, uri="ui://cards/board", visibility=["app"]))
    (tool,) = (await _ask("handshake", mcp, "tools/list"))["tools"]
    assert tool["_meta"]["ui"] == {"resourceUri": "ui://cards/board", "visibility": ["app"]}


async def test_a_tool_without_a_ui_has_no_ui_meta_and_the_extension_is_not_declared() -> None:
    mcp = MCPSite(name="plain")
    mcp.tool(show_board)
    client = _client(mcp)
    init = await client.initialize()
    (tool,) = (await client.call("tools/list"))["tools"]
    assert "_meta" not in tool
    assert "extensions" not in init["capabilities"]


# -- the extension ----------------------------------------------------------------------------------


async def test_initialize_and_discover_declare_the_ui_extension() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD)
    init = await _client(mcp).initialize()
    assert init["capabilities"]["extensions"] == {UI_EXTENSION: {}}
    assert "resources" in init["capabilities"]  # the UI is read with resources/read
    discovered = await _ask("stateless", mcp, "server/discover")
    assert discovered["capabilities"]["extensions"][UI_EXTENSION] == {}


# -- the resource ---------------------------------------------------------------------------------


@ERAS
async def test_the_ui_is_listed_and_reads_as_the_rendered_template_with_its_csp_and_permissions(
    era: str,
) -> None:
    mcp = MCPSite(name="apps")
    ui = UI(
        BOARD,
        title="Board",
        description="The board, as cards.",
        connect_domains=["https://api.example.com"],
        resource_domains=["https://cdn.example.com"],
        permissions=["clipboardWrite"],
        prefers_border=True,
    )
    mcp.tool(show_board, ui=ui)
    mcp.tool(move_card, ui=ui)  # two tools, one UI
    expected_meta = {
        "ui": {
            "csp": {
                "connectDomains": ["https://api.example.com"],
                "resourceDomains": ["https://cdn.example.com"],
            },
            "permissions": {"clipboardWrite": {}},
            "prefersBorder": True,
        }
    }
    (listed,) = (await _ask(era, mcp, "resources/list"))["resources"]
    assert listed == {
        "uri": BOARD_URI,
        "name": BOARD,
        "title": "Board",
        "description": "The board, as cards.",
        "mimeType": MIME_TYPE,
        "_meta": expected_meta,
    }
    (content,) = (await _ask(era, mcp, "resources/read", {"uri": BOARD_URI}))["contents"]
    assert content["uri"] == BOARD_URI
    assert content["mimeType"] == "text/html;profile=mcp-app"
    assert content["_meta"] == expected_meta
    assert content["text"].startswith("<!DOCTYPE html>")
    # Rendered by Django's loaders, with the resource's URI and its tools in the context.
    assert f'data-uri="{BOARD_URI}">Board for show_board, move_card</h1>' in content["text"]


async def test_a_ui_without_options_has_no_meta() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD)
    (listed,) = (await _ask("handshake", mcp, "resources/list"))["resources"]
    assert listed == {"uri": BOARD_URI, "name": BOARD, "mimeType": MIME_TYPE}
    (content,) = (await _ask("handshake", mcp, "resources/read", {"uri": BOARD_URI}))["contents"]
    assert "_meta" not in content


@sync_to_async
def _user(username: str, *codenames: str) -> Any:
    return make_user(username, *codenames)


@ERAS
async def test_a_user_who_may_not_use_the_tool_can_neither_list_nor_read_its_ui(era: str) -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD, permission="testapp.view_note")
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        allowed, refused = _client(mcp), _client(mcp)
        await allowed.force_login(await _user("allowed", "view_note"))
        await refused.force_login(await _user("refused"))

        assert [
            r["uri"] for r in (await _ask(era, mcp, "resources/list", client=allowed))["resources"]
        ] == [BOARD_URI]
        assert (await _ask(era, mcp, "resources/read", {"uri": BOARD_URI}, client=allowed))[
            "contents"
        ][0]["text"]

        assert (await _ask(era, mcp, "resources/list", client=refused))["resources"] == []
        if era == "handshake":  # the client has its session from the list above
            answer = (
                await refused.post(
                    {
                        "jsonrpc": "2.0",
                        "id": 9,
                        "method": "resources/read",
                        "params": {"uri": BOARD_URI},
                    }
                )
            ).json()
        else:
            answer = await _stateless(mcp, "resources/read", {"uri": BOARD_URI}, refused)
        # As for a resource that does not exist (2026-07-28 answers that -32602): the UI of a
        # hidden tool does not reveal itself.
        assert answer["error"]["code"] == (
            RESOURCE_NOT_FOUND if era == "handshake" else INVALID_PARAMS
        ), answer
        assert "text" not in str(answer)


async def test_a_ui_shared_by_tools_needs_what_every_one_of_them_needs() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD, permission="testapp.view_note")
    mcp.tool(move_card, ui=BOARD, permission="testapp.change_note", scopes=["cards:write"])
    resource = mcp.get_resource(BOARD_URI)
    assert isinstance(resource, UIResource)
    assert resource.permissions == ("testapp.view_note", "testapp.change_note")
    assert resource.scopes == ("cards:write",)
    viewer, editor = (
        await _user("viewer", "view_note"),
        await _user("editor", "view_note", "change_note"),
    )
    assert not await sync_to_async(resource.has_permission)(type("R", (), {"user": viewer})())
    assert await sync_to_async(resource.has_permission)(type("R", (), {"user": editor})())


async def test_the_ui_goes_with_the_last_tool_that_names_it() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD)
    mcp.tool(move_card, ui=BOARD)
    mcp.unregister("tool", "show_board")
    assert mcp.get_resource(BOARD_URI) is not None
    mcp.unregister("tool", "move_card")
    assert mcp.get_resource(BOARD_URI) is None
    assert "extensions" not in mcp.get_capabilities()


# -- registration ---------------------------------------------------------------------------------


def test_tools_sharing_a_uri_with_different_ui_options_are_refused() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=UI(BOARD, prefers_border=True))
    with pytest.raises(ImproperlyConfigured, match="declared twice"):
        mcp.tool(move_card, ui=UI(BOARD, prefers_border=False))
    assert mcp.get_tool("move_card") is None


def test_a_ui_cannot_take_the_uri_of_another_resource() -> None:
    mcp = MCPSite(name="apps")
    mcp.resource(BOARD_URI)(lambda: "not an app")
    with pytest.raises(AlreadyRegistered):
        mcp.tool(show_board, ui=BOARD)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"uri": "https://example.com/board"}, "ui:// scheme"),
        ({"connect_domains": "https://api.example.com"}, "connect_domains must be a list"),
        ({"permissions": ["telepathy"]}, "unknown permissions"),
        ({"visibility": ["agent"]}, "visibility must list"),
        ({"prefers_border": "yes"}, "prefers_border"),
    ],
)
def test_a_ui_with_a_wrong_option_is_refused_at_registration(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        UI(BOARD, **options)


def test_ui_must_be_a_template_name_or_a_ui() -> None:
    with pytest.raises(ImproperlyConfigured, match="ui= must be"):
        MCPSite(name="apps").tool(show_board, ui=42)  # type: ignore[call-overload]


# -- the system check ----------------------------------------------------------------------------


def _ids(mcp: MCPSite) -> list[str]:
    return [e.id for e in mcp.check() if e.id in ("mcp_django.E200", "mcp_django.E201")]


def test_a_ui_whose_template_renders_passes_the_check() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD)
    assert _ids(mcp) == []


def test_a_ui_whose_template_does_not_exist_is_check_error_e200() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui="testapp/ui/missing.html")
    (error,) = [e for e in mcp.check() if e.id == "mcp_django.E200"]
    assert "'testapp/ui/missing.html'" in error.msg and "'show_board'" in error.msg
    assert error.hint and "templates/" in error.hint


def test_a_ui_whose_template_fails_to_render_without_a_request_is_check_error_e201() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui="testapp/ui/broken.html")
    (error,) = [e for e in mcp.check() if e.id == "mcp_django.E201"]
    assert "NoReverseMatch" in error.msg
    assert error.hint and "without a request" in error.hint


# -- inlined static files ---------------------------------------------------------------------------


async def test_inline_tags_put_static_files_in_the_page_without_ending_their_element_early() -> (
    None
):
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui="testapp/ui/inlined.html")
    (content,) = (
        await _ask("handshake", mcp, "resources/read", {"uri": "ui://testapp/ui/inlined.html"})
    )["contents"]
    html = content["text"]
    assert "<style>h1 { color: red; }\n/* not the end: <\\/style> */\n</style>" in html
    assert '<script>const end = "<\\/script>";\nwindow.boardLoaded = 1 < 2;\n</script>' in html
    assert html.count("</script>") == 1 and html.count("</style>") == 1


def test_a_ui_inlining_a_static_file_that_does_not_exist_is_check_error_e201() -> None:
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui="testapp/ui/missing_static.html")
    (error,) = [e for e in mcp.check() if e.id == "mcp_django.E201"]
    assert "'testapp/ui/nowhere.js' was not found" in error.msg


async def test_a_token_lacking_the_tools_scope_reading_its_ui_gets_the_step_up_403() -> None:
    # The gate decides a UI as its tool: the user may use it, the token lacks its scope.
    mcp = MCPSite(name="apps")
    mcp.tool(show_board, ui=BOARD, scopes=["notes:write"])
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, **OAUTH}):
        _, raw = await _user_with_token("alice", "notes:read")
        client = await oauth_client(raw, mcp)
        response = await client.post(
            {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": BOARD_URI}}
        )
        assert response.status == 403
        assert 'scope="notes:write"' in response.headers.get("www-authenticate", "")
        _, granted = await _user_with_token("bob", "notes:read notes:write")
        (content,) = (
            await (await oauth_client(granted, mcp)).call("resources/read", {"uri": BOARD_URI})
        )["contents"]
        assert content["mimeType"] == MIME_TYPE
