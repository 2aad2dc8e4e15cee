"""Function resources, templates and prompts as authors write them: completers that see the
user, "not found" and ``ToolError`` answered as readable errors in both eras, and ``ctx.user``
as Django has it when nobody is signed in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest

from mcp_django import Context, InvalidParamsError, ModelMCP, ResourceNotFoundError, ToolError
from mcp_django.models import Session
from mcp_django.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from mcp_django.transport.legacy_sse import HTTPSSEConsumer
from mcp_django.transport.stdio import StdioServer
from tests.conftest import make_user
from tests.testapp.models import Note
from tests.transport.conftest import mcp_settings
from tests.transport.test_stateless import body, post

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


# -- completers that see the user ------------------------------------------------------------


def _own_titles(typed: str, ctx: Context) -> list[str]:
    # A completer is a read path: it filters rows as the resource itself would.
    return list(
        Note.objects.filter(owner_id=ctx.user.pk, title__startswith=typed)
        .order_by("title")
        .values_list("title", flat=True)
    )


async def _own_titles_async(
    typed, arguments, ctx
):  # unannotated: found by its name, like a lambda's
    return [
        n.title
        async for n in Note.objects.filter(owner_id=ctx.user.pk, title__startswith=typed).order_by(
            "title"
        )
    ]


def _notes_site() -> MCPSite:
    mcp = MCPSite(name="completer-tests")

    @mcp.resource("notes://{title}", complete={"title": _own_titles})
    def note(title: str) -> str:
        return title

    @mcp.prompt(
        complete={
            "title": _own_titles_async,
            "tone": lambda typed, ctx: [f"{typed}-{ctx.user.get_username()}"],
        }
    )
    def summarize(title: str, tone: str = "plain") -> str:
        return f"Summarize {title} in a {tone} tone."

    @mcp.prompt(complete={"tone": lambda typed, arguments: [f"{typed}:{arguments.get('title')}"]})
    def legacy(title: str, tone: str) -> str:
        return f"{title} {tone}"

    return mcp


@sync_to_async
def _alice_and_bob_notes() -> User:
    alice, bob = make_user("alice"), make_user("bob")
    Note.objects.bulk_create(
        [Note(owner=alice, title="draft alice"), Note(owner=bob, title="draft bob")]
    )
    return alice


async def _signed_in(user: User, mcp: MCPSite) -> MCPTestClient:
    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    await client.force_login(user)
    await client.initialize()
    return client


@pytest.fixture
def django_authentication() -> Iterator[None]:
    with mcp_settings(AUTHENTICATION="django"):
        yield


async def _complete(
    client: MCPTestClient,
    ref: dict[str, str],
    name: str,
    value: str,
    arguments: dict[str, str] | None = None,
) -> list[str]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if arguments is not None:
        params["context"] = {"arguments": arguments}
    result = await client.call("completion/complete", params)
    return list(result["completion"]["values"])


@pytest.mark.usefixtures("django_authentication")
async def test_a_template_completer_taking_ctx_suggests_only_the_users_rows() -> None:
    client = await _signed_in(await _alice_and_bob_notes(), _notes_site())
    assert await _complete(
        client, {"type": "ref/resource", "uri": "notes://{title}"}, "title", "draft"
    ) == ["draft alice"]


@pytest.mark.usefixtures("django_authentication")
async def test_an_async_prompt_completer_taking_ctx_suggests_only_the_users_rows() -> None:
    client = await _signed_in(await _alice_and_bob_notes(), _notes_site())
    prompt = {"type": "ref/prompt", "name": "summarize"}
    assert await _complete(client, prompt, "title", "draft", {"tone": "dry"}) == ["draft alice"]
    assert await _complete(client, prompt, "tone", "dry") == ["dry-alice"]  # a lambda's ctx


@pytest.mark.usefixtures("django_authentication")
async def test_a_completer_without_ctx_still_gets_the_value_and_the_other_arguments() -> None:
    client = await _signed_in(await _alice_and_bob_notes(), _notes_site())
    values = await _complete(
        client, {"type": "ref/prompt", "name": "legacy"}, "tone", "dry", {"title": "t"}
    )
    assert values == ["dry:t"]


# -- "not found" and ToolError from a read or a get ------------------------------------------


def _failing_site() -> MCPSite:
    mcp = MCPSite(name="error-tests")

    @mcp.resource("fail://tool-error")
    def tool_error() -> str:
        raise ToolError("That shelf is being restocked.")

    @mcp.resource("fail://http404")
    def http404() -> str:
        raise Http404("no such shelf")

    @mcp.resource("fail://notes/{pk}")
    def one_note(pk: int) -> str:
        return Note.objects.get(pk=pk).title  # Note.DoesNotExist for a missing row

    @mcp.resource("fail://own-not-found")
    def own_not_found() -> str:
        raise ResourceNotFoundError("fail://own-not-found")

    @mcp.resource("fail://own-invalid")
    async def own_invalid() -> str:
        raise InvalidParamsError("Invalid params: pick a shelf first")

    @mcp.prompt()
    def shelf(name: str) -> str:
        raise ToolError(f"No shelf called {name}.")

    @mcp.prompt()
    def shelf_404(name: str) -> str:
        raise Http404(name)

    return mcp


async def _error(mcp: MCPSite, era: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    if era == "2026-07-28":
        response = await post(client, body(method, params))
    else:
        await client.initialize()
        response = await client.post(
            {"jsonrpc": "2.0", "id": client.next_id(), "method": method, "params": params}
        )
    answer = response.json()
    assert "error" in answer, answer
    return dict(answer["error"])


ERAS = ["2025-11-25", "2026-07-28"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_resource_raising_tool_error_answers_invalid_params_with_its_message(
    era: str,
) -> None:
    error = await _error(_failing_site(), era, "resources/read", {"uri": "fail://tool-error"})
    assert error == {
        "code": INVALID_PARAMS,
        "message": "That shelf is being restocked.",
        "data": {"uri": "fail://tool-error"},
    }


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("uri", ["fail://http404", "fail://notes/999999", "fail://own-not-found"])
async def test_a_resource_that_finds_nothing_answers_resource_not_found(era: str, uri: str) -> None:
    error = await _error(_failing_site(), era, "resources/read", {"uri": uri})
    # 2026-07-28 retired -32002: a missing resource is invalid params there, with its URI.
    assert error["code"] == (INVALID_PARAMS if era == "2026-07-28" else RESOURCE_NOT_FOUND)
    assert error["data"] == {"uri": uri}
    assert error["message"] == f"Resource not found: {uri}"


@pytest.mark.parametrize("era", ERAS)
async def test_a_resource_raising_invalid_params_answers_it_as_raised(era: str) -> None:
    error = await _error(_failing_site(), era, "resources/read", {"uri": "fail://own-invalid"})
    assert (error["code"], error["message"]) == (
        INVALID_PARAMS,
        "Invalid params: pick a shelf first",
    )


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_raising_tool_error_answers_invalid_params_with_its_message(
    era: str,
) -> None:
    error = await _error(
        _failing_site(), era, "prompts/get", {"name": "shelf", "arguments": {"name": "poetry"}}
    )
    assert (error["code"], error["message"]) == (INVALID_PARAMS, "No shelf called poetry.")


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_that_finds_nothing_answers_invalid_params(era: str) -> None:
    error = await _error(
        _failing_site(), era, "prompts/get", {"name": "shelf_404", "arguments": {"name": "poetry"}}
    )
    assert error["code"] == INVALID_PARAMS
    assert "found nothing" in error["message"]


# -- Django data errors (ValidationError, a missing row) are the caller's fault ----------------


def _data_error_site() -> MCPSite:
    mcp = MCPSite(name="data-error-tests")

    @mcp.resource("data://invalid")
    def invalid() -> str:
        raise DjangoValidationError(
            {"title": ["This field is required."], "body": ["Too long.", "No HTML."]}
        )

    @mcp.prompt()
    def invalid_prompt(name: str) -> str:
        raise DjangoValidationError(f"{name} is not a shelf.")

    @mcp.tool()
    def invalid_tool(name: str) -> str:
        raise DjangoValidationError(["Pick a shelf.", f"{name} is closed."])

    @mcp.tool()
    def missing_tool(pk: int) -> str:
        return Note.objects.get(pk=pk).title

    return mcp


async def _tool_result(
    mcp: MCPSite, era: str, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    client = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    params = {"name": name, "arguments": arguments}
    if era == "2026-07-28":
        response = await post(client, body("tools/call", params))
    else:
        await client.initialize()
        response = await client.post(
            {"jsonrpc": "2.0", "id": client.next_id(), "method": "tools/call", "params": params}
        )
    answer = response.json()
    assert "result" in answer, answer
    return dict(answer["result"])


@pytest.mark.parametrize("era", ERAS)
async def test_a_resource_raising_django_validation_error_answers_invalid_params_with_its_messages(
    era: str,
) -> None:
    error = await _error(_data_error_site(), era, "resources/read", {"uri": "data://invalid"})
    assert error["code"] == INVALID_PARAMS
    assert (
        error["message"]
        == "Invalid params: title: This field is required.; body: Too long. No HTML."
    )
    assert error["data"] == {"uri": "data://invalid"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_raising_django_validation_error_answers_invalid_params_with_its_message(
    era: str,
) -> None:
    params = {"name": "invalid_prompt", "arguments": {"name": "poetry"}}
    error = await _error(_data_error_site(), era, "prompts/get", params)
    assert (error["code"], error["message"]) == (
        INVALID_PARAMS,
        "Invalid params: poetry is not a shelf.",
    )


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_raising_django_validation_error_answers_its_messages_as_a_tool_error(
    era: str,
) -> None:
    result = await _tool_result(_data_error_site(), era, "invalid_tool", {"name": "poetry"})
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "Pick a shelf. poetry is closed."}]


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_that_finds_no_row_answers_the_does_not_exist_message_as_a_tool_error(
    era: str,
) -> None:
    result = await _tool_result(_data_error_site(), era, "missing_tool", {"pk": 999999})
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "Note matching query does not exist."}]


# -- ctx.user when nobody is signed in (AUTHENTICATION = "none") -------------------------------


def _whoami_site() -> MCPSite:
    mcp = MCPSite(name="anonymous-tests")

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        # Ordinary Django code, as in a view: it must not meet None.
        return f"{type(ctx.user).__name__} authenticated={ctx.user.is_authenticated} superuser={ctx.user.is_superuser}"

    return mcp


ANONYMOUS = "AnonymousUser authenticated=False superuser=False"
WHOAMI = {"name": "whoami", "arguments": {}}


def _text(result: dict[str, Any]) -> str:
    assert not result.get("isError"), result
    return str(result["content"][0]["text"])


async def test_ctx_user_is_anonymous_user_over_streamable_http_in_a_session() -> None:
    client = MCPTestClient(MCPConsumer.as_asgi(site=_whoami_site()))
    await client.initialize()
    assert _text(await client.call("tools/call", WHOAMI)) == ANONYMOUS
    # Still anonymous to everything that keys on the user: the session has no user.
    assert (await Session.objects.aget(pk=client.session_id)).user_id is None


async def test_ctx_user_is_anonymous_user_in_a_stateless_request() -> None:
    client = MCPTestClient(MCPConsumer.as_asgi(site=_whoami_site()))
    assert _text((await post(client, body("tools/call", WHOAMI))).json()["result"]) == ANONYMOUS


async def test_ctx_user_is_anonymous_user_over_legacy_http_sse() -> None:
    mcp = _whoami_site()

    def legacy(kind: str) -> MCPTestClient:
        return MCPTestClient(HTTPSSEConsumer.as_asgi(site=mcp, kind=kind), path=f"/mcp/{kind}/")

    async with await legacy("sse").open_stream() as stream:
        endpoint = (await stream.next_event()).data
        messages = legacy("messages")
        initialize = {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        await messages.post_raw(
            orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}),
            path=endpoint,
        )
        assert "result" in await stream.next_message()
        await messages.post_raw(
            orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), path=endpoint
        )
        await messages.post_raw(
            orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": WHOAMI}),
            path=endpoint,
        )
        answer = await stream.next_message()
    assert _text(answer["result"]) == ANONYMOUS


async def test_ctx_user_is_anonymous_user_over_stdio() -> None:
    from mcp_django.management.commands.mcp_stdio import Command

    lines: list[dict[str, Any]] = []

    async def write(data: bytes) -> None:
        lines.append(orjson.loads(data))

    principal = Command().principal_for(None)  # what mcp_stdio runs as without --user
    assert principal.user.is_authenticated is False
    assert principal.user_id is None and principal.key == "anonymous"  # quotas, state, audit
    server = StdioServer(_whoami_site().engine, principal, write, max_line=1 << 20)
    await server.receive(orjson.dumps(body("tools/call", WHOAMI)))
    await asyncio.wait_for(asyncio.gather(*list(server.running.values())), 5)
    await server.stop()
    assert _text(lines[-1]["result"]) == ANONYMOUS


def test_a_context_built_without_a_user_has_an_anonymous_user() -> None:
    request = HttpRequest()
    ctx = Context(site=MCPSite(name="bare"), request=request, user=None, session=None)
    assert isinstance(ctx.user, AnonymousUser)


# -- model rows a tool returns are read through the site's ModelMCP ---------------------------


class _OwnNotes(ModelMCP[Note]):
    fields = ["id", "title", "priority"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return super().get_queryset(request).filter(owner_id=request.user.pk)


def _model_result_site(*, register: bool = True) -> MCPSite:
    mcp = MCPSite(name="model-result-tests")
    if register:
        mcp.register(Note)(_OwnNotes)

    @mcp.tool()
    def all_notes() -> list[Note]:
        return list(Note.objects.order_by("pk"))

    @mcp.tool()
    def note_queryset():  # type: ignore[no-untyped-def]  # un-annotated on purpose
        return Note.objects.order_by("pk")

    @mcp.tool()
    def one_note(title: str) -> Note:
        return Note.objects.get(title=title)

    return mcp


@sync_to_async
def _alice_may_view_notes() -> User:
    alice, bob = make_user("alice", "view_note"), make_user("bob", "view_note")
    Note.objects.bulk_create(
        [Note(owner=alice, title="draft alice"), Note(owner=bob, title="draft bob")]
    )
    return alice


@pytest.mark.usefixtures("django_authentication")
@pytest.mark.parametrize("tool", ["all_notes", "note_queryset"])
async def test_a_tool_returning_model_rows_answers_only_the_rows_its_model_mcp_lets_the_user_view(
    tool: str,
) -> None:
    client = await _signed_in(await _alice_may_view_notes(), _model_result_site())
    result = await client.call("tools/call", {"name": tool, "arguments": {}})
    assert "isError" not in result, result
    rows = result["structuredContent"]["result"]
    assert [(row["title"], row["priority"]) for row in rows] == [("draft alice", "low")]
    assert set(rows[0]) == {"id", "title", "priority"}
    assert orjson.loads(result["content"][0]["text"]) == rows


@pytest.mark.usefixtures("django_authentication")
async def test_a_tool_returning_one_row_the_user_may_not_view_answers_not_found() -> None:
    client = await _signed_in(await _alice_may_view_notes(), _model_result_site())
    own = await client.call(
        "tools/call", {"name": "one_note", "arguments": {"title": "draft alice"}}
    )
    assert own["structuredContent"]["title"] == "draft alice"
    other = await client.call(
        "tools/call", {"name": "one_note", "arguments": {"title": "draft bob"}}
    )
    assert other["isError"] is True
    assert other["content"] == [{"type": "text", "text": "note not found"}]
    assert "draft bob" not in orjson.dumps(other).decode()


@pytest.mark.usefixtures("django_authentication")
async def test_a_tool_returning_rows_of_a_model_without_model_mcp_fails_instead_of_str() -> None:
    client = await _signed_in(await _alice_may_view_notes(), _model_result_site(register=False))
    result = await client.call(
        "tools/call", {"name": "one_note", "arguments": {"title": "draft alice"}}
    )
    assert result["isError"] is True
    assert "draft alice" not in orjson.dumps(result).decode()
    assert "structuredContent" not in result


def test_a_tool_annotated_with_a_model_lists_its_model_mcp_row_schema_as_output_schema() -> None:
    mcp = _model_result_site()
    rows = {
        "type": "object",
        "properties": mcp.get_model_mcp(Note).field_schemas(writable=False, output=True)[
            "properties"
        ],
    }
    definitions = {tool.name: tool.definition() for tool in mcp.get_tools()}
    assert definitions["one_note"]["outputSchema"] == rows
    assert set(rows["properties"]) == {"id", "title", "priority"}
    wrapped = {
        "type": "object",
        "properties": {"result": {"type": "array", "items": rows}},
        "required": ["result"],
    }
    assert definitions["all_notes"]["outputSchema"] == wrapped
    assert "outputSchema" not in definitions["note_queryset"]  # un-annotated: nothing promised


def test_a_tool_annotated_with_a_model_without_model_mcp_fails_check_e240_until_one_is_registered() -> (
    None
):
    mcp = _model_result_site(register=False)
    errors = [e for e in mcp.check() if e.id == "mcp_django.E240"]
    assert sorted(e.msg.split("'")[1] for e in errors) == ["all_notes", "one_note"]
    assert "register a ModelMCP" in errors[0].hint
    mcp.register(Note)(_OwnNotes)  # registered after the tools: that is fine
    assert [e for e in mcp.check() if e.id == "mcp_django.E240"] == []


def _lookup_site() -> MCPSite:
    mcp = MCPSite(name="lookup-value-tests")

    @mcp.resource("lookup://{pk}")
    def note_by_pk(pk: str) -> str:
        return Note.objects.get(pk=pk).title

    @mcp.tool()
    def note_title(pk: str) -> str:
        return Note.objects.get(pk=pk).title

    @mcp.tool()
    def buggy(pk: str) -> str:
        raise ValueError("internal detail")

    return mcp


@pytest.mark.parametrize("era", ERAS)
async def test_a_resource_whose_lookup_value_a_field_cannot_convert_answers_invalid_params(
    era: str,
) -> None:
    error = await _error(_lookup_site(), era, "resources/read", {"uri": "lookup://abc"})
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Invalid params: Field 'id' expected a number but got 'abc'."


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_whose_lookup_value_a_field_cannot_convert_answers_a_tool_error_but_a_bare_value_error_stays_internal(
    era: str,
) -> None:
    result = await _tool_result(_lookup_site(), era, "note_title", {"pk": "abc"})
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": "Field 'id' expected a number but got 'abc'."}
    ]
    buggy = await _tool_result(_lookup_site(), era, "buggy", {"pk": "abc"})
    assert buggy["content"] == [{"type": "text", "text": "Error running tool 'buggy'"}]
