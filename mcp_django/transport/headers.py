"""The HTTP checks made before the engine sees a message: Host, Origin, CORS, Accept,
Content-Type, the protocol version header and the body size.

Each check is a function of the headers (and settings) that raises
:class:`~mcp_django.protocol.errors.TransportError` with the status to answer; the rules
themselves live in :mod:`mcp_django.protocol.negotiation` and :mod:`mcp_django.protocol.limits`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from django.core.exceptions import DisallowedHost

from ..protocol import modern, negotiation
from ..protocol.errors import TransportError
from ..protocol.jsonrpc import Decoded, Notification, Request
from ..protocol.limits import body_too_large

if TYPE_CHECKING:
    from django.http import HttpRequest

    from ..conf import MCPSettings

security_logger = logging.getLogger("django.security.DisallowedHost")

#: The request headers a browser-based client may send, in every revision: 2026-07-28 requests
#: also carry ``Mcp-Method``, ``Mcp-Name`` and one ``Mcp-Param-{Name}`` per mirrored argument.
ALLOWED_REQUEST_HEADERS = (
    "Accept, Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, "
    "MCP-Protocol-Version, Mcp-Method, Mcp-Name"
)

#: What a CORS preflight from an allowed origin is told, besides the headers it may send.
PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "GET, POST, DELETE",
    "Access-Control-Allow-Headers": ALLOWED_REQUEST_HEADERS,
    "Access-Control-Max-Age": "600",
}

# A field name is an RFC 9110 token; a preflight naming more parameter headers than this, or
# longer ones, is not a client we serve (a tool's mirrored arguments are few and short).
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
MAX_PREFLIGHT_PARAM_HEADERS = 64

ALLOWED_METHODS = "GET, POST, DELETE"

#: Said by a refused Origin's 403: where this server lists the browser origins it serves.
ORIGINS_SETTING_HINT = "a browser client's origin must be listed in MCP_DJANGO['ALLOWED_ORIGINS']"


#: The headers a WSGI server puts in META without the ``HTTP_`` prefix (as HttpHeaders reads them).
UNPREFIXED_META = {"CONTENT_TYPE": "content-type", "CONTENT_LENGTH": "content-length"}


class Headers(Mapping[str, str]):
    """The request's headers by lower-case name; repeated headers joined with ", " (RFC 9110)."""

    def __init__(self, scope: dict[str, Any]) -> None:
        headers: dict[str, str] = {}
        for key, value in scope.get("headers", []):
            name = key.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[name] = f"{headers[name]}, {text}" if name in headers else text
        self._headers = headers

    @classmethod
    def of_request(cls, request: HttpRequest) -> Headers:
        """The headers of a Django request (the plain view's; the WSGI server joined repeated
        headers already)."""
        # Read from META as Django's HttpHeaders does, without its title-cased names: building
        # request.headers cost 9 µs a request, most of it making names we lower-case again.
        found: dict[str, str] = {}
        for key, value in request.META.items():
            if key.startswith("HTTP_"):
                found[key[5:].replace("_", "-").lower()] = value
            elif key in UNPREFIXED_META:
                found[UNPREFIXED_META[key]] = value
        headers = cls.__new__(cls)
        headers._headers = found
        return headers

    def __getitem__(self, name: str) -> str:
        return self._headers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)


def cors_headers(scheme: str, headers: Headers, settings: MCPSettings) -> list[tuple[bytes, bytes]]:
    """The CORS headers for an explicitly allowed cross-origin caller (a browser-based client)
    of a request made over ``scheme``; none for a same-origin or non-browser request, or an
    origin not in ``ALLOWED_ORIGINS``."""
    origin = headers.get("origin")
    if origin is None or not settings.allowed_origins:
        return []
    host = headers.get("host") or ""
    if negotiation.origin_allowed(origin, host, scheme, []):
        return []  # same-origin: no CORS needed
    if not negotiation.origin_allowed(origin, host, scheme, settings.allowed_origins):
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", b"Mcp-Session-Id, WWW-Authenticate"),
        (b"vary", b"Origin"),
    ]


def preflight_headers(headers: Headers) -> dict[str, str]:
    """What a CORS preflight from an allowed origin is told: the fixed headers, plus the
    ``Mcp-Param-{Name}`` headers it asks for (their names depend on the tool, and a wildcard
    is not honoured for requests with credentials, so the names asked for are echoed back)."""
    requested = headers.get("access-control-request-headers")
    if not requested:
        return PREFLIGHT_HEADERS
    params: list[str] = []
    for name in requested.split(","):
        name = name.strip()
        if name.lower().startswith(modern.HEADER_PARAM_PREFIX) and _TOKEN_RE.fullmatch(name):
            params.append(name)
            if len(params) == MAX_PREFLIGHT_PARAM_HEADERS:
                break
    if not params:
        return PREFLIGHT_HEADERS
    return {
        **PREFLIGHT_HEADERS,
        "Access-Control-Allow-Headers": ", ".join([ALLOWED_REQUEST_HEADERS, *params]),
    }


def check_declared_length(headers: Headers, settings: MCPSettings) -> None:
    """Refuse (413) a body whose Content-Length already says it is too large, before reading it."""
    length = headers.get("content-length")
    # ASCII digits only: str.isdigit() also admits "²" (a latin-1 byte), which int() rejects.
    if (
        length is not None
        and length.isascii()
        and length.isdigit()
        and int(length) > settings.max_body_size
    ):
        raise body_too_large(settings.max_body_size)


def check_origin_and_host(request: HttpRequest, headers: Headers, settings: MCPSettings) -> None:
    """Host against ``ALLOWED_HOSTS`` (400, logged like Django does) and Origin against
    ``ALLOWED_ORIGINS`` (403): DNS rebinding and cross-site requests stop here."""
    try:
        host = request.get_host()
    except DisallowedHost as exc:
        security_logger.error(str(exc))
        raise TransportError(HTTPStatus.BAD_REQUEST, "Bad Request: invalid Host header") from None
    negotiation.check_origin(
        headers.get("origin"),
        host,
        request.scheme or "http",
        settings.allowed_origins,
        # A developer trying a browser client (the Inspector) learns where origins are allowed.
        how_to_allow=ORIGINS_SETTING_HINT,
    )


def check_post(headers: Headers) -> None:
    """Accept and Content-Type of a POST, in every revision."""
    negotiation.check_post_accept(headers.get("accept"))
    negotiation.check_content_type(headers.get("content-type"))


def refuse_modern_batch(headers: Headers, params: Iterable[dict[str, Any]]) -> None:
    """400 for a JSON-RPC batch sent as 2026-07-28 (by its header or a message's ``_meta``):
    that revision takes one message per request (batches were removed in 2025-06-18; only a
    2025-03-26 session takes them)."""
    version = headers.get("mcp-protocol-version")
    if modern.is_modern_version(version) or any(
        modern.is_modern_request(version, each) for each in params
    ):
        raise TransportError(
            HTTPStatus.BAD_REQUEST,
            "Invalid Request: MCP 2026-07-28 takes one JSON-RPC message per request, not a batch "
            "(JSON-RPC batches are only allowed in a 2025-03-26 session)",
        )


def modern_message(headers: Headers, decoded: Decoded) -> Request | Notification | None:
    """The one message of a 2026-07-28 POST, or None for the handshake era.

    The era is chosen per request: 2026-07-28 ``_meta`` (or header) means stateless, even on
    initialize (a removed method there: 404); anything else is the handshake era (versioning
    spec, "dual-era" servers)."""
    first = decoded.messages[0]
    if (
        not decoded.is_batch
        and isinstance(first, (Request, Notification))
        and modern.is_modern_request(headers.get("mcp-protocol-version"), first.params)
    ):
        return first
    return None


def check_handshake_post(headers: Headers, decoded: Decoded) -> None:
    """A handshake-era POST: no batch sent as 2026-07-28, and its ``MCP-Protocol-Version``."""
    if decoded.is_batch:
        refuse_modern_batch(
            headers,
            (m.params for m in decoded.messages if isinstance(m, (Request, Notification))),
        )
    check_version(headers)


def initialize_request(headers: Headers, decoded: Decoded) -> Request | None:
    """The ``initialize`` request of a POST, or None; 400 when it is batched or sent with a
    session id."""
    if not any(isinstance(m, Request) and m.method == "initialize" for m in decoded.messages):
        return None
    if decoded.is_batch:
        raise TransportError(
            HTTPStatus.BAD_REQUEST, "Invalid Request: initialize must not be part of a batch"
        )
    if headers.get("mcp-session-id") is not None:
        raise TransportError(
            HTTPStatus.BAD_REQUEST,
            "Invalid Request: initialize must be sent without Mcp-Session-Id",
        )
    return decoded.messages[0]  # type: ignore[return-value]


def sessionless_ping(headers: Headers, decoded: Decoded) -> Request | None:
    """A lone ``ping`` sent without a session: the one request allowed before initialize
    (lifecycle spec), answered at once."""
    first = decoded.messages[0]
    if (
        not decoded.is_batch
        and isinstance(first, Request)
        and first.method == "ping"
        and headers.get("mcp-session-id") is None
    ):
        return first
    return None


def session_id(headers: Headers) -> str:
    """The ``Mcp-Session-Id`` of a request in a session; 400 without one."""
    value = headers.get("mcp-session-id")
    if value is None:
        raise TransportError(
            HTTPStatus.BAD_REQUEST,
            "Bad Request: Mcp-Session-Id header is required; send initialize first",
        )
    return value


def check_version(headers: Headers) -> None:
    """``MCP-Protocol-Version`` of a request in a session (a 2026-07-28 request's is checked
    against its ``_meta`` instead)."""
    negotiation.check_protocol_version_header(headers.get("mcp-protocol-version"))


def check_get(headers: Headers) -> None:
    negotiation.check_get_accept(headers.get("accept"))
    check_version(headers)


def refuse_stateless(headers: Headers, method: str) -> None:
    """405 for a GET or DELETE of 2026-07-28: no session, so no standalone stream and nothing
    to delete (transports spec, "Earlier Streamable HTTP Revisions")."""
    if modern.is_modern_version(headers.get("mcp-protocol-version")):
        raise TransportError(
            HTTPStatus.METHOD_NOT_ALLOWED,
            f"Method Not Allowed: {method} is not part of MCP 2026-07-28",
            headers={"Allow": "POST"},
        )


def method_not_allowed() -> TransportError:
    return TransportError(
        HTTPStatus.METHOD_NOT_ALLOWED, "Method Not Allowed", headers={"Allow": ALLOWED_METHODS}
    )
