"""Versions and the Streamable HTTP header rules (Accept, Content-Type, size, version, session, Origin)."""

from __future__ import annotations

import pytest

from mcp_django.protocol.errors import INVALID_REQUEST, TransportError
from mcp_django.protocol.negotiation import (
    DEFAULT_HEADER_VERSION,
    LATEST_VERSION,
    SUPPORTED_VERSIONS,
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    accepts,
    check_body_size,
    check_content_type,
    check_get_accept,
    check_origin,
    check_post_accept,
    check_protocol_version_header,
    is_valid_session_id,
    negotiate_version,
    normalize_origin,
    origin_allowed,
    supports_batches,
)

# --- versions ----------------------------------------------------------------------------


def test_supported_versions_are_newest_first_and_latest_is_first():
    assert SUPPORTED_VERSIONS == (V2025_11_25, V2025_06_18, V2025_03_26, V2024_11_05)
    assert LATEST_VERSION == SUPPORTED_VERSIONS[0] == "2025-11-25"
    assert list(SUPPORTED_VERSIONS) == sorted(SUPPORTED_VERSIONS, reverse=True)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_negotiate_version_echoes_a_supported_version(version):
    assert negotiate_version(version) == version


@pytest.mark.parametrize(
    "requested",
    ["2026-07-28", "2024-01-01", "", " 2025-06-18", "latest", None, 20250618, ["2025-06-18"]],
)
def test_negotiate_version_answers_latest_for_anything_else(requested):
    assert negotiate_version(requested) == LATEST_VERSION


def test_only_2025_03_26_supports_batches():
    assert supports_batches(V2025_03_26) is True
    for version in (V2024_11_05, V2025_06_18, V2025_11_25, "2026-07-28", ""):
        assert supports_batches(version) is False


# --- MCP-Protocol-Version ---------------------------------------------------------------


def test_missing_protocol_version_header_defaults_to_2025_03_26():
    assert check_protocol_version_header(None) == "2025-03-26" == DEFAULT_HEADER_VERSION


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_supported_protocol_version_header_is_returned(version):
    assert check_protocol_version_header(version) == version


def test_protocol_version_header_surrounding_whitespace_is_ignored():
    assert check_protocol_version_header("  2025-06-18 ") == "2025-06-18"


@pytest.mark.parametrize(
    "value",
    ["2026-07-28", "2025-06-19", "", " ", "2025-06-18, 2025-03-26", "2025-06-18\x00", "x" * 500],
)
def test_unsupported_protocol_version_header_is_400(value):
    with pytest.raises(TransportError) as exc:
        check_protocol_version_header(value)
    assert exc.value.status == 400
    assert exc.value.code == INVALID_REQUEST
    assert "supported" in exc.value.message
    # The echoed value is truncated so a huge header cannot bloat the answer.
    assert len(exc.value.message) < 200


# --- Accept ------------------------------------------------------------------------------

BOTH = "application/json, text/event-stream"


@pytest.mark.parametrize(
    "accept",
    [
        BOTH,
        "text/event-stream, application/json",
        "application/json,text/event-stream",
        "APPLICATION/JSON, Text/Event-Stream",
        "*/*",
        "application/*, text/*",
        "application/json, text/*",
        "application/*, text/event-stream",
        "application/json;q=0.9, text/event-stream;q=0.1",
        "application/json; charset=utf-8, text/event-stream",
        "application/json;q=0, application/json, text/event-stream",
        "text/html, */*;q=0.8",
        "application/*;q=0, application/json, text/event-stream",
        "*/*;q=0, application/json, text/event-stream",
        " , ,application/json,, text/event-stream ,",
        None,
        "",
        "   ",
    ],
)
def test_post_accept_admits_both_types(accept):
    check_post_accept(accept)


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",
        "text/event-stream",
        "text/html",
        "application/json, text/event-stream;q=0",
        "application/json;q=0, text/event-stream",
        "application/json, text/event-stream;q=0.0",
        "application/json, text/event-stream; Q=0",
        "application/json, text/*;q=0",
        "*/*, text/event-stream;q=0",
        "*/*;q=0",
        "application/json, text/event-stream;q=abc",
        "application/json, text/event-stream;q=-1",
        "application/json, text/event-stream;q=nan",
        "application/json, text/event-streams",
        "application/jsonx, text/event-stream",
        "*",
    ],
)
def test_post_accept_refuses_with_406(accept):
    with pytest.raises(TransportError) as exc:
        check_post_accept(accept)
    assert exc.value.status == 406
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize(
    "accept",
    [
        "text/event-stream",
        "text/*",
        "*/*",
        "text/event-stream;q=0.1",
        None,
        "application/json, text/event-stream",
    ],
)
def test_get_accept_admits_sse(accept):
    check_get_accept(accept)


@pytest.mark.parametrize(
    "accept", ["application/json", "text/event-stream;q=0", "text/html", "text/*;q=0", "*/*;q=0"]
)
def test_get_accept_refuses_with_406(accept):
    with pytest.raises(TransportError) as exc:
        check_get_accept(accept)
    assert exc.value.status == 406


def test_accepts_most_specific_range_wins():
    assert accepts("text/*;q=0, text/event-stream", "text/event-stream") is True
    assert accepts("text/*, text/event-stream;q=0", "text/event-stream") is False
    assert accepts("text/*;q=0, text/event-stream", "text/html") is False
    assert accepts("*/*;q=0.1, text/*;q=0", "text/html") is False
    assert accepts("*/*;q=0.1, text/*;q=0", "application/json") is True


def test_accepts_ignores_other_media_parameters():
    assert accepts("text/event-stream;charset=utf-8;q=0.5", "text/event-stream") is True
    assert accepts("text/event-stream;charset=utf-8;q=0", "text/event-stream") is False


def test_accepts_missing_header_admits_everything():
    assert accepts(None, "application/json") is True
    assert accepts("", "text/event-stream") is True


# --- Content-Type and body size ---------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        "Application/JSON",
        " application/json ; x=y",
    ],
)
def test_content_type_json_is_accepted(content_type):
    check_content_type(content_type)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "text/plain",
        "application/jsonl",
        "application/json-rpc",
        "application/vnd.api+json",
        "text/json",
        "multipart/form-data",
        "application/x-www-form-urlencoded",
        "application",
        "json",
        "*/*",
        "application/*",
    ],
)
def test_content_type_other_than_json_is_415(content_type):
    with pytest.raises(TransportError) as exc:
        check_content_type(content_type)
    assert exc.value.status == 415
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize(("length", "limit"), [(0, 0), (0, 10), (10, 10), (9, 10)])
def test_body_size_within_limit_is_accepted(length, limit):
    check_body_size(length, limit)


@pytest.mark.parametrize(("length", "limit"), [(1, 0), (11, 10), (10**12, 4 * 1024 * 1024)])
def test_body_size_over_limit_is_413(length, limit):
    with pytest.raises(TransportError) as exc:
        check_body_size(length, limit)
    assert exc.value.status == 413
    assert str(limit) in exc.value.message


# --- session ids -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "!",
        "~",
        "0123456789abcdef",
        "x" * 128,
        "".join(chr(c) for c in range(0x21, 0x7F)),
        "abc-DEF_123.~:/=+",
    ],
)
def test_session_id_of_visible_ascii_is_valid(value):
    assert is_valid_session_id(value) is True


@pytest.mark.parametrize(
    "value",
    [
        "",
        "x" * 129,
        "a b",
        " abc",
        "abc ",
        "abc\n",
        "\nabc",
        "abc\r\n",
        "a\tb",
        "a\x00b",
        "a\x7fb",
        "a\x20",
        "café",
        "a\u2028b",
        "ａｂｃ",
    ],
)
def test_session_id_outside_visible_ascii_or_too_long_is_invalid(value):
    assert is_valid_session_id(value) is False


# --- Origin ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("http://example.com", "http://example.com"),
        ("HTTP://EXAMPLE.COM", "http://example.com"),
        ("http://example.com:80", "http://example.com"),
        ("https://example.com:443", "https://example.com"),
        ("http://example.com:443", "http://example.com:443"),
        ("https://example.com:80", "https://example.com:80"),
        ("http://example.com:8000", "http://example.com:8000"),
        ("http://example.com/", "http://example.com"),
        ("  http://example.com  ", "http://example.com"),
        ("http://[::1]", "http://[::1]"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("https://[2001:DB8::1]:443", "https://[2001:db8::1]"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ],
)
def test_normalize_origin(origin, expected):
    assert normalize_origin(origin) == expected


@pytest.mark.parametrize(
    "origin",
    [
        "null",
        "",
        " ",
        "file://",
        "file:///etc/passwd",
        "http://",
        "https://",
        "http://:80",
        "javascript:alert(1)",
        "data:text/html,x",
        "ftp://example.com",
        "chrome-extension://abc",
        "example.com",
        "//example.com",
        "http://[::1",
        "http://example.com:99999",
        "http://example.com:abc",
        "*",
    ],
)
def test_normalize_origin_rejects_unusable_values(origin):
    assert normalize_origin(origin) is None


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://example.com", "example.com", "http"),
        ("http://example.com", "example.com:80", "http"),
        ("http://example.com:80", "example.com", "http"),
        ("https://example.com", "example.com:443", "https"),
        ("https://example.com:443", "EXAMPLE.com", "https"),
        ("http://localhost:8000", "localhost:8000", "http"),
        ("http://[::1]:8000", "[::1]:8000", "http"),
        ("http://[::1]", "[::1]:80", "http"),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", "http"),
    ],
)
def test_same_origin_is_allowed_without_allow_list(origin, host, scheme):
    assert origin_allowed(origin, host, scheme, []) is True
    check_origin(origin, host, scheme, [])


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://evil.com", "example.com", "http"),
        ("https://example.com", "example.com", "http"),
        ("http://example.com", "example.com", "https"),
        ("http://example.com:8000", "example.com", "http"),
        ("http://example.com", "example.com:8000", "http"),
        ("http://sub.example.com", "example.com", "http"),
        ("http://example.com.evil.com", "example.com", "http"),
        ("http://localhost:8001", "localhost:8000", "http"),
        ("http://[::2]:8000", "[::1]:8000", "http"),
        ("http://127.0.0.1:8000", "localhost:8000", "http"),
        ("http://example.com@evil.com", "example.com", "http"),
    ],
)
def test_other_origins_are_refused_with_403(origin, host, scheme):
    assert origin_allowed(origin, host, scheme, []) is False
    with pytest.raises(TransportError) as exc:
        check_origin(origin, host, scheme, [])
    assert exc.value.status == 403
    assert exc.value.code == INVALID_REQUEST


@pytest.mark.parametrize(
    "origin",
    ["null", "file://", "http://", "javascript:", "javascript:alert(1)", "", "data:,x", "*"],
)
def test_garbage_origins_are_refused_with_403(origin):
    with pytest.raises(TransportError) as exc:
        check_origin(origin, "example.com", "http", [])
    assert exc.value.status == 403


@pytest.mark.parametrize("origin", ["null", "file://", "http://", "javascript:"])
def test_garbage_origins_are_refused_even_when_listed(origin):
    assert origin_allowed(origin, "example.com", "http", [origin]) is False


def test_missing_origin_is_allowed():
    check_origin(None, "example.com", "http", [])


def test_allow_list_admits_listed_origins_only():
    allowed = ["https://app.example.org", "http://localhost:3000"]
    assert origin_allowed("https://app.example.org", "api.example.com", "https", allowed) is True
    assert (
        origin_allowed("HTTPS://APP.example.org:443/", "api.example.com", "https", allowed) is True
    )
    assert origin_allowed("http://localhost:3000", "api.example.com", "https", allowed) is True
    assert origin_allowed("http://app.example.org", "api.example.com", "https", allowed) is False
    assert origin_allowed("http://localhost:3001", "api.example.com", "https", allowed) is False
    with pytest.raises(TransportError) as exc:
        check_origin("https://evil.example.org", "api.example.com", "https", allowed)
    assert exc.value.status == 403


def test_allow_list_entries_are_normalised():
    assert (
        origin_allowed("https://app.example.org", "h", "https", ["HTTPS://App.Example.org:443"])
        is True
    )
    assert origin_allowed("http://[::1]:3000", "h", "https", ["http://[::1]:3000/"]) is True


def test_allow_list_ignores_unusable_entries():
    assert (
        origin_allowed("http://evil.com", "example.com", "http", ["", "null", "garbage", "file://"])
        is False
    )


def test_wildcard_allow_list_admits_any_usable_origin():
    assert origin_allowed("http://evil.com", "example.com", "http", ["*"]) is True
    check_origin("https://anything.test:1234", "example.com", "http", ["https://x.test", "*"])


def test_wildcard_allow_list_still_refuses_unusable_origins():
    # "*" switches off the cross-origin check, not the sanity check on the header.
    assert origin_allowed("null", "example.com", "http", ["*"]) is False


def test_allow_list_may_be_any_iterable():
    assert (
        origin_allowed("http://a.test", "example.com", "http", (o for o in ["http://a.test"]))
        is True
    )
    assert (
        origin_allowed("http://a.test", "example.com", "http", frozenset({"http://a.test"})) is True
    )
