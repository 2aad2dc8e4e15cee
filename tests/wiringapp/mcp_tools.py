"""Registrations in the wrong module: autodiscovery imports ``mcp``, not ``mcp_tools``."""

from mcp_django import site


@site.tool()
def never_registered() -> str:
    """Return a word."""
    return "hidden"
