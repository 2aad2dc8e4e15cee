"""The cache in front of Twisted's Content-Type parser (mcp_django.transport.daphne): the same
answers as Twisted's own, for any value, and bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_django.transport import daphne

http = pytest.importorskip("twisted.web.http")
TWISTED_PARSE = getattr(http, "_parseContentType", None)
if TWISTED_PARSE is not None:
    TWISTED_PARSE = getattr(TWISTED_PARSE, "__wrapped__", TWISTED_PARSE)

pytestmark = pytest.mark.skipif(
    TWISTED_PARSE is None, reason="this Twisted has no _parseContentType to speed up"
)


@pytest.fixture
def remembered(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(http, "_parseContentType", TWISTED_PARSE)
    assert daphne.remember_content_types() is True
    return http._parseContentType


def test_it_is_put_in_place_once(remembered) -> None:
    assert remembered is not TWISTED_PARSE
    assert daphne.remember_content_types() is False
    assert http._parseContentType is remembered


def test_the_values_clients_send_parse_as_before(remembered) -> None:
    for value in (
        b"application/json",
        b"application/json; charset=utf-8",
        b"APPLICATION/JSON",
        b"multipart/form-data; boundary=xyz",
        b"application/x-www-form-urlencoded",
        b"",
        b"nonsense",
    ):
        assert remembered(value) == TWISTED_PARSE(value)
        assert remembered(value) == TWISTED_PARSE(value)  # from the cache


def outcome(parse, value: bytes) -> object:
    try:
        return parse(value)
    except ValueError as exc:  # what Twisted raises for a value it cannot parse
        return ("ValueError", str(exc))


@given(st.binary(max_size=300))
def test_any_value_parses_as_before(value: bytes) -> None:
    http._parseContentType = TWISTED_PARSE
    try:
        daphne.remember_content_types()
        first = outcome(http._parseContentType, value)
        again = outcome(http._parseContentType, value)
    finally:
        http._parseContentType = TWISTED_PARSE
    assert first == again == outcome(TWISTED_PARSE, value)


def test_the_cache_is_bounded(remembered) -> None:
    for i in range(daphne.CACHED_VALUES * 3):
        remembered(b"application/x-%d" % i)
    remembered(b"application/json; x=" + b"a" * daphne.CACHED_LENGTH)  # too long: not kept
    cache = remembered.__closure__  # the lru_cache's own bound is the guarantee
    assert cache is not None
    info = next(c.cell_contents for c in cache if hasattr(c.cell_contents, "cache_info"))
    assert info.cache_info().currsize <= daphne.CACHED_VALUES
