"""Sealed ``requestState`` (2026-07-28 input-required results): the client is the attacker."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_django.exceptions import InvalidParamsError
from mcp_django.server import request_state
from mcp_django.server.request_state import InvalidRequestState, request_binding, seal, unseal
from tests.fuzzing import examples

USER = "user:42"
BINDING = request_binding("tools/call", "book_flight", {"to": "OSL", "seats": 2})
PAYLOAD: dict[str, Any] = {
    "step": 2,
    "answers": {"github_login": "octocat"},
    "items": [1, 2.5, None, True],
}
KEY_A = "a" * 48
KEY_B = "b" * 48
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def reason(token: object, *, principal: str = USER, binding: str = BINDING) -> str:
    with pytest.raises(InvalidRequestState) as caught:
        unseal(token, principal=principal, binding=binding)
    return caught.value.reason


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unb64(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def test_round_trip():
    token = seal(PAYLOAD, principal=USER, binding=BINDING)
    assert unseal(token, principal=USER, binding=BINDING) == PAYLOAD


def test_tokens_are_compact_url_safe_text_and_never_repeat():
    first, second = (seal(PAYLOAD, principal=USER, binding=BINDING) for _ in range(2))
    assert first != second  # a fresh nonce each time
    assert set(first) <= set(ALPHABET)
    assert "octocat" not in first and b"octocat" not in unb64(first)  # encrypted, not just signed


def test_an_empty_payload_round_trips():
    assert unseal(seal({}, principal=USER, binding=BINDING), principal=USER, binding=BINDING) == {}


def test_compressed_round_trip_is_shorter():
    payload = {"rows": ["the same row again"] * 200}
    plain, deflated = (
        seal(payload, principal=USER, binding=BINDING),
        seal(payload, principal=USER, binding=BINDING, compress=True),
    )
    assert len(deflated) < len(plain) / 4
    assert unseal(deflated, principal=USER, binding=BINDING) == payload


def test_it_is_an_invalid_params_error():
    """Unhandled, it answers -32602 with a message that says what, not how."""
    with pytest.raises(InvalidParamsError) as caught:
        unseal("nonsense", principal=USER, binding=BINDING)
    assert caught.value.code == -32602
    assert caught.value.message.startswith("Invalid requestState")


def test_every_changed_byte_is_refused():
    raw = unb64(seal(PAYLOAD, principal=USER, binding=BINDING))
    for i in range(len(raw)):
        tampered = bytearray(raw)
        tampered[i] ^= 0x01
        assert reason(b64(bytes(tampered))) in ("malformed", "foreign"), i


@pytest.mark.parametrize("padding", [0, 1, 2])
def test_every_changed_character_is_refused(padding):
    """Including the last one, whose unused low bits would otherwise name the same bytes
    (three payload lengths: every remainder of the token's bytes modulo 3)."""
    token = seal({"pad": "x" * padding}, principal=USER, binding=BINDING)
    for i, char in enumerate(token):
        for other in ALPHABET:
            if other != char:
                assert reason(token[:i] + other + token[i + 1 :]) in ("malformed", "foreign"), (
                    i,
                    other,
                )


def test_truncated_and_extended_tokens_are_refused():
    token = seal(PAYLOAD, principal=USER, binding=BINDING)
    for cut in (1, 2, 3, 10, len(token) - 1):
        assert reason(token[:-cut]) in ("malformed", "foreign")
    assert reason(token + "AAAA") == "foreign"
    assert reason(token + "=") == "malformed"


def test_another_principal_is_refused():
    token = seal(PAYLOAD, principal=USER, binding=BINDING)
    assert reason(token, principal="user:43") == "foreign"
    assert reason(token, principal="anonymous") == "foreign"


def test_another_request_is_refused():
    token = seal(PAYLOAD, principal=USER, binding=BINDING)
    assert (
        reason(
            token, binding=request_binding("tools/call", "book_flight", {"to": "OSL", "seats": 3})
        )
        == "foreign"
    )
    assert (
        reason(
            token, binding=request_binding("tools/call", "cancel_flight", {"to": "OSL", "seats": 2})
        )
        == "foreign"
    )
    assert (
        reason(
            token, binding=request_binding("prompts/get", "book_flight", {"to": "OSL", "seats": 2})
        )
        == "foreign"
    )


def test_principal_and_binding_cannot_trade_characters():
    token = seal(PAYLOAD, principal="user:4", binding="2" + BINDING)
    assert reason(token, principal="user:42", binding=BINDING) == "foreign"


def test_request_binding_ignores_argument_order_only():
    assert request_binding("tools/call", "t", {"a": 1, "b": {"x": 1, "y": 2}}) == request_binding(
        "tools/call", "t", {"b": {"y": 2, "x": 1}, "a": 1}
    )
    assert request_binding("tools/call", "t", None) == request_binding("tools/call", "t", {})
    assert request_binding("tools/call", "t", {"a": 1}) != request_binding(
        "tools/call", "t", {"a": "1"}
    )
    assert request_binding("resources/read", "file:///a") != request_binding(
        "resources/read", "file:///b"
    )


def test_expired_state_is_told_apart(monkeypatch):
    now = time.time()
    monkeypatch.setattr(request_state, "_now", lambda: now)
    with override_settings(MCP_DJANGO={"REQUEST_STATE_TTL": 60}):
        token = seal(PAYLOAD, principal=USER, binding=BINDING)
        monkeypatch.setattr(request_state, "_now", lambda: now + 59)
        assert unseal(token, principal=USER, binding=BINDING) == PAYLOAD
        monkeypatch.setattr(request_state, "_now", lambda: now + 60)
        with pytest.raises(InvalidRequestState, match="expired") as caught:
            unseal(token, principal=USER, binding=BINDING)
    assert caught.value.reason == "expired"


def test_an_expired_token_of_another_principal_is_foreign_not_expired(monkeypatch):
    """Expiry is read only once the tag verifies: nothing unauthenticated is believed."""
    token = seal(PAYLOAD, principal=USER, binding=BINDING)
    monkeypatch.setattr(request_state, "_now", lambda: time.time() + 10_000)
    assert reason(token) == "expired"
    assert reason(token, principal="user:43") == "foreign"


def test_rotation_with_request_state_keys():
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_A]}):
        old = seal(PAYLOAD, principal=USER, binding=BINDING)
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_B, KEY_A]}):
        new = seal(PAYLOAD, principal=USER, binding=BINDING)
        assert unseal(old, principal=USER, binding=BINDING) == PAYLOAD
        assert unseal(new, principal=USER, binding=BINDING) == PAYLOAD
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_B]}):
        assert unseal(new, principal=USER, binding=BINDING) == PAYLOAD
        with pytest.raises(InvalidRequestState, match="key") as caught:
            unseal(old, principal=USER, binding=BINDING)
        assert caught.value.reason == "foreign"
        assert KEY_A not in caught.value.message and KEY_B not in caught.value.message


def test_the_key_id_picks_the_key():
    """A token carries a short id of its key: the second key of the list is not the first one's."""
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_A]}):
        a = unb64(seal(PAYLOAD, principal=USER, binding=BINDING))
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_B]}):
        b = unb64(seal(PAYLOAD, principal=USER, binding=BINDING))
    assert a[1:5] != b[1:5]
    assert a[:1] == b[:1] == bytes([request_state.VERSION])


def test_rotation_with_secret_key_fallbacks():
    with override_settings(SECRET_KEY="old-secret-key-" + "x" * 40, SECRET_KEY_FALLBACKS=[]):
        old = seal(PAYLOAD, principal=USER, binding=BINDING)
    with override_settings(
        SECRET_KEY="new-secret-key-" + "y" * 40, SECRET_KEY_FALLBACKS=["old-secret-key-" + "x" * 40]
    ):
        assert unseal(old, principal=USER, binding=BINDING) == PAYLOAD
        new = seal(PAYLOAD, principal=USER, binding=BINDING)
    with override_settings(SECRET_KEY="new-secret-key-" + "y" * 40, SECRET_KEY_FALLBACKS=[]):
        assert unseal(new, principal=USER, binding=BINDING) == PAYLOAD
        assert reason(old) == "foreign"


def test_request_state_keys_replace_secret_key():
    default = seal(PAYLOAD, principal=USER, binding=BINDING)
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_A]}):
        assert reason(default) == "foreign"


@pytest.mark.parametrize("token", [None, 42, b"bytes", ["list"], {"a": 1}])
def test_non_strings_are_malformed(token):
    assert reason(token) == "malformed"


@pytest.mark.parametrize(
    "token", ["", "A", "not base64!", "é" * 60, "AAAA====", "a b", "x" * 45, "AB+/" * 20]
)
def test_garbage_is_malformed(token):
    assert reason(token) == "malformed"


def test_an_unknown_version_is_malformed():
    raw = bytearray(unb64(seal(PAYLOAD, principal=USER, binding=BINDING)))
    raw[0] = 2
    assert reason(b64(bytes(raw))) == "malformed"


def test_an_oversized_token_is_refused_unread():
    with override_settings(MCP_DJANGO={"MAX_REQUEST_STATE_BYTES": 1000}):
        assert reason("A" * 1001) == "too_large"
        assert reason("!" * 10_000_000) == "too_large"


def test_an_oversized_payload_is_not_sealed():
    with override_settings(MCP_DJANGO={"MAX_REQUEST_STATE_BYTES": 1000}):
        with pytest.raises(ValueError, match="MAX_REQUEST_STATE_BYTES"):
            seal({"blob": "x" * 1000}, principal=USER, binding=BINDING)
        # Fits as JSON, but not once sealed and encoded (a third longer).
        with pytest.raises(ValueError, match="MAX_REQUEST_STATE_BYTES"):
            seal({"blob": "x" * 900}, principal=USER, binding=BINDING)


def test_a_payload_that_inflates_past_the_limit_is_refused():
    """Decompression is bounded: a small token may not expand into a large payload."""
    payload = {"blob": "x" * 50_000}
    with override_settings(MCP_DJANGO={"MAX_REQUEST_STATE_BYTES": 100_000}):
        token = seal(payload, principal=USER, binding=BINDING, compress=True)
    assert len(token) < 1000
    with override_settings(MCP_DJANGO={"MAX_REQUEST_STATE_BYTES": 1000}):
        assert reason(token) == "too_large"
    with override_settings(MCP_DJANGO={"MAX_REQUEST_STATE_BYTES": 100_000}):
        assert unseal(token, principal=USER, binding=BINDING) == payload


def test_a_payload_that_is_not_an_object_is_not_sealed():
    with pytest.raises(TypeError):
        seal(["not", "a", "dict"], principal=USER, binding=BINDING)  # type: ignore[arg-type]


def test_an_authentic_payload_that_is_not_an_object_is_malformed():
    """Only a key holder could make one; refused all the same rather than returned."""
    key = request_state._keys()[0]
    header = request_state._HEADER.pack(request_state.VERSION, key.key_id)
    nonce = b"\x00" * 12
    inner = request_state._INNER.pack(int((time.time() + 60) * 1000), 0) + b"[1,2,3]"
    sealed = key.aead.encrypt(nonce, inner, request_state._associated_data(header, USER, BINDING))
    assert reason(b64(header + nonce + sealed)) == "malformed"


def test_messages_never_carry_key_material():
    with override_settings(MCP_DJANGO={"REQUEST_STATE_KEYS": [KEY_A]}):
        token = seal(PAYLOAD, principal=USER, binding=BINDING)
        for bad in (token[:-2], token + "AAAA", "x" * 70_000, 7):
            with pytest.raises(InvalidRequestState) as caught:
                unseal(bad, principal=USER, binding=BINDING)
            text = str(caught.value)
            assert KEY_A not in text and "aaaa" not in text.lower() and USER not in text


@settings(max_examples=examples(300), deadline=None)
@given(token=st.one_of(st.text(max_size=200), st.text(alphabet=ALPHABET, max_size=200)))
def test_fuzz_arbitrary_text_only_ever_raises_invalid_request_state(token):
    with pytest.raises(InvalidRequestState) as caught:
        unseal(token, principal=USER, binding=BINDING)
    assert caught.value.reason in ("malformed", "too_large", "foreign", "expired")


@settings(max_examples=examples(200), deadline=None)
@given(raw=st.binary(min_size=0, max_size=300))
def test_fuzz_arbitrary_bytes_behind_a_valid_header_are_refused(raw):
    """Past the base64 layer: a real version and key id, then anything."""
    key = request_state._keys()[0]
    header = request_state._HEADER.pack(request_state.VERSION, key.key_id)
    assert reason(b64(header + raw)) in ("malformed", "foreign")


@settings(max_examples=examples(50), deadline=None)
@given(
    payload=st.dictionaries(
        st.text(max_size=10),
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=5), inner, max_size=4)
            ),
            max_leaves=20,
        ),
        max_size=5,
    ),
    compress=st.booleans(),
)
def test_fuzz_any_json_object_round_trips(payload, compress):
    assert (
        unseal(
            seal(payload, principal=USER, binding=BINDING, compress=compress),
            principal=USER,
            binding=BINDING,
        )
        == payload
    )
