"""Opaque cursors and paging of list results."""

from __future__ import annotations

import base64

import orjson
import pytest

from mcp_django.protocol.errors import INVALID_PARAMS, InvalidParamsError
from mcp_django.protocol.pagination import decode_cursor, encode_cursor, page_offset, paginate


def raw_cursor(value) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode("ascii").rstrip("=")


# --- cursors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "position",
    [{}, {"o": 0}, {"o": 50}, {"o": 1, "k": "name", "nested": {"a": [1, None]}}, {"u": "ü✓"}],
)
def test_cursor_round_trips(position):
    assert decode_cursor(encode_cursor(position)) == position


def test_cursor_is_url_safe_and_unpadded():
    cursor = encode_cursor({"o": 1, "k": "\xff\xfe???>>>"})
    assert "=" not in cursor
    assert all(c.isalnum() or c in "-_" for c in cursor)


def test_decode_cursor_accepts_padded_form():
    cursor = encode_cursor({"o": 3})
    padded = cursor + "=" * (-len(cursor) % 4)
    assert decode_cursor(padded) == {"o": 3}


@pytest.mark.parametrize(
    "cursor",
    [
        None,
        3,
        ["abc"],
        {"o": 1},
        b"eyJvIjoxfQ",
        "",
        "a",
        "abcde",
        "!!!!",
        "not a cursor",
        "é",
        "eyJvIjox",
        raw_cursor([1, 2]),
        raw_cursor("o"),
        raw_cursor(5),
        raw_cursor(None),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "A" * 1025,
        encode_cursor({"o": 1, "pad": "x" * 2000}),
    ],
)
def test_decode_cursor_rejects_anything_not_made_by_encode_cursor(cursor):
    with pytest.raises(InvalidParamsError) as exc:
        decode_cursor(cursor)
    assert exc.value.code == INVALID_PARAMS


# --- page_offset -------------------------------------------------------------------------


def test_page_offset_without_cursor_is_zero():
    assert page_offset({}) == 0
    assert page_offset({"cursor": None}) == 0


def test_page_offset_reads_the_cursor():
    assert page_offset({"cursor": encode_cursor({"o": 25})}) == 25


@pytest.mark.parametrize(
    "position", [{}, {"o": -1}, {"o": "5"}, {"o": 1.0}, {"o": True}, {"o": None}, {"x": 5}]
)
def test_page_offset_rejects_cursor_without_a_non_negative_integer_offset(position):
    with pytest.raises(InvalidParamsError) as exc:
        page_offset({"cursor": encode_cursor(position)})
    assert exc.value.code == INVALID_PARAMS


@pytest.mark.parametrize("cursor", ["", "garbage", 0, False, [], {}])
def test_page_offset_rejects_bad_cursor_values(cursor):
    with pytest.raises(InvalidParamsError) as exc:
        page_offset({"cursor": cursor})
    assert exc.value.code == INVALID_PARAMS


# --- paginate ----------------------------------------------------------------------------


def test_paginate_walks_every_item_exactly_once():
    items = list(range(23))
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = paginate(items, cursor, 5)
        seen.extend(page)
        pages += 1
        if cursor is None:
            break
    assert seen == items
    assert pages == 5


def test_paginate_single_page_has_no_next_cursor():
    assert paginate([1, 2, 3], None, 10) == ([1, 2, 3], None)


def test_paginate_exact_multiple_has_no_trailing_empty_page():
    page, cursor = paginate([1, 2, 3, 4], None, 2)
    assert page == [1, 2]
    page, cursor = paginate([1, 2, 3, 4], cursor, 2)
    assert (page, cursor) == ([3, 4], None)


def test_paginate_empty_list():
    assert paginate([], None, 10) == ([], None)


def test_paginate_cursor_at_the_end_gives_an_empty_last_page():
    # The list may have shrunk since the cursor was issued.
    assert paginate([1, 2], encode_cursor({"o": 2}), 5) == ([], None)


def test_paginate_cursor_beyond_the_end_is_invalid_params():
    with pytest.raises(InvalidParamsError) as exc:
        paginate([1, 2], encode_cursor({"o": 3}), 5)
    assert exc.value.code == INVALID_PARAMS


def test_paginate_invalid_cursor_is_invalid_params():
    with pytest.raises(InvalidParamsError) as exc:
        paginate([1, 2], "nope", 5)
    assert exc.value.code == INVALID_PARAMS
