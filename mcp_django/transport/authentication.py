"""Who is calling: the site's authentication policy run on an HTTP request, once when it
arrives and again, on open streams, every ``SSE_REAUTH_SECONDS``."""

from __future__ import annotations

import logging
from io import BytesIO
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest

from ..auth.base import AuthenticationFailed
from ..auth.oauth import public_path
from ..server.principal import Principal

if TYPE_CHECKING:
    from ..conf import MCPSettings

logger = logging.getLogger("mcp_django.transport")


def build_request(scope: dict[str, Any], body: bytes = b"") -> ASGIRequest:
    """Django's request for this ASGI scope: what policies and permission hooks read."""
    request = ASGIRequest(scope, BytesIO(body))
    mark_endpoint(request)
    return request


def mark_endpoint(request: HttpRequest) -> None:
    """Note on ``request`` the path of the endpoint it reached, which the OAuth policy and the
    engine's step-up challenge name as the protected resource."""
    # The canonical URI of the endpoint has no trailing slash (RFC 9728 resource), and keeps the
    # prefix the site is mounted under (root_path, SCRIPT_NAME).
    request.mcp_endpoint_path = public_path(request).rstrip("/") or "/"  # type: ignore[attr-defined]


async def authenticate(
    request: HttpRequest, settings: MCPSettings, *, transport: str = "streamable-http"
) -> Principal:
    """Run the policy; raises :class:`AuthenticationFailed` (401/403 with a challenge)."""
    user = await settings.authentication_class().authenticate(request)
    # Hooks (get_queryset(request), has_*_permission(request)) read request.user, as in the admin.
    request.user = user if user is not None else AnonymousUser()
    return Principal(request=request, user=request.user, transport=transport)


async def still_authenticated(scope: dict[str, Any], user_id: Any, settings: MCPSettings) -> bool:
    """Whether the credential of ``scope`` still names the user ``user_id`` (not revoked,
    expired or logged out). An error in the policy itself keeps the stream open and is logged."""
    try:
        current = await settings.authentication_class().authenticate(build_request(scope))
    except AuthenticationFailed:
        return False
    except Exception:
        logger.exception("Re-checking the credential of an SSE stream failed")
        return True
    return bool(getattr(current, "pk", None) == user_id)
