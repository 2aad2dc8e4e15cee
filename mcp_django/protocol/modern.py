"""The stateless 2026-07-28 ("modern") revision, as pure functions.

Modern requests carry their version, capabilities and client identity in ``params._meta`` and
mirror selected body fields into HTTP headers; there is no ``initialize`` and no session. This
module reads and checks those per-request fields and headers and shapes modern results. It
raises only :class:`MCPError` subclasses whose ``http_status`` tells the transport what to send.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from http import HTTPStatus
from typing import Any, Final, Literal

from .errors import (
    ERROR_CODE_HTTP_STATUS,
    HeaderMismatchError,
    InvalidParamsError,
    InvalidRequestMetaError,
    UnsupportedProtocolVersionError,
)
from .lifecycle import CLIENT_INFO_STRING_LIMITS, LOG_LEVELS
from .limits import MAX_SAFE_INTEGER, check_client_value
from .negotiation import SUPPORTED_VERSIONS

V2026_07_28: Final = "2026-07-28"

#: Stateless revisions served, newest first.
MODERN_VERSIONS: Final[tuple[str, ...]] = (V2026_07_28,)
#: Every revision the server speaks, modern then handshake-era: what an
#: ``UnsupportedProtocolVersionError`` lists, so a dual-era client may also fall back to
#: ``initialize``.
ADVERTISED_VERSIONS: Final[tuple[str, ...]] = MODERN_VERSIONS + SUPPORTED_VERSIONS

# Reserved ``_meta`` keys (basic/index.mdx, "Reserved keys").
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

# The per-request keys whose presence marks a request as modern (no legacy revision used them).
_PER_REQUEST_KEYS: Final = (
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
)

#: Client-to-server methods and notifications that 2025-11-25 had and 2026-07-28 dropped: the
#: changelog's major changes 2, 4, 5 and 6, checked against the method names in both schema.ts.
#: ``tasks/get`` and ``tasks/cancel`` are absent on purpose: the ``io.modelcontextprotocol/tasks``
#: extension still defines them, so they are unknown methods rather than removed ones.
REMOVED_METHODS: Final[frozenset[str]] = frozenset(
    {
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/roots/list_changed",
        "tasks/result",
        "tasks/list",
    }
)

#: The requests a server may answer with an ``InputRequiredResult`` (mrtr.mdx, "Supported
#: Requests").
INPUT_METHODS: Final[frozenset[str]] = frozenset({"tools/call", "prompts/get", "resources/read"})

RESULT_TYPE_COMPLETE: Final = "complete"
RESULT_TYPE_INPUT_REQUIRED: Final = "input_required"

# Request header names, lower-case because the transport hands them over lower-cased.
HEADER_PROTOCOL_VERSION: Final = "mcp-protocol-version"
HEADER_METHOD: Final = "mcp-method"
HEADER_NAME: Final = "mcp-name"
HEADER_PARAM_PREFIX: Final = "mcp-param-"

#: The body field ``Mcp-Name`` mirrors, per method (streamable-http.mdx, "Standard Request
#: Headers").
NAME_HEADER_SOURCES: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "resources/read": "uri",
    "prompts/get": "name",
    # The tasks extension ("Streamable HTTP: Routing Headers"): a task's requests name the task.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

#: Longest requested version echoed back in ``UnsupportedProtocolVersionError.data``.
MAX_ECHOED_VERSION: Final = 64

_SENTINEL_PREFIX: Final = "=?base64?"
_SENTINEL_SUFFIX: Final = "?="
# Field values may hold visible ASCII, space and tab only (streamable-http.mdx, "Value Encoding").
_FIELD_VALUE_RE: Final = re.compile(r"[\t\x20-\x7e]*")
# RFC 9110 section 5.6.2: token = 1*tchar.
_TOKEN_RE: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# How integers look in a header: what JSON encoders and JS/Python str() produce (42, -7, 42.0).
_INTEGER_TEXT_RE: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_OWS: Final = " \t"


def _show(value: str) -> str:
    """Quote a client value for an error message, cut short so a message stays small."""
    return repr(value[:60] + ("..." if len(value) > 60 else ""))


# --- era selection and _meta --------------------------------------------------------------


def is_modern_version(version: str | None) -> bool:
    """Tell whether an ``MCP-Protocol-Version`` value names a stateless revision we serve."""
    return version is not None and version.strip(_OWS) in MODERN_VERSIONS


def is_modern_request(header_version: str | None, params: dict[str, Any]) -> bool:
    """Tell whether a request is served statelessly under a modern revision.

    versioning.mdx: "A request carrying modern per-request ``_meta`` is served statelessly".
    A request is modern when its ``_meta`` holds any ``io.modelcontextprotocol/`` per-request
    key (protocolVersion, clientCapabilities, clientInfo, logLevel), or when its
    ``MCP-Protocol-Version`` header names a modern version. Anything else is legacy. Modern
    ``_meta`` wins even on ``initialize`` (which is then a removed method): the client told us
    its era, and a modern error is what it can act on. Partial or bad modern metadata is still
    modern, so :func:`parse_request_meta` answers it with a modern error instead of a legacy one.
    """
    if is_modern_version(header_version):
        return True
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and any(key in meta for key in _PER_REQUEST_KEYS)


@dataclass(slots=True, frozen=True)
class RequestMeta:
    """What a modern request says about its client, read from ``params._meta``."""

    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None


def _bounded(name: str, value: Any, *, max_bytes: int, max_depth: int) -> None:
    """Apply :func:`check_client_value`, answering as a malformed ``_meta`` (HTTP 400)."""
    try:
        check_client_value(name, value, max_bytes=max_bytes, max_depth=max_depth)
    except InvalidParamsError as exc:
        raise InvalidRequestMetaError(exc.message) from None
    except TypeError:
        # orjson refuses what JSON cannot carry (e.g. integers beyond 64 bits): not a JSON value.
        raise InvalidRequestMetaError(f'Invalid params: "{name}" is not a JSON value') from None


def parse_request_meta(
    params: dict[str, Any],
    *,
    header_version: str | None,
    max_client_info_bytes: int = 4 * 1024,
    max_capabilities_bytes: int = 64 * 1024,
    max_depth: int = 16,
) -> RequestMeta:
    """Validate a modern request's per-request ``_meta`` against its ``MCP-Protocol-Version``
    header.

    Missing or mistyped required fields: -32602 (:class:`InvalidRequestMetaError`, HTTP 400, per
    basic/index.mdx). A missing, malformed or different header: -32020. A version not served:
    -32022 listing :data:`ADVERTISED_VERSIONS`. The header is checked first: a version
    the header and the body disagree on cannot be trusted. Client info and capabilities
    are bounded like ``initialize``'s, as handlers may keep or log them.
    """
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        raise InvalidRequestMetaError(
            f'Invalid params: "_meta" must be an object carrying "{META_PROTOCOL_VERSION}" and '
            f'"{META_CLIENT_CAPABILITIES}"'
        )
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str) or not version:
        raise InvalidRequestMetaError(
            f'Invalid params: "_meta.{META_PROTOCOL_VERSION}" must be a non-empty string'
        )
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise InvalidRequestMetaError(
            f'Invalid params: "_meta.{META_CLIENT_CAPABILITIES}" must be an object'
        )

    if header_version is None:
        raise HeaderMismatchError("Header mismatch: the MCP-Protocol-Version header is required")
    header = _field_value("MCP-Protocol-Version", header_version)
    if header != version:
        raise HeaderMismatchError(
            f"Header mismatch: MCP-Protocol-Version header value {_show(header)} does not match "
            f"body value {_show(version)}"
        )
    if version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersionError(
            requested=version[:MAX_ECHOED_VERSION], supported=ADVERTISED_VERSIONS
        )

    client_info = None
    if META_CLIENT_INFO in meta:
        client_info = meta[META_CLIENT_INFO]
        if not isinstance(client_info, dict):
            raise InvalidRequestMetaError(
                f'Invalid params: "_meta.{META_CLIENT_INFO}" must be an object'
            )
        for key, limit in CLIENT_INFO_STRING_LIMITS.items():
            if key in client_info and not isinstance(client_info[key], str):
                raise InvalidRequestMetaError(
                    f'Invalid params: "_meta.{META_CLIENT_INFO}.{key}" must be a string'
                )
            if len(client_info.get(key, "")) > limit:
                raise InvalidRequestMetaError(
                    f'Invalid params: "_meta.{META_CLIENT_INFO}.{key}" is longer than {limit} '
                    "characters"
                )
        _bounded(
            f"_meta.{META_CLIENT_INFO}",
            client_info,
            max_bytes=max_client_info_bytes,
            max_depth=max_depth,
        )

    log_level = None
    if META_LOG_LEVEL in meta:
        log_level = meta[META_LOG_LEVEL]
        if not isinstance(log_level, str) or log_level not in LOG_LEVELS:
            raise InvalidRequestMetaError(
                f'Invalid params: "_meta.{META_LOG_LEVEL}" must be one of {", ".join(LOG_LEVELS)}'
            )

    _bounded(
        f"_meta.{META_CLIENT_CAPABILITIES}",
        capabilities,
        max_bytes=max_capabilities_bytes,
        max_depth=max_depth,
    )
    return RequestMeta(
        version=version,
        client_capabilities=capabilities,
        client_info=client_info,
        log_level=log_level,
    )


# --- request headers ------------------------------------------------------------------------


def _field_value(header: str, value: str) -> str:
    """Drop the optional whitespace around a field value and refuse characters a header cannot
    carry."""
    value = value.strip(_OWS)
    if _FIELD_VALUE_RE.fullmatch(value) is None:
        raise HeaderMismatchError(
            f"Header mismatch: the {header} header contains invalid characters"
        )
    return value


def encode_header_value(value: str) -> str:
    """Encode a value for ``Mcp-Name`` or ``Mcp-Param-{Name}`` as a client must (the inverse of
    :func:`decode_header_value`), for test clients and proxies.

    Plain when it is visible ASCII and spaces with no edge space; otherwise, or when it looks like
    the sentinel itself, ``=?base64?{UTF-8 as Base64}?=``.
    """
    plain = re.fullmatch(r"[\x20-\x7e]*", value) is not None and value == value.strip(" ")
    if plain and not (value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX)):
        return value
    return (
        _SENTINEL_PREFIX
        + base64.b64encode(value.encode("utf-8")).decode("ascii")
        + _SENTINEL_SUFFIX
    )


def decode_header_value(value: str) -> str:
    """Return a header value as the client meant it, undoing the Base64 sentinel form.

    ``=?base64?{data}?=`` (markers case-sensitive) carries UTF-8 text that a header cannot:
    non-ASCII, control characters, edge whitespace, or the sentinel itself. Decoding is strict
    (standard alphabet, correct padding, canonical, valid UTF-8) so that a header has exactly
    one reading; anything else, and raw characters outside visible ASCII, space and tab, is a
    -32020 as streamable-http.mdx requires.
    """
    return _decode("Mcp-Name or Mcp-Param", value)


def _decode(header: str, value: str) -> str:
    """:func:`decode_header_value`, naming ``header`` in its errors."""
    value = _field_value(header, value)
    if len(value) < len(_SENTINEL_PREFIX) + len(_SENTINEL_SUFFIX) or not (
        value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX)
    ):
        return value
    data = value[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
    try:
        raw = base64.b64decode(data, validate=True)
        # Non-canonical forms ("QR==" for "QQ==") would give two spellings of one value.
        if base64.b64encode(raw).decode("ascii") != data:
            raise ValueError("non-canonical Base64")
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        # UnicodeDecodeError is a ValueError too.
        raise HeaderMismatchError(
            f"Header mismatch: the {header} header holds malformed Base64-encoded text"
        ) from None


def check_request_headers(method: str, params: dict[str, Any], headers: Mapping[str, str]) -> None:
    """Check the standard headers a modern request mirrors from its body (-32020, HTTP 400).

    ``Mcp-Method`` must equal ``method`` on every request; ``Mcp-Name`` must equal ``params.name``
    (``tools/call``, ``prompts/get``) or ``params.uri`` (``resources/read``) after Base64-sentinel
    decoding. A body lacking that field cannot match a header, so it is a mismatch too: a router
    that trusted the header must never see the server act on something else. ``headers`` are
    keyed lower-case. Notifications are not checked: the spec defines no headers for them.
    """
    sent_method = headers.get(HEADER_METHOD)
    if sent_method is None:
        raise HeaderMismatchError("Header mismatch: the Mcp-Method header is required")
    sent_method = _field_value("Mcp-Method", sent_method)
    if sent_method != method:
        raise HeaderMismatchError(
            f"Header mismatch: Mcp-Method header value {_show(sent_method)} does not match body "
            f"value {_show(method)}"
        )

    source = NAME_HEADER_SOURCES.get(method)
    if source is None:
        return
    sent_name = headers.get(HEADER_NAME)
    if sent_name is None:
        raise HeaderMismatchError(f"Header mismatch: the Mcp-Name header is required for {method}")
    name = _decode("Mcp-Name", sent_name)
    body_name = params.get(source) if isinstance(params, dict) else None
    if not isinstance(body_name, str):
        raise HeaderMismatchError(
            f'Header mismatch: Mcp-Name header value {_show(name)} has no string "params.{source}" '
            "to match"
        )
    if name != body_name:
        raise HeaderMismatchError(
            f"Header mismatch: Mcp-Name header value {_show(name)} does not match body value "
            f"{_show(body_name)}"
        )


# --- x-mcp-header ---------------------------------------------------------------------------

# JSON Schema keywords (2020-12, plus draft-07's) whose value is a subschema, a map of names to
# subschemas, or a list of subschemas. Other keywords (enum, const, default, examples, ...) hold
# instance data, where an "x-mcp-header" key is data rather than an annotation.
_SUBSCHEMA_KEYWORDS: Final = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_MAP_KEYWORDS: Final = frozenset(
    {"patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
)
_SUBSCHEMA_LIST_KEYWORDS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})
#: Schema nodes visited at most, so a schema built with shared (or cyclic) dicts stays cheap.
_MAX_SCHEMA_NODES: Final = 10_000
X_MCP_HEADER: Final = "x-mcp-header"


def _check_header_type(name: str, path: tuple[str, ...], schema: dict[str, Any]) -> None:
    """Refuse an annotation on a property whose type is not exactly one header-safe primitive."""
    where = f"x-mcp-header {name!r} on property {'.'.join(path)!r}"
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [declared]
    if "number" in types:
        raise ValueError(f"{where}: type 'number' is not permitted (use 'integer')")
    primitive = [t for t in types if t != "null"]
    if declared is None or len(primitive) != 1 or primitive[0] not in _HEADER_TYPES:
        raise ValueError(
            f"{where}: the property's type must be one of string, integer or boolean (optionally "
            f"with null), not {declared!r}"
        )


def mcp_header_params(input_schema: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Map each ``x-mcp-header`` name in a tool's ``inputSchema`` to its property path.

    Raises ValueError naming the first violation of the constraints in tools.mdx and
    streamable-http.mdx ("Schema Extension"): the value must be a non-empty RFC 9110 token
    (so no control characters), unique case-insensitively, on a string, integer or boolean
    property (not number), reached from the root through ``properties`` keys only. An
    annotation anywhere else (``items``, ``anyOf``, ``$defs`` behind a ``$ref``...) makes the
    tool invalid, so the whole schema is searched, not only the ``properties`` chain.
    """
    if not isinstance(input_schema, dict):
        raise ValueError("inputSchema must be an object")
    found: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    # (schema, property path when statically reachable through `properties` only, else None)
    stack: list[tuple[Any, tuple[str, ...] | None]] = [(input_schema, ())]
    visited = 0
    while stack:
        schema, path = stack.pop()
        if not isinstance(schema, dict):
            continue  # boolean schemas, or garbage a validator will refuse anyway
        visited += 1
        if visited > _MAX_SCHEMA_NODES:
            raise ValueError(f"inputSchema has more than {_MAX_SCHEMA_NODES} subschemas")
        if X_MCP_HEADER in schema:
            name = schema[X_MCP_HEADER]
            if path is None or not path:
                where = (
                    "the schema root"
                    if path == ()
                    else "a subschema not reachable through 'properties' alone"
                )
                raise ValueError(
                    f"x-mcp-header {name!r} is on {where}; it may only annotate properties reached "
                    "through 'properties' keys"
                )
            if not isinstance(name, str) or not name:
                raise ValueError(
                    f"x-mcp-header on property {'.'.join(path)!r} must be a non-empty string, not "
                    f"{name!r}"
                )
            if _TOKEN_RE.fullmatch(name) is None:
                raise ValueError(
                    f"x-mcp-header {name!r} on property {'.'.join(path)!r} is not an HTTP "
                    "field-name token (RFC 9110 tchar only)"
                )
            folded = name.lower()
            if folded in seen:
                raise ValueError(
                    f"x-mcp-header {name!r} duplicates {seen[folded]!r} (header names are "
                    "case-insensitive)"
                )
            _check_header_type(name, path, schema)
            seen[folded] = name
            found[name] = path
        for keyword, value in schema.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(
                    (child, None if path is None else (*path, prop))
                    for prop, child in value.items()
                )
            elif keyword in _SUBSCHEMA_MAP_KEYWORDS and isinstance(value, dict):
                stack.extend((child, None) for child in value.values())
            elif keyword in _SUBSCHEMA_LIST_KEYWORDS and isinstance(value, list):
                stack.extend((child, None) for child in value)
            elif keyword in _SUBSCHEMA_KEYWORDS:
                stack.append((value, None))
    return found


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    """Read the argument at ``path``; None when any step is missing or not an object."""
    value = arguments
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _matches(header: str, value: Any) -> bool:
    """Compare a decoded header with the body value it mirrors, by the body value's JSON type."""
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, (int, float)):
        # Numerically, as the spec recommends: "42.0" equals 42. Decimal keeps it exact.
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return _INTEGER_TEXT_RE.fullmatch(header) is not None and Decimal(header) == Decimal(value)
    if isinstance(value, str):
        return header == value
    return False  # objects and arrays cannot be mirrored


def check_param_headers(
    input_schema_paths: Mapping[str, tuple[str, ...]],
    arguments: dict[str, Any],
    headers: Mapping[str, str],
) -> None:
    """Check the ``Mcp-Param-{Name}`` headers of a ``tools/call`` against its arguments (-32020).

    ``input_schema_paths`` is :func:`mcp_header_params` of the tool's schema. A non-null value
    at a path requires its header, equal after decoding (strings exactly, integers numerically,
    booleans as ``true``/``false``). A missing or null value expects no header; one sent anyway
    asserts a value the body does not hold, so it is refused as a mismatch like any other.
    """
    for name, path in input_schema_paths.items():
        value = _lookup(arguments, path)
        sent = headers.get(HEADER_PARAM_PREFIX + name.lower())
        header = f"Mcp-Param-{name}"
        if value is None:
            if sent is not None:
                raise HeaderMismatchError(
                    f"Header mismatch: {header} header sent but argument {'.'.join(path)!r} is "
                    "absent or null"
                )
            continue
        if sent is None:
            raise HeaderMismatchError(
                f"Header mismatch: the {header} header is required when argument "
                f"{'.'.join(path)!r} "
                "is given"
            )
        decoded = _decode(header, sent)
        if not _matches(decoded, value):
            raise HeaderMismatchError(
                f"Header mismatch: {header} header value {_show(decoded)} does not match argument "
                f"{'.'.join(path)!r}"
            )


# --- results --------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class CacheHint:
    """Caching hints of a cacheable result (caching.mdx): freshness in ms and who may share it."""

    ttl_ms: int
    scope: Literal["public", "private"]

    def __post_init__(self) -> None:
        # The spec says servers MUST send ttlMs >= 0; JSON integers must stay exact in JS clients.
        if (
            isinstance(self.ttl_ms, bool)
            or not isinstance(self.ttl_ms, int)
            or not 0 <= self.ttl_ms <= MAX_SAFE_INTEGER
        ):
            raise ValueError(
                f"ttl_ms must be an integer between 0 and 2**53 - 1, not {self.ttl_ms!r}"
            )
        if self.scope not in ("public", "private"):
            raise ValueError(f"scope must be 'public' or 'private', not {self.scope!r}")

    def fields(self) -> dict[str, Any]:
        """Return the ``ttlMs`` and ``cacheScope`` result members."""
        return {"ttlMs": self.ttl_ms, "cacheScope": self.scope}


_NO_CACHE: Final = CacheHint(ttl_ms=0, scope="private")


def complete_result(
    result: dict[str, Any], *, server_info: dict[str, Any], cache: CacheHint | None = None
) -> dict[str, Any]:
    """Return a copy of a handler's result in modern shape.

    Adds ``resultType: "complete"``, ``_meta["io.modelcontextprotocol/serverInfo"]`` (basic/index
    says every result SHOULD identify the server) and, when ``cache`` is given, the top-level
    ``ttlMs`` and ``cacheScope`` (caching.mdx). Only fills gaps: what the result already says
    wins, so a handler may return ``input_required`` or its own ``_meta`` keys. Cache hints are
    left off non-complete results, which the spec says are not cacheable.
    """
    shaped = dict(result)
    shaped.setdefault("resultType", RESULT_TYPE_COMPLETE)
    meta = shaped.get("_meta", {})
    if not isinstance(meta, dict):
        raise ValueError(f"result _meta must be an object, not {type(meta).__name__}")
    shaped["_meta"] = (
        {**meta} if META_SERVER_INFO in meta else {**meta, META_SERVER_INFO: server_info}
    )
    if cache is not None and shaped["resultType"] == RESULT_TYPE_COMPLETE:
        for key, value in cache.fields().items():
            shaped.setdefault(key, value)
    return shaped


def discover_result(
    *,
    versions: Sequence[str],
    capabilities: dict[str, Any],
    server_info: dict[str, Any],
    instructions: str | None = None,
    cache: CacheHint | None,
) -> dict[str, Any]:
    """Build the ``server/discover`` result, field for field as schema.ts ``DiscoverResult``.

    DiscoverResult is a CacheableResult, whose ``ttlMs`` and ``cacheScope`` are required, so
    ``cache=None`` still sends them, as the most cautious hint: stale at once, never shared.
    ``instructions`` is left out when empty.
    """
    if not versions:
        raise ValueError("a server must support at least one protocol version")
    result: dict[str, Any] = {
        "resultType": RESULT_TYPE_COMPLETE,
        "supportedVersions": list(versions),
        "capabilities": capabilities,
        "_meta": {META_SERVER_INFO: server_info},
    }
    if instructions:
        result["instructions"] = instructions
    result.update((cache or _NO_CACHE).fields())
    return result


def http_status(response: Mapping[str, Any]) -> int:
    """The HTTP status for a JSON-RPC response answered whole to a modern request.

    A result, or an error the spec gives no status, is 200; the codes in
    :data:`~mcp_django.protocol.errors.ERROR_CODE_HTTP_STATUS` are 400 or 404 because a
    dual-era client tells a modern server from a legacy one by a 4xx whose body is a recognised
    modern error.
    """
    error = response.get("error")
    if not isinstance(error, Mapping):
        return HTTPStatus.OK
    code = error.get("code")
    if not isinstance(code, int):
        return HTTPStatus.OK
    return ERROR_CODE_HTTP_STATUS.get(code, HTTPStatus.OK)


def tag_subscription(message: dict[str, Any], subscription_id: Any) -> dict[str, Any]:
    """Put ``subscription_id`` (the listen request's id) in the ``_meta`` of a message sent on
    a ``subscriptions/listen`` stream: a notification's params, or the closing result."""
    body = (
        message.setdefault("params", {})
        if "method" in message
        else message.setdefault("result", {})
    )
    body.setdefault("_meta", {})[META_SUBSCRIPTION_ID] = subscription_id
    return message


def listen_acknowledgement(agreed: dict[str, Any], subscription_id: Any) -> dict[str, Any]:
    """The first message of a listen stream: the filter the server agreed to honour."""
    message = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": agreed},
    }
    return tag_subscription(message, subscription_id)
