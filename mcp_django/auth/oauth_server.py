"""django-oauth-toolkit's token endpoint taking ID-JAG assertions (enterprise-managed
authorization): ``OAUTH2_PROVIDER["OAUTH2_SERVER_CLASS"] = "mcp_django.auth.oauth_server.Server"``
with :class:`~mcp_django.auth.oauth_validator.MCPOAuth2Validator`, and the identity providers in
``MCP_DJANGO["ID_JAG_ISSUERS"]`` (docs/howto/managed-connectors.md).

:class:`IDJAGGrant` is oauthlib's extension-grant shape (RFC 6749 section 4.5) for the RFC 7523
``jwt-bearer`` grant, profiled by draft-ietf-oauth-identity-assertion-authz-grant: the client
authenticates as DOT authenticates it for any grant, the assertion is verified
(:mod:`mcp_django.auth.id_jag`), and an access token is issued for the asserted user, bound to
the MCP endpoint, without a refresh token. :class:`ServerMetadataView` advertises the grant in
the RFC 8414 metadata while providers are configured.

Imported only by DOT and the project's URLconf: it needs the ``oauth`` and ``jwt`` extras.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.db import router, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from oauth2_provider.models import get_access_token_model
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import OAuthServerMetadataView
from oauthlib.oauth2 import Server as OAuthlibServer
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase

from .id_jag import (
    ID_JAG_PROFILE,
    Assertion,
    AssertionRefused,
    id_jag_issuers,
    is_spent,
    spend,
    verify_assertion,
)
from .oauth import own_authorization_server
from .oauth_validator import JWT_BEARER, mcp_resource
from .subjects import user_for_claims

logger = logging.getLogger(__name__)


def authorization_server_issuer() -> str:
    """This authorization server's issuer, the audience an ID-JAG must name:
    ``OIDC_ISS_ENDPOINT`` (what the RFC 8414 metadata says), else the MCP endpoint's origin."""
    return str(oauth2_settings.OIDC_ISS_ENDPOINT or own_authorization_server(mcp_resource()))


class IDJAGGrant(GrantTypeBase):  # type: ignore[misc]
    """The RFC 7523 ``jwt-bearer`` grant with an ID-JAG assertion: see the module docstring.

    Refusals are ``invalid_request`` (no assertion), ``invalid_client`` (client authentication
    failed), ``unauthorized_client`` (the validator does not allow the client this grant: a
    public client, or no identity provider configured), ``invalid_grant`` (the assertion: RFC
    7523 section 3.1) and ``invalid_scope``. Each is logged with the client and the reason,
    never the assertion, and leaves nothing behind: the ``jti`` is recorded in the transaction
    that saves the token."""

    # The provider keeps the decision: when the token expires the client asks it again, so
    # access it withdraws ends within a token's lifetime (a refresh token would outlive it).
    refresh_token = False

    def create_token_response(
        self, request: Any, token_handler: Any
    ) -> tuple[dict[str, str], str, int]:
        headers = self._get_default_headers()
        try:
            self.validate_token_request(request)
            token = token_handler.create_token(request, refresh_token=False)
            for modifier in self._token_modifiers:
                token = modifier(token)
            self._save(token, request)
        except errors.OAuth2Error as error:
            logger.warning(
                "ID-JAG exchange refused for client %r: %s (%s)",
                request.client_id,
                error.error,
                error.description,
            )
            headers.update(error.headers)
            return headers, error.json, error.status_code
        logger.info(
            "ID-JAG of %s exchanged by client %r for user %s",
            request.id_jag.issuer.issuer,
            request.client_id,
            getattr(request.user, "pk", None),
        )
        return headers, json.dumps(token), 200

    def _save(self, token: dict[str, Any], request: Any) -> None:
        """Record the assertion's use and save the token, both or neither."""
        using = router.db_for_write(get_access_token_model())
        try:
            with transaction.atomic(using=using):
                spend(request.id_jag)
                self.request_validator.save_token(token, request)
        except AssertionRefused as refused:
            raise errors.InvalidGrantError(description=str(refused), request=request) from None

    def validate_token_request(self, request: Any) -> None:
        for validator in self.custom_validators.pre_token:
            validator(request)
        if request.grant_type != JWT_BEARER:
            raise errors.UnsupportedGrantTypeError(request=request)
        for param in ("grant_type", "assertion", "scope", "resource"):
            if param in request.duplicate_params:
                raise errors.InvalidRequestError(
                    description=f"Duplicate {param} parameter.", request=request
                )
        assertion = getattr(request, "assertion", None)
        if not isinstance(assertion, str) or not assertion:
            raise errors.InvalidRequestError(
                description="Missing assertion parameter.", request=request
            )
        self._authenticate_client(request)
        self.validate_grant_type(request)
        request.id_jag = self._verify(request, assertion)
        self._bind_resource(request)
        self._validate_scopes(request, request.id_jag)
        request.user = self._user(request, request.id_jag)
        for validator in self.custom_validators.post_token:
            validator(request)

    def _authenticate_client(self, request: Any) -> None:
        """The client with its credentials, as DOT authenticates it for any grant
        (``invalid_client`` when they fail); a public client only names itself. Who may use
        this grant (confidential clients only) is the validator's ``validate_grant_type``, asked
        next, so that one refusal covers a public client with or without a secret."""
        if self.request_validator.client_authentication_required(request):
            self.validate_client_confidential(request)
        else:
            self.validate_client_public(request)

    def _verify(self, request: Any, assertion: str) -> Assertion:
        try:
            verified = verify_assertion(
                assertion,
                client_id=request.client.client_id,
                audience=authorization_server_issuer(),
                resource=mcp_resource(),
            )
            if is_spent(verified):
                raise AssertionRefused("The assertion has already been used.")
        except AssertionRefused as refused:
            raise errors.InvalidGrantError(description=str(refused), request=request) from None
        return verified

    def _bind_resource(self, request: Any) -> None:
        """The token's audience is the MCP endpoint the assertion names; a ``resource``
        parameter, if any, must name it too (``invalid_target``, RFC 8707 section 2)."""
        requested = getattr(request, "resource", None)
        if requested and requested != mcp_resource():
            # The validator says which resources this server issues tokens for.
            self.request_validator._validate_resource_uris(request, [requested])
        request.resource = [mcp_resource()]

    def _validate_scopes(self, request: Any, assertion: Assertion) -> None:
        """The asserted scopes (or the default ones, when the provider sends none), narrowed to
        a ``scope`` parameter, which may not go beyond them, and to what the application may
        have (the MCP extension's section 7.2.1: the intersection; least privilege)."""
        asserted = assertion.scopes
        if asserted is None:
            asserted = list(self.request_validator.get_default_scopes(request.client_id, request))
        wanted = [s for s in (request.scopes or []) if s]
        if wanted and not set(wanted) <= set(asserted):
            raise errors.InvalidScopeError(
                description="The scope asked for goes beyond the assertion's.", request=request
            )
        available = set(
            get_scopes_backend().get_available_scopes(application=request.client, request=request)
        )
        granted = [s for s in dict.fromkeys(wanted or asserted) if s in available]
        if not granted:
            raise errors.InvalidScopeError(
                description="None of the asserted scopes is one this client may have.",
                request=request,
            )
        request.scopes = granted
        if not self.request_validator.validate_scopes(
            request.client_id, granted, request.client, request
        ):
            raise errors.InvalidScopeError(request=request)

    def _user(self, request: Any, assertion: Assertion) -> Any:
        """The active user the assertion's subject maps to (``JWT_USER_HOOK``): the last check,
        so a hook that creates users creates none for a refused assertion."""
        user = user_for_claims(assertion.claims, assertion.issuer)
        if user is None or not user.is_active:
            raise errors.InvalidGrantError(
                description="The assertion's subject is not an active user of this site.",
                request=request,
            )
        return user


class Server(OAuthlibServer):  # type: ignore[misc]
    """oauthlib's server with the ID-JAG grant beside DOT's usual ones."""

    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        self.id_jag_grant = IDJAGGrant(request_validator)
        self._grant_types[JWT_BEARER] = self.id_jag_grant


def id_jag_enabled() -> bool:
    """Whether the token endpoint takes ID-JAGs: providers configured, and DOT using
    :class:`Server` (mcp_django.E081 reports the second missing)."""
    server_class = oauth2_settings.OAUTH2_SERVER_CLASS
    return (
        bool(id_jag_issuers())
        and isinstance(server_class, type)
        and issubclass(server_class, Server)
    )


class ServerMetadataView(OAuthServerMetadataView):  # type: ignore[misc]
    """DOT's RFC 8414 metadata, listing the ``jwt-bearer`` grant and the ID-JAG profile (the
    MCP extension, section 6) while :func:`id_jag_enabled`."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().get(request, *args, **kwargs)
        if not id_jag_enabled():
            return response
        data = json.loads(response.content)
        grant_types = list(data.get("grant_types_supported", []))
        if JWT_BEARER not in grant_types:
            grant_types.append(JWT_BEARER)
        data["grant_types_supported"] = grant_types
        data["authorization_grant_profiles_supported"] = [ID_JAG_PROFILE]
        answer = JsonResponse(data)
        answer["Access-Control-Allow-Origin"] = "*"
        return answer


#: DOT's two RFC 8414 metadata routes (the domain root and the issuer-path form) served by
#: :class:`ServerMetadataView`, under DOT's URL names.
metadata_urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        ServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-authorization-server/<path:issuer_path>",
        ServerMetadataView.as_view(),
        name="oauth-server-metadata-issuer",
    ),
]

__all__ = [
    "IDJAGGrant",
    "Server",
    "ServerMetadataView",
    "authorization_server_issuer",
    "id_jag_enabled",
    "metadata_urlpatterns",
]
