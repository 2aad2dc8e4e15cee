"""JWTs a trusted issuer signed: the checks an external identity provider's access token
(:mod:`mcp_django.auth.external`) and an ID-JAG (:mod:`mcp_django.auth.id_jag`) share.

Before anything is trusted: the size, the ``typ`` the caller expects, an issuer of the caller's
list, an algorithm its entry allows (never ``none``, never HMAC). Then the signature, with the
keys the issuer publishes (:data:`~mcp_django.auth.jwks.key_store`), the claims the caller
requires, ``iss``, and ``exp``, ``nbf`` and ``iat`` within ``JWT_LEEWAY``. The audience is left
to the caller, which knows what it must name. Needs PyJWT (the ``jwt`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jwt

from ..conf import mcp_settings
from .jwks import TrustedIssuer, key_store

#: The registered algorithm names a refusal may quote. Any other ``alg`` is whatever the client
#: wrote (kilobytes of it, characters no HTTP header can carry) and the message goes into the
#: ``WWW-Authenticate`` challenge, which the ASGI transport encodes as latin-1.
_NAMED_ALGORITHMS = frozenset(jwt.algorithms.get_default_algorithms())


@dataclass(frozen=True)
class Kind:
    """What a caller verifies: ``noun`` names it in the messages ("access token")."""

    noun: str
    #: Longest JWT read (characters); a larger one is refused before it is decoded.
    max_length: int
    #: Whether the ``typ`` header (None when absent) is this kind's.
    accepts_type: Callable[[Any], bool]
    #: The message for a JWT of another type.
    wrong_type: str
    #: The claims that must be present.
    require: Sequence[str]


def verify_signed(
    token: str, issuers: list[TrustedIssuer], kind: Kind, refused: type[Exception]
) -> tuple[dict[str, Any], TrustedIssuer]:
    """The claims of ``token`` and the issuer of ``issuers`` that signed it; raise ``refused``
    with a message that quotes nothing of the token otherwise. Synchronous: it may fetch the
    issuer's keys."""
    noun = kind.noun
    if len(token) > kind.max_length:
        raise refused(f"The {noun} is too long.")
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise refused(f"The {noun} is not a JWT.") from None
    if not kind.accepts_type(header.get("typ")):
        raise refused(kind.wrong_type)
    issuer = next((i for i in issuers if i.issuer == unverified.get("iss")), None)
    if issuer is None:
        raise refused(f"The {noun} was not issued by a trusted issuer.")
    algorithm = header.get("alg")
    if algorithm not in issuer.algorithms:
        named = isinstance(algorithm, str) and algorithm in _NAMED_ALGORITHMS
        shown = f" {algorithm!r}" if named else ""
        raise refused(f"The {noun}'s algorithm{shown} is not accepted.")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise refused(f"The {noun}'s key id is not a string.")
    keys = key_store.signing_keys(issuer, kid)
    if not keys:
        raise refused(f"The {noun} is signed with a key the issuer does not publish.")
    for jwk in keys:
        try:
            key = jwt.PyJWK(jwk, algorithm)
        except jwt.PyJWTError:
            continue  # a key of another type (an EC key for an RS256 token)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                issuer=issuer.issuer,
                leeway=mcp_settings.jwt_leeway,
                # Callers compare the audience themselves, as canonical URIs.
                options={"require": list(kind.require), "verify_aud": False},
            )
        except (jwt.InvalidSignatureError, jwt.InvalidKeyError):
            # InvalidKeyError: an EC key on another curve (a P-384 key for an ES256 token) is
            # only found out here; the next key may be the one.
            continue
        except jwt.ExpiredSignatureError:
            raise refused(f"The {noun} has expired.") from None
        except jwt.ImmatureSignatureError:
            raise refused(f"The {noun} is not valid yet.") from None
        except jwt.MissingRequiredClaimError as exc:
            raise refused(f"The {noun} has no {exc.claim} claim.") from None
        except jwt.PyJWTError:
            raise refused(f"The {noun}'s claims are malformed.") from None
        return claims, issuer
    raise refused(f"The {noun}'s signature does not verify.")
