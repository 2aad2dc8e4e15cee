"""Checks of service clients (``mcp_django.auth.service_clients``): the validator that issues
their tokens, and the metadata that tells clients the grant exists (ids mcp_django.E/W270)."""

from __future__ import annotations

from django.apps import apps
from django.core.checks import CheckMessage, Error, Warning


def check_service_clients() -> list[CheckMessage]:
    """With DOT installed: service clients installed with a validator that ignores them, or the
    ``client_credentials`` grant advertised by one side only."""
    if not apps.is_installed("oauth2_provider"):
        return []
    # Optional dependency (the oauth extra), imported once DOT is known to be installed.
    from oauth2_provider.settings import oauth2_settings

    from ..auth.oauth_validator import CLIENT_CREDENTIALS, SERVICE_CLIENTS_APP, MCPOAuth2Validator

    installed = apps.is_installed(SERVICE_CLIENTS_APP)
    try:
        validator = oauth2_settings.OAUTH2_VALIDATOR_CLASS
    except ImportError:
        return []  # DOT's own settings loading reports that
    ours = isinstance(validator, type) and issubclass(validator, MCPOAuth2Validator)
    advertised = CLIENT_CREDENTIALS in (oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED or ())
    errors: list[CheckMessage] = []
    if installed and not ours:
        errors.append(
            Error(
                f"{SERVICE_CLIENTS_APP!r} is installed but "
                "OAUTH2_PROVIDER['OAUTH2_VALIDATOR_CLASS'] is not MCPOAuth2Validator: service "
                "clients' tokens would act for no user and for no resource, and the MCP endpoint "
                "refuses them.",
                hint='Set OAUTH2_PROVIDER["OAUTH2_VALIDATOR_CLASS"] = '
                '"mcp_django.auth.oauth_validator.MCPOAuth2Validator" (or your subclass of it).',
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
