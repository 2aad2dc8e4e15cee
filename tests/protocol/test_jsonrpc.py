"""JSON-RPC 2.0 framing as MCP restricts it: ids are strings or integers, params are objects."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_django.protocol.errors import (
    ERROR_CODE_HTTP_STATUS,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MCPError,
    MethodNotFoundError,
    ParseError,
    ResourceNotFoundError,
    TransportError,
    URLElicitationRequiredError,
)
from mcp_django.protocol.jsonrpc import (
    Decoded,
    Invalid,
    Notification,
    Request,
    Response,
    decode,
    encode,
    error_message,
    is_valid_id,
    notification_message,
    parse_message,
    request_message,
    result_message,
)


def body(value: Any) -> bytes:
    return orjson.dumps(value)


def decode_one(value: Any):
    decoded = decode(body(value))
    assert decoded.is_batch is False
    assert len(decoded.messages) == 1
    return decoded.messages[0]


# --- single messages ---------------------------------------------------------------------


def test_decode_request_with_integer_id():
    message = decode_one({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert message == Request(1, "ping", {})


def test_decode_request_with_string_id_and_params():
    message = decode_one(
        {"jsonrpc": "2.0", "id": "abc", "method": "tools/call", "params": {"name": "x"}}
    )
    assert message == Request("abc", "tools/call", {"name": "x"})


@pytest.mark.parametrize("request_id", [0, -1, "", "0", 2**63 - 1, -(2**63), 2**64 - 1])
def test_decode_accepts_edge_case_ids(request_id):
    message = decode_one({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert isinstance(message, Request)
    assert message.id == request_id
    assert type(message.id) is type(request_id)


def test_decode_request_without_params_gets_empty_params():
    message = decode_one({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert message.params == {}


def test_decode_treats_null_params_as_empty_object():
    message = decode_one({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": None})
    assert message == Request(7, "ping", {})


def test_decode_notification():
    message = decode_one({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert message == Notification("notifications/initialized", {})


def test_decode_notification_with_params():
    message = decode_one(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    )
    assert message == Notification("notifications/cancelled", {"requestId": 3})


def test_decode_result_response():
    message = decode_one({"jsonrpc": "2.0", "id": "s-1", "result": {"roots": []}})
    assert message == Response("s-1", result={"roots": []})
    assert message.error is None


def test_decode_empty_result_response():
    message = decode_one({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert message == Response(1, result={})


def test_decode_error_response():
    error = {"code": -1, "message": "User rejected", "data": {"why": "no"}}
    message = decode_one({"jsonrpc": "2.0", "id": 4, "error": error})
    assert message == Response(4, error=error)
    assert message.result is None


def test_decode_ignores_unknown_top_level_members():
    message = decode_one({"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": True})
    assert message == Request(1, "ping", {})


# --- single invalid messages raise -------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"{",
        b'{"jsonrpc": "2.0",}',
        b"{'jsonrpc': '2.0'}",
        b"NaN",
        b"1e400",
        b"[1, 2",
        b"\xef\xbb\xbf{}",
        b"[" * 2000 + b"]" * 2000,
    ],
)
def test_decode_rejects_invalid_json_as_parse_error(raw):
    with pytest.raises(ParseError) as exc:
        decode(raw)
    assert exc.value.code == PARSE_ERROR


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff",
        b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "\xc3"}',
        b'{"jsonrpc": "2.0", "id": "\xed\xa0\x80", "method": "ping"}',
    ],
)
def test_decode_rejects_invalid_utf8_as_parse_error(raw):
    with pytest.raises(ParseError) as exc:
        decode(raw)
    assert exc.value.code == PARSE_ERROR


def test_decode_rejects_empty_batch_as_invalid_request():
    with pytest.raises(InvalidRequestError) as exc:
        decode(b"[]")
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("raw", [b"null", b"1", b"-1.5", b'"ping"', b"true", b"false"])
def test_decode_rejects_non_object_body_as_invalid_request(raw):
    with pytest.raises(InvalidRequestError) as exc:
        decode(raw)
    assert exc.value.code == INVALID_REQUEST


def test_decode_rejects_empty_object_as_invalid_request():
    with pytest.raises(InvalidRequestError) as exc:
        decode(b"{}")
    assert exc.value.code == INVALID_REQUEST


def test_decode_rejects_null_id_as_invalid_request():
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": None, "method": "ping"}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("request_id", [True, False])
def test_decode_rejects_bool_id_as_invalid_request(request_id):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": request_id, "method": "ping"}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("request_id", [1.0, 1.5, -0.0, 1e10])
def test_decode_rejects_float_id_as_invalid_request(request_id):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": request_id, "method": "ping"}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize(
    "literal", [b"18446744073709551616", b"-9223372036854775809", b"123456789012345678901234567890"]
)
def test_decode_rejects_integer_id_beyond_64_bits_as_invalid_request(literal):
    # orjson reads such literals as floats, so the id is no longer an integer.
    raw = b'{"jsonrpc": "2.0", "id": ' + literal + b', "method": "ping"}'
    with pytest.raises(InvalidRequestError) as exc:
        decode(raw)
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("request_id", [[1], {"a": 1}])
def test_decode_rejects_structured_id_as_invalid_request(request_id):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": request_id, "method": "ping"}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("params", [[], [1, 2], "x", 1, True, 0.5])
def test_decode_rejects_non_object_params_as_invalid_request(params):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": params}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("params", [[], "x"])
def test_decode_rejects_notification_with_non_object_params(params):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "method": "notifications/initialized", "params": params}))
    assert exc.value.code == INVALID_REQUEST


def test_decode_rejects_missing_jsonrpc_member():
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"id": 1, "method": "ping"}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("version", ["1.0", "2", 2.0, 2, None, "2.0 ", ""])
def test_decode_rejects_wrong_jsonrpc_version(version):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": version, "id": 1, "method": "ping"}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("method", ["", None, 1, ["ping"], {"m": 1}, True])
def test_decode_rejects_bad_method(method):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": 1, "method": method}))
    assert exc.value.code == INVALID_REQUEST


def test_decode_rejects_message_without_method_result_or_error():
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": 1}))
    assert exc.value.code == INVALID_REQUEST


def test_decode_rejects_response_with_both_result_and_error():
    with pytest.raises(InvalidRequestError) as exc:
        decode(
            body({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}})
        )
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("request_id", [None, True, 1.5])
def test_decode_rejects_response_without_valid_id(request_id):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": request_id, "result": {}}))
    assert exc.value.code == INVALID_REQUEST


def test_decode_rejects_response_with_missing_id():
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "result": {}}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize("result", [None, [], "ok", 1, True])
def test_decode_rejects_non_object_result(result):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": 1, "result": result}))
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize(
    "error",
    [
        None,
        "boom",
        [],
        {},
        {"code": -1},
        {"message": "m"},
        {"code": "-1", "message": "m"},
        {"code": 1.5, "message": "m"},
        {"code": True, "message": "m"},
        {"code": False, "message": "m"},
        {"code": None, "message": "m"},
        {"code": -1, "message": None},
        {"code": -1, "message": 5},
    ],
)
def test_decode_rejects_malformed_error_object(error):
    with pytest.raises(InvalidRequestError) as exc:
        decode(body({"jsonrpc": "2.0", "id": 1, "error": error}))
    assert exc.value.code == INVALID_REQUEST


# --- batches -----------------------------------------------------------------------------


def test_decode_batch_of_valid_messages_keeps_order():
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "a"},
        {"jsonrpc": "2.0", "method": "b"},
        {"jsonrpc": "2.0", "id": "x", "result": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "c", "params": {"k": 1}},
    ]
    decoded = decode(body(batch))
    assert decoded == Decoded(
        [Request(1, "a"), Notification("b"), Response("x", result={}), Request(2, "c", {"k": 1})],
        is_batch=True,
    )


def test_decode_single_message_batch_is_still_a_batch():
    decoded = decode(body([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))
    assert decoded.is_batch is True
    assert decoded.messages == [Request(1, "ping")]


def test_decode_batch_keeps_invalid_members_in_place():
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "a"},
        1,
        {"jsonrpc": "2.0", "id": 2, "method": "b", "params": []},
        {"jsonrpc": "2.0", "method": "c"},
        {"jsonrpc": "1.0", "id": "z", "method": "d"},
        {"jsonrpc": "2.0", "id": 3, "method": "e"},
    ]
    messages = decode(body(batch)).messages
    assert len(messages) == 6
    assert messages[0] == Request(1, "a")
    assert isinstance(messages[1], Invalid) and messages[1].id is None
    assert isinstance(messages[2], Invalid) and messages[2].id == 2
    assert messages[3] == Notification("c")
    assert isinstance(messages[4], Invalid) and messages[4].id == "z"
    assert messages[5] == Request(3, "e")
    for invalid in (messages[1], messages[2], messages[4]):
        assert invalid.error.code == INVALID_REQUEST


def test_decode_batch_of_only_invalid_members_does_not_raise():
    decoded = decode(b"[1, 2, 3]")
    assert decoded.is_batch is True
    assert [type(m) for m in decoded.messages] == [Invalid, Invalid, Invalid]
    assert all(m.id is None and m.error.code == INVALID_REQUEST for m in decoded.messages)


@pytest.mark.parametrize(
    ("member", "expected_id"),
    [
        ({"jsonrpc": "2.0", "id": 5, "method": ""}, 5),
        ({"jsonrpc": "2.0", "id": "s", "method": 3}, "s"),
        ({"jsonrpc": "2.0", "id": 5, "method": "m", "params": "x"}, 5),
        ({"id": 5, "method": "m"}, 5),
        ({"jsonrpc": "2.0", "id": 5}, 5),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": [5], "method": "m"}, None),
        ("not an object", None),
        ([], None),
        (None, None),
    ],
)
def test_decode_batch_invalid_member_carries_id_only_when_attributable(member, expected_id):
    messages = decode(body([member])).messages
    assert len(messages) == 1
    assert isinstance(messages[0], Invalid)
    assert messages[0].id == expected_id
    assert messages[0].error.code == INVALID_REQUEST


def test_decode_batch_invalid_response_is_never_answered_with_its_id():
    # An error carrying the id of the client's *response* would look like an answer to a
    # client request with that id, so malformed responses stay anonymous.
    batch = [
        {"jsonrpc": "2.0", "id": 9, "result": {}, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "id": 9, "result": []},
        {"jsonrpc": "2.0", "id": 9, "error": {"code": True, "message": "m"}},
    ]
    messages = decode(body(batch)).messages
    assert all(isinstance(m, Invalid) and m.id is None for m in messages)


def test_decode_nested_batch_member_is_invalid():
    messages = decode(body([[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]])).messages
    assert isinstance(messages[0], Invalid)
    assert messages[0].id is None


def test_decode_batch_member_with_huge_integer_id_is_invalid_without_id():
    messages = decode(
        b'[{"jsonrpc": "2.0", "id": 99999999999999999999, "method": "ping"}]'
    ).messages
    assert isinstance(messages[0], Invalid)
    assert messages[0].id is None


# --- parse_message and is_valid_id -------------------------------------------------------


@pytest.mark.parametrize("value", [None, 1, "x", [], 1.5, True])
def test_parse_message_of_non_object_is_invalid_without_id(value):
    message = parse_message(value)
    assert isinstance(message, Invalid)
    assert message.id is None
    assert message.error.code == INVALID_REQUEST


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (0, True),
        (-5, True),
        ("", True),
        ("a", True),
        (2**80, True),
        (None, False),
        (True, False),
        (False, False),
        (1.0, False),
        ([], False),
        ({}, False),
    ],
)
def test_is_valid_id_accepts_only_strings_and_non_bool_integers(value, valid):
    assert is_valid_id(value) is valid


# --- building and encoding messages -----------------------------------------------------


def test_result_message_shape():
    assert result_message(1, {"ok": True}) == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}


def test_error_message_shape_with_and_without_data():
    assert error_message("a", MethodNotFoundError()) == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"},
    }
    assert error_message(None, InvalidParamsError("bad", data={"x": 1})) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_PARAMS, "message": "bad", "data": {"x": 1}},
    }


def test_notification_message_omits_params_when_none():
    assert notification_message("notifications/tools/list_changed") == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    assert notification_message("m", {}) == {"jsonrpc": "2.0", "method": "m", "params": {}}


def test_request_message_omits_params_when_none():
    assert request_message(3, "roots/list") == {"jsonrpc": "2.0", "id": 3, "method": "roots/list"}
    assert request_message("r", "ping", {"a": 1}) == {
        "jsonrpc": "2.0",
        "id": "r",
        "method": "ping",
        "params": {"a": 1},
    }


def test_encode_is_compact_utf8_json():
    out = encode({"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo ✓"}})
    assert isinstance(out, bytes)
    assert out == '{"jsonrpc":"2.0","id":1,"result":{"text":"héllo ✓"}}'.encode("utf-8")


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (request_message(1, "ping"), Request(1, "ping")),
        (
            request_message("id", "tools/call", {"name": "n", "arguments": {"a": [1, 2]}}),
            Request("id", "tools/call", {"name": "n", "arguments": {"a": [1, 2]}}),
        ),
        (
            notification_message("notifications/progress", {"progress": 0.5}),
            Notification("notifications/progress", {"progress": 0.5}),
        ),
        (result_message(2**64 - 1, {"x": None}), Response(2**64 - 1, result={"x": None})),
        (
            error_message(-3, InvalidRequestError()),
            Response(-3, error={"code": INVALID_REQUEST, "message": "Invalid Request"}),
        ),
    ],
)
def test_encode_then_decode_round_trips(built, expected):
    assert decode(encode(built)).messages == [expected]


def test_encode_batch_round_trips():
    batch = [request_message(1, "a"), notification_message("b"), result_message("c", {})]
    decoded = decode(encode(batch))
    assert decoded.is_batch is True
    assert decoded.messages == [Request(1, "a"), Notification("b"), Response("c", result={})]


def test_error_message_with_null_id_is_not_decodable_as_response():
    # The id-less error we send for unattributable failures is not a valid inbound message.
    with pytest.raises(InvalidRequestError) as exc:
        decode(encode(error_message(None, ParseError())))
    assert exc.value.code == INVALID_REQUEST


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "code", "message"),
    [
        (ParseError, PARSE_ERROR, "Parse error"),
        (InvalidRequestError, INVALID_REQUEST, "Invalid Request"),
        (MethodNotFoundError, METHOD_NOT_FOUND, "Method not found"),
        (InvalidParamsError, INVALID_PARAMS, "Invalid params"),
        (InternalError, INTERNAL_ERROR, "Internal error"),
        (
            URLElicitationRequiredError,
            URL_ELICITATION_REQUIRED,
            "This request requires more information.",
        ),
        (MCPError, INTERNAL_ERROR, "Internal error"),
    ],
)
def test_error_classes_carry_their_code_and_default_message(cls, code, message):
    exc = cls()
    assert exc.code == code
    assert exc.to_error() == {"code": code, "message": message}
    assert str(exc) == message


def test_error_codes_are_the_json_rpc_and_mcp_values():
    assert (PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR) == (
        -32700,
        -32600,
        -32601,
        -32602,
        -32603,
    )
    assert (RESOURCE_NOT_FOUND, URL_ELICITATION_REQUIRED) == (-32002, -32042)


def test_error_to_error_includes_falsy_but_present_data():
    assert InvalidParamsError("m", data=0).to_error() == {
        "code": INVALID_PARAMS,
        "message": "m",
        "data": 0,
    }
    assert InvalidParamsError("m", data={}).to_error()["data"] == {}


def test_resource_not_found_error_names_the_uri():
    exc = ResourceNotFoundError("file:///x")
    assert exc.code == RESOURCE_NOT_FOUND
    assert exc.to_error() == {
        "code": RESOURCE_NOT_FOUND,
        "message": "Resource not found: file:///x",
        "data": {"uri": "file:///x"},
    }


def test_error_code_http_status_mapping():
    # streamable-http.mdx's statuses for a modern request's whole error answer; -32602 is 200.
    assert ERROR_CODE_HTTP_STATUS == {
        PARSE_ERROR: 400,
        INVALID_REQUEST: 400,
        METHOD_NOT_FOUND: 404,
        HEADER_MISMATCH: 400,
        MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
    }
    assert INVALID_PARAMS not in ERROR_CODE_HTTP_STATUS


def test_transport_error_body_is_an_id_less_json_rpc_error():
    exc = TransportError(406, "Not Acceptable", headers={"Allow": "GET"})
    assert exc.status == 406
    assert exc.code == INVALID_REQUEST
    assert exc.headers == {"Allow": "GET"}
    assert exc.to_body() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": "Not Acceptable"},
    }
    assert TransportError(400, "x").headers == {}
