"""Checks of service clients (``mcp_django.auth.service_clients``): the validator that issues
their tokens, and the metadata that tells clients the grant exists (ids mcp_django.E/W270).

Read from the ``OAUTH2_PROVIDER`` dict with django-oauth-toolkit's defaults, as DOT will, so
that nothing of DOT is imported where it may not be installed."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from ..auth.service_clients import CLIENT_CREDENTIALS, SERVICE_CLIENTS_APP

VALIDATOR = "mcp_django.auth.oauth_validator.MCPOAuth2Validator"
#: DOT's defaults of the two keys read here.
DOT_VALIDATOR = "oauth2_provider.oauth2_validators.OAuth2Validator"
DOT_GRANT_TYPES = ["authorization_code", "implicit", "password", "client_credentials"]


def _is_ours(validator: Any) -> bool:
    """Whether ``validator`` (a class or its dotted path) is MCPOAuth2Validator or a subclass."""
    try:
        cls = import_string(validator) if isinstance(validator, str) else validator
    except ImportError:
        return False  # DOT's own settings loading reports that
    return isinstance(cls, type) and any(
        f"{c.__module__}.{c.__qualname__}" == VALIDATOR for c in cls.__mro__
    )


def check_service_clients() -> list[CheckMessage]:
    """With DOT installed: service clients installed with a validator that ignores them, or the
    ``client_credentials`` grant advertised by one side only."""
    provider = getattr(settings, "OAUTH2_PROVIDER", None) or {}
    if not apps.is_installed("oauth2_provider") or not isinstance(provider, dict):
        return []
    installed = apps.is_installed(SERVICE_CLIENTS_APP)
    ours = _is_ours(provider.get("OAUTH2_VALIDATOR_CLASS", DOT_VALIDATOR))
    grant_types = provider.get("OAUTH2_GRANT_TYPES_SUPPORTED", DOT_GRANT_TYPES)
    advertised = isinstance(grant_types, (list, tuple)) and CLIENT_CREDENTIALS in grant_types
    errors: list[CheckMessage] = []
    if installed and not ours:
        errors.append(
            Error(
                f"{SERVICE_CLIENTS_APP!r} is installed but "
                "OAUTH2_PROVIDER['OAUTH2_VALIDATOR_CLASS'] is not MCPOAuth2Validator: service "
                "clients' tokens would act for no user and for no resource, and the MCP endpoint "
                "refuses them.",
                hint=f'Set OAUTH2_PROVIDER["OAUTH2_VALIDATOR_CLASS"] = "{VALIDATOR}" (or your '
                "subclass of it).",
                id="mcp_django.E270",
            )
        )
    if installed and not advertised:
        errors.append(
            Warning(
                "Service clients are installed but the authorization server metadata does not "
                "list client_credentials in grant_types_supported.",
                hint='Add "client_credentials" to OAUTH2_PROVIDER["OAUTH2_GRANT_TYPES_SUPPORTED"].',
                id="mcp_django.W270",
            )
        )
    if ours and advertised and not installed:
        errors.append(
            Warning(
                "The authorization server metadata lists client_credentials in "
                f"grant_types_supported, but {SERVICE_CLIENTS_APP!r} is not installed: "
                "MCPOAuth2Validator refuses every such request.",
                hint=f'Add "{SERVICE_CLIENTS_APP}" to INSTALLED_APPS for service clients '
                '(docs/howto/service-clients.md), or remove "client_credentials" from '
                'OAUTH2_PROVIDER["OAUTH2_GRANT_TYPES_SUPPORTED"].',
                id="mcp_django.W271",
            )
        )
    return errors
