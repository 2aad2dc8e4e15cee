"""Property tests: the protocol core only ever fails in its documented ways."""

from __future__ import annotations

import re
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_django.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    InvalidParamsError,
    MCPError,
    TransportError,
)
from mcp_django.protocol.jsonrpc import (
    Decoded,
    Invalid,
    Notification,
    Request,
    Response,
    decode,
    encode,
    is_valid_id,
    parse_message,
)
from mcp_django.protocol.negotiation import (
    accepts,
    check_get_accept,
    check_origin,
    check_post_accept,
    check_protocol_version_header,
    is_valid_session_id,
    normalize_origin,
    origin_allowed,
)
from mcp_django.protocol.pagination import decode_cursor, encode_cursor, page_offset
from mcp_django.protocol.sse import encode_comment, encode_event, make_event_id, parse_event_id
from tests.fuzzing import examples

from . import strategies as s
from .sse_parser import parse_stream

FUZZ = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
QUICK = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def decode_or_documented_error(raw: bytes) -> Decoded | MCPError:
    try:
        return decode(raw)
    except MCPError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST), exc.code
        return exc


def check_decoded(decoded: Decoded) -> None:
    assert decoded.messages
    for message in decoded.messages:
        assert isinstance(message, (Request, Notification, Response, Invalid))
        if isinstance(message, Invalid):
            assert message.id is None or is_valid_id(message.id)
            assert message.error.code == INVALID_REQUEST
        elif isinstance(message, (Request, Notification)):
            assert isinstance(message.method, str) and message.method
            assert isinstance(message.params, dict)
            if isinstance(message, Request):
                assert is_valid_id(message.id)
        else:
            assert is_valid_id(message.id)
            assert (message.result is None) != (message.error is None)


# --- decode ------------------------------------------------------------------------------


@FUZZ
@given(s.arbitrary_bytes)
@example(b"")
@example(b"\xff")
@example(b"[]")
@example(b"[" * 5000)
@example(b'{"jsonrpc":"2.0","id":1e999,"method":"x"}')
def test_decode_arbitrary_bytes_returns_decoded_or_documented_error(raw):
    outcome = decode_or_documented_error(raw)
    if isinstance(outcome, Decoded):
        check_decoded(outcome)


@FUZZ
@given(s.json_values())
def test_decode_arbitrary_json_returns_decoded_or_documented_error(value):
    outcome = decode_or_documented_error(orjson.dumps(value))
    if isinstance(outcome, Decoded):
        check_decoded(outcome)
        assert outcome.is_batch == isinstance(value, list)
    elif isinstance(value, list) and value:
        raise AssertionError("a non-empty batch must never be refused as a whole")


@QUICK
@given(st.one_of(s.jsonrpc_ish(), st.lists(s.jsonrpc_ish(), min_size=1, max_size=5)))
def test_decode_jsonrpc_like_messages_returns_decoded_or_documented_error(value):
    outcome = decode_or_documented_error(orjson.dumps(value))
    if isinstance(outcome, Decoded):
        check_decoded(outcome)
        if outcome.is_batch:
            assert len(outcome.messages) == len(value)


@QUICK
@given(s.jsonrpc_ish())
def test_parse_message_never_raises_and_only_attributes_valid_ids(value):
    message = parse_message(value)
    if isinstance(message, Invalid):
        assert message.id is None or (
            isinstance(value, dict) and message.id == value.get("id") and is_valid_id(message.id)
        )
    elif isinstance(message, (Request, Response)):
        assert message.id == value["id"]


@FUZZ
@given(s.valid_messages)
def test_valid_message_round_trips_through_encode_and_decode(message):
    decoded = decode(encode(message))
    assert decoded.is_batch is False
    [parsed] = decoded.messages
    assert_matches(parsed, message)


@QUICK
@given(st.lists(s.valid_messages, min_size=1, max_size=6))
def test_valid_batch_round_trips_in_order(batch):
    decoded = decode(encode(batch))
    assert decoded.is_batch is True
    assert len(decoded.messages) == len(batch)
    for parsed, message in zip(decoded.messages, batch):
        assert_matches(parsed, message)


def assert_matches(parsed: Any, message: dict[str, Any]) -> None:
    if "method" in message:
        expected_cls = Request if "id" in message else Notification
        assert type(parsed) is expected_cls
        assert parsed.method == message["method"]
        assert parsed.params == message.get("params", {})
    else:
        assert type(parsed) is Response
        assert parsed.result == message.get("result")
        assert parsed.error == message.get("error")
    if "id" in message:
        assert parsed.id == message["id"]
        assert type(parsed.id) is type(message["id"])


# --- SSE ---------------------------------------------------------------------------------


@FUZZ
@given(s.stream_tokens, s.sequences)
def test_event_id_round_trips(stream, sequence):
    assert parse_event_id(make_event_id(stream, sequence)) == (stream, sequence)


@FUZZ
@given(s.header_text)
@example("abc\n:1")
@example("abc:\u0661")
def test_parse_event_id_raises_only_value_error(value):
    try:
        stream, sequence = parse_event_id(value)
    except ValueError:
        return
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", stream)
    assert 0 <= sequence < 10**18
    # Whatever is accepted is canonical up to whitespace and leading zeros.
    assert make_event_id(stream, sequence) == f"{stream}:{int(value.strip().rpartition(':')[2])}"


@FUZZ
@given(
    s.sse_text,
    st.one_of(st.none(), s.stream_tokens.map(lambda t: t + ":1")),
    st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_encode_event_parses_back_to_exactly_the_original_data(data, event_id, retry):
    out = encode_event(data, event_id=event_id, retry_ms=retry)
    parsed = parse_stream(out)
    assert parsed.comments == []
    [event] = parsed.events
    assert event.data == data.replace("\r\n", "\n").replace("\r", "\n")
    expected_fields = (
        {"data"}
        | ({"id"} if event_id is not None else set())
        | ({"retry"} if retry is not None else set())
    )
    assert set(event.fields) == expected_fields
    assert event.id == event_id
    assert event.retry == retry
    assert event.event is None


@QUICK
@given(st.lists(s.sse_text, min_size=1, max_size=5))
def test_consecutive_events_stay_separate(datas):
    stream = b"".join(encode_event(d, event_id=f"s:{i}") for i, d in enumerate(datas))
    events = parse_stream(stream).events
    assert [e.id for e in events] == [f"s:{i}" for i in range(len(datas))]
    assert [e.data for e in events] == [d.replace("\r\n", "\n").replace("\r", "\n") for d in datas]


@QUICK
@given(s.sse_text)
def test_encode_comment_never_produces_an_event(text):
    parsed = parse_stream(encode_comment(text))
    assert parsed.events == []
    assert len(parsed.comments) == 1


# --- headers -----------------------------------------------------------------------------


@FUZZ
@given(s.accept_headers)
def test_accept_checks_raise_only_406(accept):
    for check in (check_post_accept, check_get_accept):
        try:
            check(accept)
        except TransportError as exc:
            assert exc.status == 406
    assert isinstance(accepts(accept, "application/json"), bool)


@FUZZ
@given(
    s.origin_headers,
    s.origin_headers,
    st.sampled_from(["http", "https"]),
    st.lists(s.origin_headers, max_size=3),
)
def test_origin_checks_raise_only_403(origin, host, scheme, allowed):
    normalized = normalize_origin(origin)
    assert normalized is None or normalized.startswith(("http://", "https://"))
    allowed_result = origin_allowed(origin, host, scheme, allowed)
    assert isinstance(allowed_result, bool)
    try:
        check_origin(origin, host, scheme, allowed)
    except TransportError as exc:
        assert exc.status == 403
        assert not allowed_result
    else:
        assert allowed_result


@FUZZ
@given(s.origin_headers)
def test_normalize_origin_is_idempotent(origin):
    normalized = normalize_origin(origin)
    if normalized is not None:
        assert normalize_origin(normalized) == normalized


@FUZZ
@given(s.header_text)
def test_protocol_version_header_raises_only_400(value):
    try:
        check_protocol_version_header(value)
    except TransportError as exc:
        assert exc.status == 400


@FUZZ
@given(s.header_text)
@example("abc\n")
@example("x" * 129)
def test_session_id_validity_matches_the_spec_rule(value):
    expected = 1 <= len(value) <= 128 and all(0x21 <= ord(c) <= 0x7E for c in value)
    assert is_valid_session_id(value) is expected


# --- cursors -----------------------------------------------------------------------------


@FUZZ
@given(
    st.one_of(
        s.header_text,
        st.text(
            alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=",
            max_size=80,
        ),
        s.json_values(4),
    )
)
def test_decode_cursor_raises_only_invalid_params(cursor):
    try:
        position = decode_cursor(cursor)
    except InvalidParamsError as exc:
        assert exc.code == INVALID_PARAMS
    else:
        assert isinstance(position, dict)


@FUZZ
@given(st.one_of(s.header_text, s.json_values(4)))
def test_page_offset_raises_only_invalid_params(cursor):
    try:
        offset = page_offset({"cursor": cursor})
    except InvalidParamsError as exc:
        assert exc.code == INVALID_PARAMS
    else:
        assert isinstance(offset, int) and offset >= 0


@FUZZ
@given(st.dictionaries(st.text(max_size=8), s.json_values(6), max_size=4))
def test_cursor_round_trips(position):
    cursor = encode_cursor(position)
    if len(cursor) <= 1024:
        assert decode_cursor(cursor) == position
