"""What an application must be to act as a service client, written once for the token endpoint
(``auth.oauth_validator``) and the mark's validation (``models.ServiceClient.clean``), which
each say it in their own words. Imports only DOT's application model, never this app's models,
so the validator can ask without the app installed."""

from __future__ import annotations

import enum
from typing import Any

from oauth2_provider.models import AbstractApplication


class Fault(enum.Enum):
    """A rule an application breaks for the ``client_credentials`` grant."""

    #: RFC 6749 section 4.4: the grant is for confidential clients only (a public one has no
    #: secret to authenticate with).
    PUBLIC_CLIENT = "public_client"
    #: The application's authorization grant type is not client credentials.
    OTHER_GRANT_TYPE = "other_grant_type"


def client_credentials_faults(application: Any) -> list[Fault]:
    """Return the rules ``application`` breaks to use the ``client_credentials`` grant, in the
    order to report them; empty when it may."""
    faults = []
    if application.client_type != AbstractApplication.CLIENT_CONFIDENTIAL:
        faults.append(Fault.PUBLIC_CLIENT)
    if not application.allows_grant_type(AbstractApplication.GRANT_CLIENT_CREDENTIALS):
        faults.append(Fault.OTHER_GRANT_TYPE)
    return faults
