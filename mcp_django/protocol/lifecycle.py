"""The ``initialize`` handshake: what it yields and the result it answers (its params are
declared in :mod:`.params`), and logging levels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

#: ``logging/setLevel`` levels (RFC 5424 severities), least severe first.
LOG_LEVELS: Final[tuple[str, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


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


def initialize_result(
    version: str,
    capabilities: dict[str, Any],
    server_info: dict[str, Any],
    instructions: str | None = None,
) -> dict[str, Any]:
    """Build the ``InitializeResult``."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info,
    }
    if instructions:
        result["instructions"] = instructions
    return result


def level_enabled(message_level: str, threshold: str | None) -> bool:
    """Tell whether a log message at ``message_level`` passes the session's threshold."""
    if threshold is None:
        return True
    return LOG_LEVELS.index(message_level) >= LOG_LEVELS.index(threshold)
