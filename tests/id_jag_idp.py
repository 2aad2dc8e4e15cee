"""A test enterprise identity provider on loopback that mints ID-JAGs: OpenID Connect and RFC
8414 metadata and a JWKS served over HTTP, and an ES256 key it generated itself.

Used in-process (tests/auth/test_id_jag.py) and end to end (tests/e2e/test_id_jag.py): the
authorization server under test finds the keys as it would a real provider's, through the
metadata's ``jwks_uri``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from tests.loopback_json import LoopbackJSON

ID_JAG_TYPE = "oauth-id-jag+jwt"


class IdentityProvider:
    """The provider: ``with IdentityProvider() as idp: idp.mint(...)``."""

    def __init__(self, *, audience: str, resource: str, client_id: str, scope: str) -> None:
        #: Claims every assertion carries unless a test overrides them.
        self.audience = audience
        self.resource = resource
        self.client_id = client_id
        self.scope = scope
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.kid = "idp-key-1"
        self.served = LoopbackJSON(self.document_bytes)
        #: The paths asked for, in order (what the authorization server fetched).
        self.requests = self.served.requests
        self.issuer = self.served.origin

    def document_bytes(self, path: str) -> bytes | None:
        document = self.document(path)
        return None if document is None else json.dumps(document).encode()

    def document(self, path: str) -> dict[str, Any] | None:
        metadata = {
            "issuer": self.issuer,
            "jwks_uri": f"{self.issuer}/jwks",
            "token_endpoint": f"{self.issuer}/token",
            "grant_types_supported": ["urn:ietf:params:oauth:grant-type:token-exchange"],
            "identity_chaining_requested_token_types_supported": [
                "urn:ietf:params:oauth:token-type:id-jag"
            ],
        }
        if path in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
            return metadata
        if path == "/jwks":
            public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key()))
            return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "ES256"}]}
        return None

    def claims(self, **overrides: Any) -> dict[str, Any]:
        """An ID-JAG's claims (draft section 3.1); an override of None leaves the claim out."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "alice",
            "aud": self.audience,
            "resource": self.resource,
            "client_id": self.client_id,
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + 300,
            "scope": self.scope,
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def mint(self, *, typ: str = ID_JAG_TYPE, key: Any = None, **claims: Any) -> str:
        """A signed ID-JAG; ``key``: sign with another private key under the same key id."""
        return jwt.encode(
            self.claims(**claims),
            key or self.key,
            algorithm="ES256",
            headers={"typ": typ, "kid": self.kid},
        )

    def __enter__(self) -> IdentityProvider:
        self.served.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.served.stop()
