"""Exceptions raised by mcp_django outside the wire (registry, configuration, hostile input)."""

from __future__ import annotations

from django.core.exceptions import SuspiciousOperation

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
    "ClientRequestError",
    "InternalError",
    "InvalidParamsError",
    "InvalidRequestError",
    "InvalidSessionId",
    "MCPError",
    "MethodNotFoundError",
    "NotRegistered",
    "ResourceNotFoundError",
    "ToolError",
    "URLElicitationRequiredError",
]


class ToolError(Exception):
    """Raise inside a tool to answer ``isError: true`` with this message (not a protocol error)."""


class ClientRequestError(Exception):
    """A request to the client could not be made, timed out, or was refused.

    Raised inside a tool; unless the tool catches it, its message becomes the tool's
    ``isError`` result, like a ``ToolError``.
    """


class AlreadyRegistered(Exception):
    """A tool, resource, prompt or model is already registered on this site."""


class NotRegistered(Exception):
    """Nothing by that name is registered on this site."""


class InvalidSessionId(SuspiciousOperation):
    """An ``Mcp-Session-Id`` header that cannot be a session id at all."""
