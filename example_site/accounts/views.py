"""The authorization server's pages and endpoints that differ from django-oauth-toolkit's."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.generic import TemplateView
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView, DynamicClientRegistrationView
from oauthlib.oauth2.rfc6749 import errors

from mcp_django.auth.oauth_validator import (
    LOOPBACK_HOSTS,
    is_mcp_resource,
    mcp_resource,
    redirect_uri_is_acceptable,
)

from .tokens import approved_before, live_tokens, revoke_tokens_of

AccessToken = get_access_token_model()
Application = get_application_model()


class ConsentView(AuthorizationView):
    """DOT's authorization endpoint with MCP's rules applied before the user is asked.

    DOT refuses a ``plain`` PKCE challenge and checks ``resource`` only when the code is
    issued or exchanged, i.e. after the user has already approved. Refusing here sends the
    client its error straight away, and the consent page never shows a request that cannot
    succeed.
    """

    def validate_authorization_request(self, request: HttpRequest) -> Any:
        scopes, credentials = super().validate_authorization_request(request)
        # From here on the client and its redirect URI are known good: errors go back to it.
        redirect_uri = credentials["redirect_uri"]
        state = credentials.get("state")
        if credentials.get("code_challenge_method") != "S256":
            # oauthlib reads a missing method as "plain" (RFC 7636 section 4.3); MCP clients
            # MUST use S256 and the metadata advertises nothing else.
            raise OAuthToolkitError(
                error=errors.InvalidRequestError(
                    description='PKCE code_challenge_method must be "S256".', state=state
                ),
                redirect_uri=redirect_uri,
            )
        for resource in request.GET.getlist("resource"):
            if not is_mcp_resource(resource):
                raise OAuthToolkitError(
                    error=errors.CustomOAuth2Error(
                        error="invalid_target",
                        description=f"This server issues tokens only for {mcp_resource()}.",
                        state=state,
                    ),
                    redirect_uri=redirect_uri,
                )
        # Kept for render_to_response (DOT adds "resource" to the same dict afterwards).
        self.requested = (scopes, credentials)
        return scopes, credentials

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        # A GET reaches this only once DOT decided to ask. DOT's "auto" remembers an approval
        # only while an access token is unexpired (an hour); the connected-applications page
        # lists the client for as long as its refresh token works, so remember it as long.
        application = context.get("application")
        if (
            self.request.method == "GET"
            and application is not None
            and self.approval_remembered(application)
        ):
            scopes, credentials = self.requested
            try:
                uri, _headers, _body, _status = self.create_authorization_response(
                    request=self.request,
                    scopes=" ".join(scopes),
                    credentials=credentials,
                    allow=True,
                )
            except OAuthToolkitError as error:
                return self.error_response(error, application)
            return self.redirect(uri, application)
        return super().render_to_response(context, **kwargs)

    def approval_remembered(self, application: Any) -> bool:
        # approval_prompt=force in the request (DOT's parameter) asks whatever was approved.
        if (
            self.request.GET.get("approval_prompt", oauth2_settings.REQUEST_APPROVAL_PROMPT)
            != "auto"
        ):
            return False
        scopes, _credentials = self.requested
        return approved_before(self.request.user, application, scopes)

    def form_valid(self, form: Any) -> HttpResponse:
        # The hidden fields come back from the browser: check them again.
        if form.cleaned_data.get("code_challenge_method") != "S256" or not all(
            is_mcp_resource(r) for r in (form.cleaned_data.get("resource") or "").split()
        ):
            form.add_error(
                None, "This authorization request was altered; start again from the application."
            )
            return self.form_invalid(form)
        return super().form_valid(form)

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        # RFC 9207: the issuer goes on error responses too, not only on the code (DOT adds it
        # to successful ones). Adding it again is harmless: the helper replaces any iss present.
        if oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS:
            redirect_to = _add_iss_to_redirect(
                redirect_to, oauth2_settings.oauth2_authorization_server_issuer(self.request)
            )
        return super().redirect(redirect_to, application)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        application = context.get("application")
        redirect_uri = context.get("redirect_uri") or ""
        host = urlsplit(redirect_uri).hostname or ""
        context.update(
            # Always shown: for a client identified by a URL, the redirect host is the only
            # thing tying the request to someone the user may recognise (CIMD draft, MCP spec).
            redirect_host=urlsplit(redirect_uri).netloc,
            redirect_is_loopback=host in LOOPBACK_HOSTS,
            resource=mcp_resource(),
            server_title=settings.MCP_DJANGO.get("SERVER_TITLE") or "this site",
        )
        if application is not None:
            from_document = application.registration_source == application.RegistrationSource.CIMD
            context.update(
                client_from_document=from_document,
                client_document_host=urlsplit(application.client_id).netloc
                if from_document
                else "",
                client_registered_dynamically=application.registration_source
                == application.RegistrationSource.DCR,
            )
        return context


def client_address(request: HttpRequest) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is whatever the client wants it to be unless a
    # trusted proxy rewrote it, and this site does not know its proxies (see the docs).
    return request.META.get("REMOTE_ADDR", "")


class RegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration, open to anonymous MCP clients (the spec's use), with a rate limit
    per client address and only the grants this server issues tokens through.

    DOT 3.4 has no throttle of its own; without one, anybody can fill the application table.
    """

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limited = self.rate_limited(request)
        if limited is not None:
            return limited
        try:
            metadata = json.loads(request.body)
        except ValueError:
            metadata = None  # DOT answers invalid_client_metadata itself
        if isinstance(metadata, dict):
            uris = metadata.get("redirect_uris")
            if isinstance(uris, list) and not all(
                isinstance(u, str) and redirect_uri_is_acceptable(u) for u in uris
            ):
                # Refused at authorize anyway; saying so at registration spares the client a
                # registration it can never use (RFC 7591 section 3.2.2).
                return JsonResponse(
                    {
                        "error": "invalid_redirect_uri",
                        "error_description": "Redirect URIs must use https, or http on a loopback address (127.0.0.1, [::1], localhost).",
                    },
                    status=400,
                )
            grant_types = metadata.get("grant_types", ["authorization_code"])
            if isinstance(grant_types, list) and not set(grant_types) <= {
                "authorization_code",
                "refresh_token",
            }:
                return JsonResponse(
                    {
                        "error": "invalid_client_metadata",
                        "error_description": "Only the authorization_code and refresh_token grant types are supported.",
                    },
                    status=400,
                )
        return super().post(request, *args, **kwargs)

    def rate_limited(self, request: HttpRequest) -> HttpResponse | None:
        count, window = settings.OAUTH_DCR_RATE_LIMIT
        key = f"accounts:dcr:{client_address(request)}"
        # A fixed window: add() starts it, incr() counts in it. Needs a cache shared by all
        # server processes to hold across them (settings.py uses Redis when REDIS_URL is set).
        cache.add(key, 0, timeout=window)
        try:
            seen = cache.incr(key)
        except ValueError:  # the window ended between add() and incr()
            cache.set(key, 1, timeout=window)
            seen = 1
        if seen <= count:
            return None
        response = JsonResponse(
            {
                "error": "too_many_requests",
                "error_description": "Too many client registrations from this address; try again later.",
            },
            status=429,
        )
        response["Retry-After"] = str(window)
        return response


class ConnectedApplicationsView(LoginRequiredMixin, TemplateView):
    """The applications acting for the signed-in user, each with a button that revokes its
    access. The admin shows the same to staff; this page is for every user, staff or not."""

    template_name = "accounts/connected_applications.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        user = self.request.user
        # Acting for the user: an unexpired access token, or one whose refresh token still works.
        live = live_tokens(user).select_related("application").order_by("-created")
        applications: dict[int, dict[str, Any]] = {}
        for token in live:
            entry = applications.setdefault(
                token.application_id,
                {
                    "application": token.application,
                    "scopes": set(),
                    "last_authorized": token.created,
                },
            )
            entry["scopes"].update(token.scope.split())
        described = oauth2_settings.SCOPES
        for entry in applications.values():
            entry["scope_descriptions"] = [
                described.get(scope, scope) for scope in sorted(entry["scopes"])
            ]
            entry["redirect_hosts"] = sorted(
                {urlsplit(uri).netloc for uri in entry["application"].redirect_uris.split()}
            )
        context.update(
            applications=list(applications.values()),
            server_title=settings.MCP_DJANGO.get("SERVER_TITLE") or "this site",
        )
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        application = Application.objects.filter(pk=request.POST.get("application")).first()
        if application is not None:
            revoked = revoke_tokens_of([application], request.user)
            name = application.name or application.client_id
            messages.success(
                request, f"{name} can no longer act for you ({revoked} token(s) revoked)."
            )
        return redirect("connected-applications")
