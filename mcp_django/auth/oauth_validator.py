"""django-oauth-toolkit tightened for MCP clients, for a project that is its own
authorization server: ``OAUTH2_PROVIDER["OAUTH2_VALIDATOR_CLASS"] =
"mcp_django.auth.oauth_validator.MCPOAuth2Validator"`` and ``"CIMD_METADATA_FETCHER":
"mcp_django.auth.oauth_validator.MetadataFetcher"`` (docs/authorization.md).

DOT 3.4 accepts any absolute URI as an RFC 8707 ``resource`` and issues tokens without one,
which its own resource servers then accept everywhere. The site protects exactly one
resource, the MCP endpoint (``MCP_DJANGO["RESOURCE_URL"]``), so every token is bound to that
endpoint's canonical URI: other resources are refused with ``invalid_target``, and a request
without ``resource`` gets this one as the default audience (RFC 8707 section 2 allows a
predefined default).

With the service clients app installed (``mcp_django.auth.service_clients``), confidential
applications an admin marked as service clients also get tokens with ``client_credentials``
(RFC 6749 section 4.4), acting as the service user they are bound to, for the same resource.

Imported only by DOT, through those settings: it needs the ``oauth`` extra.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps as django_apps
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher, is_cimd_client_id
from oauth2_provider.models import AbstractApplication
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from ..conf import mcp_settings
from .oauth import canonical
from .service_clients import CLIENT_CREDENTIALS, SERVICE_CLIENTS_APP
from .service_clients.rules import Fault, client_credentials_faults

# RFC 8252 section 7.3 (and the MCP spec): plain-http redirects only to the user's own machine.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})

# The grants an MCP client needs. DOT lets dynamically registered clients pick others
# (client_credentials, password, device code) and the metadata lists are advertisement only,
# so the token endpoint enforces this list itself.
ALLOWED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
# RFC 7523 with an ID-JAG assertion (mcp_django.auth.oauth_server), while ID_JAG_ISSUERS names
# identity providers: for confidential clients only (the draft's section 7.1).
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def service_client_of(application: Any) -> Any:
    """The service client mark of ``application`` with its user, or None (also when the
    service clients app is not installed)."""
    if application is None or not django_apps.is_installed(SERVICE_CLIENTS_APP):
        return None
    model = django_apps.get_model("mcp_service_clients", "ServiceClient")
    return model._default_manager.select_related("user").filter(application=application).first()


#: What the token endpoint says of each rule an application breaks for client_credentials.
CLIENT_CREDENTIALS_FAULTS = {
    Fault.PUBLIC_CLIENT: "Only confidential clients may use the client_credentials grant.",
    Fault.OTHER_GRANT_TYPE: "This application's grant type is not client credentials.",
}


def service_client_refusal(application: Any, service_client: Any) -> str | None:
    """Why ``application`` may not use ``client_credentials`` now, in words for its owner (it
    has authenticated with its secret); None when it may."""
    faults = client_credentials_faults(application)
    if faults:
        return CLIENT_CREDENTIALS_FAULTS[faults[0]]
    if service_client is None:
        return "This application is not a service client: an admin has to mark it as one."
    if not service_client.enabled:
        return "This service client is disabled."
    if not service_client.user.is_active:
        return "This service client's service user is inactive."
    return None


def mcp_resource() -> str:
    """The canonical URI of this site's MCP endpoint, the one audience tokens are issued for."""
    configured = mcp_settings.resource_url
    if not configured:
        # No request to derive it from here: the token endpoint is not the MCP endpoint.
        raise ImproperlyConfigured(
            "MCPOAuth2Validator binds tokens to MCP_DJANGO['RESOURCE_URL']: set it to the "
            "endpoint's public URL (e.g. https://mcp.example.com/mcp)."
        )
    return canonical(configured)


def is_mcp_resource(uri: object) -> bool:
    return isinstance(uri, str) and canonical(uri) == mcp_resource()


def redirect_uri_is_acceptable(uri: str) -> bool:
    """https anywhere, http only on loopback (RFC 8252 native clients), nothing else."""
    parts = urlsplit(uri)
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


def public_reason(error: CIMDError) -> str:
    """Why a client ID metadata document was refused, in words safe to show anyone: the
    resolved addresses and the network error stay in the log."""
    message = str(error)
    if "non-public address" in message:
        return "its host resolves to a non-public address"
    if message.startswith("could not resolve"):
        return "its host name could not be resolved"
    if message.startswith("could not fetch"):
        return "it could not be fetched"
    return message  # DOT's other reasons name only the document's own faults (status, type, size)


def _refusal_key(client_id: str) -> str:
    return "mcp_django:cimd-refusal:" + hashlib.sha256(client_id.encode()).hexdigest()


class MetadataFetcher(SafeMetadataFetcher):  # type: ignore[misc]
    """DOT's fetcher (public https addresses only), remembering why it refused a document:
    DOT only logs the reason and answers "Invalid client_id parameter value.", which leaves the
    user and the client's developer guessing. Kept as long as DOT's backoff, during which DOT
    does not fetch again."""

    def fetch(self, client_id: str) -> Any:
        try:
            return super().fetch(client_id)
        except CIMDError as error:
            cache.set(
                _refusal_key(client_id),
                public_reason(error),
                oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS,
            )
            raise


class MCPOAuth2Validator(OAuth2Validator):  # type: ignore[misc]
    """DOT's validator issuing tokens for the MCP endpoint only: see the module docstring."""

    def validate_client_id(self, client_id: str, request: Any, *args: Any, **kwargs: Any) -> bool:
        if super().validate_client_id(client_id, request, *args, **kwargs):
            return True
        reason = cache.get(_refusal_key(client_id)) if is_cimd_client_id(client_id) else None
        if reason:
            # Shown on the error page (never a redirect: the client is unknown) as
            # error_description.
            raise errors.InvalidClientIdError(
                description=f"This client's metadata document was refused: {reason}.",
                request=request,
            )
        return False

    def _validate_resource_uris(self, request: Any, resources: list[str]) -> None:
        # Called for the token request's own values and for those inherited from the grant or
        # refresh token, so a resource smuggled in at the authorization endpoint is caught too.
        # Ours first: DOT's check parses each value with urlsplit, which raises on "https://["
        # (a 500); past ours, only this server's own URI is left for it to parse.
        for resource in resources:
            if not is_mcp_resource(resource):
                raise errors.CustomOAuth2Error(
                    error="invalid_target",
                    description=(
                        f"This server issues tokens only for {mcp_resource()}, not for "
                        f"{resource!r}."
                    ),
                    request=request,
                )
        super()._validate_resource_uris(request, resources)

    def _check_and_set_request_resource(self, request: Any) -> None:
        super()._check_and_set_request_resource(request)
        if not request.resource:
            # A token without an audience would be accepted by any resource server trusting
            # DOT's defaults; bind it to the one resource this server protects.
            request.resource = [mcp_resource()]

    def validate_scopes(
        self,
        client_id: str,
        scopes: list[str],
        client: Any,
        request: Any,
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        # oauthlib turns "scope=" into [""] and refuses it as invalid_scope; some MCP clients
        # send exactly that. An empty scope means "no scope asked for": use the defaults.
        wanted = [scope for scope in scopes if scope]
        if not wanted:
            wanted = self.get_default_scopes(client_id, request)
        if wanted != list(scopes):
            request.scopes = wanted  # oauthlib reads the validated list back from the request
        allowed = _service_scopes(request)
        if allowed is not None and not set(wanted) <= allowed:
            return False  # invalid_scope: beyond what the admin allowed this service client
        return bool(super().validate_scopes(client_id, wanted, client, request, *args, **kwargs))

    def get_default_scopes(self, client_id: str, request: Any, *args: Any, **kwargs: Any) -> Any:
        defaults = super().get_default_scopes(client_id, request, *args, **kwargs)
        allowed = _service_scopes(request)
        # A service client asking for no scope gets the defaults it is allowed, not a refusal.
        return defaults if allowed is None else [s for s in defaults if s in allowed]

    def validate_redirect_uri(
        self, client_id: str, redirect_uri: str, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        # DOT allows http redirects to any host once "http" is an allowed scheme (needed for
        # loopback); registration cannot be trusted to have checked, so check every request.
        if not redirect_uri_is_acceptable(redirect_uri):
            return False
        valid = super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)
        return bool(valid)

    def validate_grant_type(
        self, client_id: str, grant_type: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if grant_type == CLIENT_CREDENTIALS:
            return self._validate_service_client(client, request)
        if grant_type == JWT_BEARER:
            return self._validate_id_jag_client(client, request)
        if grant_type not in ALLOWED_GRANT_TYPES:
            return False
        valid = super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)
        return bool(valid)

    def _validate_id_jag_client(self, client: Any, request: Any) -> bool:
        # The grant has authenticated the client (invalid_client otherwise) before asking this:
        # a confidential one with its credentials, a public one by its client_id alone.
        if not mcp_settings.id_jag_issuers:
            return False
        if client.client_type != AbstractApplication.CLIENT_CONFIDENTIAL:
            # The draft's section 7.1: a public client proves nothing about who presents the
            # assertion, so anyone holding a leaked one could spend it.
            raise errors.UnauthorizedClientError(
                description="Public clients cannot exchange identity assertions; use the "
                "authorization code grant.",
                request=request,
            )
        return True

    def _validate_service_client(self, client: Any, request: Any) -> bool:
        # oauthlib has authenticated the client (invalid_client otherwise) before asking this.
        if client is None:
            return False
        service_client = service_client_of(client)
        refusal = service_client_refusal(client, service_client)
        if refusal is not None:
            # unauthorized_client with the reason: the client proved it owns the secret.
            raise errors.UnauthorizedClientError(description=refusal, request=request)
        request.mcp_service_client = service_client
        self._bind_resource(request)
        return True

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            return False
        # The code is the client's: its grant's resource, and the request's, can be checked.
        self._bind_resource(request)
        return True

    def validate_refresh_token(
        self, refresh_token: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        self._bind_resource(request)
        return True

    def _bind_resource(self, request: Any) -> None:
        """Check and set the token's audience while oauthlib validates the request, not only
        when DOT saves the token: oauthlib answers an error raised while validating as a JSON
        body with its Content-Type, but lets one raised by ``save_token`` reach DOT's view,
        which sends the JSON as ``text/html``. DOT checks again when saving, with the same
        answer: the resources it then finds on the request are the ones checked here."""
        self._check_and_set_request_resource(request)

    def _create_access_token(
        self, expires: Any, request: Any, token: Any, source_refresh_token: Any = None
    ) -> Any:
        if request.grant_type == CLIENT_CREDENTIALS:
            # DOT issues client_credentials tokens for no user; ours act as the service user,
            # so its permissions and row rules apply on the MCP endpoint like anyone's.
            request.user = request.mcp_service_client.user
        return super()._create_access_token(expires, request, token, source_refresh_token)


def _service_scopes(request: Any) -> frozenset[str] | None:
    """The scopes the request's service client may have; None when any scope will do (not a
    service client's request, or one without a restriction)."""
    service_client = getattr(request, "mcp_service_client", None)
    if service_client is None or not service_client.scopes:
        return None
    return frozenset(service_client.scopes)
