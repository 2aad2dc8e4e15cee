"""Hypothesis strategies for the inputs of the JWT parsers (tests/auth/test_fuzz_*.py): bearer
strings, JOSE headers and claims of every wrong shape, JSON written as an attacker or a broken
identity provider would write it, JWK sets and issuer metadata; and the keys that sign them.

The tokens are built by hand here (:func:`compact`), not by PyJWT: it refuses to sign much of
what a forger sends (a ``kid`` that is not a string, a payload that is not an object, integers
beyond 64 bits, ``NaN``).
"""

from __future__ import annotations

import base64
import functools
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import strategies as st

from mcp_django.auth.jwks import MAX_DOCUMENT_BYTES
from tests.auth.test_external import private_key
from tests.protocol.strategies import json_values

#: The identity provider every fuzzed token names; its keys come from a fetch the tests fake.
IDP = "https://idp.example.com"
#: The MCP endpoint, and the site's own authorization server (an ID-JAG's audience).
RESOURCE = "https://mcp.example.com/mcp"
AUTHORIZATION_SERVER = "https://mcp.example.com"
#: Where the provider's keys are (entries name it, so no discovery).
JWKS_URI = IDP + "/keys"

#: The signing keys: the provider publishes k1 (RSA) and e1 (EC), not k2.
ALGORITHM = {"k1": "RS256", "e1": "ES256", "k2": "RS256"}
PUBLISHED = ("k1", "e1")


def signing_key(kid: str) -> Any:
    # tests/auth/test_external.py's keys, made once per process (RSA keys take a while).
    return private_key(kid, "ec" if ALGORITHM[kid].startswith("ES") else "rsa")


def public_jwk(kid: str) -> dict[str, Any]:
    public = jwt.get_algorithm_by_name(ALGORITHM[kid]).to_jwk(
        signing_key(kid).public_key(), as_dict=True
    )
    return {**public, "kid": kid, "use": "sig"}


def private_jwk(kid: str) -> dict[str, Any]:
    """The key with its private part: what a provider that leaked it would publish."""
    private = jwt.get_algorithm_by_name(ALGORITHM[kid]).to_jwk(signing_key(kid), as_dict=True)
    return {**private, "kid": kid, "use": "sig"}


def published_keys() -> dict[str, Any]:
    return {"keys": [public_jwk(kid) for kid in PUBLISHED]}


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def dumps(value: Any) -> bytes:
    """JSON as Python writes it: ``NaN``, ``Infinity`` and integers of any size included, all
    of which PyJWT's ``json.loads`` reads back."""
    return json.dumps(value, ensure_ascii=False).encode()


@dataclass(frozen=True)
class Now:
    """A time claim ``offset`` seconds from when the token is built (:func:`fill`)."""

    offset: int


@dataclass(frozen=True)
class Unique:
    """A ``jti`` no other token has (:func:`fill`)."""


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


#: An override that removes the field.
ABSENT: Any = _Absent()


def fill(value: Any) -> Any:
    """``value`` with every :class:`Now` turned into seconds since the epoch, every
    :class:`Unique` into a fresh id."""
    if isinstance(value, Now):
        return int(time.time()) + value.offset
    if isinstance(value, Unique):
        return uuid.uuid4().hex
    if isinstance(value, list):
        return [fill(item) for item in value]
    if isinstance(value, dict):
        return {key: fill(item) for key, item in value.items()}
    return value


def apply(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it (:data:`ABSENT` removes a field), filled in."""
    merged = {**base, **overrides}
    return fill({key: value for key, value in merged.items() if value is not ABSENT})


def compact(header: Any, claims: Any, key: Any = None, algorithm: str = "") -> str:
    """A compact JWS of any ``header`` and ``claims`` (any JSON, object or not), signed with
    ``key`` by ``algorithm`` whatever the header says, or with an empty signature."""
    signing_input = b64url(dumps(header)) + "." + b64url(dumps(claims))
    signature = b""
    if key is not None:
        signer = jwt.get_algorithm_by_name(algorithm)
        signature = signer.sign(signing_input.encode(), signer.prepare_key(key))
    return signing_input + "." + b64url(signature)


# -- values of the wrong shape -------------------------------------------------------------------

#: Numbers no clock holds: beyond 64 bits, beyond datetime's years, not finite.
odd_numbers = st.sampled_from(
    [
        2**63,
        2**64 + 1,
        10**30,
        -(10**30),
        253402300800,  # the year 10000
        1e300,
        -1e300,
        float("inf"),
        float("-inf"),
        float("nan"),
        0,
        -1,
        True,
    ]
)
#: Strings a URL parser chokes on, or reads as something else than a glance suggests.
broken_urls = st.sampled_from(
    [
        "https://[",
        "http://[::1",
        "https://[::1]:99999/",
        "https://[mcp.example.com]/mcp",
        "https://mcp.example.com:99999/mcp",
        "https://mcp.example.com:-1/mcp",
        "https://user@mcp.example.com/mcp",
        "https://mcp.example.com\u3002com/mcp",
        "https://mcp.ex\u2100ample.com/mcp",
        "//mcp.example.com/mcp",
        "mcp.example.com/mcp",
    ]
)
#: Strings that break header syntax or naive number parsing, or are merely empty.
odd_strings = broken_urls | st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "\u2028",
        'x", error="forged',
        "\u4e2d\u6587",
        "\U0001f600",
        "9999999999",
        "1e30",
        "NaN",
    ]
)
#: Anything a JSON document can hold, and more of the above.
wild = json_values(10) | odd_numbers | odd_strings | st.text(max_size=40)


def deep(depth: int, inner: str = "1") -> str:
    """``depth`` nested JSON arrays around ``inner``, as text."""
    return "[" * depth + inner + "]" * depth


# -- JOSE headers and claims -----------------------------------------------------------------------

algorithms = st.sampled_from(
    ["RS256", "ES256", "RS512", "PS256", "EdDSA", "HS256", "none", "None", "NONE", ""]
)
token_types = st.sampled_from(
    [
        "at+jwt",
        "AT+JWT",
        "application/at+jwt",
        "jwt",
        "JWT",
        "oauth-id-jag+jwt",
        "application/oauth-id-jag+jwt",
        "OAUTH-ID-JAG+JWT",
        "logout+jwt",
    ]
)
key_ids = st.sampled_from(["k1", "e1", "k2", "unknown", ""])


def overrides(fields: Mapping[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """One to three of ``fields`` changed (or removed, :data:`ABSENT`), sometimes with an unknown
    field beside them: few enough that the other checks still pass and each change is what a
    refusal has to be about."""

    @st.composite
    def changes(draw: st.DrawFn) -> dict[str, Any]:
        count = draw(st.sampled_from([1, 1, 1, 2, 3]))
        names = draw(
            st.lists(st.sampled_from(sorted(fields)), min_size=count, max_size=count, unique=True)
        )
        changed = {
            name: ABSENT if draw(st.integers(0, 7)) == 0 else draw(fields[name]) for name in names
        }
        if draw(st.integers(0, 3)) == 0:
            changed = {**draw(st.dictionaries(st.text(max_size=8), wild, max_size=1)), **changed}
        return changed

    return changes()


header_overrides = overrides(
    {
        "alg": algorithms | wild,
        "typ": token_types | wild,
        "kid": key_ids | wild,
        "crit": st.sampled_from([["b64"], ["exp"], [], "b64"]) | wild,
        "b64": st.booleans() | wild,
        "jku": st.just("https://evil.example.com/jwks") | wild,
        "jwk": wild,
        "cty": st.just("JWT") | wild,
        "zip": st.just("DEF") | wild,
    }
)

times = (
    st.integers(-(10**6), 10**6).map(Now)
    | st.sampled_from([Now(-3600), Now(-30), Now(30), Now(3600)])
    | odd_numbers
    | st.integers(-(10**6), 10**6).map(lambda n: str(int(time.time()) + n))
    | wild
)
issuers = st.sampled_from([IDP, IDP + "/", IDP.upper(), "https://other-idp.example.com"]) | wild
urls = (
    st.sampled_from(
        [
            RESOURCE,
            RESOURCE + "/",
            "HTTPS://MCP.EXAMPLE.COM/mcp",
            "https://mcp.example.com:443/mcp",
            AUTHORIZATION_SERVER,
            AUTHORIZATION_SERVER + "/",
            "https://mcp.example.com/other",
            "https://auth.other.example.com",
        ]
    )
    | broken_urls
)
audiences = (
    urls
    | st.lists(urls | wild, max_size=3)
    | st.dictionaries(urls, wild, max_size=2)
    | odd_numbers
    | wild
)
subjects = st.sampled_from(["alice", "bob", "Alice", "alice\x00"]) | wild
scopes = st.sampled_from(["notes:read", "notes:read notes:write", "admin", ""]) | wild
client_ids = st.sampled_from(["managed-connector", "someone-else", ""]) | wild

claim_overrides = overrides(
    {
        "iss": issuers,
        "aud": audiences,
        "exp": times,
        "nbf": times,
        "iat": times,
        "sub": subjects,
        "scope": scopes,
        "scp": scopes | st.lists(scopes, max_size=3),
        "jti": st.uuids().map(lambda u: u.hex) | wild,
        "client_id": client_ids,
        "resource": audiences,
    }
)


@st.composite
def token_changes(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """What to change in a token a trusted key signs: some claims (most often), some header
    fields, both, or nothing; now and then claims that are not an object at all (third item,
    None otherwise)."""
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return {}, {}, draw(wild)
    header = draw(header_overrides) if choice in (1, 2, 3) else {}
    claims = draw(claim_overrides) if choice in (3, 4, 5, 6, 7, 8) else {}
    return header, claims, None


@st.composite
def raw_segments(draw: st.DrawFn) -> str:
    """One base64url segment that is not the encoding of a JSON object: any bytes, text that is
    almost JSON, arrays nested past the parser's recursion limit."""
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return b64url(draw(st.binary(max_size=120)))
    if choice == 1:
        return b64url(dumps(draw(json_values(10))))
    if choice == 2:
        depth = draw(st.integers(0, 5000))
        return b64url(('{"iss": "' + IDP + '", "x": ' + deep(depth) + "}").encode())
    return draw(st.text(alphabet=B64URL + "=+/. ", max_size=120))


@st.composite
def forged_tokens(draw: st.DrawFn, typ: str = "at+jwt") -> str:
    """Bearer strings no trusted key signed: any text, base64url segments joined by dots,
    well-formed JWTs naming the trusted issuer with a made-up (or no) signature, and tokens
    longer than any parser reads."""
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return draw(st.text(max_size=200))
    if choice == 1:
        return ".".join(draw(st.lists(raw_segments(), min_size=1, max_size=5)))
    if choice == 2:
        # The trusted issuer's name gets a token past the issuer check to the algorithm, key
        # and signature checks.
        header = apply({"alg": "RS256", "typ": typ, "kid": "k1"}, draw(header_overrides))
        claims = apply({"iss": IDP}, draw(claim_overrides))
        token = compact(header, claims)
        return token + draw(st.sampled_from(["", "AAAA", b64url(draw(st.binary(max_size=300)))]))
    if choice == 3:
        header = draw(json_values(6))
        claims = draw(json_values(6))
        return compact(header, claims) + b64url(draw(st.binary(max_size=64)))
    if choice == 4:
        header_text = draw(raw_segments())
        return header_text + "." + b64url(dumps({"iss": IDP})) + "." + draw(raw_segments())
    # Around the 16 KiB the parsers read at most.
    length = draw(st.integers(16 * 1024 - 2, 16 * 1024 + 64))
    head = compact({"alg": "RS256", "typ": typ}, {"iss": IDP})
    return head + "A" * max(0, length - len(head))


# -- documents an issuer serves -----------------------------------------------------------------

jwk_fields = st.fixed_dictionaries(
    {},
    optional={
        "kty": st.sampled_from(["RSA", "EC", "OKP", "oct", "rsa", ""]) | wild,
        "kid": key_ids | wild,
        "use": st.sampled_from(["sig", "enc", ""]) | wild,
        "alg": algorithms | wild,
        "n": st.binary(max_size=300).map(b64url) | wild,
        "e": st.sampled_from(["AQAB", "Aw", "AA", ""]) | wild,
        "crv": st.sampled_from(["P-256", "P-384", "P-521", "secp256k1", "Ed25519", "X25519"])
        | wild,
        "x": st.binary(max_size=70).map(b64url) | wild,
        "y": st.binary(max_size=70).map(b64url) | wild,
        "d": st.binary(max_size=70).map(b64url) | wild,
        "k": st.binary(max_size=40).map(b64url) | wild,
        "oth": wild,
    },
)


@functools.cache
def foreign_keys() -> list[dict[str, Any]]:
    """Real public keys that are not the signer's: other curves, a short RSA key, another key of
    the signer's own type. A provider publishes such keys beside the one in use."""
    keys: list[tuple[type[Any], Any]] = [
        (jwt.algorithms.ECAlgorithm, ec.generate_private_key(curve))
        for curve in (ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1(), ec.SECP256K1())
    ]
    keys.append((jwt.algorithms.OKPAlgorithm, ed25519.Ed25519PrivateKey.generate()))
    keys.append((jwt.algorithms.RSAAlgorithm, rsa.generate_private_key(65537, 1024)))
    keys.append((jwt.algorithms.RSAAlgorithm, signing_key("k2")))
    return [algorithm.to_jwk(key.public_key(), as_dict=True) for algorithm, key in keys]


foreign_jwks = st.integers(0, 6).map(lambda index: dict(foreign_keys()[index]))
jwk_sets = (
    st.fixed_dictionaries({"keys": st.lists(foreign_jwks | jwk_fields | wild, max_size=4)})
    | st.fixed_dictionaries({"keys": wild})
    | st.dictionaries(st.text(max_size=8), wild, max_size=3)
)


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """What a metadata or JWKS URL may answer: JSON of any shape, JSON in another encoding or
    with a byte-order mark, nesting past the parser's limit, bytes that are not JSON, and
    bodies around :data:`~mcp_django.auth.jwks.MAX_DOCUMENT_BYTES`."""
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return dumps(draw(jwk_sets | json_values(10)))
    if choice == 1:
        return draw(st.binary(max_size=300))
    if choice == 2:
        depth = draw(st.integers(0, 200_000))
        return ('{"keys": ' + deep(depth, "{}") + "}").encode()
    if choice == 3:
        encoding = draw(st.sampled_from(["utf-8-sig", "utf-16", "utf-16-be", "utf-32"]))
        return json.dumps(draw(jwk_sets)).encode(encoding)
    if choice == 4:
        return b'{"keys": [' + draw(st.binary(max_size=60)) + b"]}"
    if choice == 5:
        # Valid JSON padded to just under, at, or just over the cap.
        size = draw(st.integers(MAX_DOCUMENT_BYTES - 2, MAX_DOCUMENT_BYTES + 2))
        return b'{"keys": []' + b" " * (size - 12) + b"}"
    return dumps(draw(st.text(max_size=50)))
