"""mcp_django as an OAuth 2.1 resource server, with django-oauth-toolkit's tokens.

Every request carries ``Authorization: Bearer <token>``. A token is accepted only when it is
known, unexpired, acts for an active user, and was issued for this server: its ``resource``
(RFC 8707) names the configured canonical URI. Comparing with the configured URI rather than
the request's keeps the check right behind a TLS-terminating proxy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from asgiref.sync import sync_to_async
from django.apps import apps as django_apps
from django.http import HttpRequest
from django.utils import timezone

from ..conf import mcp_settings
from .base import AuthenticationFailed, BaseAuthentication

PRM_PATH = "/.well-known/oauth-protected-resource"


def canonical(uri: str) -> str:
    """Normalise a resource URI for comparison: lower-case scheme and host, no default port,
    no fragment, no trailing slash (RFC 8707 and the MCP authorization spec)."""
    try:
        parts = urlsplit(uri.strip())
    except ValueError:
        # "https://[" is no URI. Token claims and request parameters reach here as their
        # senders wrote them: kept as it is, such a value equals no endpoint's canonical URI.
        return uri.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port in (None, default) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def script_name(request: HttpRequest) -> str:
    """The path prefix the site is mounted under, without its trailing slash: ``SCRIPT_NAME``
    under WSGI, ``root_path`` under ASGI (or ``FORCE_SCRIPT_NAME``); "" at the host's root."""
    return str(request.META.get("SCRIPT_NAME") or "").rstrip("/")


def public_path(request: HttpRequest) -> str:
    """The request's path as clients sent it: the script name, then the path below it. Not
    ``request.path`` itself: Daphne's ``--root-path`` leaves the prefix out of the ASGI
    ``path``, which Django's ``ASGIRequest.path`` then lacks too."""
    return script_name(request) + request.path_info


def resource_url(request: HttpRequest | None, endpoint_path: str | None = None) -> str:
    """The canonical URI of the MCP endpoint: the setting, or derived from the request
    (``endpoint_path``: the endpoint's public path, script name included; default the
    request's own)."""
    configured = mcp_settings.resource_url
    if configured:
        return canonical(configured)
    if request is None:
        raise ValueError(
            "MCP_DJANGO['RESOURCE_URL'] is not set and there is no request to derive it from"
        )
    path = endpoint_path if endpoint_path is not None else public_path(request)
    return canonical(f"{request.scheme}://{request.get_host()}{path}")


def public_url(request: HttpRequest, path: str) -> str:
    """``path`` as an absolute URL of this site: on the public origin of ``RESOURCE_URL`` when
    it is set (behind a proxy the request's host may be an internal one), else the request's."""
    configured = mcp_settings.resource_url
    if configured:
        parts = urlsplit(configured)
        return f"{parts.scheme}://{parts.netloc}{path}"
    return request.build_absolute_uri(path)


def metadata_url(resource: str) -> str:
    """The RFC 9728 (section 3.1) metadata URL for ``resource``: the well-known prefix inserted
    between its host and its path, so ``https://host/app/mcp`` has its document at
    ``https://host/.well-known/oauth-protected-resource/app/mcp``, at the host's root even when
    the site is mounted under ``/app`` (the deployment docs say how a proxy sends it there)."""
    parts = urlsplit(resource)
    return urlunsplit((parts.scheme, parts.netloc, PRM_PATH + parts.path, "", ""))


def own_authorization_server(resource: str, mount: str = "") -> str:
    """This site's own issuer: the resource's origin followed by ``mount``, the script name the
    site (and the django-oauth-toolkit endpoints it serves) is mounted under. Under ``/app``
    that issuer is ``https://host/app``, whose RFC 8414 metadata is at
    ``https://host/.well-known/oauth-authorization-server/app``."""
    parts = urlsplit(resource)
    return urlunsplit((parts.scheme, parts.netloc, mount.rstrip("/"), "", ""))


def authorization_servers(resource: str, mount: str = "") -> list[str]:
    """The issuers clients are sent to: AUTHORIZATION_SERVERS, else those the authentication
    policy names (:meth:`OAuthAuthentication.issuers`: this site's own for "oauth", the
    trusted issuers for "jwt")."""
    configured = mcp_settings.authorization_servers
    if configured:
        return list(configured)
    policy = mcp_settings.authentication_class
    if isinstance(policy, type) and issubclass(policy, OAuthAuthentication):
        return policy.issuers(resource, mount)
    return [own_authorization_server(resource, mount)]


def serves_resource_metadata() -> bool:
    """Whether the site is an OAuth resource server ("oauth", "jwt", or a subclass of
    :class:`OAuthAuthentication`), so serves RFC 9728 metadata."""
    if mcp_settings.authentication in ("oauth", "jwt"):
        return True
    try:
        policy = mcp_settings.authentication_class
    except ImportError:
        return False  # E004 reports it
    return isinstance(policy, type) and issubclass(policy, OAuthAuthentication)


def advertised_scopes(declared: Sequence[str] = ()) -> list[str]:
    """The scopes a client may ask for: SCOPES_SUPPORTED, REQUIRED_SCOPES, then ``declared``
    (every scope the site's entries use), without repeats. Naming them all lets a client get,
    up front, a token for everything the user may do instead of stepping up tool by tool."""
    return list(
        dict.fromkeys(
            [
                *(mcp_settings.scopes_supported or []),
                *(mcp_settings.required_scopes or []),
                *declared,
            ]
        )
    )


def protected_resource_metadata(
    resource: str, declared: Sequence[str] = (), mount: str = ""
) -> dict[str, Any]:
    """The RFC 9728 document for ``resource``; ``declared``: the scopes the site's entries use;
    ``mount``: the script name the site is served under (:func:`authorization_servers`)."""
    document: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": authorization_servers(resource, mount),
        "bearer_methods_supported": ["header"],
    }
    scopes = advertised_scopes(declared)
    if scopes:
        document["scopes_supported"] = scopes
    name = mcp_settings.resource_name or mcp_settings.server_title or mcp_settings.server_name
    document["resource_name"] = name
    return document


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(
    resource: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scopes: Sequence[str] | None = None,
) -> str:
    """Build a ``WWW-Authenticate: Bearer`` challenge (RFC 6750 section 3, RFC 9728 section 5.1);
    without ``scopes``, the advertised ones (SCOPES_SUPPORTED, REQUIRED_SCOPES)."""
    params = []
    if error:
        params.append(f"error={_quote(error)}")
    if description:
        params.append(f"error_description={_quote(description)}")
    scope = " ".join(scopes if scopes is not None else advertised_scopes())
    if scope:
        params.append(f"scope={_quote(scope)}")
    params.append(f"resource_metadata={_quote(metadata_url(resource))}")
    return "Bearer " + ", ".join(params)


class InsufficientScope(AuthenticationFailed):
    """The token is good but lacks scopes the operation needs: 403 with a step-up challenge."""

    def __init__(self, resource: str, scopes: list[str]) -> None:
        super().__init__(
            f"Insufficient scope: this operation needs {' '.join(scopes)}",
            status=HTTPStatus.FORBIDDEN,
            headers={
                "WWW-Authenticate": challenge(
                    resource,
                    error="insufficient_scope",
                    scopes=scopes,
                    description="The access token lacks a scope this operation needs",
                )
            },
        )
        self.scopes = scopes


class OAuthAuthentication(BaseAuthentication):
    """Bearer tokens from django-oauth-toolkit, bound to this server by their audience."""

    def _fail(
        self,
        resource: str,
        message: str,
        error: str | None = "invalid_token",
        status: int = HTTPStatus.UNAUTHORIZED,
        request: HttpRequest | None = None,
    ) -> AuthenticationFailed:
        # The transport puts a function on the request that gives the site's declared scopes
        # (mcp_declared_scopes): asked only here, when a challenge is sent, not on every request.
        declared = getattr(request, "mcp_declared_scopes", None)
        scopes = advertised_scopes(declared() if declared is not None else ())
        header = challenge(
            resource, error=error, description=message if error else None, scopes=scopes
        )
        return AuthenticationFailed(message, status=status, headers={"WWW-Authenticate": header})

    @classmethod
    def issuers(cls, resource: str, mount: str = "") -> list[str]:
        """The authorization servers the metadata names when AUTHORIZATION_SERVERS is unset:
        this site's own."""
        return [own_authorization_server(resource, mount)]

    def bearer_token(self, request: HttpRequest, resource: str) -> str:
        """The request's bearer token; refuse the request (400, or 401 with a challenge) when
        it carries none, or carries it where tokens are not accepted."""
        if "access_token" in request.GET:
            # RFC 6750 section 2.3 is forbidden by OAuth 2.1 and the MCP spec: never read it.
            message = (
                "Access tokens are not accepted in the query string; use the Authorization header."
            )
            raise self._fail(
                resource, message, "invalid_request", HTTPStatus.BAD_REQUEST, request=request
            )
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            raise self._fail(resource, "Authentication required.", error=None, request=request)
        if scheme.lower() != "bearer":
            # No bearer credentials at all: a plain challenge, without an error code (RFC 6750 3.1).
            raise self._fail(
                resource,
                "Authentication required: send 'Authorization: Bearer <token>'.",
                error=None,
                request=request,
            )
        if not token.strip():
            raise self._fail(
                resource,
                "The Authorization header must be 'Bearer <token>'.",
                "invalid_request",
                HTTPStatus.BAD_REQUEST,
                request=request,
            )
        return token.strip()

    def require_scopes(self, request: HttpRequest, resource: str, granted: frozenset[str]) -> None:
        """Keep the token's ``granted`` scopes on the request; refuse it with a step-up
        challenge when it lacks one of REQUIRED_SCOPES."""
        request.auth_scopes = granted  # type: ignore[attr-defined]
        if any(scope not in granted for scope in mcp_settings.required_scopes or []):
            raise InsufficientScope(resource, list(mcp_settings.required_scopes))

    async def authenticate(self, request: HttpRequest) -> Any:
        resource = resource_url(request, getattr(request, "mcp_endpoint_path", None))
        token = self.bearer_token(request, resource)
        found = await sync_to_async(self._load)(token)
        if found is None:
            raise self._fail(
                resource, "The access token is unknown, revoked or expired.", request=request
            )
        access_token, user = found
        audiences = [canonical(str(a)) for a in (access_token.resource or [])]
        if resource not in audiences:
            # Tokens issued without a resource, or for another server, are not ours to accept.
            raise self._fail(
                resource, "The access token was not issued for this server.", request=request
            )
        if user is None or not user.is_active:
            raise self._fail(
                resource, "The access token does not act for an active user.", request=request
            )
        request.auth_token = access_token  # type: ignore[attr-defined]
        self.require_scopes(request, resource, frozenset(access_token.scope.split()))
        return user

    @staticmethod
    def _load(token: str) -> tuple[Any, Any] | None:
        checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
        access_token = (
            _access_tokens().select_related("user").filter(token_checksum=checksum).first()
        )
        if access_token is None or access_token.is_expired():
            return None
        return access_token, access_token.user


def access_token_model() -> Any:
    """DOT's (swappable) access token model; None when DOT is not installed."""
    if not django_apps.is_installed("oauth2_provider"):
        return None
    # Optional dependency (the oauth extra), imported once the app registry is ready.
    from oauth2_provider.models import get_access_token_model

    return get_access_token_model()


def _access_tokens() -> Any:
    """DOT's access tokens (the swappable model's default manager)."""
    return access_token_model()._default_manager


def holds_live_token(user_id: Any, client_id: str, scopes: Collection[str]) -> bool:
    """Whether the active user ``user_id`` still holds a live token of the OAuth client
    ``client_id`` (not revoked: DOT deletes a revoked token; not expired) with every one of
    ``scopes``: what a durable task made with a token needs to go on. One query."""
    live = (
        _access_tokens()
        .select_related("user")
        .filter(user_id=user_id, application__client_id=client_id, expires__gt=timezone.now())
    )
    needed = set(scopes)
    return any(token.user.is_active and needed <= set(token.scope.split()) for token in live)
