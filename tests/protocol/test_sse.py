"""Server-sent event framing and resumable event ids."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_django.protocol.sse import (
    KEEPALIVE,
    SSEComment,
    SSEEvent,
    SSEParser,
    encode_comment,
    encode_event,
    make_event_id,
    parse_event_id,
    parse_sse,
)
from tests.fuzzing import examples

from . import strategies as s
from .sse_parser import parse_stream

# --- event framing -----------------------------------------------------------------------


def test_encode_event_single_line():
    assert encode_event('{"jsonrpc":"2.0"}') == b'data: {"jsonrpc":"2.0"}\n\n'


def test_encode_event_accepts_utf8_bytes():
    assert encode_event("héllo ✓".encode("utf-8")) == "data: héllo ✓\n\n".encode("utf-8")


def test_encode_event_rejects_non_utf8_bytes():
    with pytest.raises(UnicodeDecodeError):
        encode_event(b"\xff")


def test_encode_event_with_all_fields():
    out = encode_event("x", event_id="s1:3", retry_ms=1500, event="message")
    assert out == b"id: s1:3\nevent: message\nretry: 1500\ndata: x\n\n"
    [event] = parse_stream(out).events
    assert (event.data, event.id, event.event, event.retry) == ("x", "s1:3", "message", 1500)


def test_encode_event_retry_is_written_as_an_integer():
    assert b"retry: 2000\n" in encode_event("x", retry_ms=2000.7)


def test_encode_event_priming_event_has_id_and_empty_data():
    out = encode_event("", event_id="abc:0")
    assert out == b"id: abc:0\ndata:\n\n"
    [event] = parse_stream(out).events
    assert event.data == ""
    assert event.id == "abc:0"


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        ("a\nb", ["a", "b"]),
        ("a\r\nb", ["a", "b"]),
        ("a\rb", ["a", "b"]),
        ("a\n\nb", ["a", "", "b"]),
        ("a\r\rb", ["a", "", "b"]),
        ("a\n\r\nb", ["a", "", "b"]),
        ("\n", ["", ""]),
        ("a\n", ["a", ""]),
        ("\ra", ["", "a"]),
    ],
)
def test_encode_event_splits_every_line_terminator_into_data_lines(data, lines):
    out = encode_event(data)
    expected = "".join(f"data: {line}\n" if line else "data:\n" for line in lines) + "\n"
    assert out == expected.encode("utf-8")


@pytest.mark.parametrize(
    "data",
    [
        "x\nid: injected",
        "x\r\nevent: injected",
        "x\rretry: 1",
        "x\r\rid: injected\r\rdata: second event",
        "x\n\ndata: second event",
        "x\r\n\r\ndata: second event",
        "x\n: comment",
        "id: 1",
        "\r\nevent: x\r\n",
    ],
)
def test_encode_event_data_cannot_inject_fields_or_events(data):
    parsed = parse_stream(encode_event(data, event_id="s:1"))
    assert len(parsed.events) == 1
    assert parsed.comments == []
    event = parsed.events[0]
    assert set(event.fields) == {"id", "data"}
    assert event.id == "s:1"
    assert event.event is None and event.retry is None
    assert event.data == data.replace("\r\n", "\n").replace("\r", "\n")


def test_encode_event_keeps_leading_spaces_and_colons_in_data():
    [event] = parse_stream(encode_event("  indented: yes\n:colon")).events
    assert event.data == "  indented: yes\n:colon"


def test_encode_event_leaves_unicode_line_separators_alone():
    # SSE only splits on CR and LF, so these are plain characters inside the data line.
    data = "a\u2028b\u2029c\x85d\x0be\x0cf"
    [event] = parse_stream(encode_event(data)).events
    assert event.data == data


@pytest.mark.parametrize("event_id", ["a\nb", "a\rb", "a\r\nb", "s:1\ndata: x", "a\x00b"])
def test_encode_event_refuses_event_id_that_could_break_framing(event_id):
    with pytest.raises(ValueError):
        encode_event("x", event_id=event_id)


@pytest.mark.parametrize("event", ["a\nb", "a\rb", "message\r\nid: x"])
def test_encode_event_refuses_event_type_that_could_break_framing(event):
    with pytest.raises(ValueError):
        encode_event("x", event=event)


# --- comments ----------------------------------------------------------------------------


def test_encode_comment_default_is_keepalive():
    assert encode_comment() == b": keep-alive\n\n" == KEEPALIVE


def test_encode_comment_is_ignored_by_clients():
    parsed = parse_stream(encode_comment("ping"))
    assert parsed.events == []
    assert parsed.comments == ["ping"]


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "a\rb", "x\n\ndata: injected\n\n", "\rid: 1"])
def test_encode_comment_cannot_inject_fields_or_events(text):
    out = encode_comment(text)
    parsed = parse_stream(out)
    assert parsed.events == []
    assert len(parsed.comments) == 1
    assert b"\r" not in out
    assert out.count(b"\n") == 2


def test_keepalive_and_events_concatenate_into_one_stream():
    stream = (
        KEEPALIVE
        + encode_event("one", event_id="s:1")
        + KEEPALIVE
        + encode_event("two\nlines", event_id="s:2")
    )
    parsed = parse_stream(stream)
    assert [(e.id, e.data) for e in parsed.events] == [("s:1", "one"), ("s:2", "two\nlines")]
    assert parsed.comments == ["keep-alive", "keep-alive"]


# --- event ids ---------------------------------------------------------------------------


def test_make_event_id_format():
    assert make_event_id("abc", 5) == "abc:5"
    assert make_event_id("abc", 0) == "abc:0"


@pytest.mark.parametrize(
    ("stream", "sequence"),
    [("abc", 0), ("abc", 1), ("A-b_9", 42), ("x" * 64, 10**18 - 1), ("-", 7), ("_", 0)],
)
def test_event_id_round_trips(stream, sequence):
    assert parse_event_id(make_event_id(stream, sequence)) == (stream, sequence)


def test_parse_event_id_ignores_surrounding_whitespace():
    assert parse_event_id("  abc:12 ") == ("abc", 12)


def test_parse_event_id_accepts_leading_zeros():
    assert parse_event_id("abc:007") == ("abc", 7)


@pytest.mark.parametrize(
    "value",
    [
        "",
        " ",
        ":",
        "abc",
        "abc:",
        ":5",
        "abc:-1",
        "abc:+1",
        "abc:1.0",
        "abc:1e3",
        "abc:0x10",
        "abc: 1",
        "abc :1",
        "abc:1 2",
        "a:b:1",
        "a.b:1",
        "a/b:1",
        "x" * 65 + ":1",
        "abc:" + "1" * 19,
        "abc\n:1",
        "\nabc:1\n\n:2",
        "abc:1\n5",
        "abc:²",
        "abc:١٢",
        "abc:１",
        "äbc:1",
        "abc:1_000",
        "abc\x00:1",
    ],
)
def test_parse_event_id_rejects_malformed_ids_with_value_error(value):
    with pytest.raises(ValueError):
        parse_event_id(value)


def test_parse_event_id_error_message_is_bounded():
    with pytest.raises(ValueError) as exc:
        parse_event_id("x" * 10_000)
    assert len(str(exc.value)) < 200


# --- parsing, as a browser's EventSource reads a stream --------------------------------------------------------------------------


def test_parser_reads_events_comments_ids_and_retry():
    raw = b'id: s:0\nretry: 1000\ndata:\n\n: keep-alive\n\nid: s:1\ndata: {"a": 1}\n\n'
    assert parse_sse(raw) == [
        SSEEvent("", "s:0", None, 1000),
        SSEComment("keep-alive"),
        SSEEvent('{"a": 1}', "s:1"),
    ]


def test_parser_joins_multi_line_data():
    assert parse_sse(b"data: one\ndata: two\n\n") == [SSEEvent("one\ntwo")]


def test_parser_keeps_an_unfinished_event_for_the_next_chunk():
    parser = SSEParser()
    assert parser.feed(b"id: s:1\nda") == []
    assert parser.feed(b"ta: x\n") == []
    assert parser.feed(b"\n") == [SSEEvent("x", "s:1")]


def test_parser_handles_crlf_split_across_chunks():
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r\n") == [SSEEvent("x")]


def test_parser_handles_utf8_split_across_chunks():
    raw = "data: caf\u00e9\n\n".encode()
    parser = SSEParser()
    cut = raw.index(b"\xa9")
    assert parser.feed(raw[:cut]) == []
    assert parser.feed(raw[cut:]) == [SSEEvent("caf\u00e9")]


@settings(max_examples=examples(100), deadline=None)
@given(
    datas=st.lists(s.sse_text, min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_parser_reads_what_the_server_encodes_whatever_the_chunking(datas, cuts):
    raw = b"".join(
        encode_event(d, event_id=f"s:{i}") + encode_comment() for i, d in enumerate(datas)
    )
    parser = SSEParser()
    items = []
    last = 0
    for cut in sorted(c for c in cuts if c < len(raw)):
        items += parser.feed(raw[last:cut])
        last = cut
    items += parser.feed(raw[last:])
    events = [i for i in items if isinstance(i, SSEEvent)]
    assert [e.data for e in events] == [d.replace("\r\n", "\n").replace("\r", "\n") for d in datas]
    assert [e.id for e in events] == [f"s:{i}" for i in range(len(datas))]
    assert sum(isinstance(i, SSEComment) for i in items) == len(datas)
