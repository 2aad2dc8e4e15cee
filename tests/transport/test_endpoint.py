"""The Streamable HTTP endpoint end to end: header rules, JSON-RPC, lifecycle, tools, SSE, sessions.

Everything goes through :class:`mcp_django.testing.MCPTestClient` in-process; raw bodies and
headers only where the test is about status codes, headers or SSE framing.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import orjson
import pytest
from channels.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from django.utils import timezone

from mcp_django.models import Event, Session
from mcp_django.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
)
from mcp_django.protocol.negotiation import LATEST_VERSION
from mcp_django.protocol.sse import SSEParser
from mcp_django.registry.sites import MCPSite
from mcp_django.routing import MCPRouter
from mcp_django.stores import initialized_marks, session_cache
from mcp_django.testing import MCPTestClient, SSEEvent, StreamClosed
from mcp_django.transport.consumers import MCPConsumer
from tests.test_running_caps import Held, hold_call, open_call
from tests.test_running_caps import held as held  # the fixture

from .conftest import mcp_settings

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def ping_body(request_id: int | str = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


def assert_transport_error(response, status: int) -> dict:
    """The answer is ``status`` with an id-less JSON-RPC error body; return the error."""
    assert response.status == status, response.body
    assert response.content_type == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert isinstance(body["error"]["code"], int)
    return body["error"]


# --- Accept -------------------------------------------------------------------------------


async def test_post_accepting_only_json_is_refused_with_406(client):
    response = await client.post_raw(ping_body(), {"accept": "application/json"})
    assert_transport_error(response, 406)


async def test_post_accepting_only_sse_is_refused_with_406(client):
    response = await client.post_raw(ping_body(), {"accept": "text/event-stream"})
    assert_transport_error(response, 406)


async def test_post_accepting_both_with_wildcard_is_served(client):
    response = await client.post_raw(ping_body(), {"accept": "*/*"})
    assert response.status == 200


async def test_get_without_sse_in_accept_is_refused_with_406(client):
    stream = await client.open_stream(headers={"accept": "application/json"})
    assert stream.status == 406
    assert stream.json()["error"]["code"] == INVALID_REQUEST


# --- Content-Type and size ----------------------------------------------------------------


async def test_post_with_non_json_content_type_is_refused_with_415(client):
    response = await client.post_raw(ping_body(), {"content-type": "text/plain"})
    assert_transport_error(response, 415)


async def test_post_json_content_type_with_charset_is_served(client):
    response = await client.post_raw(
        ping_body(), {"content-type": "application/json; charset=utf-8"}
    )
    assert response.status == 200


async def test_content_length_over_max_body_size_is_refused_with_413(client):
    with mcp_settings(MAX_BODY_SIZE=64):
        response = await client.post_raw(ping_body(), {"content-length": "65"})
    assert_transport_error(response, 413)


async def test_body_over_max_body_size_is_refused_with_413_without_content_length(client):
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 100}})
    with mcp_settings(MAX_BODY_SIZE=64):
        response = await client.post_raw(body)
    assert_transport_error(response, 413)


async def test_body_within_max_body_size_is_served(client):
    with mcp_settings(MAX_BODY_SIZE=64):
        response = await client.post_raw(ping_body())
    assert response.status == 200


# --- MCP-Protocol-Version -----------------------------------------------------------------


async def test_missing_protocol_version_header_is_taken_as_2025_03_26(client):
    response = await client.post_raw(ping_body(), {"mcp-protocol-version": None})
    assert response.status == 200
    assert response.json()["result"] == {}


async def test_unsupported_protocol_version_header_is_refused_with_400(client):
    response = await client.post_raw(ping_body(), {"mcp-protocol-version": "1999-01-01"})
    error = assert_transport_error(response, 400)
    assert "MCP-Protocol-Version" in error["message"]


async def test_unsupported_protocol_version_header_on_get_is_refused_with_400(client):
    stream = await client.open_stream(headers={"mcp-protocol-version": "2026-13-45"})
    assert stream.status == 400


# --- Mcp-Session-Id -----------------------------------------------------------------------


async def test_request_without_session_id_after_initialize_is_refused_with_400(client):
    response = await client.post_raw(
        orjson.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}), {"mcp-session-id": None}
    )
    assert_transport_error(response, 400)


async def test_unknown_session_id_is_answered_404(client):
    response = await client.post_raw(ping_body(), {"mcp-session-id": "no-such-session"})
    assert_transport_error(response, 404)


async def test_terminated_session_id_is_answered_404(client):
    await Session.objects.filter(pk=client.session_id).aupdate(terminated_at=timezone.now())
    session_cache.drop(
        client.session_id
    )  # as the store's own writes announce (a queryset update does not)
    response = await client.post_raw(ping_body())
    assert_transport_error(response, 404)


async def test_expired_session_id_is_answered_404(client):
    await Session.objects.filter(pk=client.session_id).aupdate(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    session_cache.drop(
        client.session_id
    )  # as the store's own writes announce (a queryset update does not)
    response = await client.post_raw(ping_body())
    assert_transport_error(response, 404)


@pytest.mark.parametrize("value", ["has space", "x" * 129, "tab\there", "caf\u00e9"])
async def test_malformed_session_id_is_refused_with_400(client, value, caplog):
    with caplog.at_level("WARNING", logger="django.security.InvalidSessionId"):
        response = await client.post_raw(ping_body(), {"mcp-session-id": value})
    assert_transport_error(response, 400)
    # Logged where Django logs its SuspiciousOperations, without echoing the value.
    [record] = [r for r in caplog.records if r.name == "django.security.InvalidSessionId"]
    assert "Malformed Mcp-Session-Id" in record.getMessage() and value not in record.getMessage()


async def test_session_id_is_visible_ascii(client):
    assert client.session_id
    assert all(0x21 <= ord(c) <= 0x7E for c in client.session_id)


# --- Origin and Host ----------------------------------------------------------------------


async def test_foreign_origin_is_refused_with_403(client):
    response = await client.post_raw(ping_body(), {"origin": "http://evil.example"})
    assert_transport_error(response, 403)
    # The developer behind a refused browser client learns where origins are allowed.
    assert "MCP_DJANGO['ALLOWED_ORIGINS']" in response.json()["error"]["message"]


async def test_foreign_origin_is_refused_before_initialize():
    client = MCPTestClient()
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": LATEST_VERSION, "capabilities": {}},
        },
        {"origin": "http://evil.example"},
    )
    assert_transport_error(response, 403)
    assert await Session.objects.acount() == 0


async def test_same_origin_is_allowed(client):
    response = await client.post_raw(ping_body(), {"origin": "http://testserver"})
    assert response.status == 200


async def test_origin_listed_in_allowed_origins_is_allowed(client):
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example"]):
        response = await client.post_raw(ping_body(), {"origin": "https://app.example"})
    assert response.status == 200


async def test_host_not_in_allowed_hosts_is_refused_with_400(client):
    response = await client.post_raw(ping_body(), {"host": "evil.example"})
    assert_transport_error(response, 400)


# --- CSRF, methods, paths -----------------------------------------------------------------


async def test_post_needs_no_csrf_token():
    user = await get_user_model().objects.acreate_user("csrf-user", password="pw")
    with mcp_settings(AUTHENTICATION="django"):
        client = MCPTestClient()
        await client.force_login(user)
        assert "csrftoken" not in client.headers.get("cookie", "")
        result = await client.initialize()
        assert result["protocolVersion"] == LATEST_VERSION
        assert (await client.call_tool("add", {"a": 2, "b": 3}))["structuredContent"] == {
            "result": 5
        }


async def test_unsupported_method_is_answered_405_with_allow(client):
    response = await client.send("PUT", ping_body(), {"content-type": "application/json"})
    assert_transport_error(response, 405)
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert allowed == {"GET", "POST", "DELETE"}


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_endpoint_is_served_with_and_without_trailing_slash(path):
    client = MCPTestClient(path=path)
    result = await client.initialize()
    assert result["protocolVersion"] == LATEST_VERSION
    assert (await client.ping()) == {}


async def test_other_paths_go_to_django(client):
    response = await client.send("GET", headers={"accept": "text/html"}, path="/not-mcp/")
    assert response.status == 404
    assert "mcp-session-id" not in response.headers


# --- JSON-RPC framing ---------------------------------------------------------------------


async def test_invalid_json_is_a_parse_error_with_null_id(client):
    response = await client.post_raw(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert response.status == 400
    body = response.json()
    assert body["id"] is None
    assert body["error"]["code"] == PARSE_ERROR


async def test_invalid_utf8_is_a_parse_error(client):
    response = await client.post_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}')
    assert response.status == 400
    assert response.json()["error"]["code"] == PARSE_ERROR


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        "ping",
        42,
    ],
)
async def test_invalid_request_is_answered_invalid_request(client, message):
    response = await client.post(message)
    assert response.status == 400
    assert response.json()["error"]["code"] == INVALID_REQUEST


async def test_null_id_is_rejected(client):
    response = await client.post({"jsonrpc": "2.0", "id": None, "method": "ping"})
    assert response.status == 400
    body = response.json()
    assert body["id"] is None
    assert body["error"]["code"] == INVALID_REQUEST


async def test_unknown_method_is_method_not_found_with_the_id(client):
    response = await client.request("no/such/method", id="abc")
    assert response["id"] == "abc"
    assert response["error"]["code"] == METHOD_NOT_FOUND


async def test_notification_is_answered_202_without_body(client):
    response = await client.notify("notifications/roots/list_changed")
    assert response.status == 202
    assert response.body == b""


async def test_client_response_is_answered_202(client):
    response = await client.post({"jsonrpc": "2.0", "id": "srv-unknown", "result": {}})
    assert response.status == 202
    assert response.body == b""


async def test_client_error_response_is_answered_202(client):
    response = await client.post(
        {"jsonrpc": "2.0", "id": 9, "error": {"code": -1, "message": "no"}}
    )
    assert response.status == 202


async def test_string_and_integer_ids_are_echoed_with_their_type(client):
    assert (await client.request("ping", id="7"))["id"] == "7"
    assert (await client.request("ping", id=7))["id"] == 7


# --- batches ------------------------------------------------------------------------------


@pytest.fixture
async def batch_client() -> MCPTestClient:
    """A client whose session speaks 2025-03-26, the one revision with batches."""
    client = MCPTestClient()
    result = await client.initialize(protocol_version="2025-03-26")
    assert result["protocolVersion"] == "2025-03-26"
    return client


async def test_batch_on_2025_03_26_session_is_answered_as_json_array(batch_client):
    response = await batch_client.post(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 1}},
            },
        ]
    )
    assert response.status == 200
    assert response.content_type == "application/json"
    answers = {a["id"]: a for a in response.json()}
    assert set(answers) == {1, 2}
    assert answers[1]["result"] == {}
    assert answers[2]["result"]["structuredContent"] == {"result": 2}


async def test_batch_of_notifications_only_is_answered_202(batch_client):
    response = await batch_client.post(
        [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]
    )
    assert response.status == 202


async def test_batch_with_streaming_tool_is_answered_as_sse(batch_client):
    response = await batch_client.post(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "progress", "arguments": {"steps": 1}},
            },
        ]
    )
    assert response.status == 200
    assert response.is_sse
    answers = {m["id"]: m for m in response.messages() if "id" in m}
    assert answers[1]["result"] == {}
    assert answers[2]["result"]["content"][0]["text"] == "done 1"


async def test_batch_with_invalid_member_answers_the_others(batch_client):
    response = await batch_client.post(
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2}]
    )
    answers = {a["id"]: a for a in response.json()}
    assert answers[1]["result"] == {}
    assert answers[2]["error"]["code"] == INVALID_REQUEST


async def test_batch_on_2025_11_25_session_is_refused_with_400(client):
    response = await client.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    error = assert_transport_error(response, 400)
    assert error["code"] == INVALID_REQUEST


async def test_batch_sent_as_2026_07_28_is_refused_as_one_message_per_request():
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]

    response = await MCPTestClient().post_raw(
        orjson.dumps(batch), {"mcp-protocol-version": "2026-07-28"}
    )

    error = assert_transport_error(response, 400)
    assert error["code"] == INVALID_REQUEST
    assert "2026-07-28 takes one JSON-RPC message per request" in error["message"]
    assert "unsupported MCP-Protocol-Version" not in error["message"]


async def test_batch_whose_messages_carry_2026_07_28_meta_is_refused_as_one_message_per_request():
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": meta}}]

    response = await MCPTestClient().post_raw(orjson.dumps(batch), {})

    error = assert_transport_error(response, 400)
    assert "2026-07-28 takes one JSON-RPC message per request" in error["message"]


async def test_initialize_in_a_batch_is_refused_with_400():
    client = MCPTestClient()
    response = await client.post(
        [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
            }
        ]
    )
    assert_transport_error(response, 400)
    assert await Session.objects.acount() == 0


async def test_duplicate_ids_in_one_batch_answer_the_first_and_reject_the_second(batch_client):
    response = await batch_client.post(
        [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "first"}},
            },
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "second"}},
            },
        ]
    )
    answers = response.json()
    assert len(answers) == 2
    results = [a for a in answers if "result" in a]
    errors = [a for a in answers if "error" in a]
    assert [r["result"]["content"][0]["text"] for r in results] == ["first"]
    assert errors[0]["id"] == 1
    assert errors[0]["error"]["code"] == INVALID_REQUEST


async def test_batch_over_max_batch_size_is_refused_with_400(batch_client):
    with mcp_settings(MAX_BATCH_SIZE=2):
        response = await batch_client.post(
            [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(3)]
        )
    assert_transport_error(response, 400)


# --- lifecycle ----------------------------------------------------------------------------


async def test_ping_before_initialize_is_answered():
    client = MCPTestClient()
    assert await client.ping() == {}
    assert await Session.objects.acount() == 0


async def test_other_requests_before_initialize_need_a_session():
    client = MCPTestClient()
    response = await client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert_transport_error(response, 400)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_initialize_echoes_a_known_version(version):
    client = MCPTestClient()
    result = await client.initialize(protocol_version=version)
    assert result["protocolVersion"] == version
    session = await Session.objects.aget(pk=client.session_id)
    assert session.protocol_version == version


async def test_initialize_answers_latest_for_an_unknown_version():
    client = MCPTestClient()
    result = await client.initialize(protocol_version="2099-01-01")
    assert result["protocolVersion"] == LATEST_VERSION


async def test_initialize_sets_session_id_header_and_stores_client_info():
    client = MCPTestClient()
    await client.initialize(
        client_info={"name": "probe", "version": "2.0"}, capabilities={"sampling": {}}
    )
    assert client.last_response is not None
    await initialized_marks.flush()  # notifications/initialized is written off the request's path
    session = await Session.objects.aget(pk=client.session_id)
    assert (session.client_name, session.client_version) == ("probe", "2.0")
    assert session.client_capabilities == {"sampling": {}}
    assert session.initialized is True


async def test_initialize_with_session_id_header_is_refused(client):
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": LATEST_VERSION, "capabilities": {}},
        }
    )
    assert_transport_error(response, 400)


async def test_capabilities_reflect_the_registry(client):
    capabilities = client.initialize_result["capabilities"]
    assert {"tools", "resources", "prompts", "logging", "completions"} <= set(capabilities)


async def test_capabilities_of_a_site_with_only_tools_leave_out_resources_and_prompts():
    site = MCPSite(name="tools-only")
    site.tool(lambda a: a, name="identity")
    client = MCPTestClient(MCPConsumer.as_asgi(site=site))
    result = await client.initialize()
    assert "tools" in result["capabilities"]
    assert "resources" not in result["capabilities"]
    assert "prompts" not in result["capabilities"]
    assert (await client.request("resources/list"))["error"]["code"] == METHOD_NOT_FOUND
    assert (await client.request("prompts/get", {"name": "x"}))["error"]["code"] == METHOD_NOT_FOUND


async def test_server_info_and_instructions_come_from_settings():
    with mcp_settings(
        SERVER_NAME="Library",
        SERVER_VERSION="9.1",
        SERVER_TITLE="The Library",
        INSTRUCTIONS="Search first.",
    ):
        result = await MCPTestClient().initialize()
    assert result["serverInfo"] == {"name": "Library", "version": "9.1", "title": "The Library"}
    assert result["instructions"] == "Search first."


async def test_no_instructions_by_default(client):
    assert "instructions" not in client.initialize_result
    assert client.initialize_result["serverInfo"]["name"] == "mcp-django-tests"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"protocolVersion": 2025},
        {"protocolVersion": LATEST_VERSION, "capabilities": []},
        {"protocolVersion": LATEST_VERSION, "clientInfo": "x"},
    ],
)
async def test_initialize_with_bad_params_is_invalid_params(params):
    client = MCPTestClient()
    response = await client.request("initialize", params)
    assert response["error"]["code"] == INVALID_PARAMS
    assert await Session.objects.acount() == 0


# --- tools --------------------------------------------------------------------------------


async def test_tools_list_names_the_registered_tools(client):
    result = await client.call("tools/list")
    names = {t["name"] for t in result["tools"]}
    assert {"add", "echo", "fail", "crash", "progress", "reconnect"} <= names
    add = next(t for t in result["tools"] if t["name"] == "add")
    assert add["inputSchema"]["required"] == ["a", "b"]


async def test_call_tool_returns_structured_content(client):
    result = await client.call_tool("add", {"a": 2, "b": 40})
    assert result["structuredContent"] == {"result": 42}
    assert result["content"] == [{"type": "text", "text": "42"}]


async def test_unknown_tool_is_invalid_params(client):
    response = await client.request("tools/call", {"name": "nope", "arguments": {}})
    assert response["error"]["code"] == INVALID_PARAMS


async def test_invalid_tool_arguments_give_is_error_with_field_messages(client):
    result = await client.call_tool("add", {"a": "x"})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "a:" in text and "b:" in text


async def test_tool_error_text_is_the_tool_result(client):
    result = await client.call_tool("fail", {"message": "nothing to do"})
    assert result == {"content": [{"type": "text", "text": "nothing to do"}], "isError": True}


async def test_tool_exception_gives_is_error_without_details(client):
    result = await client.call_tool("crash")
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "secret internal detail" not in text
    assert "RuntimeError" not in text
    assert "Traceback" not in text


async def test_tool_exception_shows_its_text_with_tool_error_details(client):
    with mcp_settings(TOOL_ERROR_DETAILS=True):
        result = await client.call_tool("crash")
    text = result["content"][0]["text"]
    assert "RuntimeError: secret internal detail" in text
    assert "Traceback" not in text


async def test_tools_list_paginates_across_pages(client):
    with mcp_settings(PAGE_SIZE=1):
        names: list[str] = []
        params: dict = {}
        for _ in range(50):
            result = await client.call("tools/list", params)
            assert len(result["tools"]) == 1
            names += [t["name"] for t in result["tools"]]
            if "nextCursor" not in result:
                break
            params = {"cursor": result["nextCursor"]}
    everything = [t["name"] for t in (await client.call("tools/list"))["tools"]]
    assert names == everything
    assert len(names) == len(set(names)) > 1


async def test_invalid_cursor_is_invalid_params(client):
    response = await client.request("tools/list", {"cursor": "not-a-cursor!"})
    assert response["error"]["code"] == INVALID_PARAMS


# --- resources, prompts, completion -------------------------------------------------------


async def test_read_static_resource(client):
    result = await client.call("resources/read", {"uri": "test://hello"})
    assert result["contents"] == [
        {"uri": "test://hello", "text": "Hello!", "mimeType": "text/plain"}
    ]


async def test_read_resource_template(client):
    result = await client.call("resources/read", {"uri": "test://items/12"})
    (content,) = result["contents"]
    assert content["uri"] == "test://items/12"
    assert orjson.loads(content["text"]) == {"id": 12}


async def test_read_unknown_resource_is_resource_not_found_with_uri(client):
    response = await client.request("resources/read", {"uri": "test://nothing"})
    assert response["error"]["code"] == RESOURCE_NOT_FOUND
    assert response["error"]["data"] == {"uri": "test://nothing"}


async def test_resources_and_templates_are_listed(client):
    resources = (await client.call("resources/list"))["resources"]
    templates = (await client.call("resources/templates/list"))["resourceTemplates"]
    assert any(r["uri"] == "test://hello" for r in resources)
    assert any(t["uriTemplate"] == "test://items/{item_id}" for t in templates)


async def test_get_prompt(client):
    result = await client.call("prompts/get", {"name": "explain", "arguments": {"topic": "django"}})
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Explain django at beginner level."}}
    ]


async def test_get_prompt_without_required_argument_is_invalid_params(client):
    response = await client.request("prompts/get", {"name": "explain", "arguments": {}})
    assert response["error"]["code"] == INVALID_PARAMS


async def test_get_unknown_prompt_is_invalid_params(client):
    response = await client.request("prompts/get", {"name": "nope"})
    assert response["error"]["code"] == INVALID_PARAMS


async def test_completion_of_prompt_argument(client):
    result = await client.call(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "explain"},
            "argument": {"name": "topic", "value": "d"},
        },
    )
    assert result["completion"] == {"values": ["django", "databases"], "total": 2, "hasMore": False}


async def test_completion_of_template_variable(client):
    result = await client.call(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "test://items/{item_id}"},
            "argument": {"name": "item_id", "value": "1"},
        },
    )
    assert result["completion"]["values"] == ["1", "12"]


# --- SSE answers --------------------------------------------------------------------------


async def test_sse_response_mode_answers_with_an_event_stream(client):
    with mcp_settings(RESPONSE_MODE="sse", SSE_RETRY_MS=2500):
        response = await client.post(PING)
    assert response.status == 200
    assert response.content_type == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    priming, answer = response.events()
    stream, _, seq = priming.id.rpartition(":")
    assert stream and seq == "0"
    assert priming.data == ""
    assert priming.retry == 2500
    assert answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert answer.id == f"{stream}:1"


async def test_sse_answer_is_stored_as_events(client):
    with mcp_settings(RESPONSE_MODE="sse"):
        response = await client.post(PING)
    answer = response.events()[-1]
    stream, _, seq = answer.id.rpartition(":")
    event = await Event.objects.aget(session_id=client.session_id, stream=stream, seq=int(seq))
    assert orjson.loads(event.payload) == answer.json()
    assert event.closes_stream is True


async def test_a_quick_sse_answer_is_one_write_after_the_headers(client):
    communicator = ApplicationCommunicator(
        client.application, client.scope("POST", client.build_headers("POST"))
    )
    with mcp_settings(RESPONSE_MODE="sse"):
        await communicator.send_input(
            {"type": "http.request", "body": orjson.dumps(PING), "more_body": False}
        )
        start = await communicator.receive_output(5)
        body = await communicator.receive_output(5)
        await communicator.wait(5)
    assert start["type"] == "http.response.start" and start["status"] == 200
    # The priming event, the stored answer and the end of the response, together.
    assert body["more_body"] is False
    priming, answer = SSEParser().feed(body["body"])
    assert isinstance(priming, SSEEvent) and priming.id.endswith(":0") and priming.data == ""
    assert isinstance(answer, SSEEvent) and answer.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }


async def test_a_silent_streamed_call_gets_its_headers_and_priming_event_after_the_start_delay(
    client, held: Held
):
    exchange, stream = await open_call(client, hold_call("silent"))
    try:
        assert stream.status == 200 and stream.is_sse
        priming = await stream.next_event()
        assert priming.id.endswith(":0") and priming.data == ""
        held.gate.set()
        answer = await stream.next_message()
        assert answer["result"]["content"][0]["text"]
    finally:
        held.gate.set()
        await exchange.stop()


async def test_context_tool_is_answered_as_sse_even_in_json_mode(client):
    response = await client.request("tools/call", {"name": "progress", "arguments": {"steps": 2}})
    assert client.last_response.is_sse
    assert response["result"]["content"][0]["text"] == "done 2"


@pytest.mark.parametrize("token", [7, "tok-7", 0])
async def test_progress_token_is_echoed_unchanged(client, token):
    await client.request(
        "tools/call",
        {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": token}},
    )
    progress = [
        n["params"] for n in client.last_notifications if n["method"] == "notifications/progress"
    ]
    assert [p["progress"] for p in progress] == [1, 2]
    for params in progress:
        assert params["progressToken"] == token
        assert type(params["progressToken"]) is type(token)


async def test_no_progress_without_a_token(client):
    await client.request("tools/call", {"name": "progress", "arguments": {"steps": 2}})
    assert not [n for n in client.last_notifications if n["method"] == "notifications/progress"]


async def test_log_messages_arrive_by_default(client):
    await client.request("tools/call", {"name": "progress", "arguments": {"steps": 2}})
    logs = [
        n["params"] for n in client.last_notifications if n["method"] == "notifications/message"
    ]
    assert logs == [{"level": "info", "data": "step 1"}, {"level": "info", "data": "step 2"}]


async def test_set_level_filters_messages_below_the_level(client):
    assert await client.call("logging/setLevel", {"level": "warning"}) == {}
    await client.request(
        "tools/call", {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": 1}}
    )
    methods = [n["method"] for n in client.last_notifications]
    assert "notifications/message" not in methods
    assert methods.count("notifications/progress") == 2


async def test_set_level_with_unknown_level_is_invalid_params(client):
    response = await client.request("logging/setLevel", {"level": "loud"})
    assert response["error"]["code"] == INVALID_PARAMS


# --- resumption ---------------------------------------------------------------------------


async def test_reconnect_replays_exactly_the_missed_events_then_the_result(client):
    response = await client.post(
        {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "reconnect"}}
    )
    assert response.is_sse
    priming, before = response.events()
    assert before.json()["params"]["data"] == "before close"
    stream_token = priming.id.rpartition(":")[0]
    assert before.id == f"{stream_token}:1"

    async with await client.open_stream(last_event_id=before.id) as stream:
        assert stream.status == 200
        items = await stream.read_until_closed()
    events = [i for i in items if isinstance(i, SSEEvent) and i.data]
    assert [e.id for e in events] == [f"{stream_token}:2", f"{stream_token}:3"]
    assert events[0].json()["params"]["data"] == "after close"
    assert events[1].json() == {
        "jsonrpc": "2.0",
        "id": 11,
        "result": {"content": [{"type": "text", "text": "resumed"}]},
    }


async def test_resuming_from_the_priming_event_replays_the_whole_stream(client):
    response = await client.post(
        {"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "reconnect"}}
    )
    priming = response.events()[0]
    async with await client.open_stream(last_event_id=priming.id) as stream:
        items = await stream.read_until_closed()
    data = [i.json() for i in items if isinstance(i, SSEEvent) and i.data]
    assert [m.get("params", {}).get("data") for m in data[:2]] == ["before close", "after close"]
    assert data[2]["id"] == 12
    assert len(data) == 3


async def test_client_request_resumes_transparently(client):
    response = await client.request("tools/call", {"name": "reconnect"})
    assert response["result"]["content"][0]["text"] == "resumed"
    assert [n["params"]["data"] for n in client.last_notifications] == [
        "before close",
        "after close",
    ]
    ids = [e.id for e in client.last_events if e.data]
    assert len(ids) == len(set(ids)) == 3


async def test_malformed_last_event_id_is_refused_with_400(client):
    stream = await client.open_stream(last_event_id="not an event id")
    assert stream.status == 400
    assert stream.json()["error"]["code"] == INVALID_REQUEST


async def test_last_event_id_of_another_sessions_stream_is_refused_with_400(client):
    response = await client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reconnect"}}
    )
    foreign_id = response.events()[-1].id
    other = MCPTestClient()
    await other.initialize()
    stream = await other.open_stream(last_event_id=foreign_id)
    assert stream.status == 400


# --- the GET stream -----------------------------------------------------------------------


async def test_get_stream_opens_with_a_priming_event(client):
    async with await client.open_stream() as stream:
        assert stream.status == 200
        assert stream.is_sse
        assert stream.headers["cache-control"] == "no-cache"
        assert stream.headers["x-accel-buffering"] == "no"
        priming = await stream.next_event()
        assert priming.data == ""
        assert priming.id == "get:0"
        assert priming.retry is not None


async def test_get_stream_sends_keep_alive_comments(client):
    with mcp_settings(SSE_KEEPALIVE_SECONDS=0.05):
        async with await client.open_stream() as stream:
            comment = await stream.next_comment(timeout=5)
    assert comment.text == "keep-alive"


async def test_get_stream_without_session_is_refused_with_400():
    client = MCPTestClient()
    stream = await client.open_stream()
    assert stream.status == 400


async def test_second_get_takes_over_the_first(client):
    first = await client.open_stream()
    try:
        await first.next_event()
        async with await client.open_stream() as second:
            await first.read_until_closed()
            assert first.closed
            assert (await second.next_event()).id == "get:0"
    finally:
        await first.close()


async def test_session_notifications_reach_the_get_stream(client):
    from mcp_django.transport.streams import send_to_session

    async with await client.open_stream() as stream:
        await stream.next_event()
        await send_to_session(
            client.session_id, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        )
        message = await stream.next_message()
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert stream.last_event_id == "get:1"


# --- DELETE -------------------------------------------------------------------------------


async def test_delete_answers_204_then_the_session_is_gone(client):
    response = await client.delete()
    assert response.status == 204
    assert_transport_error(await client.post_raw(ping_body()), 404)
    assert_transport_error(await client.delete(), 404)


async def test_delete_closes_open_streams_of_the_session(client):
    async with await client.open_stream() as stream:
        await stream.next_event()
        assert (await client.delete()).status == 204
        await stream.read_until_closed()
        assert stream.closed


async def test_delete_without_session_id_is_refused_with_400(client):
    assert_transport_error(await client.delete({"mcp-session-id": None}), 400)


# --- authentication and ownership ---------------------------------------------------------


async def test_anonymous_request_with_django_authentication_is_refused_with_401():
    with mcp_settings(AUTHENTICATION="django"):
        response = await MCPTestClient().post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": LATEST_VERSION, "capabilities": {}},
            }
        )
    assert response.status == 401
    assert response.json()["error"]["code"] == INVALID_REQUEST


async def test_session_of_another_user_is_answered_404():
    users = get_user_model().objects
    alice = await users.acreate_user("alice", password="pw")
    bob = await users.acreate_user("bob", password="pw")
    with mcp_settings(AUTHENTICATION="django"):
        owner = MCPTestClient()
        await owner.force_login(alice)
        await owner.initialize()
        session = await Session.objects.aget(pk=owner.session_id)
        assert session.user_id == alice.pk

        intruder = MCPTestClient(
            session_id=owner.session_id, protocol_version=owner.protocol_version
        )
        await intruder.force_login(bob)
        assert_transport_error(await intruder.post_raw(ping_body()), 404)
        assert (await intruder.open_stream()).status == 404
        assert_transport_error(await intruder.delete(), 404)
        assert await owner.ping() == {}


# --- persistence --------------------------------------------------------------------------


async def test_session_survives_a_new_application_instance(client):
    from tests.asgi import django_asgi_app

    restarted = MCPTestClient(
        MCPRouter(django_asgi_app),
        session_id=client.session_id,
        protocol_version=client.protocol_version,
    )
    assert await restarted.ping() == {}
    assert (await restarted.call_tool("add", {"a": 1, "b": 2}))["structuredContent"] == {
        "result": 3
    }


async def test_stream_can_be_resumed_through_a_new_application_instance(client):
    from tests.asgi import django_asgi_app

    response = await client.post(
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "reconnect"}}
    )
    restarted = MCPTestClient(
        MCPRouter(django_asgi_app),
        session_id=client.session_id,
        protocol_version=client.protocol_version,
    )
    async with await restarted.open_stream(last_event_id=response.events()[-1].id) as stream:
        items = await stream.read_until_closed()
    assert [
        i.json()["id"] for i in items if isinstance(i, SSEEvent) and i.data and "id" in i.json()
    ] == [3]


async def test_reading_a_closed_stream_raises_stream_closed(client):
    async with await client.open_stream() as stream:
        await stream.next_event()
        await client.delete()
        await stream.read_until_closed()
        with pytest.raises(StreamClosed):
            await stream.next_event(timeout=1)


async def test_waiting_on_an_idle_stream_is_bounded(client):
    async with await client.open_stream() as stream:
        await stream.next_event()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stream.next_message(timeout=0.05), 5)


# --- more streams: GET resume, connection limit, cancellation, subscriptions ----------------


async def test_get_stream_resume_replays_missed_session_notifications_then_follows_live(client):
    from mcp_django.transport.streams import send_to_session

    for i in range(3):
        await send_to_session(
            client.session_id, {"jsonrpc": "2.0", "method": f"notifications/n{i}"}
        )
    async with await client.open_stream(last_event_id="get:1") as stream:
        replayed = [await stream.next_message(), await stream.next_message()]
        await send_to_session(client.session_id, {"jsonrpc": "2.0", "method": "notifications/live"})
        live = await stream.next_event()
    assert [m["method"] for m in replayed] == ["notifications/n1", "notifications/n2"]
    assert (live.id, live.json()["method"]) == ("get:4", "notifications/live")


async def test_max_connection_seconds_closes_the_connection_after_the_priming_event(client):
    with mcp_settings(SSE_MAX_CONNECTION_SECONDS=0.05):
        async with await client.open_stream() as stream:
            items = await stream.read_until_closed(timeout=5)
    assert stream.closed
    priming = items[0]
    assert isinstance(priming, SSEEvent) and priming.retry is not None and priming.id == "get:0"


async def test_cancelled_request_gets_no_response_and_its_client_request_is_cancelled():
    from mcp_django.models import ServerRequest

    client = MCPTestClient()
    await client.initialize(capabilities={"sampling": {}})

    async def cancel_instead_of_answering(params):
        assert (
            await client.notify(
                "notifications/cancelled", {"requestId": 99, "reason": "changed my mind"}
            )
        ).status == 202
        return {"role": "assistant", "content": {"type": "text", "text": "too late"}, "model": "m"}

    client.request_handlers["sampling/createMessage"] = cancel_instead_of_answering
    with pytest.raises(StreamClosed):
        await client.request(
            "tools/call", {"name": "ask", "arguments": {"question": "q"}}, id=99, resume=False
        )
    assert not [e for e in client.last_events if e.data and orjson.loads(e.data).get("id") == 99]
    assert [r.state async for r in ServerRequest.objects.all()] == [ServerRequest.State.CANCELLED]


async def test_subscribed_resource_update_reaches_the_get_stream(client):
    from mcp_django import site

    assert await client.call("resources/subscribe", {"uri": "test://hello"}) == {}
    async with await client.open_stream() as stream:
        await stream.next_event()
        assert await site.anotify_resource_updated("test://hello") == 1
        message = await stream.next_message()
    assert message == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://hello"},
    }


async def test_subscribe_to_unknown_resource_is_resource_not_found(client):
    response = await client.request("resources/subscribe", {"uri": "test://nothing"})
    assert response["error"]["code"] == RESOURCE_NOT_FOUND


# --- authentication challenge and CORS ----------------------------------------------------


async def test_401_carries_www_authenticate():
    with mcp_settings(AUTHENTICATION="django"):
        response = await MCPTestClient().post(PING)
    assert response.status == 401
    assert "www-authenticate" in response.headers


async def test_cors_preflight_from_an_allowed_origin_is_answered(client):
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example"]):
        preflight = await client.send(
            "OPTIONS",
            headers={
                "origin": "https://app.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, mcp-session-id, mcp-protocol-version",
            },
        )
        response = await client.post_raw(ping_body(), {"origin": "https://app.example"})
    assert preflight.status in (200, 204)
    assert preflight.headers.get("access-control-allow-origin") == "https://app.example"
    assert {"POST", "GET", "DELETE"} <= {
        m.strip() for m in preflight.headers["access-control-allow-methods"].split(",")
    }
    allowed = {
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    }
    assert {
        "authorization",
        "content-type",
        "mcp-protocol-version",
        "mcp-session-id",
        "last-event-id",
    } <= allowed
    assert response.headers.get("access-control-allow-origin") == "https://app.example"
    exposed = {
        h.strip().lower()
        for h in response.headers.get("access-control-expose-headers", "").split(",")
    }
    assert {"mcp-session-id", "www-authenticate"} <= exposed


async def preflight_asking_for(client: MCPTestClient, requested: str):
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example"]):
        return await client.send(
            "OPTIONS",
            headers={
                "origin": "https://app.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": requested,
            },
        )


async def test_cors_preflight_allows_the_headers_of_a_2026_07_28_request(client):
    requested = (
        "authorization, content-type, mcp-method, mcp-name, mcp-param-region, mcp-protocol-version"
    )

    preflight = await preflight_asking_for(client, requested)

    assert preflight.status == 204
    allowed = {
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    }
    assert {
        "mcp-method",
        "mcp-name",
        "mcp-param-region",
        "mcp-protocol-version",
        "authorization",
    } <= allowed


async def test_cors_preflight_echoes_only_well_formed_parameter_headers_up_to_a_bound(client):
    asked = ", ".join(["x-other", "mcp-param-a b", *(f"mcp-param-p{i}" for i in range(100))])

    preflight = await preflight_asking_for(client, asked)

    allowed = [
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    ]
    params = [h for h in allowed if h.startswith("mcp-param-")]
    assert len(params) == 64
    assert "x-other" not in allowed
    assert "mcp-param-a b" not in allowed


async def test_cors_preflight_from_a_foreign_origin_is_refused_with_403(client):
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example"]):
        preflight = await client.send(
            "OPTIONS",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
    assert_transport_error(preflight, 403)
    assert "access-control-allow-origin" not in preflight.headers


async def test_cors_headers_are_on_error_answers_and_streams_for_an_allowed_origin(client):
    origin = {"origin": "https://app.example"}
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example"]):
        not_found = await client.post_raw(ping_body(), {**origin, "mcp-session-id": "gone"})
        async with await client.open_stream(headers=origin) as stream:
            stream_headers = stream.headers
    assert not_found.status == 404
    assert not_found.headers["access-control-allow-origin"] == "https://app.example"
    assert stream_headers["access-control-allow-origin"] == "https://app.example"


async def test_same_origin_answers_carry_no_cors_headers(client):
    response = await client.post_raw(ping_body(), {"origin": "http://testserver"})
    assert "access-control-allow-origin" not in response.headers


async def test_cors_headers_are_on_a_413_for_an_allowed_origin(client):
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example"], MAX_BODY_SIZE=64):
        response = await client.post_raw(
            ping_body(), {"origin": "https://app.example", "content-length": "65"}
        )
    assert response.status == 413
    assert response.headers.get("access-control-allow-origin") == "https://app.example"


async def test_resuming_after_the_final_event_ends_the_connection_at_once(client):
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 50,
            "method": "tools/call",
            "params": {"name": "progress", "arguments": {"steps": 1}},
        }
    )
    final = response.events()[-1]
    assert final.json()["id"] == 50
    async with await client.open_stream(last_event_id=final.id) as stream:
        assert stream.status == 200
        assert await stream.read_until_closed(timeout=1) == []


async def test_activity_extends_the_session_expiry(client):
    soon = timezone.now() + timedelta(seconds=30)
    await Session.objects.filter(pk=client.session_id).aupdate(
        last_active_at=timezone.now() - timedelta(minutes=5), expires_at=soon
    )
    session_cache.drop(client.session_id)  # the row as another process left it
    assert await client.ping() == {}
    session = await Session.objects.aget(pk=client.session_id)
    assert session.expires_at > soon + timedelta(hours=1)
    assert session.last_active_at > timezone.now() - timedelta(minutes=1)


async def test_session_of_another_site_is_answered_404(client):
    other = MCPSite(name="other-site")
    other.tool(lambda: "x", name="t")
    stranger = MCPTestClient(
        MCPConsumer.as_asgi(site=other),
        session_id=client.session_id,
        protocol_version=client.protocol_version,
    )
    assert_transport_error(await stranger.post_raw(ping_body()), 404)


async def send_in_chunks(client: MCPTestClient, body: bytes, size: int) -> tuple[int, bytes]:
    """POST ``body`` as several ``http.request`` messages, as a server does for a streamed upload."""
    from channels.testing import ApplicationCommunicator

    communicator = ApplicationCommunicator(
        client.application, client.scope("POST", client.build_headers("POST"))
    )
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    for i, piece in enumerate(pieces):
        await communicator.send_input(
            {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        )
    start = await communicator.receive_output(5)
    answer = b""
    while True:
        message = await communicator.receive_output(5)
        answer += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait(5)
    return start["status"], answer


async def test_body_sent_in_chunks_is_reassembled(client):
    status, answer = await send_in_chunks(client, ping_body(42), 7)
    assert status == 200
    assert orjson.loads(answer) == {"jsonrpc": "2.0", "id": 42, "result": {}}


async def test_chunked_body_over_max_body_size_is_refused_with_413(client):
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 100}})
    with mcp_settings(MAX_BODY_SIZE=64):
        status, answer = await send_in_chunks(client, body, 40)
    assert status == 413
    assert orjson.loads(answer)["error"]["code"] == INVALID_REQUEST


async def test_mcp_router_answers_lifespan_for_django() -> None:
    from django.core.asgi import get_asgi_application

    from mcp_django.routing import MCPRouter

    router = MCPRouter(get_asgi_application())
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, str]] = []

    async def receive() -> dict[str, str]:
        return inbox.pop(0)

    async def send(message: dict[str, str]) -> None:
        sent.append(message)

    await router({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


# --- Without MCPRouter (WSGI, or Django's bare ASGI handler) ---------------------------------
# The plain view serves the endpoint there (tests/transport/test_plain.py); here, only that
# both path forms reach it.


@pytest.mark.parametrize(("method", "status"), [("POST", 200), ("GET", 405), ("DELETE", 400)])
@pytest.mark.parametrize("debug", [True, False])
def test_under_wsgi_both_paths_reach_the_plain_view(method, status, debug, settings):
    """runserver without daphne, gunicorn: no consumer, so the plain view answers. The
    no-slash form must not meet APPEND_SLASH (a 500 under DEBUG, a redirect dropping the POST)."""
    from django.test import Client

    settings.DEBUG = debug
    bodies = []
    for path in ("/mcp", "/mcp/"):
        response = Client().generic(
            method,
            path,
            ping_body(),
            content_type="application/json",
            headers={"accept": "application/json, text/event-stream"},
        )
        assert response.status_code == status, response.content
        assert response["content-type"] == "application/json"
        bodies.append(response.content)
    assert bodies[0] == bodies[1]


async def test_under_bare_django_asgi_both_paths_reach_the_plain_view():
    from django.core.asgi import get_asgi_application

    bodies = []
    for path in ("/mcp", "/mcp/"):
        client = MCPTestClient(get_asgi_application(), path=path)
        response = await client.send(
            "POST",
            ping_body(),
            {"content-type": "application/json", "accept": "application/json, text/event-stream"},
        )
        assert response.status == 200, response.body
        assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
        bodies.append(response.body)
    assert bodies[0] == bodies[1]


def test_other_paths_without_a_slash_still_redirect():
    from django.test import Client

    assert Client().get("/admin").status_code == 301


async def test_the_endpoint_needs_no_channels_entry_in_installed_apps():
    # Channels 4's AppConfig does nothing (no models, no ready()); daphne carries runserver.
    # So no system check asks for "channels": a project may leave it out.
    from django.conf import settings
    from django.test import override_settings

    with override_settings(
        INSTALLED_APPS=[app for app in settings.INSTALLED_APPS if app != "channels"]
    ):
        client = MCPTestClient()
        await client.initialize()
        listed = await client.request("tools/list")
    assert listed["result"]["tools"]


# --- A service the endpoint needs cannot be reached ------------------------------------------


@pytest.mark.parametrize(
    "raised",
    [
        ConnectionError("Error 22 connecting to 10.231.0.13:6379. Invalid argument."),
        TimeoutError("Timeout connecting to 10.231.0.13:6379"),
    ],
)
async def test_a_cache_that_cannot_be_reached_is_answered_503_retry_after(
    client, monkeypatch, caplog, raised
):
    """The running-calls quota counts in the cache (Redis, with several hosts): when it cannot be
    reached the call is answered 503 with Retry-After and an id-less -32603 saying to try again,
    the cause logged, not the ASGI server's bare 500 (tests/multihost scenario 3 saw those)."""
    from mcp_django.ops.quotas.limits import RunningSlot

    async def unreachable(*args, **kwargs):
        raise raised

    monkeypatch.setattr(RunningSlot, "acquire", unreachable)
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 1}},
        }
    )
    error = assert_transport_error(response, 503)
    assert error["code"] == INTERNAL_ERROR and error["message"].startswith("Service Unavailable:")
    assert response.headers["retry-after"] == "1"
    assert b"10.231.0.13" not in response.body
    assert "a backing service is unreachable" in caplog.text


async def test_a_request_answered_503_closes_the_broken_connections_of_the_sync_thread(
    client, monkeypatch
):
    # After a PostgreSQL restart, Django's sync thread kept its broken connection until a tool
    # happened to run there: every initialize and sweep before that failed (multihost scenario 5).
    import threading

    from django.db import OperationalError

    from mcp_django import db
    from mcp_django.ops.quotas.limits import RunningSlot

    closed_in: list[str] = []

    async def unreachable(*args, **kwargs):
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(RunningSlot, "acquire", unreachable)
    monkeypatch.setattr(
        db, "close_broken_connections", lambda: closed_in.append(threading.current_thread().name)
    )
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 1}},
        }
    )
    assert_transport_error(response, 503)
    assert (
        len(closed_in) == 1 and closed_in[0] != threading.current_thread().name
    )  # in the sync thread, not on the loop


async def test_a_failed_sweep_closes_the_broken_connections_of_the_sync_thread(monkeypatch):
    from django.db import OperationalError

    from mcp_django import db
    from mcp_django.transport import process

    closed: list[bool] = []

    async def unreachable(**kwargs):
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(process, "close_orphaned_streams", unreachable)
    monkeypatch.setattr(db, "close_broken_connections", lambda: closed.append(True))
    await process.sweep()  # logged, not raised
    assert closed == [True]


async def test_redis_own_connection_errors_are_unreachable_too(client, monkeypatch):
    import redis.exceptions

    from mcp_django.ops.quotas.limits import RunningSlot

    async def unreachable(*args, **kwargs):
        raise redis.exceptions.ConnectionError(
            "Error 111 connecting to 127.0.0.1:6379. Connection refused."
        )

    monkeypatch.setattr(RunningSlot, "acquire", unreachable)
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 1}},
        }
    )
    assert_transport_error(response, 503)


async def test_a_bug_at_the_top_level_is_answered_500_and_logged(client, monkeypatch, caplog):
    from mcp_django.ops.quotas.limits import RunningSlot

    async def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(RunningSlot, "acquire", broken)
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 1}},
        }
    )
    assert assert_transport_error(response, 500) == {
        "code": INTERNAL_ERROR,
        "message": "Internal error",
    }
    assert "Could not answer a request to the MCP endpoint" in caplog.text


async def test_the_endpoint_answers_again_once_the_cache_is_back(client, monkeypatch):
    from mcp_django.ops.quotas.limits import RunningSlot

    acquire = RunningSlot.acquire

    async def unreachable(*args, **kwargs):
        raise ConnectionError("Connection refused")

    monkeypatch.setattr(RunningSlot, "acquire", unreachable)
    call = {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 2}},
    }
    assert (await client.post(call)).status == 503
    monkeypatch.setattr(RunningSlot, "acquire", acquire)
    response = await client.post(call)
    assert response.status == 200 and response.json()["result"]["structuredContent"] == {
        "result": 4
    }
