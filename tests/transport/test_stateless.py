"""The 2026-07-28 revision on the same endpoint: stateless requests, per-request _meta, header
checks, removed methods, cache hints, and questions to the client as input-required results."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_django import Context
from mcp_django.models import Session
from mcp_django.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_django.protocol.modern import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
)
from mcp_django.testing import MCPTestClient

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "2026-07-28"
ALL_CAPABILITIES = {"sampling": {}, "elicitation": {"form": {}}, "roots": {}}


def body(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    request_id: Any = 1,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    version: str = VERSION,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: capabilities if capabilities is not None else {},
        META_CLIENT_INFO: {"name": "stateless-test", "version": "1.0"},
    }
    if log_level is not None:
        meta[META_LOG_LEVEL] = log_level
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


def headers(message: dict[str, Any], **overrides: str | None) -> dict[str, str | None]:
    params = message["params"]
    sent: dict[str, str | None] = {
        "mcp-protocol-version": params["_meta"][META_PROTOCOL_VERSION],
        "mcp-method": message["method"],
    }
    name = params.get("uri") if message["method"] == "resources/read" else params.get("name")
    if message["method"] in ("tools/call", "prompts/get", "resources/read"):
        sent["mcp-name"] = name
    sent.update(overrides)
    return sent


async def post(client: MCPTestClient, message: dict[str, Any], **overrides: str | None) -> Any:
    return await client.post_raw(orjson.dumps(message), headers(message, **overrides))


@pytest.fixture
def client() -> MCPTestClient:
    return MCPTestClient()  # no initialize: nothing in this revision needs one


async def test_tools_list_needs_no_session_and_carries_result_type_server_info_and_cache_hints(
    client,
):
    response = await post(client, body("tools/list"))
    assert response.status == 200
    assert "mcp-session-id" not in response.headers
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO]["name"] == "mcp-django-tests"
    assert (
        result["ttlMs"] >= 0 and result["cacheScope"] == "public"
    )  # authentication is off in the tests
    assert "echo" in [t["name"] for t in result["tools"]]
    assert await Session.objects.acount() == 0


async def test_discover_lists_every_version_served(client):
    response = await post(client, body("server/discover"))
    result = response.json()["result"]
    assert result["supportedVersions"][0] == VERSION and "2025-11-25" in result["supportedVersions"]
    assert "tools" in result["capabilities"]
    assert {"ttlMs", "cacheScope", "resultType"} <= set(result)


async def test_tools_call_answers_as_json(client):
    response = await post(client, body("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    result = response.json()["result"]
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert result["resultType"] == "complete"


@pytest.mark.parametrize(
    ("message", "overrides", "code"),
    [
        (
            body("tools/list", capabilities=None)
            | {"params": {"_meta": {META_PROTOCOL_VERSION: VERSION}}},
            {},
            INVALID_PARAMS,
        ),
        (body("tools/list", version="2099-01-01"), {}, UNSUPPORTED_PROTOCOL_VERSION),
        (body("tools/list"), {"mcp-method": "prompts/list"}, HEADER_MISMATCH),
        (body("tools/list"), {"mcp-method": None}, HEADER_MISMATCH),
        (
            body("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
            {"mcp-name": None},
            HEADER_MISMATCH,
        ),
        (
            body("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
            {"mcp-name": "add"},
            HEADER_MISMATCH,
        ),
    ],
)
async def test_bad_meta_and_headers_are_400_with_the_revisions_codes(
    client, message, overrides, code
):
    response = await post(client, message, **overrides)
    assert response.status == 400
    assert response.json()["error"]["code"] == code


async def test_unsupported_version_lists_the_supported_ones(client):
    error = (await post(client, body("tools/list", version="2099-01-01"))).json()["error"]
    assert VERSION in error["data"]["supported"] and error["data"]["requested"] == "2099-01-01"


async def test_the_name_header_may_use_the_base64_sentinel(client):
    message = body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    response = await post(client, message, **{"mcp-name": "=?base64?ZWNobw==?="})
    assert response.status == 200 and response.json()["result"]["content"][0]["text"] == "x"


@pytest.mark.parametrize(
    "method", ["ping", "logging/setLevel", "resources/subscribe", "no/such/method"]
)
async def test_removed_and_unknown_methods_are_404_method_not_found(client, method):
    response = await post(
        client, body(method, {"uri": "test://hello"} if method == "resources/subscribe" else {})
    )
    assert response.status == 404
    assert response.json()["error"]["code"] == METHOD_NOT_FOUND


async def test_a_missing_resource_is_invalid_params_not_resource_not_found(client):
    response = await post(client, body("resources/read", {"uri": "test://nothing-here"}))
    error = response.json()["error"]
    assert error["code"] == INVALID_PARAMS and error["data"] == {"uri": "test://nothing-here"}


async def test_get_and_delete_are_405_for_this_revision(client):
    for method in ("GET", "DELETE"):
        response = await client.send(method, headers={"mcp-protocol-version": VERSION})
        assert response.status == 405, method
        assert response.headers["allow"] == "POST"


async def test_progress_and_logs_stream_on_the_requests_own_response(client):
    message = body("tools/call", {"name": "progress", "arguments": {"steps": 2}}, log_level="info")
    message["params"]["_meta"]["progressToken"] = "p"
    response = await post(client, message)
    assert response.is_sse
    messages = response.messages()
    methods = [m.get("method") for m in messages]
    assert (
        methods.count("notifications/message") == 2 and methods.count("notifications/progress") == 2
    )
    assert all(
        event.id is None for event in response.events()
    )  # nothing to resume in this revision
    assert messages[-1]["result"]["content"][0]["text"] == "done 2"


async def test_no_log_message_without_a_log_level(client):
    response = await post(
        client, body("tools/call", {"name": "progress", "arguments": {"steps": 2}})
    )
    methods = [m.get("method") for m in response.messages()]
    assert "notifications/message" not in methods
    assert response.messages()[-1]["result"]["resultType"] == "complete"


async def test_questions_to_the_client_become_input_required_rounds(client):
    call = {"name": "ask", "arguments": {"question": "Why?"}}
    first = (await post(client, body("tools/call", call, capabilities=ALL_CAPABILITIES))).json()[
        "result"
    ]
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["sampling-1"]
    assert first["inputRequests"]["sampling-1"]["method"] == "sampling/createMessage"
    assert first["requestState"]  # sealed even before any answer

    sampled = {"role": "assistant", "content": {"type": "text", "text": "Because"}, "model": "m"}
    second = (
        await post(
            client,
            body(
                "tools/call",
                {**call, "inputResponses": {"sampling-1": sampled}},
                request_id=2,
                capabilities=ALL_CAPABILITIES,
            ),
        )
    ).json()["result"]
    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["elicitation-2"]
    assert second["inputRequests"]["elicitation-2"]["params"]["mode"] == "form"

    answer = {"action": "accept", "content": {"ok": True}}
    final = (
        await post(
            client,
            body(
                "tools/call",
                {
                    **call,
                    "requestState": second["requestState"],
                    "inputResponses": {"elicitation-2": answer},
                },
                request_id=3,
                capabilities=ALL_CAPABILITIES,
            ),
        )
    ).json()["result"]
    assert final["resultType"] == "complete"
    assert final["content"][0]["text"] == "Because / accept {'ok': True}"


async def test_a_tampered_or_foreign_request_state_is_refused(client):
    call = {"name": "ask", "arguments": {"question": "Why?"}}
    sampled = {"role": "assistant", "content": {"type": "text", "text": "Because"}, "model": "m"}
    second = (
        await post(
            client,
            body(
                "tools/call",
                {**call, "inputResponses": {"sampling-1": sampled}},
                capabilities=ALL_CAPABILITIES,
            ),
        )
    ).json()["result"]
    state = second["requestState"]
    tampered = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
    for bad, params in (
        (tampered, call),
        (state, {"name": "ask", "arguments": {"question": "Other?"}}),
    ):
        response = await post(
            client,
            body("tools/call", {**params, "requestState": bad}, capabilities=ALL_CAPABILITIES),
        )
        assert response.json()["error"]["code"] == INVALID_PARAMS


async def test_a_question_for_an_undeclared_capability_is_missing_required_client_capability(
    client,
):
    response = await post(
        client,
        body("tools/call", {"name": "ask", "arguments": {"question": "Why?"}}, capabilities={}),
    )
    assert response.status == 400
    error = response.json()["error"]
    assert error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert "sampling" in error["data"]["requiredCapabilities"]


async def test_the_handshake_era_is_unchanged_beside_it(client):
    await client.initialize()
    assert client.session_id is not None
    result = await client.request("tools/list")
    assert "resultType" not in result


async def listen(client: MCPTestClient, notifications: dict[str, Any], request_id: Any = 7) -> Any:
    message = body("subscriptions/listen", {"notifications": notifications}, request_id=request_id)
    return await client.post_stream(message, headers(message))


async def test_listen_acknowledges_what_it_honours_and_tags_every_message(client):
    from mcp_django.registry.sites import site

    async with await listen(
        client,
        {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourceSubscriptions": ["test://hello", "test://nope"],
        },
    ) as stream:
        ack = await stream.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7
        # Only what exists and the user may read: an unknown URI is left out, not refused.
        assert ack["params"]["notifications"] == {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourceSubscriptions": ["test://hello"],
        }
        await site.anotify_list_changed("resources")  # not asked for: not sent
        await site.anotify_list_changed("tools")
        await site.anotify_resource_updated("test://hello")
        changed = await stream.next_message()
        updated = await stream.next_message()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://hello", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}},
    }


async def test_listen_ends_gracefully_with_a_complete_result(client):
    from tests.transport.conftest import mcp_settings as settings

    with settings(SSE_MAX_CONNECTION_SECONDS=0.2, SSE_KEEPALIVE_SECONDS=0):
        async with await listen(client, {"toolsListChanged": True}, request_id="l-1") as stream:
            await stream.next_message()
            end = await stream.next_message(timeout=5)
            assert end == {
                "jsonrpc": "2.0",
                "id": "l-1",
                "result": {
                    "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/subscriptionId": "l-1"},
                },
            }
            await stream.read_until_closed(timeout=5)
            assert stream.closed


async def test_listen_refuses_a_malformed_filter(client):
    response = await post(
        client,
        body("subscriptions/listen", {"notifications": {"resourceSubscriptions": "test://hello"}}),
    )
    assert response.json()["error"]["code"] == INVALID_PARAMS


async def test_cache_hints_come_from_the_settings_and_a_resources_own_ttl(client):
    from mcp_django.registry.sites import MCPSite
    from tests.transport.conftest import mcp_settings as settings

    mcp = MCPSite(name="cached")

    @mcp.resource("test://fresh", cache_ttl_ms=5_000)
    def fresh() -> str:
        return "fresh"

    @mcp.resource("test://plain")
    def plain() -> str:
        return "plain"

    from mcp_django.transport.consumers import MCPConsumer

    local = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    with settings(CACHE_TTL_MS=1234, READ_CACHE_TTL_MS=7):
        listed = (await post(local, body("resources/list"))).json()["result"]
        own = (await post(local, body("resources/read", {"uri": "test://fresh"}))).json()["result"]
        default = (await post(local, body("resources/read", {"uri": "test://plain"}))).json()[
            "result"
        ]
    assert (listed["ttlMs"], own["ttlMs"], default["ttlMs"]) == (1234, 5000, 7)
    assert {listed["cacheScope"], own["cacheScope"]} == {"public"}


def test_a_negative_cache_ttl_is_improperly_configured():
    from django.core.exceptions import ImproperlyConfigured

    from mcp_django.registry.sites import MCPSite

    with pytest.raises(ImproperlyConfigured, match="cache_ttl_ms"):
        MCPSite(name="bad-ttl").resource("test://x", cache_ttl_ms=-1)(lambda: "x")


async def test_answers_that_depend_on_the_user_are_private_and_discover_is_public(client):
    from asgiref.sync import sync_to_async

    from tests.conftest import make_user
    from tests.transport.conftest import mcp_settings as settings

    with settings(AUTHENTICATION="django"):
        await client.force_login(await sync_to_async(make_user)("cache-scope"))
        listed = (await post(client, body("tools/list"))).json()["result"]
        discovered = (await post(client, body("server/discover"))).json()["result"]
    assert listed["cacheScope"] == "private"
    assert discovered["cacheScope"] == "public"


async def test_closing_the_response_stream_cancels_the_tool(client):
    import asyncio

    from mcp_django.registry.sites import MCPSite
    from mcp_django.transport.consumers import MCPConsumer

    mcp = MCPSite(name="cancel")
    started, cancelled = asyncio.Event(), asyncio.Event()

    @mcp.tool()
    async def wait_forever(ctx: Context) -> str:
        await ctx.report_progress(0, 1)
        started.set()
        try:
            await asyncio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    local = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    message = body("tools/call", {"name": "wait_forever", "arguments": {}})
    message["params"]["_meta"]["progressToken"] = 1
    stream = await local.post_stream(message, headers(message))
    assert (await stream.next_message())["method"] == "notifications/progress"
    await asyncio.wait_for(started.wait(), 5)
    await stream.close()  # the client goes away: in 2026-07-28 that is the cancellation
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_a_resource_read_may_ask_first(client):
    from mcp_django.registry.sites import MCPSite
    from mcp_django.transport.consumers import MCPConsumer

    mcp = MCPSite(name="asking-resource")

    @mcp.resource("test://greeting")
    async def greeting(ctx: Context) -> str:
        answer = await ctx.elicit(
            "Whom shall I greet?",
            {"type": "object", "properties": {"name": {"type": "string"}}},
            key="who",
        )
        return f"Hello, {(answer.content or {}).get('name')}!"

    local = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    capabilities = {"elicitation": {"form": {}}}
    first = (
        await post(
            local, body("resources/read", {"uri": "test://greeting"}, capabilities=capabilities)
        )
    ).json()["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["who"]
    retry = body(
        "resources/read",
        {
            "uri": "test://greeting",
            "requestState": first["requestState"],
            "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
        },
        capabilities=capabilities,
    )
    done = (await post(local, retry)).json()["result"]
    assert done["contents"][0]["text"] == "Hello, Ada!" and done["resultType"] == "complete"


async def test_user_state_is_kept_for_the_user_across_stateless_requests(client):
    from asgiref.sync import sync_to_async

    from mcp_django.registry.sites import MCPSite
    from mcp_django.transport.consumers import MCPConsumer
    from tests.conftest import make_user
    from tests.transport.conftest import mcp_settings as settings

    mcp = MCPSite(name="keeping")

    @mcp.tool()
    async def keep(ctx: Context, value: str) -> str:
        before = await ctx.user_state.get("kept")
        await ctx.user_state.set("kept", value)
        return f"{before}->{value}"

    @mcp.tool()
    async def keep_for_session(ctx: Context) -> str:
        await ctx.session_state.set("kept", "x")
        return "kept"

    local = MCPTestClient(MCPConsumer.as_asgi(site=mcp))
    with settings(AUTHENTICATION="django"):
        await local.force_login(await sync_to_async(make_user)("keeper"))
        first = (
            await post(local, body("tools/call", {"name": "keep", "arguments": {"value": "a"}}))
        ).json()["result"]
        second = (
            await post(
                local,
                body("tools/call", {"name": "keep", "arguments": {"value": "b"}}, request_id=2),
            )
        ).json()["result"]
        no_session = (
            await post(
                local,
                body("tools/call", {"name": "keep_for_session", "arguments": {}}, request_id=3),
            )
        ).json()["result"]
    assert (first["content"][0]["text"], second["content"][0]["text"]) == ("None->a", "a->b")
    assert no_session["isError"] and "use ctx.user_state" in no_session["content"][0]["text"]
