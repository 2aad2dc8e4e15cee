"""OAuth scopes of the request at hand, compared with what an entry needs."""

from __future__ import annotations

from typing import Any


def missing_scopes(request: Any, scopes: tuple[str, ...]) -> list[str]:
    """Scopes the request's OAuth token lacks (none when the request is not OAuth-authenticated)."""
    granted = getattr(request, "auth_scopes", None)
    if granted is None or not scopes:
        return []
    return [s for s in scopes if s not in granted]
