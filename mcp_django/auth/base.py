"""Authentication policies: each MCP request is authenticated on its own.

A session id is never a credential: the session only binds to the user a policy returns.
"""

from __future__ import annotations

from http import HTTPStatus
from importlib import import_module
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, aget_user, get_user, load_backend
from django.http import HttpRequest
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, Resolver404, resolve


class AuthenticationFailed(Exception):
    """Refuse the request with ``status`` (401 or 403) and these response headers."""

    def __init__(
        self,
        message: str,
        status: int = HTTPStatus.UNAUTHORIZED,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message
        self.status = status
        self.headers = headers or {}
        super().__init__(message)


class BaseAuthentication:
    """Decide who is calling. Return a user, or None when anonymous calls are allowed."""

    async def authenticate(self, request: HttpRequest) -> Any:
        """Return the user making ``request``, or None; raise :class:`AuthenticationFailed` to
        refuse it."""
        raise NotImplementedError(
            "Authentication classes must implement async authenticate(request) -> user or None"
        )


class NoAuthentication(BaseAuthentication):
    """No authentication (development and conformance runs only; a system check warns)."""

    async def authenticate(self, request: HttpRequest) -> Any:
        return None


class DjangoAuthentication(BaseAuthentication):
    """The request's Django user from the session cookie, for same-site clients."""

    async def authenticate(self, request: HttpRequest) -> Any:
        engine = import_module(settings.SESSION_ENGINE)
        request.session = engine.SessionStore(request.COOKIES.get(settings.SESSION_COOKIE_NAME))
        user = await _session_user(request)
        if not user.is_authenticated or not user.is_active:
            # RFC 9110 requires a challenge with every 401; cookies have no registered scheme.
            page = login_page()
            where = f" at {page}" if page else ""
            raise AuthenticationFailed(
                f"Authentication credentials were not provided: log in to this site first{where}.",
                headers={"WWW-Authenticate": 'Session realm="mcp"'},
            )
        return user


def login_page() -> str | None:
    """``LOGIN_URL`` as a path, when the URLconf serves it (its default, ``/accounts/login/``,
    is often not): where the 401 of a session-cookie site sends the user."""
    try:
        url = resolve_url(settings.LOGIN_URL)
    except NoReverseMatch:
        return None
    if url.startswith("/"):
        try:
            resolve(url)
        except Resolver404:
            return None
    return url


async def _session_user(request: HttpRequest) -> Any:
    """The session's user, through whichever backend signed it in.

    Django accepts any class with ``authenticate`` and ``get_user`` as a backend; only
    ``BaseBackend`` subclasses have ``aget_user``, which ``django.contrib.auth.aget_user`` calls
    unconditionally. Backends without it are asked through the sync path, off the event loop.
    """
    backend_path = await request.session.aget(BACKEND_SESSION_KEY)
    if (
        isinstance(backend_path, str)
        and backend_path in settings.AUTHENTICATION_BACKENDS
        and not hasattr(load_backend(backend_path), "aget_user")
    ):
        return await sync_to_async(get_user)(request)
    return await aget_user(request)


def token_client(request: Any) -> str:
    """The OAuth client a request's JWT access token was issued to (its ``client_id`` claim,
    RFC 9068 section 2.2, or ``azp`` from providers that send that instead), "" without one.
    django-oauth-toolkit's tokens name theirs by application (``request.auth_token``)."""
    claims = getattr(request, "auth_claims", None)
    if not isinstance(claims, dict):
        return ""
    client = claims.get("client_id") or claims.get("azp")
    return client[:255] if isinstance(client, str) else ""
