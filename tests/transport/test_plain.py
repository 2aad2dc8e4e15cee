"""The endpoint's plain view (WSGI, or ASGI without the router), through Django's test Client:
a real WSGI handler, so the view runs through ``async_to_sync`` as under gunicorn."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from mcp_django.models import Session, Task, ToolCall
from mcp_django.ops.audit import buffer as audit_buffer
from mcp_django.protocol.errors import METHOD_NOT_FOUND, PARSE_ERROR, QUOTA_EXCEEDED
from mcp_django.protocol.negotiation import LATEST_VERSION
from mcp_django.transport.plain import GET_STREAM_REFUSED, LISTEN_REFUSED, RESUME_REFUSED
from mcp_django.transport import headers as checks
from mcp_django.transport.process import sweeper
from tests.conftest import BASE_SETTINGS
from tests.polling import until_sync
from tests.test_commands import make_task

from .conftest import mcp_settings
from .test_stateless import ALL_CAPABILITIES, body, headers

# transaction=True: the view runs the engine on the process loop, whose ORM calls use asgiref's
# thread for sync code and its own connection (transport.process_loop), not the test's.
pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def post(client: Client, message: Any, **extra: str) -> Any:
    """POST ``message`` as JSON, with ``extra`` headers by lower-case name."""
    return client.post(
        "/mcp/",
        orjson.dumps(message),
        content_type="application/json",
        headers={"accept": ACCEPT, **extra},
    )


def post_modern(client: Client, message: dict[str, Any], **extra: str) -> Any:
    sent = {k: v for k, v in headers(message).items() if v is not None}
    return post(client, message, **sent, **extra)


def initialize(
    client: Client,
    capabilities: dict[str, Any] | None = None,
    version: str = LATEST_VERSION,
) -> str:
    """Open a handshake-era session (the client declaring ``capabilities``); return its id."""
    response = post(
        client,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "wsgi-test", "version": "1"},
            },
        },
    )
    assert response.status_code == 200, response.content
    return str(response["mcp-session-id"])


def in_session(client: Client, session_id: str, message: Any) -> Any:
    return post(
        client, message, **{"mcp-session-id": session_id, "mcp-protocol-version": LATEST_VERSION}
    )


def call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


# --- the handshake era, in JSON answer mode ---------------------------------------------------


def test_initialize_makes_a_session_row_and_answers_json_with_its_id():
    client = Client()

    session_id = initialize(client)

    assert Session.objects.filter(pk=session_id, terminated_at__isnull=True).exists()


def test_a_session_calls_a_tool_and_its_notification_is_accepted():
    client = Client()
    session_id = initialize(client)

    accepted = in_session(
        client, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    answered = in_session(client, session_id, call("add", {"a": 2, "b": 3}))

    assert accepted.status_code == 202 and accepted.content == b""
    assert answered.status_code == 200
    assert answered["Content-Type"] == "application/json"
    assert int(answered["Content-Length"]) == len(answered.content)
    assert answered.json()["result"]["structuredContent"] == {"result": 5}


def test_delete_ends_the_session_and_later_requests_get_404():
    client = Client()
    session_id = initialize(client)

    deleted = client.delete(
        "/mcp/", headers={"mcp-session-id": session_id, "mcp-protocol-version": LATEST_VERSION}
    )
    after = in_session(client, session_id, call("add", {"a": 1, "b": 1}))

    assert deleted.status_code == 204
    assert after.status_code == 404


def test_a_request_without_a_session_id_is_refused_with_400():
    response = post(
        Client(), call("add", {"a": 1, "b": 1}), **{"mcp-protocol-version": LATEST_VERSION}
    )

    assert response.status_code == 400


def test_ping_before_initialize_is_answered():
    response = post(Client(), {"jsonrpc": "2.0", "id": 7, "method": "ping"})

    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}


# --- the 2026-07-28 revision ------------------------------------------------------------------


def test_server_discover_is_answered_without_a_session():
    response = post_modern(Client(), body("server/discover"))

    assert response.status_code == 200
    result = response.json()["result"]
    assert "2026-07-28" in result["supportedVersions"]
    assert Session.objects.count() == 0


def test_a_2026_call_is_answered_in_full():
    response = post_modern(
        Client(), body("tools/call", {"name": "add", "arguments": {"a": 4, "b": 5}})
    )

    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"result": 9}


def test_a_2026_input_round_carries_request_state_to_the_retry():
    client = Client()
    arguments = {"name": "ask", "arguments": {"question": "Why?"}}

    first = post_modern(
        client, body("tools/call", arguments, capabilities=ALL_CAPABILITIES)
    ).json()["result"]
    sampled = {"role": "assistant", "content": {"type": "text", "text": "Because"}, "model": "m"}
    second = post_modern(
        client,
        body(
            "tools/call",
            {
                **arguments,
                "requestState": first["requestState"],
                "inputResponses": {"sampling-1": sampled},
            },
            request_id=2,
            capabilities=ALL_CAPABILITIES,
        ),
    ).json()["result"]
    final = post_modern(
        client,
        body(
            "tools/call",
            {
                **arguments,
                "requestState": second["requestState"],
                "inputResponses": {"elicitation-2": {"action": "accept", "content": {"ok": True}}},
            },
            request_id=3,
            capabilities=ALL_CAPABILITIES,
        ),
    ).json()["result"]

    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["sampling-1"]
    assert second["resultType"] == "input_required"
    assert final["resultType"] == "complete"
    assert final["content"][0]["text"] == "Because / accept {'ok': True}"


def test_subscriptions_listen_answers_an_error_naming_the_asgi_deployment():
    response = post_modern(Client(), body("subscriptions/listen", {"notifications": {}}))

    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == METHOD_NOT_FOUND
    assert error["message"] == LISTEN_REFUSED


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.urls_plain_tasks")
@pytest.mark.parametrize("backend", [None, "default"])
def test_a_task_is_created_run_by_the_backend_and_polled(backend):
    client = Client()

    with mcp_settings(TASKS_BACKEND=backend, TASK_POLL_INTERVAL_MS=50):
        created = post_modern(
            client,
            body("tools/call", {"name": "count", "arguments": {"upto": 2}}, capabilities=TASKS),
        ).json()["result"]

        def polled() -> dict[str, Any] | None:
            result = post_modern(
                client,
                body("tasks/get", {"taskId": created["taskId"]}, request_id=2, capabilities=TASKS),
                **{"mcp-name": created["taskId"]},
            ).json()["result"]
            return result if result["status"] == "completed" else None

        # Run after the answer: by the process loop's runner (None) or the backend's worker.
        until_sync(polled)

    assert created["status"] == "working"
    assert Task.objects.get(pk=created["taskId"]).status == "completed"


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resume", "refused"), [({}, GET_STREAM_REFUSED), ({"last-event-id": "abc:1"}, RESUME_REFUSED)]
)
def test_the_get_stream_and_its_resumption_answer_405_naming_the_asgi_deployment(resume, refused):
    client = Client()
    session_id = initialize(client)

    response = client.get(
        "/mcp/",
        headers={
            "accept": "text/event-stream",
            "mcp-session-id": session_id,
            "mcp-protocol-version": LATEST_VERSION,
            **resume,
        },
    )

    assert response.status_code == 405
    assert response["Allow"] == "POST, DELETE"
    assert response.json()["error"]["message"] == refused


def test_a_body_over_max_body_size_is_refused_with_413():
    with mcp_settings(MAX_BODY_SIZE=100):
        response = post(Client(), call("echo", {"text": "x" * 200}))

    assert response.status_code == 413


def test_a_content_length_of_a_non_ascii_digit_is_not_a_server_error():
    # Content-Length "\xb2" (the byte, read as latin-1: "²") passed str.isdigit() and then failed
    # int(): a 500. runserver hands such a header on; Django reads it as no body.
    response = Client(raise_request_exception=False).post(
        "/mcp/",
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
        content_type="application/json",
        headers={"accept": ACCEPT, "content-length": "\xb2"},
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == PARSE_ERROR


def test_a_foreign_origin_is_refused_with_403():
    response = post(
        Client(), {"jsonrpc": "2.0", "id": 1, "method": "ping"}, origin="https://evil.example"
    )

    assert response.status_code == 403


def test_an_allowed_origin_gets_its_preflight_and_cors_headers():
    client = Client()
    origin = "https://app.example"

    with mcp_settings(ALLOWED_ORIGINS=[origin]):
        preflight = client.options(
            "/mcp/", headers={"origin": origin, "access-control-request-method": "POST"}
        )
        answered = post(client, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, origin=origin)

    assert preflight.status_code == 204
    assert "POST" in preflight["Access-Control-Allow-Methods"]
    assert answered["Access-Control-Allow-Origin"] == origin


def test_the_view_is_csrf_exempt():
    client = Client(enforce_csrf_checks=True)

    response = post(client, {"jsonrpc": "2.0", "id": 1, "method": "ping"})

    assert response.status_code == 200


def test_without_credentials_the_django_policy_answers_401_with_a_challenge():
    with mcp_settings(AUTHENTICATION="django"):
        response = post(Client(), {"jsonrpc": "2.0", "id": 1, "method": "ping"})

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Session realm="mcp"'


def test_a_user_logged_in_through_django_sessions_is_served_as_that_user():
    user = get_user_model().objects.create_user("alice", password="pw")
    client = Client()
    client.force_login(user)

    with mcp_settings(AUTHENTICATION="django"):
        session_id = initialize(client)

    assert Session.objects.get(pk=session_id).user_id == user.pk


def test_a_tools_call_is_audited_by_the_writer_of_the_process_loop():
    client = Client()
    session_id = initialize(client)

    in_session(client, session_id, call("add", {"a": 1, "b": 2}))

    # Written after the answer, as under ASGI: by the writer's task on the process loop, whose
    # next round this flush does now.
    audit_buffer.flush()
    row = ToolCall.objects.get(tool_name="add", session_id=session_id)
    assert row.outcome == ToolCall.Outcome.OK
    assert row.session_id == session_id


def test_a_quota_refusal_is_answered_429_and_audited():
    client = Client()
    quotas = {"TOOL_CALLS": "1/minute"}

    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "QUOTAS": quotas}):
        first = post_modern(
            client, body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
        )
        second = post_modern(
            client,
            body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, request_id=2),
        )

    assert first.status_code == 200
    assert second.status_code == 429
    assert second.json()["error"]["code"] == QUOTA_EXCEEDED
    assert "Retry-After" in second
    audit_buffer.flush()
    assert ToolCall.objects.filter(tool_name="add", outcome=ToolCall.Outcome.DENIED).count() == 1


def test_the_first_request_starts_the_sweep_after_dead_processes():
    # No process channel runs under WSGI: without this sweep, a task its killed gunicorn worker
    # was running stayed "working" until a client polled it.
    now = timezone.now()
    dead = make_task(heartbeat_at=now - timedelta(hours=1), expires_at=now + timedelta(hours=1))
    alive = make_task(heartbeat_at=now, expires_at=now + timedelta(hours=1))

    response = post_modern(Client(), body("tools/list", {}))

    assert response.status_code == 200
    until_sync(lambda: Task.objects.get(pk=dead.pk).status == Task.Status.FAILED)
    assert Task.objects.get(pk=alive.pk).status == Task.Status.WORKING
    assert sweeper.task is not None and not sweeper.task.done()


# --- the headers, read from META --------------------------------------------------------------

_meta_keys = st.sampled_from(
    ["CONTENT_TYPE", "CONTENT_LENGTH", "REMOTE_ADDR", "SERVER_NAME", "wsgi.input", "QUERY_STRING"]
) | st.from_regex(r"HTTP_[A-Z][A-Z0-9_]{0,20}", fullmatch=True)


@given(st.dictionaries(_meta_keys, st.text(max_size=20), max_size=12))
def test_headers_of_a_request_are_djangos_headers_by_lower_case_name(meta):
    request = HttpRequest()
    request.META = meta

    headers = checks.Headers.of_request(request)

    assert dict(headers) == {name.lower(): value for name, value in request.headers.items()}
