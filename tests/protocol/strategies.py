"""Hypothesis strategies for the protocol core's inputs: JSON, JSON-RPC messages, bytes, headers."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# orjson only round-trips integers inside the 64-bit range; beyond it, it reads floats.
INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (what ``orjson.loads`` can return), nested and bounded."""
    return st.recursive(
        json_scalars,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=max_leaves,
    )


json_objects = st.dictionaries(st.text(max_size=8), json_values(10), max_size=4)

request_ids = st.text(max_size=16) | st.integers(min_value=INT64_MIN, max_value=UINT64_MAX)
invalid_ids = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(INT64_MIN, UINT64_MAX), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(INT64_MIN, UINT64_MAX), max_size=2)
)
methods = st.text(min_size=1, max_size=30)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(request_ids), "method": draw(methods)}
    if draw(st.booleans()):
        message["params"] = draw(json_objects)
    return message


@st.composite
def notifications(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(methods)}
    if draw(st.booleans()):
        message["params"] = draw(json_objects)
    return message


@st.composite
def result_responses(draw: st.DrawFn) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": draw(request_ids), "result": draw(json_objects)}


@st.composite
def error_responses(draw: st.DrawFn) -> dict[str, Any]:
    error: dict[str, Any] = {
        "code": draw(st.integers(min_value=INT64_MIN, max_value=2**63 - 1)),
        "message": draw(st.text(max_size=30)),
    }
    if draw(st.booleans()):
        error["data"] = draw(json_values(5))
    return {"jsonrpc": "2.0", "id": draw(request_ids), "error": error}


valid_messages = requests() | notifications() | result_responses() | error_responses()


@st.composite
def jsonrpc_ish(draw: st.DrawFn) -> Any:
    """Objects that look like JSON-RPC but may break any rule, plus the odd non-object."""
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        return draw(json_values(8))
    message: dict[str, Any] = {}
    candidates: dict[str, st.SearchStrategy[Any]] = {
        "jsonrpc": st.sampled_from(["2.0", "1.0", "2", 2.0, None]),
        "id": request_ids | invalid_ids,
        "method": methods | st.just("") | json_scalars,
        "params": json_objects | json_values(4),
        "result": json_objects | json_values(4),
        "error": st.fixed_dictionaries({"code": json_scalars, "message": json_scalars})
        | json_values(4),
    }
    for key, strategy in candidates.items():
        if draw(st.booleans()):
            message[key] = draw(strategy)
    for key, value in draw(st.dictionaries(st.text(max_size=6), json_scalars, max_size=2)).items():
        message.setdefault(key, value)
    return message


arbitrary_bytes = st.binary(max_size=300)

# Header values: mostly printable ASCII (what a header can carry), sometimes any text at all.
header_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60
) | st.text(max_size=40)

accept_headers = (
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "application/json",
                    "text/event-stream",
                    "*/*",
                    "application/*",
                    "text/*",
                    "text/html",
                    "",
                    "*",
                ]
            ),
            st.sampled_from(
                [
                    "",
                    ";q=0",
                    ";q=1",
                    ";q=0.5",
                    ";q=abc",
                    ";Q=0",
                    ";q=",
                    ";level=1",
                    ";q=nan",
                    ";q=-1",
                ]
            ),
        ).map("".join),
        max_size=5,
    ).map(", ".join)
    | header_text
)

origin_headers = (
    st.builds(
        lambda scheme, host, port: f"{scheme}{host}{port}",
        st.sampled_from(
            ["http://", "https://", "HTTP://", "file://", "javascript:", "ftp://", "", "//"]
        ),
        st.sampled_from(
            [
                "example.com",
                "EXAMPLE.com",
                "[::1]",
                "[::1",
                "127.0.0.1",
                "localhost",
                "",
                "a@b",
                "null",
            ]
        ),
        st.sampled_from(
            ["", ":80", ":443", ":8000", ":", ":99999", ":-1", ":abc", "/path", "?q", "#f"]
        ),
    )
    | st.sampled_from(["null", "file://", "http://", "javascript:alert(1)", "*", " "])
    | header_text
)

# Line terminators are over-weighted because they are what could break SSE framing.
sse_text = st.lists(
    st.characters(codec="utf-8") | st.sampled_from(["\r", "\n", "\r\n", ":", " ", "data: x"]),
    max_size=40,
).map("".join)
stream_tokens = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
    min_size=1,
    max_size=64,
)
sequences = st.integers(min_value=0, max_value=10**18 - 1)
