"""The signing keys of trusted external issuers: discovered from their metadata, cached per issuer.

An issuer's keys come from its JWKS document, found through ``jwks_uri`` in its OpenID Connect
discovery document (``/.well-known/openid-configuration``), else in its RFC 8414 metadata
(``/.well-known/oauth-authorization-server``), unless the issuer's configuration names
``jwks_uri`` itself. Keys are kept for :data:`KEYS_TTL` seconds. A token signed with a key id
the cache does not hold makes it fetch the keys again (the issuer rotated them), but at most
once every :data:`REFRESH_FLOOR` seconds per issuer: a flood of tokens with made-up key ids
costs the identity provider one request per floor, not one per token.

Everything here is synchronous and thread-safe; async code calls :meth:`KeyStore.asigning_keys`.
Nothing here knows about MCP requests, so a grant on the site's own authorization server
(RFC 7523 ``jwt-bearer`` with an ID-JAG assertion) can verify its assertions with the same
:data:`key_store` and :class:`TrustedIssuer` entries.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from asgiref.sync import sync_to_async

logger = logging.getLogger(__name__)

#: Seconds the keys of an issuer are kept before they are fetched again.
KEYS_TTL = 3600.0
#: Least seconds between two fetches of an issuer's keys (metadata and JWKS).
REFRESH_FLOOR = 30.0
#: Seconds to connect to, and to read from, an issuer (each fetch).
FETCH_TIMEOUT = 5.0
#: Largest metadata or JWKS document read (bytes); a larger one is refused unread past it.
MAX_DOCUMENT_BYTES = 256 * 1024

#: Signature algorithms an issuer may use: asymmetric ones only. ``none`` is never accepted, and
#: no HMAC algorithm either: its secret would be the issuer's public key, which anyone can read.
ASYMMETRIC_ALGORITHMS = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES384",
        "ES512",
        "EdDSA",
    }
)
#: What an issuer may use unless its entry says otherwise: the RS256, PS256 and ES256 families
#: (EdDSA only where an entry lists it).
DEFAULT_ALGORITHMS = tuple(sorted(ASYMMETRIC_ALGORITHMS - {"EdDSA"}))


class KeyDiscoveryError(Exception):
    """An issuer's metadata or keys could not be fetched, or did not make sense."""


@dataclass(frozen=True)
class TrustedIssuer:
    """One entry of ``MCP_DJANGO["TRUSTED_ISSUERS"]``, with its defaults filled in.

    ``audience`` None means the MCP endpoint's canonical resource URL (``RESOURCE_URL``).
    """

    issuer: str
    audience: str | None = None
    jwks_uri: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    user_claim: str = "sub"
    user_field: str = "username"
    create_users: bool = False
    scope_prefix: str = ""
    #: Any other keys of the entry, for a project's own user hook.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_setting(cls, entry: Mapping[str, Any]) -> TrustedIssuer:
        """Build one from a settings entry (system checks E070 to E078 report bad ones)."""
        known = {
            "issuer",
            "audience",
            "jwks_uri",
            "algorithms",
            "user_claim",
            "user_field",
            "create_users",
            "scope_prefix",
        }
        algorithms = entry.get("algorithms") or DEFAULT_ALGORITHMS
        return cls(
            issuer=str(entry["issuer"]),
            audience=entry.get("audience") or None,
            jwks_uri=entry.get("jwks_uri") or None,
            # Only asymmetric algorithms, whatever the entry says (E076 reports the rest).
            algorithms=tuple(a for a in algorithms if a in ASYMMETRIC_ALGORITHMS),
            user_claim=str(entry.get("user_claim") or "sub"),
            user_field=str(entry.get("user_field") or "username"),
            create_users=bool(entry.get("create_users", False)),
            scope_prefix=str(entry.get("scope_prefix") or ""),
            extra={k: v for k, v in entry.items() if k not in known},
        )


def trusted_issuers(entries: Any) -> list[TrustedIssuer]:
    """The usable entries of a ``TRUSTED_ISSUERS`` value (those without ``issuer`` are left
    out: E071 reports them)."""
    if not isinstance(entries, (list, tuple)):
        return []
    return [
        TrustedIssuer.from_setting(entry)
        for entry in entries
        if isinstance(entry, Mapping) and isinstance(entry.get("issuer"), str) and entry["issuer"]
    ]


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is a loopback address or ``localhost``."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fetchable(url: str) -> bool:
    """Whether keys may be fetched from ``url``: https, or http on loopback (tests, development)."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        # "http://[::1": a metadata document's jwks_uri is whatever the issuer wrote.
        return False
    return scheme == "https" or (scheme == "http" and is_loopback(url))


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: the metadata's own URLs say where the keys are."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def fetch_json(url: str) -> dict[str, Any]:
    """GET ``url`` and parse its JSON object, within :data:`FETCH_TIMEOUT` and
    :data:`MAX_DOCUMENT_BYTES`; raise :class:`KeyDiscoveryError` on any failure."""
    if not fetchable(url):
        raise KeyDiscoveryError(f"{url!r} is not an https URL (http only on loopback)")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        # The standard library's client: the package needs no HTTP client of its own for this.
        with _opener.open(request, timeout=FETCH_TIMEOUT) as response:
            body = response.read(MAX_DOCUMENT_BYTES + 1)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        # URLError, HTTPError, timeouts, a bad URL; and an answer that is not HTTP, or a
        # chunked body cut short (BadStatusLine, IncompleteRead: http.client's own).
        raise KeyDiscoveryError(f"{url} could not be fetched: {exc}") from exc
    if len(body) > MAX_DOCUMENT_BYTES:
        raise KeyDiscoveryError(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        # RecursionError: arrays nested a few thousand deep fit well within the size cap.
        raise KeyDiscoveryError(f"{url} did not send JSON") from exc
    if not isinstance(document, dict):
        raise KeyDiscoveryError(f"{url} did not send a JSON object")
    return document


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect discovery (the well-known suffix
    appended to the issuer), then RFC 8414 (the well-known prefix inserted before its path)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [
        issuer.rstrip("/") + "/.well-known/openid-configuration",
        urlunsplit(
            (parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + path, "", "")
        ),
    ]


def discover_jwks_uri(issuer: str, fetch: Callable[[str], dict[str, Any]] = fetch_json) -> str:
    """The ``jwks_uri`` of ``issuer``'s metadata, whose own ``issuer`` must be the same
    (OpenID Connect Discovery section 4.3, RFC 8414 section 3.3)."""
    failures = []
    for url in metadata_urls(issuer):
        try:
            metadata = fetch(url)
        except KeyDiscoveryError as exc:
            failures.append(str(exc))
            continue
        if metadata.get("issuer") != issuer:
            failures.append(f"{url} names the issuer {metadata.get('issuer')!r}")
            continue
        jwks_uri = metadata.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri:
            failures.append(f"{url} has no jwks_uri")
            continue
        return jwks_uri
    raise KeyDiscoveryError(f"no metadata for the issuer {issuer}: " + "; ".join(failures))


@dataclass
class _Keys:
    """What the store holds for one issuer."""

    keys: list[dict[str, Any]] = field(default_factory=list)
    #: When the keys were fetched (monotonic seconds), and when a fetch was last tried.
    fetched_at: float | None = None
    tried_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class KeyStore:
    """The JWKS of each issuer, kept for ``ttl`` seconds, fetched again on an unknown key id
    no more often than every ``refresh_floor`` seconds."""

    def __init__(
        self,
        *,
        ttl: float = KEYS_TTL,
        refresh_floor: float = REFRESH_FLOOR,
        fetch: Callable[[str], dict[str, Any]] = fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.refresh_floor = refresh_floor
        self.fetch = fetch
        self.clock = clock
        #: How many times each issuer's keys were fetched (metadata and JWKS as one).
        self.fetches: dict[str, int] = {}
        self._issuers: dict[str, _Keys] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every issuer's keys."""
        with self._lock:
            self._issuers.clear()
            self.fetches.clear()

    def _entry(self, issuer: str) -> _Keys:
        with self._lock:
            return self._issuers.setdefault(issuer, _Keys())

    def _refresh(self, issuer: TrustedIssuer, entry: _Keys) -> None:
        """Fetch the keys once (the caller holds the entry's lock and checked the floor)."""
        entry.tried_at = self.clock()
        self.fetches[issuer.issuer] = self.fetches.get(issuer.issuer, 0) + 1
        jwks_uri = issuer.jwks_uri or discover_jwks_uri(issuer.issuer, self.fetch)
        document = self.fetch(jwks_uri)
        keys = document.get("keys")
        if not isinstance(keys, list):
            raise KeyDiscoveryError(f"{jwks_uri} is not a JWK set")
        signing = [key for key in keys if isinstance(key, dict) and key.get("use") != "enc"]
        # A key published with its private part ("d") is a leaked one: whatever it signed
        # could be anyone's (and PyJWT fails on an RSA private key with AttributeError).
        if any("d" in key for key in signing):
            logger.warning("The JWKS of %s publishes a private key; it is ignored.", issuer.issuer)
        entry.keys = [key for key in signing if "d" not in key]
        entry.fetched_at = entry.tried_at

    def signing_keys(self, issuer: TrustedIssuer, kid: str | None) -> list[dict[str, Any]]:
        """The JWKs of ``issuer`` a token with key id ``kid`` may be signed with (every key
        when the token names none); empty when there is none, even after a refresh."""
        entry = self._entry(issuer.issuer)
        with entry.lock:
            now = self.clock()
            stale = entry.fetched_at is None or now - entry.fetched_at >= self.ttl
            found = _matching(entry.keys, kid)
            floor_passed = entry.tried_at is None or now - entry.tried_at >= self.refresh_floor
            if (stale or not found) and floor_passed:
                try:
                    self._refresh(issuer, entry)
                except KeyDiscoveryError as exc:
                    # Keep the keys we had: a brief outage of the IdP must not refuse every token.
                    logger.warning("Could not fetch the keys of %s: %s", issuer.issuer, exc)
                found = _matching(entry.keys, kid)
            return found

    async def asigning_keys(self, issuer: TrustedIssuer, kid: str | None) -> list[dict[str, Any]]:
        """:meth:`signing_keys` from async code, in a worker thread (it may fetch)."""
        return await sync_to_async(self.signing_keys, thread_sensitive=False)(issuer, kid)


def _matching(keys: Sequence[dict[str, Any]], kid: str | None) -> list[dict[str, Any]]:
    if kid is None:
        return list(keys)
    return [key for key in keys if key.get("kid") == kid]


#: The process's key store, shared by every policy and grant that verifies issuers' tokens.
key_store = KeyStore()
