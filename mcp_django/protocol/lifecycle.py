"""The ``initialize`` handshake: parameter validation and the result it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .errors import InvalidParamsError
from .limits import check_client_value
from .negotiation import negotiate_version

#: ``logging/setLevel`` levels (RFC 5424 severities), least severe first.
LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(slots=True, frozen=True)
class InitializeParams:
    """What a client says about itself in ``initialize``."""

    requested_version: str
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any]


#: Longest ``clientInfo`` name and version kept (the Session columns' lengths).
CLIENT_INFO_STRING_LIMITS: Final[dict[str, int]] = {"name": 200, "version": 100}


#: The lists a server announces changes of (``notifications/<kind>/list_changed``).
LIST_KINDS = ("tools", "resources", "prompts")


def parse_initialize(
    params: dict[str, Any],
    *,
    max_client_info_bytes: int = 4 * 1024,
    max_capabilities_bytes: int = 64 * 1024,
    max_depth: int = 16,
) -> InitializeParams:
    """Validate ``initialize`` params and negotiate the version; -32602 when malformed.

    ``clientInfo`` and ``capabilities`` are kept with the session (and in each process's
    session cache), so their size and nesting are bounded here, before anything is stored.
    """
    requested = params.get("protocolVersion")
    if not isinstance(requested, str) or not requested:
        raise InvalidParamsError('Invalid params: "protocolVersion" must be a non-empty string')
    capabilities = params.get("capabilities", {})
    if not isinstance(capabilities, dict):
        raise InvalidParamsError('Invalid params: "capabilities" must be an object')
    client_info = params.get("clientInfo", {})
    if not isinstance(client_info, dict):
        raise InvalidParamsError('Invalid params: "clientInfo" must be an object')
    for key, limit in CLIENT_INFO_STRING_LIMITS.items():
        if key in client_info and not isinstance(client_info[key], str):
            raise InvalidParamsError(f'Invalid params: "clientInfo.{key}" must be a string')
        if len(client_info.get(key, "")) > limit:
            raise InvalidParamsError(f'Invalid params: "clientInfo.{key}" is longer than {limit} characters')
    check_client_value("clientInfo", client_info, max_bytes=max_client_info_bytes, max_depth=max_depth)
    check_client_value("capabilities", capabilities, max_bytes=max_capabilities_bytes, max_depth=max_depth)
    return InitializeParams(requested, negotiate_version(requested), capabilities, client_info)


def initialize_result(
    version: str,
    capabilities: dict[str, Any],
    server_info: dict[str, Any],
    instructions: str | None = None,
) -> dict[str, Any]:
    """Build the ``InitializeResult``."""
    result: dict[str, Any] = {"protocolVersion": version, "capabilities": capabilities, "serverInfo": server_info}
    if instructions:
        result["instructions"] = instructions
    return result


def level_enabled(message_level: str, threshold: str | None) -> bool:
    """Tell whether a log message at ``message_level`` passes the session's threshold."""
    if threshold is None:
        return True
    return LOG_LEVELS.index(message_level) >= LOG_LEVELS.index(threshold)
