"""The third-party OAuth pattern: a "connect" page that sends the user to another authorization
server, and a callback that stores the resulting tokens for that user.

The third party's tokens never reach the MCP client, and the client's token never reaches the
third party: the browser carries only this site's session cookie, a one-time ``state`` and the
provider's code, which this server exchanges itself (with PKCE).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import urllib.error
import urllib.parse
import urllib.request
from http import HTTPStatus
from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import never_cache

from ..auth.oauth import public_url
from ..conf import mcp_settings
from ..models import Elicitation
from . import services

SESSION_PREFIX = "mcp_django.connect."


def provider(name: str) -> dict[str, Any]:
    providers = mcp_settings.connect_providers or {}
    if name not in providers:
        raise Http404("No such provider")
    return providers[name]


def callback_url(request: HttpRequest, site_name: str) -> str:
    # The app namespace, with the site as current app: works whether the site's URLs are
    # included as ``include("mcp_django.urls")`` (instance namespace "mcp_django") or as
    # ``site.urls`` (instance namespace ``site.name``), like the admin's reverse().
    return public_url(request, reverse("mcp_django:connect-callback", current_app=site_name))


@method_decorator(never_cache, name="dispatch")
class ConnectElicitationView(LoginRequiredMixin, View):
    """Check the browser user, then redirect to the provider's authorize endpoint (with PKCE)."""

    site: Any = None

    def get(self, request: HttpRequest, elicitation_id: str) -> HttpResponse:
        elicitation = services.open_for(elicitation_id, request.user)
        if elicitation is None or not elicitation.params.get("provider"):
            raise Http404("No such request")
        config = provider(elicitation.params["provider"])
        state = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .decode()
            .rstrip("=")
        )
        redirect_uri = callback_url(request, self.site.name)
        # The state binds the callback to this browser session and this elicitation.
        request.session[SESSION_PREFIX + state] = {
            "elicitation": elicitation.pk,
            "verifier": verifier,
            "redirect_uri": redirect_uri,
        }
        query = {
            "response_type": "code",
            "client_id": config["client_id"],
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if config.get("scopes"):
            query["scope"] = " ".join(config["scopes"])
        query.update(config.get("extra_authorize_params", {}))
        return HttpResponseRedirect(
            config["authorize_url"]
            + ("&" if "?" in config["authorize_url"] else "?")
            + urllib.parse.urlencode(query)
        )


@method_decorator(never_cache, name="dispatch")
class ConnectCallbackView(LoginRequiredMixin, View):
    """Exchange the provider's code for tokens, store them for the user, finish the elicitation."""

    site: Any = None
    template_name = "mcp_django/elicitation/done.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        state = request.GET.get("state", "")
        pending = request.session.pop(SESSION_PREFIX + state, None) if state else None
        if pending is None:
            raise Http404("No such request")
        elicitation = services.open_for(pending["elicitation"], request.user)
        if elicitation is None:
            raise Http404("No such request")
        name = elicitation.params["provider"]
        config = provider(name)
        if "code" not in request.GET:
            services.finish(elicitation, Elicitation.State.DECLINED)
            return self.done(elicitation, Elicitation.State.DECLINED, config)
        try:
            tokens = self.exchange(config, request.GET["code"], pending)
        except (urllib.error.URLError, ValueError, KeyError) as exc:
            context = {
                "elicitation": elicitation,
                "state": "failed",
                "title": f"Could not connect {config.get('label', name)}",
                "error": str(exc)[:200],
            }
            return render(request, self.template_name, context, status=HTTPStatus.BAD_GATEWAY)
        services.store_secret(request.user, f"connect:{name}", json.dumps(tokens))
        services.finish(elicitation, Elicitation.State.COMPLETED)
        return self.done(elicitation, Elicitation.State.COMPLETED, config)

    def done(self, elicitation: Elicitation, state: str, config: dict[str, Any]) -> HttpResponse:
        title = (
            f"{config.get('label', elicitation.params['provider'])}: "
            f"{'connected' if state == 'completed' else 'not connected'}"
        )
        return render(
            self.request,
            self.template_name,
            {"elicitation": elicitation, "state": state, "title": title},
        )

    @staticmethod
    def exchange(config: dict[str, Any], code: str, pending: dict[str, Any]) -> dict[str, Any]:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending["redirect_uri"],
            "client_id": config["client_id"],
            "code_verifier": pending["verifier"],
        }
        if config.get("client_secret"):
            form["client_secret"] = config["client_secret"]
        request = urllib.request.Request(
            config["token_url"],
            data=urllib.parse.urlencode(form).encode(),
            headers={"Accept": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=float(config.get("timeout", 10))) as response:
            tokens = json.loads(response.read(1_000_000))
        if not isinstance(tokens, dict) or "access_token" not in tokens:
            raise ValueError("the provider's token response has no access_token")
        return tokens
