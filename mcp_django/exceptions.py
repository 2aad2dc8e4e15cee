"""Exceptions raised by mcp_django outside the wire (registry, configuration, hostile input)."""

from __future__ import annotations

from django.core.exceptions import SuspiciousOperation

from .functions import ToolError
from .protocol.errors import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MCPError,
    MethodNotFoundError,
    ResourceNotFoundError,
    URLElicitationRequiredError,
)

__all__ = [
    "AlreadyRegistered",
    "NotRegistered",
    "InvalidSessionId",
    "ToolError",
    "MCPError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "InvalidParamsError",
    "InternalError",
    "ResourceNotFoundError",
    "URLElicitationRequiredError",
]


class AlreadyRegistered(Exception):
    """A tool, resource, prompt or model is already registered on this site."""


class NotRegistered(Exception):
    """Nothing by that name is registered on this site."""


class InvalidSessionId(SuspiciousOperation):
    """An ``Mcp-Session-Id`` header that cannot be a session id at all."""
