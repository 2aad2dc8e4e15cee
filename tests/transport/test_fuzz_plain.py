"""Property tests against the endpoint's plain view (WSGI), the counterpart of test_fuzz.py for
the ASGI consumer: whatever a client sends, in either era, with whatever headers and HTTP
method, the answer is a 2xx or 4xx, never a 5xx, and nothing is logged at ERROR; a JSON answer
parses and its errors carry JSON-RPC codes in the documented ranges; a streamed answer parses as
SSE and ends with its response; and no stream slot of the process is left held.

Requests go through Django's sync test Client as raw WSGI environs: a header left out is absent
(the Client's helpers always send a Content-Type with a body), and the body is read from a
stream that ends where its bytes do, so a Content-Length declared past the body reads short, as
from a client that stopped sending, rather than tripping the Client's FakePayload assertion.

Examples of one test share its sessions (the health check for function-scoped fixtures is
silenced on purpose): a DELETE ends only a session made for it.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import orjson
import pytest
from django.core.exceptions import DisallowedHost
from django.http import HttpResponse
from django.http.request import HttpHeaders
from django.test import Client
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from mcp_django.protocol.errors import INTERNAL_ERROR
from mcp_django.protocol.lifecycle import LOG_LEVELS
from mcp_django.protocol.modern import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    NAME_HEADER_SOURCES,
    V2026_07_28,
    encode_header_value,
)
from mcp_django.protocol.negotiation import SUPPORTED_VERSIONS
from mcp_django.protocol.sse import SSEEvent, parse_sse
from mcp_django.transport.plain_stream import cut_off_message, open_streams
from tests import urls_plain_streams
from tests.fuzzing import examples
from tests.protocol import strategies as s

from .conftest import mcp_settings
from .test_fuzz import KNOWN_METHODS, known_method_messages, raw_header_values

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


def fuzz(count: int) -> settings:
    """Hypothesis settings for ``count`` examples (a fifth in the matrix, see tests/fuzzing.py)."""
    return settings(
        max_examples=examples(count),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


ACCEPT = "application/json, text/event-stream"
#: PLAIN_STREAM_SECONDS here: a streamed answer that would run on (the default bound is 300 s)
#: is cut off soon, and the stream tests fail on the cut-off, so a hang fails fast.
BOUND = 5
POST_HEADERS = {"accept": ACCEPT, "content-type": "application/json"}
ALLOWED_ORIGIN = "https://app.example"

#: JSON-RPC 2.0's predefined codes and the range it leaves to the server (MCP's own codes).
PREDEFINED_CODES = frozenset({-32700, -32600, -32601, -32602, -32603})
SERVER_CODES = range(-32099, -32000 + 1)

#: The handshake era's methods (initialize, ping and others were removed in 2026-07-28), and the
#: 2026-07-28 revision's own.
MODERN_METHODS = [
    *KNOWN_METHODS,
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/result",
    "tasks/update",
]
HTTP_METHODS = ["POST", "GET", "DELETE", "PUT", "PATCH", "OPTIONS"]


# --- sending and checking -----------------------------------------------------------------------


def send(
    body: bytes = b"",
    headers: Mapping[str, str | None] | None = None,
    method: str = "POST",
    client: Client | None = None,
) -> Any:
    """Send a raw request to the plain view; ``headers`` by lower-case name, None leaving one
    out (``content-length`` defaults to the body's length)."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": "/mcp/",
        "CONTENT_LENGTH": str(len(body)),
        # Ends where the body does: a longer declared length reads short, as from a real server.
        "wsgi.input": io.BytesIO(body),
    }
    for name, value in (headers or {}).items():
        key = HttpHeaders.to_wsgi_name(name)
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    return (client or Client(raise_request_exception=False)).request(**environ)


def check_message(message: Any) -> None:
    """One JSON-RPC message the server wrote: a response with a result or an error (whose code
    is JSON-RPC's or in the server's range), or a notification."""
    assert isinstance(message, dict) and message["jsonrpc"] == "2.0", message
    if "method" in message:
        assert "id" not in message and isinstance(message["method"], str)
        return
    assert ("result" in message) != ("error" in message), message
    if "error" in message:
        code = message["error"]["code"]
        assert type(code) is int, message
        assert code in PREDEFINED_CODES or code in SERVER_CODES, message
        assert isinstance(message["error"]["message"], str)


def check_answer(response: Any) -> list[dict[str, Any]]:
    """A 2xx or 4xx, well formed for its content type; the JSON-RPC messages it carries."""
    status = response.status_code
    content_type = response.get("Content-Type")
    if currently_in_test_context():  # what the examples got: --hypothesis-show-statistics
        event(f"HTTP {status}{' (streamed)' if response.streaming else ''}")
    if response.streaming:
        # Read to its end, as a WSGI server does; the test Client then closes it.
        body = b"".join(response.streaming_content)
        assert status == 200 and content_type == "text/event-stream", (status, body[:300])
        messages = [event.json() for event in parse_sse(body) if isinstance(event, SSEEvent)]
        for message in messages:
            check_message(message)
        assert messages and "method" not in messages[-1], body[:300]  # its response last
        return messages
    body = response.content
    assert 200 <= status < 300 or 400 <= status < 500, (status, body[:300])
    if status in (202, 204):
        assert body == b"" and content_type is None, (status, response.headers)
        return []
    if content_type != "application/json":
        # Refused by Django before the view (CommonMiddleware reads the Host): a 400 page.
        with pytest.raises(DisallowedHost):
            response.wsgi_request.get_host()
        assert status == 400
        return []
    assert int(response["Content-Length"]) == len(body)
    value = orjson.loads(body)
    messages = value if isinstance(value, list) else [value]
    for message in messages:
        check_message(message)
    if status >= 400:
        assert isinstance(value, dict) and "error" in value, value
    return messages


class Errors(logging.Handler):
    """The records logged at ERROR by Django's request handler or mcp_django's transport (a
    failed request, a failed stream) while it is attached."""

    NAMES = ("django.request", "mcp_django.transport")

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def logged_errors() -> Iterator[Errors]:
    """The records logged at ERROR during a test, which must end without any (see
    :func:`after_each` for each example)."""
    errors = Errors()
    loggers = [logging.getLogger(name) for name in Errors.NAMES]
    for logger in loggers:
        logger.addHandler(errors)
    try:
        yield errors
    finally:
        for logger in loggers:
            logger.removeHandler(errors)
    assert [record.getMessage() for record in errors.records] == []


def bounded(**overrides: Any) -> Any:
    """These tests' MCP_DJANGO (see BOUND), with ``overrides``."""
    return mcp_settings(**{"PLAIN_STREAM_SECONDS": BOUND, **overrides})


@pytest.fixture(autouse=True)
def _bounded() -> Iterator[None]:
    with bounded():
        yield


def not_cut_off(messages: list[dict[str, Any]]) -> None:
    """No answer of a call that ends on its own was cut off at BOUND: it did not hang."""
    for message in messages:
        assert message.get("error", {}).get("message") != cut_off_message(BOUND), message


def after_each(errors: Errors) -> None:
    """What every example leaves: no stream slot held, nothing logged at ERROR (checked per
    example, so that hypothesis shrinks to the input that logged it)."""
    assert open_streams.held == 0
    assert [record.getMessage() for record in errors.records] == []


def initialize(version: str = "2025-11-25") -> str:
    response = send(
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "fuzz-plain", "version": "1"},
                },
            }
        ),
        POST_HEADERS,
    )
    assert response.status_code == 200, response.content
    return str(response["Mcp-Session-Id"])


@contextmanager
def own_session(wanted: bool = True) -> Iterator[str | None]:
    """A 2025-11-25 session for one example (None unless ``wanted``), ended after it: an
    example may end it itself, and SESSIONS_PER_ADDRESS caps those left open."""
    if not wanted:
        yield None
        return
    session_id = initialize()
    try:
        yield session_id
    finally:
        send(b"", {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}, "DELETE")


@pytest.fixture
def session() -> str:
    """A 2025-11-25 session, shared by a test's examples."""
    return initialize()


@pytest.fixture
def batch_session() -> str:
    """A 2025-03-26 session: the one revision that takes JSON-RPC batches."""
    return initialize("2025-03-26")


def modern_meta() -> dict[str, Any]:
    """The ``_meta`` of a valid 2026-07-28 request."""
    return {
        META_PROTOCOL_VERSION: V2026_07_28,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: {"name": "fuzz-plain", "version": "1"},
    }


def in_session(session_id: str, version: str = "2025-11-25") -> dict[str, str | None]:
    return {**POST_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": version}


# --- strategies ---------------------------------------------------------------------------------


def latin1(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Text as a WSGI server hands it over (UTF-8 bytes read as latin-1), without CR, LF or NUL,
    which no server passes on."""
    return strategy.map(lambda text: text.encode("utf-8", "replace").decode("latin-1")).filter(
        lambda text: not any(c in text for c in "\r\n\0")
    )


def mostly(usual: st.SearchStrategy[T], other: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``usual`` three times in four, else ``other``: arbitrary values, with enough valid ones
    that an example gets past the first check that would refuse it."""
    return st.integers(0, 3).flatmap(lambda n: usual if n else other)


def header(*plausible: str) -> st.SearchStrategy[str]:
    """A header's value: one of the ``plausible`` ones, or anything a server would pass on."""
    return st.sampled_from(plausible) | raw_header_values if plausible else raw_header_values


#: Mostly valid (a bounded string or a safe integer), else any JSON value or a 64-bit integer.
progress_tokens = mostly(
    st.text(max_size=16) | st.integers(-(2**53) + 1, 2**53 - 1),
    s.json_values(4) | st.integers(s.INT64_MIN, s.UINT64_MAX) | st.text(min_size=200),
)
log_levels = mostly(st.sampled_from(LOG_LEVELS), s.json_scalars)


@st.composite
def modern_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A 2026-07-28 request or notification for a known method, with arbitrary params and
    ``_meta`` that is mostly valid (else arbitrary, or merged with arbitrary keys)."""
    message = draw(known_method_messages())
    message["method"] = draw(st.sampled_from(MODERN_METHODS) | st.just(message["method"]))
    meta: dict[str, Any] = {
        META_PROTOCOL_VERSION: draw(mostly(st.just(V2026_07_28), header(*SUPPORTED_VERSIONS))),
        META_CLIENT_CAPABILITIES: draw(mostly(st.just({}), s.json_values(4))),
        META_CLIENT_INFO: draw(
            mostly(st.just({"name": "fuzz-plain", "version": "1"}), s.json_values(4))
        ),
    }
    if draw(st.booleans()):
        meta[META_LOG_LEVEL] = draw(log_levels)
    if draw(st.booleans()):
        meta["progressToken"] = draw(progress_tokens)
    if draw(st.integers(0, 7)) == 0:
        meta = {**draw(s.json_objects), **meta} if draw(st.booleans()) else draw(s.json_values(6))
    message["params"]["_meta"] = meta
    return message


@st.composite
def modern_headers(draw: st.DrawFn, message: dict[str, Any]) -> dict[str, str | None]:
    """The headers of a 2026-07-28 POST of ``message``: ``Mcp-Method`` and ``Mcp-Name`` that
    mirror it, or not (left out, another value, or raw bytes)."""
    method = message.get("method")
    source = NAME_HEADER_SOURCES.get(method) if isinstance(method, str) else None
    params = message.get("params")
    name = params.get(source) if source is not None and isinstance(params, dict) else None
    sent: dict[str, str | None] = {
        **POST_HEADERS,
        "mcp-protocol-version": draw(mostly(st.just(V2026_07_28), header(V2026_07_28 + " ", ""))),
        "mcp-method": draw(
            mostly(
                st.just(method if isinstance(method, str) else None),
                st.none() | header(*MODERN_METHODS),
            )
        ),
    }
    if name is not None or draw(st.booleans()):
        sent["mcp-name"] = draw(
            mostly(
                st.just(encode_header_value(name) if isinstance(name, str) else None),
                st.none()
                | header("add", "echo", "test://hello", "=?base64?YWRk?=", "=?base64?!?="),
            )
        )
    for key, value in list(sent.items()):
        if value is not None:
            # As a server hands it over (see latin1), or left out if no server would.
            value = value.encode("utf-8", "replace").decode("latin-1")
            sent[key] = None if any(c in value for c in "\r\n\0") else value
    return sent


known_bodies = (
    known_method_messages().map(orjson.dumps)
    | modern_messages().map(orjson.dumps)
    | s.arbitrary_bytes
    | s.json_values().map(orjson.dumps)
)

content_lengths = (
    st.integers(min_value=0, max_value=400).map(str)
    | st.sampled_from(["-1", "+5", " 5", "0x10", "1e3", "\xb2", "99999999999999999999"])
    | raw_header_values
)

#: Every header the view reads, each left out or sent with a plausible or arbitrary value.
any_headers = st.fixed_dictionaries(
    {},
    optional={
        "accept": latin1(s.accept_headers) | st.just(ACCEPT),
        "content-type": header(
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/json;charset=latin-1",
            "text/plain",
            "application/jsonx",
            "",
        ),
        "content-length": content_lengths | st.none(),  # None: absent, as a chunked body
        "mcp-protocol-version": header(V2026_07_28, *SUPPORTED_VERSIONS, "2025-11-25 ", ""),
        "mcp-session-id": raw_header_values,
        "origin": mostly(st.just(ALLOWED_ORIGIN), latin1(s.origin_headers)),
        "host": header("testserver", "localhost:8000", "evil.example", "[::1", "", "a:b:c"),
        "last-event-id": header("get:0", "get:99999999999999999", ":1", "get:\xb2"),
        "mcp-method": header(*MODERN_METHODS),
        "mcp-name": header("add", "echo", "test://hello", "=?base64?YWRk?="),
        "mcp-param-region": header("eu", "=?base64?ZXU=?="),
        "access-control-request-method": header("POST", "GET", "DELETE"),
        "access-control-request-headers": header("mcp-param-region, Mcp-Session-Id", "a,,b"),
    },
)


# --- bodies, in the handshake era ---------------------------------------------------------------


@fuzz(100)
@given(body=s.arbitrary_bytes)
@example(body=b"")
@example(body=b"\xff\xfe")
@example(body=b"[" * 5000)
@example(body=b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}')
def test_arbitrary_bytes_bodies_get_a_well_formed_answer(logged_errors, session, body):
    check_answer(send(body, POST_HEADERS))
    check_answer(send(body, in_session(session)))
    after_each(logged_errors)


@fuzz(100)
@given(value=s.json_values())
def test_arbitrary_json_bodies_get_a_well_formed_answer(logged_errors, session, value):
    check_answer(send(orjson.dumps(value), in_session(session)))
    after_each(logged_errors)


@fuzz(100)
@given(value=st.one_of(s.jsonrpc_ish(), st.lists(s.jsonrpc_ish(), min_size=1, max_size=4)))
def test_jsonrpc_like_bodies_get_a_well_formed_answer(logged_errors, batch_session, value):
    check_answer(send(orjson.dumps(value), in_session(batch_session, "2025-03-26")))
    after_each(logged_errors)


@fuzz(200)
@given(message=known_method_messages())
def test_known_methods_with_arbitrary_params_in_a_session_get_a_well_formed_answer(
    logged_errors, session, message
):
    response = send(orjson.dumps(message), in_session(session))
    messages = check_answer(response)
    if "id" in message and response.status_code == 200:
        assert messages[-1]["id"] == message["id"]
    after_each(logged_errors)


@fuzz(100)
@given(messages=st.lists(known_method_messages(), min_size=1, max_size=4))
def test_batches_of_known_methods_get_a_well_formed_answer(logged_errors, batch_session, messages):
    check_answer(send(orjson.dumps(messages), in_session(batch_session, "2025-03-26")))
    after_each(logged_errors)


@fuzz(100)
@given(message=known_method_messages(), value=raw_header_values)
@example(message={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, value="")
@example(message={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, value=" ")
def test_known_methods_with_an_arbitrary_session_id_get_a_well_formed_answer(
    logged_errors, message, value
):
    headers = {**POST_HEADERS, "mcp-session-id": value, "mcp-protocol-version": "2025-11-25"}
    check_answer(send(orjson.dumps(message), headers))
    after_each(logged_errors)


# --- bodies, in the 2026-07-28 revision -------------------------------------------------------


@fuzz(300)
@given(data=st.data())
def test_2026_requests_with_arbitrary_params_and_headers_get_a_well_formed_answer(
    logged_errors, data
):
    message = data.draw(modern_messages())
    headers = data.draw(modern_headers(message))
    response = send(orjson.dumps(message), headers)
    messages = check_answer(response)
    if "id" in message and response.status_code == 200:
        assert messages[-1]["id"] == message["id"]
    after_each(logged_errors)


@fuzz(100)
@given(value=st.one_of(s.jsonrpc_ish(), st.lists(s.jsonrpc_ish(), min_size=1, max_size=4)))
def test_2026_jsonrpc_like_bodies_get_a_well_formed_answer(logged_errors, value):
    headers = {**POST_HEADERS, "mcp-protocol-version": V2026_07_28, "mcp-method": "tools/list"}
    check_answer(send(orjson.dumps(value), headers))
    after_each(logged_errors)


#: The ``x-mcp-header`` names of tests.urls_plain_headers' tool, and the arguments they mirror.
MIRRORS = {
    "Region": ("region",),
    "Count": ("count",),
    "Dry-Run": ("dry",),
    "City": ("where", "city"),
}


def mirror(value: Any) -> str | None:
    """The ``Mcp-Param-*`` value a client sends for an argument, None for one it cannot mirror."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return encode_header_value(value) if isinstance(value, str) else None


@st.composite
def mirrored_calls(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str | None]]:
    """A 2026-07-28 call of ``mirrored`` with arbitrary arguments, and its headers: each
    ``Mcp-Param-*`` mostly mirroring its argument (in any letter case), else left out or any
    value, and the odd header no argument declares."""
    arguments = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "region": mostly(st.text(max_size=8), s.json_scalars),
                "count": mostly(st.integers(-(2**53), 2**53), s.json_scalars),
                "dry": mostly(st.booleans() | st.none(), s.json_scalars),
                "where": mostly(
                    st.fixed_dictionaries({}, optional={"city": st.text(max_size=8)}),
                    s.json_values(3),
                ),
            },
        )
    )
    headers: dict[str, str | None] = {
        **POST_HEADERS,
        "mcp-protocol-version": V2026_07_28,
        "mcp-method": "tools/call",
        "mcp-name": "mirrored",
    }
    for name, path in MIRRORS.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        sent = draw(
            mostly(
                st.just(mirror(value)),
                st.none() | header("eu", "3", "3.0", "1e3", "true", "", "=?base64?ZXU?="),
            )
        )
        if sent is not None:
            spelled = draw(st.sampled_from([name, name.lower(), name.upper()]))
            headers[f"mcp-param-{spelled}"] = sent
    if draw(st.integers(0, 7)) == 0:
        headers["mcp-param-other"] = draw(raw_header_values)
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "mirrored", "arguments": arguments, "_meta": modern_meta()},
    }
    return message, headers


@pytest.mark.urls("tests.urls_plain_headers")
@fuzz(150)
@given(call=mirrored_calls())
def test_mcp_param_headers_get_a_well_formed_answer(logged_errors, call):
    message, headers = call
    check_answer(send(orjson.dumps(message), headers))
    after_each(logged_errors)


# --- headers and HTTP methods -----------------------------------------------------------------


@fuzz(400)
@given(
    method=st.sampled_from(HTTP_METHODS),
    body=known_bodies,
    headers=any_headers,
    real_session=st.booleans(),
    origins=st.sampled_from([[], [ALLOWED_ORIGIN]]),
)
@example(
    method="POST", body=b"{}", headers={"content-length": "\xb2"}, real_session=False, origins=[]
)
def test_any_method_with_any_headers_gets_a_well_formed_answer(
    logged_errors, method, body, headers, real_session, origins
):
    headers = dict(headers)
    with own_session(real_session and "mcp-session-id" not in headers) as session_id:
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        with bounded(ALLOWED_ORIGINS=origins):
            response = send(body, headers, method)
            check_answer(response)
    if response.status_code == 405:
        assert response["Allow"]
    after_each(logged_errors)


@fuzz(150)
@given(
    body=known_bodies,
    declared=st.integers(min_value=0, max_value=600) | st.sampled_from(["-1", "", "x"]),
    limit=st.sampled_from([None, 64]),
)
@example(body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', declared=500, limit=None)
@example(body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', declared=5, limit=None)
@example(body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', declared=65, limit=64)
def test_a_content_length_larger_or_smaller_than_the_body_gets_a_well_formed_answer(
    logged_errors, session, body, declared, limit
):
    headers = {**in_session(session), "content-length": str(declared)}
    overrides = {} if limit is None else {"MAX_BODY_SIZE": limit}
    with bounded(**overrides):
        response = send(body, headers)
    check_answer(response)
    if limit is not None and isinstance(declared, int) and declared > limit:
        assert response.status_code == 413
    after_each(logged_errors)


@fuzz(100)
@given(
    method=st.sampled_from(HTTP_METHODS),
    origin=mostly(st.just(ALLOWED_ORIGIN), latin1(s.origin_headers)),
    requested=st.none() | header("POST", "GET", "PUT", ""),
    requested_headers=st.none()
    | header("Mcp-Param-Region", "mcp-param-a, MCP-PARAM-b ,x", "Mcp-Param-" + "a" * 200),
)
def test_cors_preflights_and_cross_origin_requests_get_a_well_formed_answer(
    logged_errors, method, origin, requested, requested_headers
):
    headers: dict[str, str | None] = {"origin": origin}
    if requested is not None:
        headers["access-control-request-method"] = requested
    if requested_headers is not None:
        headers["access-control-request-headers"] = requested_headers
    with bounded(ALLOWED_ORIGINS=[ALLOWED_ORIGIN]):
        response = send(b"", headers, method)
    check_answer(response)
    if method == "OPTIONS" and origin == ALLOWED_ORIGIN:
        assert response.status_code == 204
        assert response["Access-Control-Allow-Origin"] == ALLOWED_ORIGIN
    after_each(logged_errors)


@fuzz(100)
@given(
    method=st.sampled_from(["GET", "DELETE"]),
    headers=st.fixed_dictionaries(
        {},
        optional={
            "accept": latin1(s.accept_headers),
            "mcp-protocol-version": header(V2026_07_28, *SUPPORTED_VERSIONS),
            "last-event-id": header("get:0", "get:99999999999999999", ":1", "get:\xb2"),
        },
    ),
    real_session=st.booleans(),
)
def test_get_and_delete_with_any_session_get_a_well_formed_answer(
    logged_errors, method, headers, real_session
):
    with own_session(real_session) as session_id:
        response = send(b"", {**headers, "mcp-session-id": session_id}, method)
        check_answer(response)
    if method == "GET":
        assert response.status_code in (400, 404, 405, 406), response.content
    after_each(logged_errors)


# --- streamed answers ---------------------------------------------------------------------------


@fuzz(100)
@given(
    token=st.none() | progress_tokens,
    level=st.none() | log_levels,
    steps=st.integers(min_value=0, max_value=3),
    request_id=s.request_ids,
    plain_streams=st.sampled_from([8, 0]),
)
def test_2026_streamed_calls_with_arbitrary_meta_get_a_well_formed_answer(
    logged_errors, token, level, steps, request_id, plain_streams
):
    meta = modern_meta()
    if token is not None:
        meta["progressToken"] = token
    if level is not None:
        meta[META_LOG_LEVEL] = level
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "progress", "arguments": {"steps": steps}, "_meta": meta},
    }
    headers = {
        **POST_HEADERS,
        "mcp-protocol-version": V2026_07_28,
        "mcp-method": "tools/call",
        "mcp-name": "progress",
    }
    with bounded(PLAIN_STREAMS=plain_streams):  # none: answered as JSON instead
        response = send(orjson.dumps(message), headers)
        messages = check_answer(response)
    not_cut_off(messages)
    if plain_streams == 0:
        assert not response.streaming
    if response.status_code == 200:
        assert messages[-1]["id"] == request_id
    for sent in messages[:-1]:
        if sent["method"] == "notifications/progress":
            assert sent["params"]["progressToken"] == token
    after_each(logged_errors)


@fuzz(100)
@given(
    token=st.none() | progress_tokens,
    # Numbers up to 3 (pydantic reads 1e18 as an int: the tool would stream that many steps).
    steps=st.integers(min_value=s.INT64_MIN, max_value=3)
    | st.floats(max_value=3, allow_nan=False, allow_infinity=False)
    | st.none()
    | st.booleans()
    | st.text(max_size=5),
    request_id=s.request_ids,
    others=st.none() | st.lists(known_method_messages(), max_size=3),
)
def test_session_streamed_calls_with_arbitrary_meta_get_a_well_formed_answer(
    logged_errors, session, batch_session, token, steps, request_id, others
):
    """A call alone in a 2025-11-25 session, or batched with ``others`` in a 2025-03-26 one
    (what they are answered at once comes first on its stream)."""
    params: dict[str, Any] = {"name": "progress", "arguments": {"steps": steps}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    if others is None:
        response = send(orjson.dumps(message), in_session(session))
    else:
        batch = [*others, message]
        response = send(orjson.dumps(batch), in_session(batch_session, "2025-03-26"))
    messages = check_answer(response)
    not_cut_off(messages)
    if response.streaming and others is None:
        assert messages[-1]["id"] == request_id
    after_each(logged_errors)


@pytest.mark.urls("tests.urls_plain_streams")
@fuzz(30)
@given(
    token=progress_tokens,
    level=st.none() | log_levels,
    in_a_session=st.booleans(),
    keepalive=st.sampled_from([15, 0.01]),
)
def test_streams_cut_off_by_their_time_bound_get_a_well_formed_answer(
    logged_errors, session, token, level, in_a_session, keepalive
):
    urls_plain_streams.outcomes.clear()
    meta: dict[str, Any] = {"progressToken": token}
    if in_a_session:
        headers = in_session(session)
    else:
        meta.update(modern_meta())
        if level is not None:
            meta[META_LOG_LEVEL] = level
        headers = {
            **POST_HEADERS,
            "mcp-protocol-version": V2026_07_28,
            "mcp-method": "tools/call",
            "mcp-name": "stall",
        }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "stall", "arguments": {}, "_meta": meta},
    }
    with bounded(PLAIN_STREAM_SECONDS=0.05, SSE_KEEPALIVE_SECONDS=keepalive):
        response = send(orjson.dumps(message), headers)
        messages = check_answer(response)
    # Cut off at the bound, and the call cancelled with it; refused (400) before it ran.
    assert urls_plain_streams.outcomes == (["cancelled"] if response.streaming else [])
    if response.streaming:
        assert messages[-1]["error"] == {"code": INTERNAL_ERROR, "message": cut_off_message(0.05)}
    after_each(logged_errors)


def test_check_answer_refuses_a_server_error():
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "x"}})
    response = HttpResponse(body, status=500, content_type="application/json")
    response["Content-Length"] = str(len(body))

    with pytest.raises(AssertionError):
        check_answer(response)


def test_send_leaves_out_the_headers_it_is_told_to():
    response = send(b"{}", {"content-type": None, "accept": ACCEPT})

    assert "CONTENT_TYPE" not in response.wsgi_request.META
    assert response.status_code == 415
