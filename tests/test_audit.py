"""The audit trail (``mcp_django.ops.audit``): a ToolCall row for every tools/call, whatever its
outcome, with its arguments redacted and bounded, written in batches; its retention, its off
switch, its checks, and its read-only admin with a CSV export."""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import secrets
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from pydantic import BaseModel, Field, SecretStr

from mcp_django import Context, ToolError
from mcp_django.checks import check_settings
from mcp_django.models import RunningRequest, Session, ToolCall
from mcp_django.ops.audit import buffer as audit_buffer
from mcp_django.stores import column
from mcp_django.ops.audit import record as audit_record
from mcp_django.ops.audit.redaction import (
    REDACTED,
    redact,
    sensitive_names,
    write_only_properties,
)
from mcp_django.ops.audit.trail import INTERRUPTED_MESSAGE, durable, on_request_orphaned
from mcp_django.protocol.errors import INVALID_PARAMS
from mcp_django.protocol.modern import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)
from mcp_django.registry.functions import FunctionTool
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS, make_user
from tests.polling import until

RESOURCE = "https://mcp.example.com/mcp"
MODERN = "2026-07-28"
Outcome = ToolCall.Outcome


@pytest.fixture(autouse=True)
def empty_buffer() -> Iterator[None]:
    """Calls buffered by an earlier test (or left by this one) must not reach another test's rows."""
    audit_buffer.writer.discard()
    yield
    audit_buffer.writer.discard()


@pytest.fixture(autouse=True)
def template_rows_match_whole_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every call of every test here made from a row template (AuditWriter.add_like) is also
    made whole, the way the first call of its caller and tool is, and both rows must match."""
    compared: list[str] = []
    add_like = audit_buffer.AuditWriter.add_like

    def checked(
        self: audit_buffer.AuditWriter, key: Any, varying: Any, whole: Any
    ) -> None:
        full = (audit_buffer._database(), django_settings.USE_TZ, *key)
        template = audit_buffer._templates.get(full)
        if template is not None:
            expected = audit_buffer._prepared(whole())
            made = template.make(varying)
            # The duration is read from the clock each time: made again later, it differs.
            for row in (made, expected):
                assert row is not None
                row[column(ToolCall, "duration_ms")] = None
            assert made == expected
            compared.append(key[-1])
        add_like(self, key, varying, whole)

    monkeypatch.setattr(audit_buffer.AuditWriter, "add_like", checked)
    audit_buffer._templates.clear()
    yield compared
    audit_buffer._templates.clear()


def settings(**overrides: Any) -> Any:
    return override_settings(MCP_DJANGO={**BASE_SETTINGS, **overrides})


# -- a site with one tool per outcome ------------------------------------------------------


class Login(BaseModel):
    user: str
    password: str
    deep: dict[str, Any] = Field(default_factory=dict)


def audited_site() -> MCPSite:
    mcp = MCPSite(name="audited")

    @mcp.tool()
    def echo(text: str, api_key: str = "", options: dict[str, Any] | None = None) -> str:
        """Say it back."""
        return text

    @mcp.tool()
    def fail(reason: str) -> str:
        """Always a tool error."""
        raise ToolError(f"refused: {reason}")

    @mcp.tool(sensitive=["pin"])
    def unlock(door: str, pin: str) -> str:
        """A tool that marks an argument sensitive itself."""
        return f"{door} open"

    @mcp.tool()
    def connect(host: str, secret_key: SecretStr, login: Login | None = None) -> str:
        """SecretStr is writeOnly in the schema: never stored."""
        return host

    @mcp.tool(permission="testapp.delete_note")
    def purge() -> str:
        """Only for users holding testapp.delete_note."""
        return "purged"

    @mcp.tool(scopes=["notes:write"])
    def write_note(text: str) -> str:
        """Needs the notes:write scope."""
        return text

    @mcp.tool()
    async def ask(ctx: Context) -> str:
        """Asks the user: an input-required round in 2026-07-28."""
        answer = await ctx.elicit(
            "Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        )
        return answer.action

    return mcp


def client_for(mcp: MCPSite, **kwargs: Any) -> MCPTestClient:
    return MCPTestClient(MCPConsumer.as_asgi(site=mcp), **kwargs)


async def rows() -> list[ToolCall]:
    """Write what is buffered, then read every ToolCall, oldest first."""
    assert await audit_buffer.aflush() == 0
    return [call async for call in ToolCall.objects.order_by("started_at", "pk")]


def modern(
    method: str,
    params: dict[str, Any],
    request_id: Any = 1,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: capabilities or {},
        META_CLIENT_INFO: {"name": "audit", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }


def modern_headers(message: dict[str, Any]) -> dict[str, str | None]:
    sent: dict[str, str | None] = {"mcp-protocol-version": MODERN, "mcp-method": message["method"]}
    if message["method"] == "tools/call":
        sent["mcp-name"] = message["params"]["name"]
    return sent


# -- outcomes, in-process -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_successful_call_is_recorded_with_who_where_and_how_long() -> None:
    client = client_for(audited_site())
    await client.initialize()
    await client.call_tool("echo", {"text": "hello"})
    (call,) = await rows()
    assert (call.tool_name, call.outcome, call.arguments) == ("echo", Outcome.OK, {"text": "hello"})
    assert call.session_id == client.session_id and call.transport == "streamable-http"
    assert call.protocol_version == client.protocol_version and call.site_name == "audited"
    assert call.request_id and call.error == "" and call.error_code is None
    assert call.duration_ms >= 0 and call.started_at <= timezone.now()
    assert call.user_id is None and call.username == ""  # AUTHENTICATION "none"


@pytest.mark.django_db(transaction=True)
async def test_a_tool_error_and_a_protocol_error_are_told_apart() -> None:
    client = client_for(audited_site())
    await client.initialize()
    assert (await client.call_tool("fail", {"reason": "no"}))["isError"] is True
    response = await client.request(
        "tools/call", {"name": "echo", "arguments": ["not", "an", "object"]}
    )
    assert response["error"]["code"] == INVALID_PARAMS
    failed, malformed = await rows()
    assert (failed.outcome, failed.error, failed.error_code) == (
        Outcome.TOOL_ERROR,
        "refused: no",
        None,
    )
    assert (malformed.outcome, malformed.error_code) == (Outcome.PROTOCOL_ERROR, INVALID_PARAMS)
    assert (
        malformed.error == '"arguments" must be an object' or "must be an object" in malformed.error
    )
    assert malformed.arguments == ["not", "an", "object"]


@pytest.mark.django_db(transaction=True)
async def test_an_unknown_tool_and_a_tool_the_user_may_not_use_are_denied() -> None:
    user = await sync_to_async(make_user)("reader")
    client = client_for(audited_site())
    await client.force_login(user)
    with settings(AUTHENTICATION="django"):
        await client.initialize()
        unknown = await client.request("tools/call", {"name": "nope", "arguments": {}})
        hidden = await client.request("tools/call", {"name": "purge", "arguments": {}})
        calls = await rows()
    # The client hears "Unknown tool" both times; the trail says why.
    assert (
        unknown["error"]["message"] == "Unknown tool: nope"
        and hidden["error"]["message"] == "Unknown tool: purge"
    )
    assert [(c.tool_name, c.outcome, c.error) for c in calls] == [
        ("nope", Outcome.DENIED, "unknown tool"),
        ("purge", Outcome.DENIED, "not permitted: the user may not use this tool"),
    ]
    assert {(c.user_id, c.username) for c in calls} == {(user.pk, "reader")}


def _token(user: Any, scope: str) -> tuple[str, Application]:
    app = Application.objects.create(
        name="audit tests",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
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
    return raw, app


@pytest.mark.django_db(transaction=True)
async def test_a_call_refused_for_a_missing_scope_is_denied_in_both_eras_with_the_oauth_client() -> (
    None
):
    user = await sync_to_async(make_user)("alice")
    raw, app = await sync_to_async(_token)(user, "notes:read")
    client = client_for(audited_site(), headers={"authorization": f"Bearer {raw}"})
    with settings(
        AUTHENTICATION="oauth",
        RESOURCE_URL=RESOURCE,
        SCOPES_SUPPORTED=["notes:read", "notes:write"],
    ):
        await client.initialize()
        refused = await client.post(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "write_note", "arguments": {"text": "x"}},
            }
        )
        stateless = client_for(audited_site(), headers={"authorization": f"Bearer {raw}"})
        message = modern("tools/call", {"name": "write_note", "arguments": {"text": "y"}})
        refused_2026 = await stateless.post(message, modern_headers(message))
        allowed = await client.call_tool("echo", {"text": "fine"})
        calls = await rows()
    assert (
        refused.status == 403
        and refused_2026.status == 403
        and allowed["content"][0]["text"] == "fine"
    )
    handshake, modern_call, ok = calls
    assert (handshake.outcome, handshake.error) == (
        Outcome.DENIED,
        "insufficient scope: needs notes:write",
    )
    assert handshake.session_id == client.session_id and handshake.arguments == {"text": "x"}
    assert (modern_call.outcome, modern_call.protocol_version, modern_call.session_id) == (
        Outcome.DENIED,
        MODERN,
        "",
    )
    assert ok.outcome == Outcome.OK
    assert {(c.client_id, c.username) for c in calls} == {(app.client_id, "alice")}


async def call_then_hang_up(site_name: str) -> None:
    """Call ``wait_forever`` (2026-07-28, on a stream) on a new site, wait until it runs, then
    close the stream: in this revision closing the answer is the cancellation."""
    mcp = MCPSite(name=site_name)
    started = asyncio.Event()

    @mcp.tool()
    async def wait_forever(ctx: Context) -> str:
        await ctx.report_progress(0, 1)
        started.set()
        await asyncio.Event().wait()  # runs until cancelled
        return "never"

    client = client_for(mcp)
    message = modern("tools/call", {"name": "wait_forever", "arguments": {}})
    message["params"]["_meta"]["progressToken"] = 1
    stream = await client.post_stream(message, modern_headers(message))
    assert (await stream.next_message())["method"] == "notifications/progress"
    await asyncio.wait_for(started.wait(), 5)
    await stream.close()


@pytest.mark.django_db(transaction=True)
async def test_a_call_cancelled_by_the_client_is_recorded_as_cancelled() -> None:
    await call_then_hang_up("cancel")
    await until(
        lambda: len(audit_buffer.writer), failure="the cancelled call was never recorded"
    )  # on its way out
    (call,) = await rows()
    assert (call.tool_name, call.outcome, call.protocol_version) == (
        "wait_forever",
        Outcome.CANCELLED,
        MODERN,
    )


@pytest.mark.django_db(transaction=True)
async def test_a_call_whose_client_never_answers_is_timed_out() -> None:
    mcp = MCPSite(name="timeout")
    gave_up = asyncio.Event()

    @mcp.tool()
    async def needs_model(ctx: Context) -> str:
        try:
            await ctx.sample("Anyone?", 10, timeout=0.05)
        finally:
            gave_up.set()
        return "answered"

    async def answer_too_late(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.wait_for(gave_up.wait(), 5)
        return {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}

    client = client_for(mcp, request_handlers={"sampling/createMessage": answer_too_late})
    await client.initialize(capabilities={"sampling": {}})
    result = await client.call_tool("needs_model")
    (call,) = await rows()
    assert result["isError"] is True
    assert (call.outcome, call.error) == (
        Outcome.TIMED_OUT,
        "The client did not answer sampling/createMessage in time",
    )


@pytest.mark.django_db(transaction=True)
async def test_a_2026_call_that_asks_the_client_is_input_required_and_its_retry_is_a_call_of_its_own() -> (
    None
):
    client = client_for(audited_site())
    capabilities = {"elicitation": {"form": {}}}
    first = modern("tools/call", {"name": "ask", "arguments": {}}, capabilities=capabilities)
    asked = (await client.post(first, modern_headers(first))).json()["result"]
    assert asked["resultType"] == "input_required"
    retry = modern(
        "tools/call",
        {
            "name": "ask",
            "arguments": {},
            "requestState": asked["requestState"],
            "inputResponses": {
                key: {"action": "accept", "content": {"ok": True}} for key in asked["inputRequests"]
            },
        },
        request_id=2,
        capabilities=capabilities,
    )
    done = (await client.post(retry, modern_headers(retry))).json()["result"]
    assert done["content"][0]["text"] == "accept"
    calls = await rows()
    assert [(c.outcome, c.protocol_version, c.session_id) for c in calls] == [
        (Outcome.INPUT_REQUIRED, MODERN, ""),
        (Outcome.OK, MODERN, ""),
    ]


@pytest.mark.django_db(transaction=True)
async def test_methods_other_than_tools_call_are_not_recorded() -> None:
    client = client_for(audited_site())
    await client.initialize()
    await client.call("tools/list")
    await client.ping()
    assert await rows() == []


@pytest.mark.django_db(transaction=True)
async def test_the_off_switch_records_nothing() -> None:
    client = client_for(audited_site())
    with settings(AUDIT_TOOL_CALLS=False):
        await client.initialize()
        await client.call_tool("echo", {"text": "unseen"})
        assert len(audit_buffer.writer) == 0
    assert await rows() == []


@pytest.mark.django_db(transaction=True)
async def test_the_buffer_is_written_in_the_background_without_a_flush() -> None:
    client = client_for(audited_site())
    with settings(AUDIT_FLUSH_INTERVAL=0.01):
        await client.initialize()
        await client.call_tool("echo", {"text": "later"})
        await until(
            ToolCall.objects.acount, failure="the background writer wrote nothing"
        )  # its task runs on this loop
    assert [c.arguments async for c in ToolCall.objects.all()] == [{"text": "later"}]
    assert len(audit_buffer.writer) == 0


@pytest.mark.django_db(transaction=True)
async def test_the_background_writer_takes_one_batch_per_trip_to_the_sync_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Sync tools run on the same thread: queued behind a whole buffer's write, they all waited.
    writer = audit_buffer.AuditWriter()
    monkeypatch.setattr(audit_buffer, "BATCH_SIZE", 2)
    trips: list[int] = []
    flush_batch = writer._flush_batch

    def counted() -> bool:
        trips.append(len(writer))
        return flush_batch()

    monkeypatch.setattr(writer, "_flush_batch", counted)
    with settings(AUDIT_FLUSH_INTERVAL=0.01):
        for n in range(5):
            writer.add(_record(n))
        assert writer._task is not None
        await writer._task
    assert trips == [5, 3, 1]  # what was buffered as each trip began: two rows each, then the last
    assert await ToolCall.objects.acount() == 5 and len(writer) == 0


@pytest.mark.django_db(transaction=True)
async def test_a_partial_batch_ends_the_writers_round_and_what_came_meanwhile_waits_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Under load a trip to the sync thread waits for the GIL while calls keep coming: writing
    # them at once made batches of a dozen rows, each paying the thread hop, BEGIN and COMMIT.
    writer = audit_buffer.AuditWriter()
    monkeypatch.setattr(audit_buffer, "BATCH_SIZE", 2)
    events: list[str] = []
    flush_batch = writer._flush_batch

    def counted() -> bool:
        events.append(f"trip {len(writer)}")
        written = flush_batch()
        if len(events) == 2:
            writer.add(_record(9))  # a call answered while the first (partial) batch was written
        return written

    class Clock:
        def __getattr__(self, name: str) -> Any:
            return getattr(asyncio, name)

        async def sleep(self, delay: float) -> None:
            events.append("wait")
            await asyncio.sleep(0)

    monkeypatch.setattr(writer, "_flush_batch", counted)
    monkeypatch.setattr(audit_buffer, "asyncio", Clock())
    writer.add(_record(1))
    assert writer._task is not None
    await writer._task
    assert events == ["wait", "trip 1", "wait", "trip 1"]
    assert await ToolCall.objects.acount() == 2 and len(writer) == 0


# -- redaction and bounds ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_sensitive_arguments_are_redacted_by_setting_by_tool_and_by_write_only_schema() -> (
    None
):
    client = client_for(audited_site())
    await client.initialize()
    await client.call_tool(
        "echo",
        {"text": "t", "api_key": "k-123", "options": {"nested": {"Password": "p-456", "kept": 1}}},
    )
    await client.call_tool("unlock", {"door": "front", "pin": "0000"})
    await client.call_tool(
        "connect",
        {
            "host": "db",
            "secret_key": "s-789",
            "login": {"user": "u", "password": "p", "deep": {"token": "t-0"}},
        },
    )
    with settings(AUDIT_SENSITIVE_ARGUMENTS=["door"]):
        await client.call_tool("unlock", {"door": "back", "pin": "1111"})
    echo, unlock, connect, custom = await rows()
    hidden = REDACTED
    assert echo.arguments == {
        "text": "t",
        "api_key": hidden,
        "options": {"nested": {"Password": hidden, "kept": 1}},
    }
    assert unlock.arguments == {"door": "front", "pin": hidden}
    assert connect.arguments == {
        "host": "db",
        "secret_key": hidden,
        "login": {"user": "u", "password": hidden, "deep": {"token": hidden}},
    }
    assert custom.arguments == {
        "door": hidden,
        "pin": hidden,
    }  # the setting's list replaced the defaults
    stored = orjson.dumps([c.arguments for c in (echo, unlock, connect, custom)]).decode()
    for secret in ("k-123", "p-456", "0000", "s-789", "t-0", "1111"):
        assert secret not in stored


@pytest.mark.parametrize(
    "name",
    [
        "x_api_key",
        "db_password",
        "secret_key",
        "sessionToken",
        "bearer",
        "pin",
        "PIN",
        "pinCode",
        "X-Api-Key",
        "xAPIKey",
        "api.key",
        "API KEY",
        "newPassword",
        "dbpassword",
        "accessToken",
        "Authorization",
        "auth",
        "cookie",
        "session_id",
        "sessionid",
        "private-key",
        "ssn",
        "cvv",
        "otp",
        "passcode",
        "pwd",
        "credentials",
        "client.secret",
        "\uff30\uff21\uff33\uff33\uff37\uff2f\uff32\uff24",  # full-width PASSWORD
    ],
)
def test_a_name_holding_a_secret_word_is_redacted_in_any_case_separator_or_position(
    name: str,
) -> None:
    assert redact({name: "s3cr3t", "kept": 1}, frozenset()) == {
        name: REDACTED,
        "kept": 1,
    }


@pytest.mark.parametrize(
    "name",
    [
        "spinning",
        "pinned",
        "opinion",
        "author",
        "keyboard",
        "max_tokens",
        "tokenizer",
        "secretary",
        "description",
        "username",
        "sort_key",
        "session",
    ],
)
def test_a_name_merely_containing_the_letters_of_a_secret_word_is_kept(name: str) -> None:
    assert redact({name: "v"}, frozenset()) == {name: "v"}


def test_secret_words_are_redacted_nested_in_dicts_and_lists() -> None:
    value = {
        "items": [{"dbPassword": "a"}, [{"inner": {"X-Api-Key": "b", "n": 2}}]],
        "headers": {"Cookie": "c"},
    }
    assert redact(value, frozenset()) == {
        "items": [
            {"dbPassword": REDACTED},
            [{"inner": {"X-Api-Key": REDACTED, "n": 2}}],
        ],
        "headers": {"Cookie": REDACTED},
    }


def test_explicit_names_match_in_any_case_or_separator() -> None:
    with settings(AUDIT_SENSITIVE_ARGUMENTS=["account_number"]):
        names = sensitive_names()
        assert redact({"accountNumber": 1, "ACCOUNT-NUMBER": 2, "account": 3}, names) == {
            "accountNumber": REDACTED,
            "ACCOUNT-NUMBER": REDACTED,
            "account": 3,
        }


def test_the_allowed_setting_gives_a_name_back_but_never_an_explicit_one() -> None:
    with settings(AUDIT_ALLOWED_ARGUMENTS=["maxToken", "pin"], AUDIT_SENSITIVE_ARGUMENTS=["pin"]):
        names = sensitive_names()
        assert redact({"max_token": 5, "MAX-TOKEN": 6, "token": "t", "pin": "0"}, names) == {
            "max_token": 5,
            "MAX-TOKEN": 6,
            "token": REDACTED,
            "pin": REDACTED,
        }


def test_e028_audit_allowed_arguments_must_be_a_list_of_names() -> None:
    assert "mcp_django.E028" in _errors(AUDIT_ALLOWED_ARGUMENTS="max_tokens")
    assert "mcp_django.E028" not in _errors(AUDIT_ALLOWED_ARGUMENTS=["max_tokens"])


@pytest.mark.django_db(transaction=True)
async def test_secrets_are_redacted_from_rejected_unknown_and_failed_calls_and_their_errors() -> (
    None
):
    mcp = audited_site()

    @mcp.tool(input_schema={"type": "object", "properties": {"pin": {"type": "integer"}}})
    def door(pin: int) -> str:
        """A JSON-Schema-validated tool: its error quotes the bad value."""
        return "open"

    @mcp.tool()
    def login(user: str, db_password: str) -> str:
        """Its error quotes the password."""
        raise ToolError(f"wrong password {db_password!r} for {user}")

    client = client_for(mcp)
    await client.initialize()
    assert (await client.call_tool("door", {"pin": "98765"}))["isError"] is True
    assert (await client.call_tool("echo", {"text": 5, "x_api_key": "k-1"}))["isError"] is True
    await client.request("tools/call", {"name": "nope", "arguments": {"sessionToken": "t-2"}})
    assert (await client.call_tool("login", {"user": "ann", "db_password": "hunter2"}))[
        "isError"
    ] is True
    door_call, echo, unknown, login_call = await rows()
    assert (
        "98765" in (await client.call_tool("door", {"pin": "98765"}))["content"][0]["text"]
    )  # the client is told
    assert (
        door_call.arguments == {"pin": REDACTED}
        and "98765" not in door_call.error
        and REDACTED in door_call.error
    )
    assert echo.arguments == {"text": 5, "x_api_key": REDACTED}
    assert (unknown.outcome, unknown.arguments) == (
        Outcome.DENIED,
        {"sessionToken": REDACTED},
    )
    assert login_call.arguments == {"user": "ann", "db_password": REDACTED}
    assert login_call.error == f"wrong password '{REDACTED}' for ann"


def test_refused_calls_with_their_site_redact_secret_words() -> None:
    from django.http import HttpRequest

    from mcp_django.protocol.jsonrpc import Request
    from mcp_django.server.engine import Principal

    fresh = audit_buffer.AuditWriter()
    audit_record.writer, original = fresh, audit_record.writer
    try:
        message = Request(
            1, "tools/call", {"name": "echo", "arguments": {"text": "t", "bearer": "b"}}
        )
        audit_record.record_refused(
            Principal(HttpRequest(), None), None, message, "quota", site=audited_site()
        )
    finally:
        audit_record.writer = original
    (record,) = list(fresh._buffer)
    assert orjson.loads(str(record["arguments"])) == {"text": "t", "bearer": REDACTED}


@pytest.mark.django_db(transaction=True)
async def test_large_arguments_are_replaced_by_a_marker_with_their_size() -> None:
    client = client_for(audited_site())
    with settings(AUDIT_MAX_ARGUMENTS_BYTES=64):
        await client.initialize()
        await client.call_tool("echo", {"text": "x" * 500})
        await client.call_tool("echo", {"text": "short"})
    large, small = await rows()
    assert large.arguments == {
        "_omitted": "arguments too large to keep",
        "bytes": len(orjson.dumps({"text": "x" * 500})),
    }
    assert small.arguments == {"text": "short"}


@pytest.mark.django_db(transaction=True)
async def test_nul_characters_and_long_names_from_a_client_are_stored_safely() -> None:
    client = client_for(audited_site())
    await client.initialize()
    await client.call_tool("echo", {"text": "a\x00b", "options": {"k\x00": "v"}})
    await client.request("tools/call", {"name": "n" * 300, "arguments": {}})
    echo, unknown = await rows()
    assert echo.arguments == {"text": "a\ufffdb", "options": {"k\ufffd": "v"}}
    assert unknown.tool_name == "n" * 200 and unknown.outcome == Outcome.DENIED


def test_write_only_properties_are_found_at_any_depth_and_through_defs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "plain": {"type": "string"},
            "pw": {"anyOf": [{"type": "string", "writeOnly": True}, {"type": "null"}]},
            "ref": {"$ref": "#/$defs/Secret"},
            "inner": {"type": "object", "properties": {"Key-Id": {"writeOnly": True}}},
        },
        "$defs": {"Secret": {"type": "string", "writeOnly": True}},
    }
    assert write_only_properties(schema) == {"pw", "ref", "key_id"}


def test_a_tool_declaring_sensitive_as_a_string_is_improperly_configured() -> None:
    with pytest.raises(ImproperlyConfigured, match="sensitive must be a list"):
        FunctionTool(lambda pin: pin, name="bad", sensitive="pin")  # type: ignore[arg-type]


def test_refused_calls_without_their_site_keep_no_argument_value() -> None:
    from django.http import HttpRequest

    from mcp_django.protocol.jsonrpc import Request
    from mcp_django.server.engine import Principal

    fresh = audit_buffer.AuditWriter()
    audit_record.writer, original = fresh, audit_record.writer
    try:
        audit_record.record_refused(
            Principal(HttpRequest(), None),
            None,
            Request(1, "tools/call", {"name": "t", "arguments": {"q": "v"}}),
            "quota",
        )
        audit_record.record_refused(
            Principal(HttpRequest(), None), None, Request(2, "tools/list", {}), "quota"
        )
    finally:
        audit_record.writer = original
    (record,) = list(fresh._buffer)
    assert (record["outcome"], record["error"], orjson.loads(str(record["arguments"]))) == (
        Outcome.DENIED,
        "quota",
        {"q": REDACTED},
    )


# -- durable mode --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_durable_mode_writes_each_call_before_it_is_answered() -> None:
    client = client_for(audited_site())
    with settings(AUDIT_DURABLE=True):
        await client.initialize()
        await client.call_tool("echo", {"text": "hi"})
        await client.call_tool("fail", {"reason": "no"})
        # No flush: the rows are in the table as the answers arrive, and nothing is buffered.
        calls = [c async for c in ToolCall.objects.order_by("pk")]
    assert len(audit_buffer.writer) == 0
    assert [(c.tool_name, c.outcome, c.arguments, c.lease_until) for c in calls] == [
        ("echo", Outcome.OK, {"text": "hi"}, None),
        ("fail", Outcome.TOOL_ERROR, {"reason": "no"}, None),
    ]
    assert (
        calls[1].error == "refused: no"
        and calls[0].session_id == client.session_id
        and calls[0].duration_ms > 0
    )


@pytest.mark.django_db(transaction=True)
async def test_durable_mode_shows_a_call_as_running_under_a_lease_while_it_runs() -> None:
    mcp = MCPSite(name="durable")
    started, release = asyncio.Event(), asyncio.Event()

    @mcp.tool()
    async def slow(db_password: str) -> str:
        started.set()
        await asyncio.wait_for(release.wait(), 10)
        return "done"

    client = client_for(mcp)
    with settings(AUDIT_DURABLE=True):
        await client.initialize()
        call = asyncio.ensure_future(client.call_tool("slow", {"db_password": "p"}))
        await asyncio.wait_for(started.wait(), 10)
        running = await ToolCall.objects.aget()
        assert durable.running == {running.pk}
        release.set()
        await asyncio.wait_for(call, 10)
    assert (running.outcome, running.arguments) == (
        Outcome.RUNNING,
        {"db_password": REDACTED},
    )
    assert running.lease_until is not None and running.lease_until > timezone.now()
    finished = await ToolCall.objects.aget()
    assert (finished.outcome, finished.lease_until, durable.running) == (
        Outcome.OK,
        None,
        set(),
    )


@pytest.mark.django_db(transaction=True)
async def test_durable_mode_records_a_cancelled_call_on_its_running_row() -> None:
    with settings(AUDIT_DURABLE=True):
        await call_then_hang_up("durable-cancel")

        async def ended() -> (
            ToolCall | None
        ):  # the cancelled task updates its row from a task of its own
            row = await ToolCall.objects.aget()
            return row if row.outcome != Outcome.RUNNING else None

        call = await until(ended, failure="the cancelled call's row still says running")
    assert (call.tool_name, call.outcome, call.lease_until) == (
        "wait_forever",
        Outcome.CANCELLED,
        None,
    )
    assert len(audit_buffer.writer) == 0 and durable.running == set()


@pytest.mark.django_db(transaction=True)
async def test_durable_mode_writes_a_refused_call_before_the_refusal_is_answered() -> None:
    from django.http import HttpRequest

    from mcp_django.protocol.jsonrpc import Request
    from mcp_django.server.engine import Principal

    message = Request(
        1, "tools/call", {"name": "echo", "arguments": {"text": "t", "sessionToken": "x"}}
    )
    with settings(AUDIT_DURABLE=True):
        await audit_record.arecord_refused(
            Principal(HttpRequest(), None), None, message, "quota: calls", site=audited_site()
        )
    assert len(audit_buffer.writer) == 0
    call = await ToolCall.objects.aget()
    assert (call.outcome, call.error, call.arguments) == (
        Outcome.DENIED,
        "quota: calls",
        {"text": "t", "sessionToken": REDACTED},
    )


@pytest.mark.django_db(transaction=True)
async def test_the_sweep_marks_running_calls_whose_lease_lapsed_interrupted() -> None:
    from mcp_django.transport.process import sweep

    now = timezone.now()
    dead = await ToolCall.objects.acreate(
        tool_name="dead",
        transport="stdio",
        outcome=Outcome.RUNNING,
        lease_until=now - timedelta(seconds=1),
    )
    alive = await ToolCall.objects.acreate(
        tool_name="alive",
        transport="stdio",
        outcome=Outcome.RUNNING,
        lease_until=now + timedelta(minutes=1),
    )
    done = await ToolCall.objects.acreate(tool_name="done", transport="stdio", outcome=Outcome.OK)
    await sweep()  # what every process runs at its first request and on each lease renewal
    states = {c.tool_name: (c.outcome, c.error) async for c in ToolCall.objects.all()}
    assert states == {
        "dead": (Outcome.INTERRUPTED, INTERRUPTED_MESSAGE),
        "alive": (Outcome.RUNNING, ""),
        "done": (Outcome.OK, ""),
    }
    assert {dead.pk, alive.pk, done.pk} == set(
        await sync_to_async(lambda: set(ToolCall.objects.values_list("pk", flat=True)))()
    )


def _streamed_site(name: str) -> tuple[MCPSite, asyncio.Event, asyncio.Event]:
    """A site whose ``slow`` tool is answered on its POST's SSE stream (it takes a Context) and
    runs until released."""
    mcp = MCPSite(name=name)
    started, release = asyncio.Event(), asyncio.Event()

    @mcp.tool()
    async def slow(ctx: Context, db_password: str, note: str) -> str:
        started.set()
        await asyncio.wait_for(release.wait(), 10)
        return "done"

    return mcp, started, release


async def _claimed(session_id: str) -> RunningRequest:
    """The claim on the session's one streamed request, once its process has written it."""
    return await until(
        lambda: RunningRequest.objects.filter(session_id=session_id).afirst(),
        failure="the streamed call was never claimed",
    )


async def _process_died(claim: RunningRequest) -> None:
    """What a sweep sees of a process that died: its claims' leases lapsed (and its durable rows')."""
    lapsed = timezone.now() - timedelta(seconds=1)
    await RunningRequest.objects.filter(pk=claim.pk).aupdate(lease_until=lapsed)
    await ToolCall.objects.filter(outcome=Outcome.RUNNING).aupdate(lease_until=lapsed)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer")
async def test_in_the_buffered_default_the_sweep_writes_a_streamed_call_its_dead_process_cut_off_interrupted() -> (
    None
):
    from mcp_django.transport.process import sweep

    mcp, started, release = _streamed_site("buffered-crash")
    alice = await sync_to_async(make_user)("alice-crash", "*")
    client = client_for(mcp)
    await client.force_login(alice)
    with settings(AUTHENTICATION="django"):
        await client.initialize()
        call = asyncio.ensure_future(
            client.call_tool("slow", {"db_password": "hunter2", "note": "kept"})
        )
        try:
            await asyncio.wait_for(started.wait(), 10)
            claim = await _claimed(client.session_id)
            assert (
                claim.tool_call is not None
                and "hunter2" not in orjson.dumps(claim.tool_call).decode()
            )  # redacted on the claim too
            assert await ToolCall.objects.acount() == 0  # buffered: nothing written yet
            await _process_died(claim)
            await sweep()  # what another process runs on each lease renewal
            interrupted = await ToolCall.objects.select_related("user").aget()
            assert (interrupted.outcome, interrupted.error, interrupted.tool_name) == (
                Outcome.INTERRUPTED,
                INTERRUPTED_MESSAGE,
                "slow",
            )
            assert interrupted.arguments == {"db_password": REDACTED, "note": "kept"}
            assert (interrupted.user, interrupted.username, interrupted.session_id) == (
                alice,
                "alice-crash",
                client.session_id,
            )
            assert (interrupted.transport, interrupted.request_id, interrupted.lease_until) == (
                "streamable-http",
                claim.request_id,
                None,
            )
            assert interrupted.started_at <= claim.created_at
            # The same orphan reported twice (two processes sweeping) is written once.
            await sync_to_async(on_request_orphaned)(
                None,
                session_id=client.session_id,
                request_id=claim.request_id,
                tool_call=claim.tool_call,
            )
            assert await ToolCall.objects.acount() == 1
        finally:
            release.set()
            # Its stream was ended with the orphan's error by the sweep.
            await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), 10)
            audit_buffer.writer.discard()  # this process did not die: its own record of the call is not the point


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer")
async def test_in_durable_mode_the_sweep_marks_the_running_row_and_writes_no_second_one() -> None:
    from mcp_django.transport.process import sweep

    mcp, started, release = _streamed_site("durable-crash")
    client = client_for(mcp)
    with settings(AUDIT_DURABLE=True):
        await client.initialize()
        call = asyncio.ensure_future(client.call_tool("slow", {"db_password": "p", "note": "n"}))
        try:
            await asyncio.wait_for(started.wait(), 10)
            claim = await _claimed(client.session_id)
            assert claim.tool_call is None  # the row is there already
            await _process_died(claim)
            await sweep()
            assert [(c.tool_name, c.outcome) async for c in ToolCall.objects.all()] == [
                ("slow", Outcome.INTERRUPTED)
            ]
        finally:
            release.set()
            await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), 10)


def test_e029_audit_durable_must_be_a_boolean() -> None:
    assert "mcp_django.E029" in _errors(AUDIT_DURABLE="yes")
    assert "mcp_django.E029" not in _errors(AUDIT_DURABLE=True)


# -- the writer ----------------------------------------------------------------------------------


def _record(n: int) -> dict[str, Any]:
    return {
        "started_at": timezone.now(),
        "site_name": "mcp",
        "user_id": None,
        "username": "",
        "application_id": None,
        "session_id": "",
        "transport": "stdio",
        "protocol_version": "2025-11-25",
        "request_id": str(n),
        "tool_name": f"t{n}",
        "arguments": {},
        "outcome": Outcome.OK,
        "error_code": None,
        "error": "",
        "duration_ms": 1.0,
        "trace_id": "",
    }


@pytest.mark.django_db
def test_a_full_buffer_drops_and_counts_new_calls_and_logs_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = audit_buffer.AuditWriter()
    with (
        settings(AUDIT_BUFFER_SIZE=2),
        caplog.at_level(logging.WARNING, logger="mcp_django.ops.audit.buffer"),
    ):
        for n in range(5):
            writer.add(_record(n))
        assert (len(writer), writer.dropped) == (2, 3)
        assert writer.flush() == 0
    assert list(ToolCall.objects.order_by("request_id").values_list("tool_name", flat=True)) == [
        "t0",
        "t1",
    ]
    full = [r for r in caplog.records if "buffer is full" in r.getMessage()]
    summary = [r for r in caplog.records if "3 tool calls were dropped" in r.getMessage()]
    assert len(full) == 1 and len(summary) == 1


@pytest.mark.django_db
def test_each_row_is_made_as_its_call_is_added_and_the_writer_only_inserts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rows are made on the event loop, a call at a time: made by the writer's thread, a
    # batch's Python work kept the loop waiting for the GIL (the p99 of tools/call, bench/).
    writer = audit_buffer.AuditWriter()
    made_later: list[Any] = []
    real = audit_buffer.prepare_row

    def failing_once(model: Any, row: dict[str, Any]) -> list[Any]:
        if row["tool_name"] == "t2" and not made_later:
            made_later.append(row["tool_name"])
            raise ValueError("cannot be made now")
        return real(model, row)

    monkeypatch.setattr(audit_buffer, "prepare_row", failing_once)
    for n in (1, 2, 3):
        writer.add(_record(n))
    assert [type(r["_row"]) for r in writer._buffer] == [list, type(None), list]

    in_writer: list[str] = []
    monkeypatch.setattr(
        audit_buffer,
        "prepare_row",
        lambda model, row: in_writer.append(row["tool_name"]) or real(model, row),
    )
    assert writer.flush() == 0
    assert in_writer == ["t2"]  # only the row that could not be made when it was added
    assert sorted(ToolCall.objects.values_list("tool_name", "outcome", "arguments")) == [
        (f"t{n}", "ok", {}) for n in (1, 2, 3)
    ]


@pytest.mark.django_db(transaction=True)  # the foreign key is checked when the INSERT commits
def test_a_call_of_a_user_deleted_before_the_write_is_kept_unlinked() -> None:
    writer = audit_buffer.AuditWriter()
    gone = get_user_model().objects.create_user("gone")
    record = {**_record(1), "user_id": gone.pk, "username": "gone"}
    gone.delete()
    writer.add(record)
    writer.flush()
    (call,) = ToolCall.objects.all()
    assert (call.user_id, call.username) == (None, "gone")


@pytest.mark.django_db
def test_a_call_recorded_against_another_database_is_not_written_to_this_one() -> None:
    """A test run's calls, still buffered when its test database is gone, never reach the real one."""
    writer = audit_buffer.AuditWriter()
    writer.add(_record(1))
    writer.add(_record(2))
    writer._buffer[0]["_database"] = "another-database"
    assert writer.flush() == 0
    assert (
        list(ToolCall.objects.values_list("tool_name", flat=True)) == ["t2"] and writer.dropped == 1
    )


@pytest.mark.django_db
def test_deleting_a_user_keeps_their_calls_with_the_username() -> None:
    user = get_user_model().objects.create_user("leaver")
    ToolCall.objects.create(
        user=user, username="leaver", tool_name="t", transport="stdio", outcome=Outcome.OK
    )
    user.delete()
    assert list(ToolCall.objects.values_list("user_id", "username")) == [(None, "leaver")]


# -- retention -----------------------------------------------------------------------------------


def _call(age: timedelta, **fields: Any) -> ToolCall:
    fields = {"tool_name": "t", "transport": "stdio", "outcome": Outcome.OK, **fields}
    return ToolCall.objects.create(started_at=timezone.now() - age, **fields)


def clear(*args: str, **overrides: Any) -> str:
    out = StringIO()
    with settings(**overrides):
        call_command("mcp_clearsessions", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_clearsessions_deletes_tool_calls_older_than_the_retention() -> None:
    old, recent = _call(timedelta(days=31)), _call(timedelta(days=29))
    assert "Would delete 1 tool calls of the audit trail." in clear(
        "--dry-run", AUDIT_RETENTION_DAYS=30
    )
    assert ToolCall.objects.count() == 2
    output = clear(AUDIT_RETENTION_DAYS=30)
    assert "Deleted 1 tool calls of the audit trail (older than 30 days)." in output
    assert list(ToolCall.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not ToolCall.objects.filter(pk=old.pk).exists()


@pytest.mark.django_db
def test_clearsessions_keeps_every_tool_call_when_the_retention_is_none() -> None:
    _call(timedelta(days=4000))
    assert "Deleted 0 tool calls" in clear(AUDIT_RETENTION_DAYS=None)
    assert ToolCall.objects.count() == 1


# -- checks ---------------------------------------------------------------------------------------


def _errors(**overrides: Any) -> set[str]:
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, **overrides}):
        return {e.id for e in check_settings() if e.id}


def test_default_audit_settings_pass_the_checks() -> None:
    assert not {i for i in _errors() if i.startswith("mcp_django.E03")}


def test_e030_audit_tool_calls_must_be_a_boolean() -> None:
    assert "mcp_django.E030" in _errors(AUDIT_TOOL_CALLS="yes")


@pytest.mark.parametrize("days", [0, -1, "90", 1.5, True])
def test_e031_audit_retention_days_must_be_positive_or_none(days: Any) -> None:
    assert "mcp_django.E031" in _errors(AUDIT_RETENTION_DAYS=days)


@pytest.mark.parametrize("names", ["password", ["ok", ""], [1], None])
def test_e032_audit_sensitive_arguments_must_be_a_list_of_names(names: Any) -> None:
    assert "mcp_django.E032" in _errors(AUDIT_SENSITIVE_ARGUMENTS=names)


@pytest.mark.parametrize("size", [0, 63, "8k", None])
def test_e033_audit_max_arguments_bytes_must_be_at_least_64(size: Any) -> None:
    assert "mcp_django.E033" in _errors(AUDIT_MAX_ARGUMENTS_BYTES=size)


@pytest.mark.parametrize(
    "overrides",
    [
        {"AUDIT_BUFFER_SIZE": 0},
        {"AUDIT_BUFFER_SIZE": "many"},
        {"AUDIT_FLUSH_INTERVAL": 0},
        {"AUDIT_FLUSH_INTERVAL": float("inf")},
        {"AUDIT_FLUSH_INTERVAL": None},
    ],
)
def test_e034_audit_buffer_size_and_flush_interval_must_be_positive(
    overrides: dict[str, Any],
) -> None:
    assert "mcp_django.E034" in _errors(**overrides)


# -- the admin -----------------------------------------------------------------------------------

CHANGELIST = "admin:mcp_django_toolcall_changelist"


@pytest.fixture
def trail(db: Any) -> list[ToolCall]:
    alice = get_user_model().objects.create_user("alice")
    return [
        _call(
            timedelta(hours=3),
            tool_name="search_books",
            user=alice,
            username="alice",
            session_id="s" * 43,
            arguments={"query": "wells"},
        ),
        _call(
            timedelta(hours=2),
            tool_name="library_book_create",
            username="bob",
            outcome=Outcome.DENIED,
            error="not permitted",
            arguments={"title": "=HYPERLINK(1)"},
        ),
        _call(
            timedelta(hours=1),
            tool_name="search_books",
            username="bob",
            outcome=Outcome.TOOL_ERROR,
            error="no results",
            transport="sse",
        ),
    ]


@pytest.fixture
def crashed(trail: list[ToolCall]) -> list[ToolCall]:
    """Two durable-mode calls of a process that died: one swept already, one not yet."""
    return [
        _call(
            timedelta(hours=5),
            tool_name="shelve_book",
            username="carol",
            outcome=Outcome.INTERRUPTED,
            error=INTERRUPTED_MESSAGE,
        ),
        _call(
            timedelta(hours=4),
            tool_name="drop_book",
            username="carol",
            outcome=Outcome.RUNNING,
            lease_until=timezone.now() + timedelta(minutes=1),
        ),
    ]


def _listed(response: Any) -> list[str]:
    assert response.status_code == 200
    return [c.tool_name + ":" + c.username for c in response.context["cl"].result_list]


def test_the_changelist_lists_every_call_newest_first(
    admin_client: Any, trail: list[ToolCall]
) -> None:
    assert _listed(admin_client.get(reverse(CHANGELIST))) == [
        "search_books:bob",
        "library_book_create:bob",
        "search_books:alice",
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"outcome": "denied"}, ["library_book_create:bob"]),
        ({"tool_name": "search_books"}, ["search_books:bob", "search_books:alice"]),
        ({"username": "alice"}, ["search_books:alice"]),
        ({"transport": "sse"}, ["search_books:bob"]),
        ({"q": "library"}, ["library_book_create:bob"]),
        ({"q": "bob"}, ["search_books:bob", "library_book_create:bob"]),
        ({"q": "sssssssss"}, ["search_books:alice"]),  # a session id, by its start
        ({"session_id": "s" * 43}, ["search_books:alice"]),  # the session page's link
        ({"outcome": "interrupted"}, ["shelve_book:carol"]),
        ({"outcome": "running"}, ["drop_book:carol"]),
    ],
)
def test_the_changelist_filters_and_searches(
    admin_client: Any, crashed: list[ToolCall], query: dict[str, str], expected: list[str]
) -> None:
    assert _listed(admin_client.get(reverse(CHANGELIST), query)) == expected


def test_the_changelist_shows_running_and_interrupted_calls_and_filters_by_them(
    admin_client: Any, crashed: list[ToolCall]
) -> None:
    content = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert (
        "?outcome__exact=interrupted" in content and "?outcome__exact=running" in content
    )  # the filter offers both
    assert (
        '<b style="color:#c62828">interrupted</b>' in content
        and '<b style="color:#1565c0">running</b>' in content
    )


def test_the_changelist_filters_by_date(admin_client: Any, trail: list[ToolCall]) -> None:
    _call(timedelta(days=10), tool_name="long_ago", username="carol")
    since = (timezone.now() - timedelta(days=7)).isoformat()  # what the "Past 7 days" choice sends
    assert _listed(admin_client.get(reverse(CHANGELIST), {"started_at__gte": since})) == [
        "search_books:bob",
        "library_book_create:bob",
        "search_books:alice",
    ]
    now = timezone.localtime()
    day = {
        "started_at__year": now.year,
        "started_at__month": now.month,
        "started_at__day": now.day,
    }  # the date hierarchy
    assert "long_ago:carol" not in _listed(admin_client.get(reverse(CHANGELIST), day))


def test_nobody_may_add_change_or_delete_a_call_not_even_a_superuser(
    admin_client: Any, trail: list[ToolCall]
) -> None:
    call = trail[0]
    assert admin_client.get(reverse("admin:mcp_django_toolcall_add")).status_code == 403
    page = admin_client.get(reverse("admin:mcp_django_toolcall_change", args=[call.pk]))
    assert (
        page.status_code == 200
        and 'name="_save"' not in page.content.decode()
        and "wells" in page.content.decode()
    )
    assert (
        admin_client.post(
            reverse("admin:mcp_django_toolcall_change", args=[call.pk]), {"tool_name": "x"}
        ).status_code
        == 403
    )
    assert (
        admin_client.post(
            reverse("admin:mcp_django_toolcall_delete", args=[call.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    actions = (
        admin_client.get(reverse(CHANGELIST))
        .context["cl"]
        .model_admin.get_actions(admin_client.get(reverse(CHANGELIST)).wsgi_request)
    )
    assert list(actions) == ["export_csv"]
    call.refresh_from_db()
    assert call.tool_name == "search_books"


def test_staff_with_the_view_permission_see_every_call_and_others_none(
    client: Any, trail: list[ToolCall]
) -> None:
    staff = get_user_model().objects.create_user("auditor", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(reverse(CHANGELIST)).status_code == 403
    staff.user_permissions.add(
        Permission.objects.get(content_type__app_label="mcp_django", codename="view_toolcall")
    )
    assert len(_listed(client.get(reverse(CHANGELIST)))) == 3  # every user's calls


def test_the_csv_export_streams_the_selected_calls_with_arguments_as_json(
    admin_client: Any, trail: list[ToolCall]
) -> None:
    response = admin_client.post(
        reverse(CHANGELIST), {"action": "export_csv", "_selected_action": [c.pk for c in trail]}
    )
    assert response.status_code == 200 and response.streaming
    assert (
        response["Content-Type"] == "text/csv; charset=utf-8"
        and "attachment" in response["Content-Disposition"]
    )
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["tool"], r["user"], r["outcome"]) for r in table] == [
        ("search_books", "alice", "ok"),
        ("library_book_create", "bob", "denied"),
        ("search_books", "bob", "tool_error"),
    ]
    assert table[0]["arguments"] == '{"query": "wells"}' and table[0]["session"] == "s" * 43
    assert table[1]["arguments"].startswith('{"title"')
    assert table[2]["arguments"] == "" and table[2]["transport"] == "sse"


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_the_csv_export_streams_page_by_page_without_reading_it_whole(
    async_client: Any,
) -> None:
    admin = await sync_to_async(get_user_model().objects.create_superuser)(
        "root", "root@example.com", "pw"
    )
    calls = await sync_to_async(
        lambda: [_call(timedelta(minutes=n), tool_name=f"tool_{n}") for n in range(5)]
    )()
    await async_client.aforce_login(admin)
    from mcp_django import admin as mcp_admin

    mcp_admin.CSV_PAGE, page = 2, mcp_admin.CSV_PAGE  # three pages for five rows
    try:
        response = await async_client.post(
            reverse(CHANGELIST), {"action": "export_csv", "_selected_action": [c.pk for c in calls]}
        )
        assert response.status_code == 200 and response.is_async
        chunks = [chunk async for chunk in response.streaming_content]
    finally:
        mcp_admin.CSV_PAGE = page
    table = list(csv.DictReader(io.StringIO(b"".join(chunks).decode())))
    assert len(chunks) == 4  # the header, then one chunk per page
    assert [r["tool"] for r in table] == [f"tool_{n}" for n in range(5)]


@pytest.mark.parametrize(
    "cell",
    [
        "=1+1",
        "+x",
        "-x",
        "@x",
        "|calc",
        "\t=1",
        "\tplain",
        "\rplain",
        " =1+1",
        "   +x",
        "\n=1+1",
        "\r\n@SUM(A1)",
        "\u00a0=1",
        "\u200b=1",
        "\ufeff-1",
        "\uff1d1+1",
        "\uff0bx",
        "\uff0dx",
        "\uff20x",
        "\uff5ccalc",
        ' \n \uff1dHYPERLINK("x")',
    ],
)
def test_a_formula_like_cell_in_the_csv_export_is_defused(cell: str) -> None:
    from mcp_django.admin import _csv_cell

    assert _csv_cell(cell) == "'" + cell


@pytest.mark.parametrize(
    "cell", ["plain", "", "  ", " plain", "a=b", "1-2", "%20", "'quoted", "\uff41bc"]
)
def test_a_cell_that_is_no_formula_is_exported_as_it_is(cell: str) -> None:
    from mcp_django.admin import _csv_cell

    assert _csv_cell(cell) == cell


@pytest.mark.django_db
def test_the_csv_export_defuses_a_formula_hidden_behind_blanks_or_full_width_signs(
    admin_client: Any,
) -> None:
    call = _call(timedelta(minutes=1), tool_name=" =cmd|' /C calc'!A0", error="\uff1d1+1")
    response = admin_client.post(
        reverse(CHANGELIST), {"action": "export_csv", "_selected_action": [call.pk]}
    )
    (row,) = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert row["tool"] == "' =cmd|' /C calc'!A0" and row["error"] == "'\uff1d1+1"


def test_the_session_page_shows_its_calls_and_links_to_all_of_them(admin_client: Any) -> None:
    session = Session.objects.create(
        protocol_version="2025-11-25", expires_at=timezone.now() + timedelta(hours=1)
    )
    for n in range(25):
        _call(timedelta(minutes=n), tool_name=f"tool_{n}", session_id=session.pk)
    _call(timedelta(minutes=1), tool_name="elsewhere", session_id="other")
    content = admin_client.get(
        reverse("admin:mcp_django_session_change", args=[quote(session.pk)])
    ).content.decode()
    assert (
        "tool_0" in content
        and "tool_19" in content
        and "tool_20" not in content
        and "elsewhere" not in content
    )
    assert "All 25 calls of this session in the audit trail" in content
    assert reverse(CHANGELIST) + "?session_id=" + session.pk in content


@pytest.mark.django_db(transaction=True)
async def test_a_callers_later_calls_are_made_from_the_template_and_stored_alike(
    template_rows_match_whole_rows: list[str],
) -> None:
    """The second call on of a caller and tool is made from the first one's row template
    (issue 45): the rows read back are what the calls were, arguments and outcomes included."""
    client = client_for(audited_site())
    await client.initialize()
    for text in ("one", "two\x00nul", "three"):
        await client.call_tool("echo", {"text": text, "api_key": "sk-1"})
    await client.call_tool("fail", {"reason": "no"})
    await client.call_tool("fail", {"reason": "again"})
    stored = await rows()
    assert [(r.tool_name, r.outcome) for r in stored] == [
        ("echo", Outcome.OK),
        ("echo", Outcome.OK),
        ("echo", Outcome.OK),
        ("fail", Outcome.TOOL_ERROR),
        ("fail", Outcome.TOOL_ERROR),
    ]
    assert [r.arguments["text"] for r in stored[:3]] == ["one", "two\ufffdnul", "three"]
    assert {r.arguments["api_key"] for r in stored[:3]} == {REDACTED}
    assert [r.error for r in stored[3:]] == ["refused: no", "refused: again"]
    assert len({r.request_id for r in stored}) == 5
    assert template_rows_match_whole_rows == ["echo", "echo", "fail"]
