"""Property tests of what mcp_django.auth.jwks reads from an issuer: whatever its metadata and
JWKS URLs answer, :func:`fetch_json` returns the JSON object or raises
:class:`KeyDiscoveryError`, never reads past :data:`MAX_DOCUMENT_BYTES`, and the key store hands
out signing keys or none, never an exception; a key set of junk beside the real key neither
breaks the verification of a token nor lets one through that the real key did not sign.

The documents are served over HTTP by tests/auth/test_external.py's loopback provider, its
answers replaced by the fuzzed bytes.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_django.auth import signed
from mcp_django.auth.external import ACCESS_TOKEN, InvalidToken
from mcp_django.auth.jwks import (
    MAX_DOCUMENT_BYTES,
    KeyDiscoveryError,
    KeyStore,
    TrustedIssuer,
    fetch_json,
)
from mcp_django.auth.signed import verify_signed
from tests.auth import strategies as s
from tests.auth.test_external import Clock, Provider
from tests.fuzzing import examples

FUZZ = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Served(Provider):
    """The loopback provider, answering each path with the bytes a test put there (404 for the
    others)."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: dict[str, bytes] = {}

    def document(self, path: str) -> bytes | None:
        return self.bodies.get(path)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with Served() as provider:
        yield provider


def parsed(body: bytes) -> dict[str, Any] | None:
    """What fetch_json must return for ``body``: its JSON object, or None for a refusal."""
    if len(body) > MAX_DOCUMENT_BYTES:
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


@FUZZ
@given(body=s.documents())
@example(body=b"[" * 5_000)
@example(body=b'{"keys": ' + b"[" * 5_000 + b"]" * 5_000 + b"}")
@example(body=b'{"keys": []' + b" " * (MAX_DOCUMENT_BYTES - 12) + b"}")
@example(body=b'{"keys": []' + b" " * (MAX_DOCUMENT_BYTES - 11) + b"}")
@example(body=b"\xff\xfe{\x00}\x00")
def test_a_fetched_document_is_its_json_object_or_a_key_discovery_error(
    served: Served, body: bytes
) -> None:
    served.bodies["/doc"] = body
    # The provider answers an empty body with "{}" (test_a_broken_http_answer sends empty ones).
    expected = parsed(body or b"{}")

    if expected is None:
        with pytest.raises(KeyDiscoveryError):
            fetch_json(served.issuer.removesuffix("/tenant") + "/doc")
    else:
        document = fetch_json(served.issuer.removesuffix("/tenant") + "/doc")
        # Compared as JSON: NaN is not equal to itself.
        assert json.dumps(document, sort_keys=True) == json.dumps(expected, sort_keys=True)


# -- raw HTTP answers ------------------------------------------------------------------------------


class RawServer:
    """A TCP server on loopback that reads a request and answers whatever bytes the test set,
    then closes the connection."""

    def __init__(self) -> None:
        self.answer = b""
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/doc"
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return  # closed
            with connection:
                connection.settimeout(5)
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                connection.sendall(self.answer)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


status_lines = st.sampled_from(
    [
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.0 200 OK\r\n",
        b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\n",
        b"HTTP/1.1 500 Oops\r\n",
        b"HTTP/1.1 99999 Odd\r\n",
        b"HTTP/9.9 200 OK\r\n",
        b"ICY 200 OK\r\n",
        b"garbage\r\n",
        b"",
    ]
)
header_lines = st.lists(
    st.sampled_from(
        [
            b"Content-Type: application/json\r\n",
            b"Content-Length: 2\r\n",
            b"Content-Length: 999999\r\n",
            b"Content-Length: -1\r\n",
            b"Content-Length: abc\r\n",
            b"Transfer-Encoding: chunked\r\n",
            b"Content-Encoding: gzip\r\n",
            b"X-Long: " + b"a" * 70_000 + b"\r\n",
            b"no colon here\r\n",
        ]
    )
    | st.binary(max_size=40).map(lambda b: b + b"\r\n"),
    max_size=4,
)
bodies = st.sampled_from([b"{}", b'{"keys": []}', b"2\r\n{}\r\n0\r\n\r\n", b"zz\r\n{}", b""]) | (
    st.binary(max_size=80)
)


@FUZZ
@given(status=status_lines, headers=header_lines, body=bodies)
@example(status=b"garbage\r\n", headers=[], body=b"")
@example(
    status=b"HTTP/1.1 200 OK\r\n", headers=[b"Transfer-Encoding: chunked\r\n"], body=b"5\r\n{}"
)
def test_a_broken_http_answer_is_a_key_discovery_error(
    raw: RawServer, status: bytes, headers: list[bytes], body: bytes
) -> None:
    raw.answer = status + b"".join(headers) + b"\r\n" + body

    try:
        document = fetch_json(raw.url)
    except KeyDiscoveryError:
        return
    assert isinstance(document, dict)


# -- the key store, over discovery ---------------------------------------------------------------

#: Where a metadata document may send the store for the keys: the served set, a path with nothing,
#: closed ports and URLs no parser takes, all on loopback (nothing here may leave the machine).
jwks_uris = st.sampled_from(
    [
        "{origin}/keys",
        "{origin}/missing",
        "{origin}/metadata",
        "http://127.0.0.1:1/keys",
        "http://[",
        "http://[::1",
        "http://127.0.0.1:99999/keys",
        "http://127.0.0.1:-1/keys",
        "http://user@127.0.0.1:1/keys",
        "http://127.0.0.1\u3002com/keys",
        "http://[127.0.0.1]/keys",
        "ftp://127.0.0.1/keys",
        "file:///etc/passwd",
        "",
    ]
) | s.wild.filter(lambda value: not (isinstance(value, str) and "//" in value))

metadata_documents = (
    st.fixed_dictionaries(
        {},
        optional={
            "issuer": st.sampled_from(["{issuer}", "{issuer}/", "https://other.example.com"])
            | s.wild,
            "jwks_uri": jwks_uris,
        },
    ).map(lambda document: json.dumps(document).encode())
    | s.documents()
)


def placed(body: bytes, provider: Served) -> bytes:
    origin = provider.issuer.removesuffix("/tenant")
    return body.replace(b"{issuer}", provider.issuer.encode()).replace(b"{origin}", origin.encode())


@FUZZ
@given(
    oidc=metadata_documents,
    rfc8414=metadata_documents,
    jwks=s.jwk_sets.map(lambda document: json.dumps(document).encode()) | s.documents(),
    kid=st.none() | s.key_ids,
)
@example(
    oidc=b'{"issuer": "{issuer}", "jwks_uri": "http://[::1"}', rfc8414=b"{}", jwks=b"{}", kid=None
)
@example(oidc=b"[" * 5_000, rfc8414=b"{}", jwks=b"{}", kid=None)
@example(
    oidc=b'{"issuer": "{issuer}", "jwks_uri": "{origin}/keys"}',
    rfc8414=b"{}",
    jwks=b'{"keys": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
    kid=None,
)
def test_the_key_store_gives_keys_or_none_whatever_the_issuer_serves(
    served: Served, oidc: bytes, rfc8414: bytes, jwks: bytes, kid: str | None
) -> None:
    served.bodies = {
        "/tenant/.well-known/openid-configuration": placed(oidc, served),
        "/.well-known/oauth-authorization-server/tenant": placed(rfc8414, served),
        "/keys": placed(jwks, served),
        "/metadata": placed(oidc, served),
    }
    store = KeyStore(clock=Clock())

    keys = store.signing_keys(TrustedIssuer(issuer=served.issuer), kid)

    assert isinstance(keys, list)
    for key in keys:
        assert isinstance(key, dict) and key.get("use") != "enc"
        assert kid is None or key.get("kid") == kid
    assert store.fetches[served.issuer] == 1


# -- junk keys beside the real one ---------------------------------------------------------------


@FUZZ
@given(
    junk=st.lists(s.foreign_jwks | s.jwk_fields | s.wild, max_size=4),
    real=st.sampled_from(["public", "public", "private", "absent"]),
    position=st.integers(0, 4),
    kid=st.sampled_from(["k1", "e1"]),
    named=st.booleans(),
)
@example(junk=[], real="private", position=0, kid="k1", named=True)
@example(junk=[s.foreign_keys()[1]], real="public", position=1, kid="e1", named=False)
# PyJWT warns of an RSA key shorter than 2048 bits (the suite makes warnings errors); a provider
# publishing one beside the key in use must not keep that key from verifying.
@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_junk_keys_neither_break_the_real_key_nor_stand_in_for_it(
    monkeypatch: pytest.MonkeyPatch,
    junk: list[Any],
    real: str,
    position: int,
    kid: str,
    named: bool,
) -> None:
    # The junk carries the real key's id, so each junk key is tried before or after it (every
    # key is, when the token names none).
    keys = [{**key, "kid": kid} if isinstance(key, dict) else key for key in junk]
    if real != "absent":
        keys.insert(position, s.public_jwk(kid) if real == "public" else s.private_jwk(kid))
    documents = {s.JWKS_URI: {"keys": keys}}
    monkeypatch.setattr(
        signed, "key_store", KeyStore(fetch=lambda url: documents[url], clock=Clock())
    )
    header = {"alg": s.ALGORITHM[kid], "typ": "at+jwt"}
    if named:
        header["kid"] = kid
    claims = s.fill({"iss": s.IDP, "aud": s.RESOURCE, "exp": s.Now(300)})
    token = s.compact(header, claims, s.signing_key(kid), s.ALGORITHM[kid])
    issuer = TrustedIssuer(issuer=s.IDP, jwks_uri=s.JWKS_URI)

    try:
        verified, _ = verify_signed(token, [issuer], ACCESS_TOKEN, InvalidToken)
    except InvalidToken:
        # A published private key is a leaked one: nothing it signed is trusted.
        assert real != "public"
    else:
        assert real == "public" and verified == claims
