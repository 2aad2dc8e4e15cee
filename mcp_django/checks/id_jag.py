"""Checks of enterprise-managed authorization (``ID_JAG_ISSUERS``): the identity providers'
entries, and the django-oauth-toolkit settings without which the token endpoint would not take
their assertions, or would take them and issue tokens nobody can bind or advertise."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.urls import NoReverseMatch, resolve, reverse
from django.utils.module_loading import import_string

from .auth import issuer_entry_errors

SERVER_CLASS = "mcp_django.auth.oauth_server.Server"
VALIDATOR_CLASS = "mcp_django.auth.oauth_validator.MCPOAuth2Validator"
METADATA_VIEW = "mcp_django.auth.oauth_server.ServerMetadataView"


def check_id_jag(user: dict[str, Any]) -> list[CheckMessage]:
    """``ID_JAG_ISSUERS`` and what the jwt-bearer grant needs beside it; nothing when unset."""
    entries = user.get("ID_JAG_ISSUERS")
    if not entries:
        return []
    errors = _check_entries(entries)
    if not apps.is_installed("oauth2_provider"):
        errors.append(
            Error(
                "MCP_DJANGO['ID_JAG_ISSUERS'] is set but django-oauth-toolkit is not installed: "
                "there is no token endpoint to present the assertions to.",
                hint="pip install django-oauth-toolkit, add 'oauth2_provider' to INSTALLED_APPS "
                "(docs/howto/managed-connectors.md), or remove ID_JAG_ISSUERS.",
                id="mcp_django.E083",
            )
        )
        return errors
    if not user.get("RESOURCE_URL"):
        errors.append(
            Error(
                "MCP_DJANGO['ID_JAG_ISSUERS'] is set but RESOURCE_URL is not: the resource the "
                "assertions must name, and the tokens are bound to, is unknown.",
                hint="Set RESOURCE_URL to the MCP endpoint's public URL, e.g. \"https://mcp."
                'example.com/mcp"; the identity provider puts it in the resource claim.',
                id="mcp_django.E086",
            )
        )
    errors += _check_dot_classes()
    if importlib.util.find_spec("jwt") is None:
        errors.append(
            Error(
                "PyJWT is not installed: ID-JAG assertions cannot be verified.",
                hint="pip install 'django-mcp-site[jwt]' (PyJWT with its crypto extra).",
                id="mcp_django.E084",
            )
        )
    provider = getattr(settings, "OAUTH2_PROVIDER", {}) or {}
    if not provider.get("OIDC_ISS_ENDPOINT") and not all(
        isinstance(e, Mapping) and e.get("audience") for e in entries
    ):
        errors.append(
            Warning(
                "OAUTH2_PROVIDER['OIDC_ISS_ENDPOINT'] is not set: ID-JAG assertions must name "
                "the MCP endpoint's origin as their aud, which under a path prefix is not the "
                "issuer the metadata announces.",
                hint="Set OIDC_ISS_ENDPOINT to this authorization server's issuer (what the "
                "identity provider is told to put in aud).",
                id="mcp_django.W080",
            )
        )
    errors += _check_metadata_view()
    return errors


def _check_entries(entries: Any) -> list[CheckMessage]:
    if not isinstance(entries, (list, tuple)):
        entries = [entries]
    errors: list[CheckMessage] = []
    for index, entry in enumerate(entries):
        name = f"MCP_DJANGO['ID_JAG_ISSUERS'][{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("issuer"), str):
            errors.append(
                Error(
                    f"{name} is not a dict with an issuer.",
                    hint='Each entry is a dict with at least "issuer": the identity provider\'s '
                    "issuer URL exactly as its metadata names it.",
                    id="mcp_django.E080",
                )
            )
            continue
        errors += issuer_entry_errors(
            name, entry, urls="mcp_django.E081", algorithms="mcp_django.E085"
        )
    return errors


def _check_dot_classes() -> list[CheckMessage]:
    """DOT's server and validator classes: ours (or subclasses), or the grant is not served."""
    provider = getattr(settings, "OAUTH2_PROVIDER", {}) or {}
    errors: list[CheckMessage] = []
    for key, expected, default in (
        ("OAUTH2_SERVER_CLASS", SERVER_CLASS, "oauthlib.oauth2.Server"),
        (
            "OAUTH2_VALIDATOR_CLASS",
            VALIDATOR_CLASS,
            "oauth2_provider.oauth2_validators.OAuth2Validator",
        ),
    ):
        value = provider.get(key, default)
        try:
            configured = import_string(value) if isinstance(value, str) else value
            wanted = import_string(expected)
        except ImportError:
            configured, wanted = None, object()
        if not (isinstance(configured, type) and issubclass(configured, wanted)):
            errors.append(
                Error(
                    f"MCP_DJANGO['ID_JAG_ISSUERS'] is set but OAUTH2_PROVIDER[{key!r}] is "
                    f"{value!r}: the token endpoint would not take ID-JAG assertions.",
                    hint=f'Set OAUTH2_PROVIDER["{key}"] = "{expected}" (or a subclass).',
                    id="mcp_django.E082",
                )
            )
    return errors


def _check_metadata_view() -> list[CheckMessage]:
    """The RFC 8414 metadata at the domain root: served by our view, which lists the grant."""
    try:
        match = resolve(reverse("oauth2_provider:oauth-server-metadata"))
    except NoReverseMatch:
        return []  # no metadata served at all: nothing advertises anything
    view_class = getattr(match.func, "view_class", None)
    if isinstance(view_class, type) and issubclass(view_class, import_string(METADATA_VIEW)):
        return []
    return [
        Warning(
            "The RFC 8414 metadata is not served by mcp_django's view: it does not list the "
            "jwt-bearer grant and the ID-JAG profile, so clients will not try them.",
            hint="Serve mcp_django.auth.oauth_server.metadata_urlpatterns in place of "
            "django-oauth-toolkit's metadata patterns (docs/howto/managed-connectors.md).",
            id="mcp_django.W081",
        )
    ]
