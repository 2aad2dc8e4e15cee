"""Protocol versions and the Streamable HTTP header rules, as pure functions.

Each check returns the value it validated or raises :class:`TransportError` with the HTTP status
the spec asks for; the transport only extracts headers and writes the answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Final
from urllib.parse import urlsplit

from .errors import TransportError

V2024_11_05: Final = "2024-11-05"
V2025_03_26: Final = "2025-03-26"
V2025_06_18: Final = "2025-06-18"
V2025_11_25: Final = "2025-11-25"

#: Handshake-era revisions served, newest first.
SUPPORTED_VERSIONS: Final[tuple[str, ...]] = (V2025_11_25, V2025_06_18, V2025_03_26, V2024_11_05)
LATEST_VERSION: Final = V2025_11_25
#: What a request without ``MCP-Protocol-Version`` is taken to speak (transports spec, 2025-06-18+).
DEFAULT_HEADER_VERSION: Final = V2025_03_26
#: The only revision that allowed JSON-RPC batch arrays in a POST body.
BATCH_VERSIONS: Final = frozenset({V2025_03_26})

JSON: Final = "application/json"
SSE: Final = "text/event-stream"

# Visible ASCII only (0x21-0x7E), as the transport spec requires of session ids.
_SESSION_ID_RE = re.compile(r"[\x21-\x7e]{1,128}")


def negotiate_version(requested: object) -> str:
    """Answer the client's version when we speak it, otherwise our latest (lifecycle spec)."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION


def supports_batches(version: str) -> bool:
    """Tell whether ``version`` allows JSON-RPC batch arrays."""
    return version in BATCH_VERSIONS


def check_protocol_version_header(value: str | None) -> str:
    """Return the revision a request speaks; 400 for an unsupported ``MCP-Protocol-Version``."""
    if value is None:
        return DEFAULT_HEADER_VERSION
    value = value.strip()
    if value not in SUPPORTED_VERSIONS:
        raise TransportError(
            HTTPStatus.BAD_REQUEST,
            f"Bad Request: unsupported MCP-Protocol-Version {value[:40]!r}; supported: "
            f"{', '.join(SUPPORTED_VERSIONS)}",
        )
    return value


def _accepted_types(accept: str | None) -> Mapping[str, float]:
    """Parse an Accept header into ``{media range: q}``; a missing header accepts everything.
    A client sends the same header on every request: the usual short ones are parsed once (so
    the mapping may be shared: read it, never change it), long ones, which only a hostile
    client sends, every time, so the cache holds at most 256 short strings."""
    if accept is not None and len(accept) <= 256:
        return _parse_accept_cached(accept)
    return _parse_accept(accept)


@functools.lru_cache(maxsize=256)
def _parse_accept_cached(accept: str) -> Mapping[str, float]:
    return _parse_accept(accept)


def _parse_accept(accept: str | None) -> dict[str, float]:
    if accept is None or not accept.strip():
        return {"*/*": 1.0}
    ranges: dict[str, float] = {}
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        if not media:
            continue
        q = 1.0
        for param in pieces[1:]:
            name, _, val = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(val.strip())
                except ValueError:
                    q = 0.0
        ranges[media] = max(q, ranges.get(media, 0.0))
    return ranges


def accepts(accept: str | None, media_type: str) -> bool:
    """Tell whether an Accept header admits ``media_type`` (wildcards and ``q=0`` honoured)."""
    ranges = _accepted_types(accept)
    major = media_type.split("/", 1)[0]
    for candidate in (media_type, f"{major}/*", "*/*"):
        if candidate in ranges:
            return ranges[candidate] > 0
    return False


def check_post_accept(accept: str | None) -> None:
    """Require a POST to accept both JSON and SSE answers, as the transport spec says (406)."""
    if not (accepts(accept, JSON) and accepts(accept, SSE)):
        raise TransportError(
            HTTPStatus.NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept both application/json and text/event-stream",
        )


def check_get_accept(accept: str | None) -> None:
    """Require a GET to accept an SSE stream (406)."""
    if not accepts(accept, SSE):
        raise TransportError(
            HTTPStatus.NOT_ACCEPTABLE, "Not Acceptable: the client must accept text/event-stream"
        )


def check_content_type(content_type: str | None) -> None:
    """Require a JSON body on POST (415)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != JSON:
        raise TransportError(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        )


def check_body_size(length: int, limit: int) -> None:
    """Refuse bodies over ``limit`` bytes (413)."""
    if length > limit:
        raise TransportError(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"Payload Too Large: the body exceeds {limit} bytes",
        )


def is_valid_session_id(value: str) -> bool:
    """Tell whether a header value can be a session id at all (visible ASCII, bounded)."""
    # fullmatch: "$" would also accept a value that ends in a newline.
    return isinstance(value, str) and _SESSION_ID_RE.fullmatch(value) is not None


def normalize_origin(origin: str) -> str | None:
    """Return ``scheme://host[:port]`` in lower case, or None for an unusable Origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default_port = 443 if parts.scheme == "https" else 80
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, default_port) else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}"


def origin_allowed(origin: str, host: str, scheme: str, allowed: Iterable[str]) -> bool:
    """Tell whether a browser ``Origin`` may call the endpoint.

    Same-origin requests (the Origin names the validated Host) are always allowed; others only
    when listed in ``allowed`` (exact origins, or ``*`` to switch the check off). This is the
    DNS-rebinding defence the transport spec requires.
    """
    normalized = normalize_origin(origin)
    if normalized is None:
        return False
    own = normalize_origin(f"{scheme}://{host}")
    if own is not None and normalized == own:
        return True
    for entry in allowed:
        if entry == "*":
            return True
        if normalize_origin(entry) == normalized:
            return True
    return False


def check_origin(
    origin: str | None, host: str, scheme: str, allowed: Iterable[str], how_to_allow: str = ""
) -> None:
    """403 when an ``Origin`` header is present and not allowed (2025-11-25 transports spec);
    ``how_to_allow`` (where the server lists the origins it serves) ends the message."""
    if origin is not None and not origin_allowed(origin, host, scheme, allowed):
        suffix = f" ({how_to_allow})" if how_to_allow else ""
        raise TransportError(HTTPStatus.FORBIDDEN, f"Forbidden: Origin not allowed{suffix}")
