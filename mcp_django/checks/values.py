"""What the checks of several wings read alike: the user's ``MCP_DJANGO`` and positive
numbers."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings


def user_settings() -> Any:
    """The user's ``MCP_DJANGO`` as written: maybe not a dict (check_settings says so, E001)."""
    return getattr(settings, "MCP_DJANGO", {})


def positive_number(value: Any) -> bool:
    """A finite int or float above 0 (a bool is not a number here)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
