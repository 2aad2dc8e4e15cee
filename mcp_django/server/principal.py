"""Who a message comes from, as a transport authenticated them.

Storage layer, beside :mod:`~mcp_django.ops.quotas.limits`: a principal's :attr:`~Principal.caller`
is
who quotas count, made once per principal. The transports build principals, and the server
(the engine, the audit trail) reads them; both sit above, so the imports point down.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ops.quotas.limits import Caller, caller_of

if TYPE_CHECKING:
    from django.http import HttpRequest


@dataclass(frozen=True)
class Principal:
    """Who a message comes from, as the transport authenticated them."""

    #: What permission hooks and scope checks read: ``request.user``, and with OAuth
    #: ``request.auth_scopes``. Stdio builds one too, for the user it runs as.
    request: HttpRequest
    #: The authenticated user; an ``AnonymousUser`` (pk None) when the site lets anonymous
    #: callers in. Code asking "anonymous?" reads ``user_id is None`` or ``is_authenticated``.
    user: Any
    #: How the principal reaches us: "streamable-http", "sse" (2024-11-05 HTTP+SSE) or "stdio".
    transport: str = "streamable-http"

    @property
    def user_id(self) -> Any:
        return getattr(self.user, "pk", None)

    @property
    def key(self) -> str:
        """Who, as a string that sealed state is bound to."""
        return f"user:{self.user_id}" if self.user_id is not None else "anonymous"

    @functools.cached_property
    def caller(self) -> Caller:
        """Who, as quotas count: the user, else the client address (made once per principal)."""
        return caller_of(self.request, self.user)
