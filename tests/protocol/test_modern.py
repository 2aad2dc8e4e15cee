"""The 2026-07-28 ("modern") protocol core: per-request ``_meta``, mirrored headers, result shapes."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_django.protocol import modern
from mcp_django.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatchError,
    InternalError,
    InvalidParamsError,
    InvalidRequestMetaError,
    MCPError,
    MethodNotFoundError,
    MissingRequiredClientCapabilityError,
    ResourceNotFoundError,
    UnsupportedProtocolVersionError,
)
from mcp_django.protocol.lifecycle import LOG_LEVELS
from mcp_django.protocol.modern import (
    ADVERTISED_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    REMOVED_METHODS,
    V2026_07_28,
    CacheHint,
    RequestMeta,
    check_param_headers,
    check_request_headers,
    complete_result,
    decode_header_value,
    discover_result,
    encode_header_value,
    is_modern_request,
    mcp_header_params,
    parse_request_meta,
)
from tests.fuzzing import examples

from . import strategies as s

FUZZ = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

SERVER_INFO = {"name": "ExampleServer", "version": "1.0.0"}
CLIENT_INFO = {"name": "ExampleClient", "version": "1.0.0"}


def meta(**extra: Any) -> dict[str, Any]:
    """A valid modern ``_meta``; keyword arguments replace or add keys (None deletes one)."""
    fields: dict[str, Any] = {
        META_PROTOCOL_VERSION: V2026_07_28,
        META_CLIENT_INFO: CLIENT_INFO,
        META_CLIENT_CAPABILITIES: {},
    }
    keys = {
        "version": META_PROTOCOL_VERSION,
        "caps": META_CLIENT_CAPABILITIES,
        "info": META_CLIENT_INFO,
        "level": META_LOG_LEVEL,
    }
    for short, value in extra.items():
        key = keys.get(short, short)
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    return fields


def parse(params: Any, header: str | None = V2026_07_28, **limits: int) -> RequestMeta:
    return parse_request_meta(params, header_version=header, **limits)


# --- errors ---------------------------------------------------------------------------------


def test_new_error_codes_are_the_spec_s():
    assert (HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION) == (
        -32020,
        -32021,
        -32022,
    )
    assert HeaderMismatchError().to_error() == {"code": -32020, "message": "Header mismatch"}


@pytest.mark.parametrize("cls", [MCPError, InvalidParamsError, InternalError, MethodNotFoundError])
def test_existing_errors_leave_the_http_status_to_the_transport(cls):
    assert cls.http_status is None
    assert ResourceNotFoundError("x://y").http_status is None


@pytest.mark.parametrize(
    "cls",
    [
        HeaderMismatchError,
        MissingRequiredClientCapabilityError,
        UnsupportedProtocolVersionError,
        InvalidRequestMetaError,
    ],
)
def test_modern_errors_are_answered_with_http_400(cls):
    assert cls.http_status == 400


def test_invalid_request_meta_is_invalid_params():
    exc = InvalidRequestMetaError("bad _meta")
    assert isinstance(exc, InvalidParamsError)
    assert exc.to_error() == {"code": INVALID_PARAMS, "message": "bad _meta"}


def test_missing_capability_data_is_required_capabilities():
    by_keyword = MissingRequiredClientCapabilityError(required_capabilities={"elicitation": {}})
    assert by_keyword.to_error() == {
        "code": -32021,
        "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"elicitation": {}}},
    }
    by_data = MissingRequiredClientCapabilityError(
        "needs sampling", data={"requiredCapabilities": {"sampling": {}}}
    )
    assert by_data.to_error()["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_unsupported_version_data_matches_the_versioning_example():
    exc = UnsupportedProtocolVersionError(
        requested="1900-01-01", supported=["2026-07-28", "2025-11-25"]
    )
    assert exc.to_error() == {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {"supported": ["2026-07-28", "2025-11-25"], "requested": "1900-01-01"},
    }


# --- constants and era selection --------------------------------------------------------------


def test_versions_and_removed_methods():
    assert MODERN_VERSIONS[0] == V2026_07_28 == "2026-07-28"
    assert ADVERTISED_VERSIONS[: len(MODERN_VERSIONS)] == MODERN_VERSIONS
    assert "2025-11-25" in ADVERTISED_VERSIONS
    assert {
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    } <= REMOVED_METHODS
    assert "notifications/roots/list_changed" in REMOVED_METHODS
    assert not REMOVED_METHODS & {
        "server/discover",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
        "completion/complete",
        "tasks/get",
    }
    assert sorted(modern.INPUT_METHODS) == ["prompts/get", "resources/read", "tools/call"]


@pytest.mark.parametrize(
    ("header", "params", "expected"),
    [
        (None, {}, False),
        (None, {"_meta": {"progressToken": 1}}, False),
        ("2025-11-25", {"protocolVersion": "2025-11-25"}, False),
        ("2025-06-18", {"_meta": "x"}, False),
        (None, "not an object", False),
        ("2026-07-28", {}, True),
        (" 2026-07-28 ", {}, True),
        (None, {"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}, True),
        (None, {"_meta": {META_PROTOCOL_VERSION: "1900-01-01"}}, True),
        (None, {"_meta": {META_CLIENT_CAPABILITIES: {}}}, True),
        (None, {"_meta": {META_CLIENT_INFO: CLIENT_INFO}}, True),
        ("2025-11-25", {"_meta": meta()}, True),
        ("2027-01-01", {}, False),
    ],
)
def test_is_modern_request(header, params, expected):
    assert is_modern_request(header, params) is expected


def test_is_modern_version():
    assert modern.is_modern_version("2026-07-28")
    assert not modern.is_modern_version(None)
    assert not modern.is_modern_version("2025-11-25")


# --- parse_request_meta ----------------------------------------------------------------------


def test_parse_minimal_and_full_meta():
    minimal = parse({"_meta": {META_PROTOCOL_VERSION: V2026_07_28, META_CLIENT_CAPABILITIES: {}}})
    assert minimal == RequestMeta(
        version=V2026_07_28, client_capabilities={}, client_info=None, log_level=None
    )
    caps = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/ui": {}}}
    full = parse({"name": "t", "_meta": meta(caps=caps, level="warning", traceparent="00-x")})
    assert full == RequestMeta(V2026_07_28, caps, CLIENT_INFO, "warning")


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": None},
        {"_meta": []},
        {"_meta": meta(version=None)},
        {"_meta": meta(version="")},
        {"_meta": meta(version=20260728)},
        {"_meta": meta(version=["2026-07-28"])},
        {"_meta": meta(caps=None)},
        {"_meta": meta(caps=[])},
        {"_meta": meta(caps="all")},
        {"_meta": {**meta(), META_CLIENT_CAPABILITIES: None}},
        "params",
        None,
    ],
)
def test_missing_or_mistyped_required_fields_are_invalid_params_400(params):
    with pytest.raises(InvalidRequestMetaError) as info:
        parse(params)
    assert info.value.code == -32602
    assert info.value.http_status == 400


def test_missing_version_header_is_a_header_mismatch():
    with pytest.raises(
        HeaderMismatchError, match="MCP-Protocol-Version header is required"
    ) as info:
        parse({"_meta": meta()}, header=None)
    assert info.value.http_status == 400


@pytest.mark.parametrize(
    "header", ["2025-11-25", "2026-07-29", "2026-07-28x", "", "2026-07-28\r\n", "2026-07-28\x00"]
)
def test_version_header_differing_from_meta_is_a_header_mismatch(header):
    with pytest.raises(HeaderMismatchError):
        parse({"_meta": meta()}, header=header)


def test_version_header_surrounding_whitespace_is_not_part_of_the_value():
    assert parse({"_meta": meta()}, header=" \t2026-07-28 ").version == V2026_07_28


def test_unsupported_version_lists_what_is_supported():
    with pytest.raises(UnsupportedProtocolVersionError) as info:
        parse({"_meta": meta(version="1900-01-01")}, header="1900-01-01")
    assert info.value.http_status == 400
    assert info.value.to_error()["data"] == {
        "supported": list(ADVERTISED_VERSIONS),
        "requested": "1900-01-01",
    }


def test_legacy_version_in_modern_meta_is_unsupported():
    with pytest.raises(UnsupportedProtocolVersionError):
        parse({"_meta": meta(version="2025-11-25")}, header="2025-11-25")


def test_unsupported_version_echo_is_bounded():
    long = "9" * 10_000
    with pytest.raises(UnsupportedProtocolVersionError) as info:
        parse({"_meta": meta(version=long)}, header=long)
    assert len(info.value.data["requested"]) == modern.MAX_ECHOED_VERSION


def test_header_is_checked_before_the_version():
    with pytest.raises(HeaderMismatchError):
        parse({"_meta": meta(version="1900-01-01")}, header="2026-07-28")


@pytest.mark.parametrize(
    "info",
    [
        [],
        "client",
        1,
        {"name": 1, "version": "1"},
        {"name": "n", "version": None},
        {"name": "n" * 201, "version": "1"},
        {"name": "n", "version": "v" * 101},
    ],
)
def test_client_info_must_be_a_bounded_object(info):
    with pytest.raises(InvalidRequestMetaError, match="clientInfo"):
        parse({"_meta": meta(info=info)})


def test_client_info_null_is_not_absent():
    with pytest.raises(InvalidRequestMetaError):
        parse({"_meta": {**meta(), META_CLIENT_INFO: None}})


def test_client_info_and_capabilities_size_and_depth_are_bounded():
    with pytest.raises(InvalidRequestMetaError, match="clientInfo"):
        parse({"_meta": meta(info={**CLIENT_INFO, "description": "d" * 5000})})
    assert parse(
        {"_meta": meta(info={**CLIENT_INFO, "description": "d" * 5000})},
        max_client_info_bytes=10_000,
    ).client_info
    with pytest.raises(InvalidRequestMetaError, match="clientCapabilities"):
        parse({"_meta": meta(caps={"experimental": {"x": "y" * 70_000}})})
    deep: dict[str, Any] = {}
    for _ in range(20):
        deep = {"d": deep}
    with pytest.raises(InvalidRequestMetaError, match="nests deeper"):
        parse({"_meta": meta(caps=deep)})
    assert parse({"_meta": meta(caps=deep)}, max_depth=30).client_capabilities == deep


def test_values_json_cannot_carry_are_invalid_params():
    with pytest.raises(InvalidRequestMetaError, match="not a JSON value"):
        parse({"_meta": meta(caps={"experimental": {"n": 2**70}})})


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_log_level_accepts_the_rfc5424_levels(level):
    assert parse({"_meta": meta(level=level)}).log_level == level


@pytest.mark.parametrize("level", ["DEBUG", "trace", "", 3])
def test_log_level_refuses_anything_else(level):
    with pytest.raises(InvalidRequestMetaError, match="logLevel"):
        parse({"_meta": meta(level=level)})


# --- Base64 sentinel ---------------------------------------------------------------------------

# streamable-http.mdx, "Value Encoding": original value and its header value.
SPEC_ENCODING_EXAMPLES = [
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
]


@pytest.mark.parametrize(("original", "encoded"), SPEC_ENCODING_EXAMPLES)
def test_spec_encoding_examples_decode(original, encoded):
    assert decode_header_value(encoded) == original


@pytest.mark.parametrize(("original", "encoded"), SPEC_ENCODING_EXAMPLES)
def test_spec_encoding_examples_encode(original, encoded):
    assert encode_header_value(original) == encoded


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("=?base64??=", ""),
        ("  us-west1\t", "us-west1"),
        ("a\tb", "a\tb"),
        ("=?BASE64?SGk=?=", "=?BASE64?SGk=?="),  # markers are case-sensitive: a plain value
        ("=?base64?=", "=?base64?="),  # too short to hold both markers: plain
        ("=?base64?SGk=", "=?base64?SGk="),
    ],
)
def test_decode_plain_and_edge_values(raw, expected):
    assert decode_header_value(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?SGk?=",  # missing padding
        "=?base64?SGk==?=",  # too much padding
        "=?base64?S Gk=?=",
        "=?base64?SGk=\n?=",
        "=?base64?!!!!?=",
        "=?base64?-_8=?=",  # URL-safe alphabet
        "=?base64?SGl=?=",  # non-canonical: trailing bits set
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
        "=?base64?" + base64.b64encode(b"\xed\xa0\x80").decode() + "?=",  # a UTF-16 surrogate
        "line1\nline2",
        "nul\x00",
        "del\x7f",
        "caf\u00e9",
        "世界",
    ],
)
def test_malformed_or_unsafe_values_are_header_mismatches(raw):
    with pytest.raises(HeaderMismatchError) as info:
        decode_header_value(raw)
    assert info.value.code == -32020


@FUZZ
@given(st.text())
@example("")
@example(" ")
@example("=?base64?x?=")
def test_encode_then_decode_is_the_identity(value):
    encoded = encode_header_value(value)
    assert all(" " <= c <= "~" for c in encoded)
    assert decode_header_value(encoded) == value


base64ish = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ ?\n\x00é",
    max_size=40,
)
header_values = (
    s.header_text
    | st.builds(lambda body: f"=?base64?{body}?=", base64ish)
    | st.builds(lambda b: f"=?base64?{base64.b64encode(b).decode()}?=", st.binary(max_size=30))
)


@FUZZ
@given(header_values)
def test_decode_header_value_only_fails_with_header_mismatch(raw):
    try:
        decoded = decode_header_value(raw)
    except HeaderMismatchError:
        return
    assert isinstance(decoded, str)


# --- standard headers ---------------------------------------------------------------------------


def headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    out = {"mcp-protocol-version": V2026_07_28, "mcp-method": method}
    if name is not None:
        out["mcp-name"] = name
    out.update(extra)
    return out


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "get_weather", "arguments": {}}, "get_weather"),
        ("prompts/get", {"name": "code_review"}, "code_review"),
        (
            "resources/read",
            {"uri": "file:///projects/myapp/config.json"},
            "file:///projects/myapp/config.json",
        ),
        ("tools/call", {"name": "météo"}, "=?base64?bcOpdMOpbw==?="),
        ("resources/read", {"uri": "file:///a b "}, "=?base64?ZmlsZTovLy9hIGIg?="),
    ],
)
def test_standard_headers_matching_the_body_pass(method, params, name):
    check_request_headers(method, params, headers(method, name))


@pytest.mark.parametrize(
    "method", ["tools/list", "server/discover", "resources/list", "subscriptions/listen"]
)
def test_methods_without_a_name_need_only_mcp_method(method):
    check_request_headers(method, {}, headers(method))


@pytest.mark.parametrize(
    ("method", "params", "sent", "match"),
    [
        ("tools/list", {}, {}, "Mcp-Method header is required"),
        ("tools/list", {}, {"mcp-method": "tools/call"}, "does not match"),
        (
            "tools/list",
            {},
            {"mcp-method": "Tools/List"},
            "does not match",
        ),  # values are case-sensitive
        ("tools/list", {}, {"mcp-method": "tools/list\r\n"}, "invalid characters"),
        ("tools/call", {"name": "a"}, {"mcp-method": "tools/call"}, "Mcp-Name header is required"),
        (
            "tools/call",
            {"name": "a"},
            {"mcp-method": "tools/call", "mcp-name": "b"},
            "does not match",
        ),
        (
            "prompts/get",
            {"name": "a"},
            {"mcp-method": "prompts/get", "mcp-name": "A"},
            "does not match",
        ),
        (
            "resources/read",
            {"uri": "x:1"},
            {"mcp-method": "resources/read", "mcp-name": "x:2"},
            "does not match",
        ),
        (
            "resources/read",
            {"name": "x:1"},
            {"mcp-method": "resources/read", "mcp-name": "x:1"},
            "no string",
        ),
        ("tools/call", {}, {"mcp-method": "tools/call", "mcp-name": "a"}, "no string"),
        ("tools/call", {"name": 5}, {"mcp-method": "tools/call", "mcp-name": "5"}, "no string"),
        (
            "tools/call",
            {"name": "é"},
            {"mcp-method": "tools/call", "mcp-name": "é"},
            "invalid characters",
        ),
        (
            "tools/call",
            {"name": "a"},
            {"mcp-method": "tools/call", "mcp-name": "=?base64?YQ?=", "x": "y"},
            "malformed Base64",
        ),
    ],
)
def test_standard_header_failures_are_header_mismatches(method, params, sent, match):
    with pytest.raises(HeaderMismatchError, match=match) as info:
        check_request_headers(method, params, sent)
    assert info.value.http_status == 400


def test_a_literal_sentinel_name_must_be_encoded():
    # A plain header that looks like the sentinel is decoded, so it cannot match the literal name.
    with pytest.raises(HeaderMismatchError):
        check_request_headers(
            "tools/call", {"name": "=?base64?YQ==?="}, headers("tools/call", "=?base64?YQ==?=")
        )
    check_request_headers(
        "tools/call",
        {"name": "=?base64?YQ==?="},
        headers("tools/call", encode_header_value("=?base64?YQ==?=")),
    )


# --- x-mcp-header --------------------------------------------------------------------------------

EXECUTE_SQL_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "description": "The region to execute the query in",
            "x-mcp-header": "Region",
        },
        "query": {"type": "string", "description": "The SQL query to execute"},
    },
    "required": ["region", "query"],
}


def schema_with(annotated: dict[str, Any], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"p": annotated, **properties}}


def test_spec_example_tool_maps_its_header():
    assert mcp_header_params(EXECUTE_SQL_SCHEMA) == {"Region": ("region",)}


def test_nested_properties_and_all_primitive_types():
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "type": "object",
                "properties": {
                    "tenant": {"type": "string", "x-mcp-header": "Tenant-Id"},
                    "shard": {"type": "integer", "x-mcp-header": "Shard"},
                },
            },
            "dry": {"type": ["boolean", "null"], "x-mcp-header": "Dry_Run"},
            "plain": {"type": "string"},
        },
    }
    assert mcp_header_params(schema) == {
        "Tenant-Id": ("target", "tenant"),
        "Shard": ("target", "shard"),
        "Dry_Run": ("dry",),
    }


def test_schemas_without_annotations_and_annotation_look_alikes():
    assert mcp_header_params({"type": "object"}) == {}
    assert mcp_header_params({"type": "object", "additionalProperties": False}) == {}
    # A property *named* x-mcp-header, and the key inside instance data, are not annotations.
    schema = {
        "type": "object",
        "properties": {
            "x-mcp-header": {"type": "string"},
            "o": {
                "type": "object",
                "default": {"x-mcp-header": "Nope"},
                "enum": [{"x-mcp-header": "No"}],
            },
        },
        "examples": [{"x-mcp-header": "No"}],
    }
    assert mcp_header_params(schema) == {}


@pytest.mark.parametrize(
    ("annotated", "match"),
    [
        ({"type": "string", "x-mcp-header": ""}, "non-empty string"),
        ({"type": "string", "x-mcp-header": None}, "non-empty string"),
        ({"type": "string", "x-mcp-header": 7}, "non-empty string"),
        ({"type": "string", "x-mcp-header": "Has Space"}, "token"),
        ({"type": "string", "x-mcp-header": "Colon:"}, "token"),
        ({"type": "string", "x-mcp-header": "Line\r\nBreak"}, "token"),
        ({"type": "string", "x-mcp-header": "Tab\t"}, "token"),
        ({"type": "string", "x-mcp-header": "Région"}, "token"),
        ({"type": "string", "x-mcp-header": "(paren)"}, "token"),
        ({"type": "number", "x-mcp-header": "N"}, "'number' is not permitted"),
        ({"type": ["number", "null"], "x-mcp-header": "N"}, "'number' is not permitted"),
        ({"type": "object", "x-mcp-header": "O"}, "must be one of"),
        ({"type": "array", "x-mcp-header": "A"}, "must be one of"),
        ({"type": "null", "x-mcp-header": "Z"}, "must be one of"),
        ({"x-mcp-header": "Untyped"}, "must be one of"),
        ({"type": ["string", "integer"], "x-mcp-header": "Mixed"}, "must be one of"),
    ],
)
def test_annotation_constraint_violations(annotated, match):
    with pytest.raises(ValueError, match=match):
        mcp_header_params(schema_with(annotated))


def test_header_names_must_be_unique_case_insensitively():
    schema = schema_with(
        {"type": "string", "x-mcp-header": "Region"}, q={"type": "string", "x-mcp-header": "REGION"}
    )
    with pytest.raises(ValueError, match="duplicates"):
        mcp_header_params(schema)


ANNOTATED = {"type": "string", "x-mcp-header": "Hidden"}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "x-mcp-header": "Root"},
        {"type": "object", "properties": {"list": {"type": "array", "items": ANNOTATED}}},
        {"type": "object", "properties": {"list": {"type": "array", "prefixItems": [ANNOTATED]}}},
        {"type": "object", "properties": {"o": {"anyOf": [ANNOTATED, {"type": "integer"}]}}},
        {"type": "object", "oneOf": [{"properties": {"p": ANNOTATED}}]},
        {"type": "object", "allOf": [{"properties": {"p": ANNOTATED}}]},
        {"type": "object", "not": {"properties": {"p": ANNOTATED}}},
        {"type": "object", "if": {"properties": {"p": ANNOTATED}}, "then": {}, "else": {}},
        {"type": "object", "then": {"properties": {"p": ANNOTATED}}},
        {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": ANNOTATED}},
        {"type": "object", "definitions": {"P": ANNOTATED}},
        {"type": "object", "additionalProperties": ANNOTATED},
        {"type": "object", "patternProperties": {"^p": ANNOTATED}},
        {"type": "object", "dependentSchemas": {"p": {"properties": {"q": ANNOTATED}}}},
        {
            "type": "object",
            "properties": {
                "o": {"type": "object", "additionalProperties": {"properties": {"p": ANNOTATED}}}
            },
        },
    ],
)
def test_annotations_not_statically_reachable_are_refused(schema):
    with pytest.raises(ValueError, match="x-mcp-header"):
        mcp_header_params(schema)


def test_non_object_schema_and_runaway_schemas_are_refused():
    with pytest.raises(ValueError, match="object"):
        mcp_header_params([])  # type: ignore[arg-type]
    shared: dict[str, Any] = {"type": "object"}
    shared["properties"] = {"a": shared, "b": shared}  # a cycle no JSON could hold
    with pytest.raises(ValueError, match="subschemas"):
        mcp_header_params(shared)


# --- Mcp-Param-{Name} ------------------------------------------------------------------------------

PATHS = {
    "Region": ("region",),
    "Shard": ("target", "shard"),
    "Dry": ("dry",),
    "Greeting": ("greeting",),
}


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ({}, {}),
        ({"region": None, "dry": None, "target": None}, {}),
        ({"target": "not an object"}, {}),
        ({"region": "us-west1"}, {"mcp-param-region": "us-west1"}),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "42"}),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "42.0"}),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "42.000"}),
        ({"target": {"shard": -7}}, {"mcp-param-shard": "-7"}),
        ({"target": {"shard": 0}}, {"mcp-param-shard": "-0"}),
        ({"target": {"shard": 42.0}}, {"mcp-param-shard": "42"}),
        ({"target": {"shard": 2**53 - 1}}, {"mcp-param-shard": "9007199254740991"}),
        ({"dry": True}, {"mcp-param-dry": "true"}),
        ({"dry": False}, {"mcp-param-dry": "false"}),
        ({"greeting": "Hello, 世界"}, {"mcp-param-greeting": "=?base64?SGVsbG8sIOS4lueVjA==?="}),
        ({"greeting": " padded "}, {"mcp-param-greeting": "=?base64?IHBhZGRlZCA=?="}),
        ({"greeting": ""}, {"mcp-param-greeting": ""}),
        (
            {"region": "us-west1", "target": {"shard": 1}, "dry": True},
            {"mcp-param-region": "us-west1", "mcp-param-shard": "1", "mcp-param-dry": "true"},
        ),
    ],
)
def test_param_headers_matching_the_arguments_pass(arguments, sent):
    check_param_headers(PATHS, arguments, sent)


@pytest.mark.parametrize(
    ("arguments", "sent", "match"),
    [
        ({"region": "us-west1"}, {}, "Mcp-Param-Region header is required"),
        ({"region": "us-west1"}, {"mcp-param-region": "us-east1"}, "does not match"),
        ({"region": "us-west1"}, {"mcp-param-region": "US-WEST1"}, "does not match"),
        ({"region": None}, {"mcp-param-region": "us-west1"}, "absent or null"),
        ({}, {"mcp-param-region": "us-west1"}, "absent or null"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "42.5"}, "does not match"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "43"}, "does not match"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "4.2e1"}, "does not match"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "+42"}, "does not match"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "0x2a"}, "does not match"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "NaN"}, "does not match"),
        ({"target": {"shard": 42}}, {"mcp-param-shard": "sNaN"}, "does not match"),
        ({"dry": True}, {"mcp-param-dry": "True"}, "does not match"),
        ({"dry": True}, {"mcp-param-dry": "1"}, "does not match"),
        ({"dry": False}, {"mcp-param-dry": "true"}, "does not match"),
        (
            {"region": "42"},
            {"mcp-param-region": "42.0"},
            "does not match",
        ),  # strings compare exactly
        ({"region": ["us-west1"]}, {"mcp-param-region": "us-west1"}, "does not match"),
        ({"region": {"r": 1}}, {"mcp-param-region": "{}"}, "does not match"),
        ({"greeting": "Hello, 世界"}, {"mcp-param-greeting": "Hello, 世界"}, "invalid characters"),
        ({"greeting": "a\nb"}, {"mcp-param-greeting": "a\nb"}, "invalid characters"),
        (
            {"greeting": "hi"},
            {"mcp-param-greeting": "=?base64?aGk?=", "mcp-name": "x"},
            "malformed Base64",
        ),
    ],
)
def test_param_header_failures_are_header_mismatches(arguments, sent, match):
    with pytest.raises(HeaderMismatchError, match=match):
        check_param_headers(PATHS, arguments, sent)


def test_param_headers_from_a_real_schema():
    paths = mcp_header_params(EXECUTE_SQL_SCHEMA)
    check_param_headers(
        paths,
        {"region": "us-west1", "query": "SELECT * FROM users"},
        {"mcp-param-region": "us-west1"},
    )
    with pytest.raises(HeaderMismatchError):
        check_param_headers(
            paths, {"region": "us-west1", "query": "SELECT 1"}, {"mcp-param-query": "SELECT 1"}
        )


# --- results ------------------------------------------------------------------------------------


def test_complete_result_adds_result_type_and_server_info_without_mutating():
    original = {"tools": []}
    shaped = complete_result(original, server_info=SERVER_INFO)
    assert shaped == {
        "tools": [],
        "resultType": "complete",
        "_meta": {META_SERVER_INFO: SERVER_INFO},
    }
    assert original == {"tools": []}


def test_complete_result_only_fills_gaps():
    result = {
        "resultType": "input_required",
        "inputRequests": {},
        "_meta": {"com.example/trace": "t"},
    }
    shaped = complete_result(result, server_info=SERVER_INFO, cache=CacheHint(60_000, "public"))
    # Interim results are not cacheable, so they carry no hints.
    assert shaped == {
        "resultType": "input_required",
        "inputRequests": {},
        "_meta": {"com.example/trace": "t", META_SERVER_INFO: SERVER_INFO},
    }
    assert result["_meta"] == {"com.example/trace": "t"}
    mine = {"_meta": {META_SERVER_INFO: {"name": "own", "version": "2"}}, "ttlMs": 5}
    own = complete_result(mine, server_info=SERVER_INFO, cache=CacheHint(60_000, "private"))
    assert own == {
        "resultType": "complete",
        "_meta": {META_SERVER_INFO: {"name": "own", "version": "2"}},
        "ttlMs": 5,
        "cacheScope": "private",
    }


def test_complete_result_puts_cache_hints_at_the_top_level():
    shaped = complete_result(
        {"contents": []}, server_info=SERVER_INFO, cache=CacheHint(ttl_ms=0, scope="private")
    )
    assert shaped == {
        "contents": [],
        "resultType": "complete",
        "_meta": {META_SERVER_INFO: SERVER_INFO},
        "ttlMs": 0,
        "cacheScope": "private",
    }


def test_complete_result_refuses_a_non_object_meta():
    with pytest.raises(ValueError, match="_meta"):
        complete_result({"_meta": []}, server_info=SERVER_INFO)


@pytest.mark.parametrize(
    ("ttl", "scope"),
    [
        (-1, "public"),
        (True, "public"),
        (1.5, "public"),
        (2**53, "public"),
        (0, "shared"),
        (0, "PUBLIC"),
    ],
)
def test_cache_hint_is_validated(ttl, scope):
    with pytest.raises(ValueError):
        CacheHint(ttl, scope)


def test_discover_result_matches_the_spec_example():
    result = discover_result(
        versions=["2026-07-28"],
        capabilities={"tools": {}, "resources": {}},
        server_info=SERVER_INFO,
        instructions="This server provides weather and resource utilities.",
        cache=CacheHint(ttl_ms=3_600_000, scope="public"),
    )
    # discover.mdx, "Response".
    assert result == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "resources": {}},
        "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "ExampleServer", "version": "1.0.0"}
        },
        "instructions": "This server provides weather and resource utilities.",
        "ttlMs": 3600000,
        "cacheScope": "public",
    }


def test_discover_result_without_instructions_or_hint():
    result = discover_result(
        versions=ADVERTISED_VERSIONS,
        capabilities={},
        server_info=SERVER_INFO,
        instructions=None,
        cache=None,
    )
    assert "instructions" not in result
    assert result["supportedVersions"] == list(ADVERTISED_VERSIONS)
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    with pytest.raises(ValueError):
        discover_result(versions=[], capabilities={}, server_info=SERVER_INFO, cache=None)


@pytest.mark.parametrize(
    ("response", "status"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, 200),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": ""}}, 400),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": ""}}, 400),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": ""}}, 400),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": ""}}, 404),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": ""}}, 200),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": ""}}, 200),
    ],
)
def test_http_status(response, status):
    assert modern.http_status(response) == status


# --- fuzzing: only the documented errors ---------------------------------------------------------

META_ERRORS = (InvalidRequestMetaError, HeaderMismatchError, UnsupportedProtocolVersionError)

versions = (
    st.sampled_from([V2026_07_28, "2025-11-25", "1900-01-01", "", " 2026-07-28"]) | s.header_text
)
# Per key: (plausible values, anything at all); plausible ones are drawn three times in four.
meta_values: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    META_PROTOCOL_VERSION: (st.just(V2026_07_28), versions | s.json_values(4)),
    META_CLIENT_CAPABILITIES: (s.json_objects, s.json_values(6) | st.just({"n": 2**70})),
    META_CLIENT_INFO: (
        st.fixed_dictionaries(
            {}, optional={"name": st.text(max_size=20), "version": st.text(max_size=5)}
        ),
        s.json_values(6),
    ),
    META_LOG_LEVEL: (st.sampled_from(LOG_LEVELS), st.sampled_from(["DEBUG", ""]) | s.json_scalars),
}


@st.composite
def modern_params(draw: st.DrawFn) -> Any:
    """Params whose ``_meta`` holds any mix of the per-request keys, right or wrong, or no object at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(s.json_values(6))
    fields: dict[str, Any] = {}
    for key, (plausible, anything) in meta_values.items():
        if draw(st.integers(0, 3)) or (key not in _REQUIRED and draw(st.booleans())):
            fields[key] = draw(plausible if draw(st.integers(0, 3)) else anything)
    fields.update(draw(st.dictionaries(st.text(max_size=8), s.json_scalars, max_size=2)))
    params = draw(s.json_objects)
    params["_meta"] = fields if draw(st.integers(0, 9)) else draw(s.json_values(3))
    return params


_REQUIRED = (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES)


@st.composite
def params_and_header(draw: st.DrawFn) -> tuple[Any, str | None]:
    """Modern params and an ``MCP-Protocol-Version`` header that often, not always, agrees."""
    params = draw(modern_params())
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if isinstance(version, str) and draw(st.booleans()):
        return params, version
    return params, draw(st.none() | versions)


@FUZZ
@given(params_and_header())
@example(({"_meta": meta()}, V2026_07_28))
def test_parse_request_meta_only_fails_with_documented_errors(case):
    params, header = case
    try:
        parsed = parse(
            params, header, max_client_info_bytes=200, max_capabilities_bytes=400, max_depth=4
        )
    except META_ERRORS as exc:
        assert exc.http_status == 400
        return
    assert parsed.version in MODERN_VERSIONS
    assert isinstance(parsed.client_capabilities, dict)
    assert parsed.client_info is None or isinstance(parsed.client_info, dict)
    assert parsed.log_level is None or parsed.log_level in LOG_LEVELS
    assert is_modern_request(header, params)


@FUZZ
@given(st.none() | versions, modern_params())
def test_is_modern_request_never_raises(header, params):
    assert isinstance(is_modern_request(header, params), bool)


methods = (
    st.sampled_from(
        ["tools/call", "prompts/get", "resources/read", "tools/list", "server/discover"]
    )
    | s.methods
)
header_maps = st.dictionaries(
    st.sampled_from(["mcp-method", "mcp-name", "mcp-protocol-version", "mcp-param-x"])
    | st.text(max_size=10),
    header_values,
    max_size=4,
)


@FUZZ
@given(
    methods,
    s.json_objects
    | st.builds(lambda n, u: {"name": n, "uri": u}, s.json_scalars, s.json_scalars)
    | s.json_values(3),
    header_maps,
)
@example(
    "tools/call", {"name": "get_weather"}, {"mcp-method": "tools/call", "mcp-name": "get_weather"}
)
def test_check_request_headers_only_fails_with_header_mismatch(method, params, sent):
    try:
        check_request_headers(method, params, sent)
    except HeaderMismatchError:
        return
    assert sent["mcp-method"].strip(" \t") == method


@FUZZ
@given(
    s.json_objects | s.json_values(4),
    st.dictionaries(
        st.sampled_from(["mcp-param-region", "mcp-param-shard", "mcp-param-dry"]),
        header_values,
        max_size=3,
    ),
)
def test_check_param_headers_only_fails_with_header_mismatch(arguments, sent):
    try:
        check_param_headers(PATHS, arguments, sent)
    except HeaderMismatchError:
        return
