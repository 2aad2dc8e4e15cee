"""Sealed ``requestState`` for input-required results (MCP 2026-07-28, multi-round-trip requests).

The state travels through the client, which the spec tells us to treat as an attacker, so it is
sealed with AES-256-GCM: the client can neither read nor change it. The associated data binds a
token to the principal it was issued to and to the request it answers (a digest the caller
builds, see :func:`request_binding`), and the encrypted payload carries an expiry, so a token
cannot be replayed by another user, on another request, or after ``REQUEST_STATE_TTL``. It can
still be replayed by the same user on the same request until it expires: state that must be
used at most once needs a server-side record as well.

Keys are derived by HKDF from ``MCP_DJANGO["REQUEST_STATE_KEYS"]`` or, by default, from
``SECRET_KEY`` and ``SECRET_KEY_FALLBACKS``: the first key seals, every key opens (rotation).

Token layout (then base64url without padding)::

    version (1) | key id (4) | nonce (12) | AES-GCM( expiry ms (8) | flags (1) | JSON ) + tag (16)
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import struct
import time
import zlib
from collections.abc import Mapping
from typing import Any, Final, Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from ..conf import mcp_settings
from ..exceptions import InvalidParamsError

__all__ = ["InvalidRequestState", "Reason", "request_binding", "seal", "unseal"]

VERSION: Final = 1
_KEY_ID_SIZE: Final = 4
_NONCE_SIZE: Final = 12
_TAG_SIZE: Final = 16
_HEADER: Final = struct.Struct(">B4s")  # version, key id: the authenticated clear-text prefix
_INNER: Final = struct.Struct(">QB")  # expiry (ms since the epoch), flags: inside the ciphertext
_MIN_SIZE: Final = _HEADER.size + _NONCE_SIZE + _INNER.size + _TAG_SIZE
_FLAG_ZLIB: Final = 0x01
_MAX_EXPIRY_MS: Final = 2**64 - 1
# Strict alphabet: the lenient decoders of ``base64`` skip unknown characters.
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")

Reason = Literal["malformed", "too_large", "foreign", "expired"]


class InvalidRequestState(InvalidParamsError):
    """A ``requestState`` the server will not use; answered as -32602 (invalid params).

    ``reason`` tells the caller why in one word: "malformed" (not a token of ours at all),
    "too_large", "foreign" (unknown key, tampered, or issued to another principal or request)
    and "expired" (authentic but too old: the client may start the request over).
    """

    _MESSAGES: Final[dict[str, str]] = {
        "malformed": "Invalid requestState: not a state this server issued.",
        "too_large": "Invalid requestState: too large.",
        "foreign": "Invalid requestState: it does not verify for this user and request.",
        "expired": "Invalid requestState: it has expired; send the request again without it.",
    }

    def __init__(self, reason: Reason, message: str | None = None) -> None:
        self.reason: Reason = reason
        super().__init__(message or self._MESSAGES[reason])


class _Key:
    """One derived key: its id (a short digest, public in every token) and its cipher."""

    __slots__ = ("aead", "key_id")

    def __init__(self, material: str) -> None:
        # Own salt and info: never the same key as crypto.py's Fernet keys from the same secret.
        key = HKDF(
            algorithm=hashes.SHA256(),
            length=32,
            salt=b"mcp_django.request_state",
            info=b"aes-256-gcm v1",
        ).derive(material.encode("utf-8"))
        # A digest of the derived key, not of the material: it tells nothing about SECRET_KEY.
        self.key_id = hashlib.sha256(b"mcp_django.request_state key id\x00" + key).digest()[
            :_KEY_ID_SIZE
        ]
        self.aead = AESGCM(key)


@functools.lru_cache(maxsize=16)
def _derive(material: str) -> _Key:
    # HKDF per call would be cheap too; the cache keeps AESGCM objects for the common keys.
    return _Key(material)


def _keys() -> list[_Key]:
    """The configured keys, the sealing one first."""
    materials = mcp_settings.request_state_keys or [
        settings.SECRET_KEY,
        *getattr(settings, "SECRET_KEY_FALLBACKS", []),
    ]
    return [_derive(str(m)) for m in materials]


def _now() -> float:
    # A seam for tests: they move the clock here, not in the whole process.
    return time.time()


def _associated_data(header: bytes, principal: str, binding: str) -> bytes:
    # The header has a fixed size and JSON delimits the strings, so no two inputs collide.
    return header + orjson.dumps([principal, binding])


def request_binding(method: str, target: str, arguments: Mapping[str, Any] | None = None) -> str:
    """A digest of a request's salient parts (method, tool or prompt name or resource URI,
    arguments) to pass as ``binding``, so that a state only opens on the request it answers.

    Keys are sorted, so the same arguments give the same digest whatever their order.
    """
    canonical = orjson.dumps([method, target, arguments or {}], option=orjson.OPT_SORT_KEYS)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode("ascii")


def seal(payload: dict[str, Any], *, principal: str, binding: str, compress: bool = False) -> str:
    """Encrypt and authenticate ``payload`` into a compact URL-safe token for ``requestState``.

    ``principal`` names who may present it back (e.g. "user:42" or "anonymous"); ``binding``
    names the request it answers (see :func:`request_binding`). Raise ``TypeError`` for a
    payload that is not a JSON object and ``ValueError`` when the token would exceed
    ``MAX_REQUEST_STATE_BYTES``: both are the server's mistakes, not the client's.

    ``compress`` deflates the JSON first. Leave it off when the payload mixes values the client
    chose with values it must not learn: the token's length would leak how well they compress
    together (as in CRIME).
    """
    if not isinstance(payload, dict):
        raise TypeError(f"requestState payload must be a dict, not {type(payload).__name__}")
    limit = mcp_settings.max_request_state_bytes
    body = orjson.dumps(payload)
    if len(body) > limit:
        raise ValueError(
            f"requestState payload is {len(body)} bytes as JSON, more than MAX_REQUEST_STATE_BYTES "
            f"({limit})"
        )
    flags = 0
    if compress:
        deflated = zlib.compress(body, 6)
        if len(deflated) < len(body):
            body, flags = deflated, _FLAG_ZLIB
    key = _keys()[0]
    header = _HEADER.pack(VERSION, key.key_id)
    expires_ms = min(int((_now() + mcp_settings.request_state_ttl) * 1000), _MAX_EXPIRY_MS)
    nonce = os.urandom(_NONCE_SIZE)  # random: safe for far more tokens per key than a server seals
    sealed = key.aead.encrypt(
        nonce, _INNER.pack(expires_ms, flags) + body, _associated_data(header, principal, binding)
    )
    token = base64.urlsafe_b64encode(header + nonce + sealed).rstrip(b"=").decode("ascii")
    if len(token) > limit:
        raise ValueError(
            f"requestState would be {len(token)} characters, more than MAX_REQUEST_STATE_BYTES "
            f"({limit})"
        )
    return token


def _decode(token: object, limit: int) -> bytes:
    """The token's bytes, refusing anything but canonical unpadded base64url within the limit."""
    if not isinstance(token, str):
        raise InvalidRequestState("malformed", "Invalid requestState: it must be a string.")
    if len(token) > limit:
        raise InvalidRequestState("too_large")  # before any decoding: the cost stays bounded
    if not _BASE64URL.fullmatch(token) or len(token) % 4 == 1:
        raise InvalidRequestState("malformed")
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    # Unused low bits of the last character would let several texts name one token.
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
        raise InvalidRequestState("malformed")
    if len(raw) < _MIN_SIZE:
        raise InvalidRequestState("malformed")
    return raw


def _inflate(body: bytes, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes: a small token must not expand without bound."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(
            body, limit + 1
        )  # one byte more tells "too large" from "exactly the limit"
    except zlib.error as exc:
        raise InvalidRequestState("malformed") from exc
    if len(out) > limit:
        raise InvalidRequestState("too_large")
    if not inflater.eof or inflater.unused_data:
        raise InvalidRequestState("malformed")
    return out


def unseal(token: object, *, principal: str, binding: str) -> dict[str, Any]:
    """Verify and decrypt a ``requestState`` made by :func:`seal` for this principal and request.

    Raise :class:`InvalidRequestState` for anything else, whatever ``token`` is: it came
    from the client, so nothing in it is trusted before the tag verifies.
    """
    limit = mcp_settings.max_request_state_bytes
    raw = _decode(token, limit)
    version, key_id = _HEADER.unpack_from(raw)
    if version != VERSION:
        raise InvalidRequestState("malformed")
    candidates = [
        k for k in _keys() if k.key_id == key_id
    ]  # more than one only on a 32-bit id collision
    if not candidates:
        raise InvalidRequestState(
            "foreign",
            "Invalid requestState: sealed with a key this server does not have (rotated out?).",
        )
    header = raw[: _HEADER.size]
    nonce = raw[_HEADER.size : _HEADER.size + _NONCE_SIZE]
    sealed = raw[_HEADER.size + _NONCE_SIZE :]
    associated = _associated_data(header, principal, binding)
    for key in candidates:
        try:
            plain = key.aead.decrypt(nonce, sealed, associated)
            break
        except InvalidTag:
            continue
    else:
        raise InvalidRequestState("foreign")
    # Authentic from here on: only this server could have written what follows.
    expires_ms, flags = _INNER.unpack_from(plain)
    if _now() * 1000 >= expires_ms:
        raise InvalidRequestState("expired")
    body = plain[_INNER.size :]
    if flags & _FLAG_ZLIB:
        body = _inflate(body, limit)
    if len(body) > limit:
        raise InvalidRequestState("too_large")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestState("malformed") from exc
    if not isinstance(payload, dict):
        raise InvalidRequestState("malformed")
    return payload
