"""CORS for the authorization server's metadata: public, so any origin may read it.

django-cors-headers allows the origins in CORS_ALLOWED_ORIGINS on CORS_URLS_REGEX (the token,
registration and revocation endpoints); this receiver of its ``check_request_enabled`` signal
opens ``/.well-known/`` (RFC 8414 metadata) to every origin, as other authorization servers do:
a browser-based client must discover the server before anyone could have listed its origin.
"""

from typing import Any

from django.http import HttpRequest


def metadata_is_public(sender: Any, request: HttpRequest, **kwargs: Any) -> bool:
    return request.path_info.startswith("/.well-known/")
