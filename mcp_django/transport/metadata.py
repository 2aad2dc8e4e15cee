"""RFC 9728 protected-resource metadata, served next to the endpoint by the ASGI router.

Clients look for it at the path-inserted URL (``/.well-known/oauth-protected-resource/mcp``)
and at the root (``/.well-known/oauth-protected-resource``); both are answered here, before the
project's URLconf, so no extra URL pattern is needed.
"""

from __future__ import annotations

from http import HTTPStatus
from io import BytesIO
from typing import Any

from channels.generic.http import AsyncHttpConsumer
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest

from ..auth.oauth import protected_resource_metadata, resource_url
from ..protocol.jsonrpc import encode


class MetadataConsumer(AsyncHttpConsumer):  # type: ignore[misc]  # channels ships no type information
    """Answer GET (and CORS preflight) for one endpoint's protected-resource metadata."""

    def __init__(self, endpoint_path: str, site: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.endpoint_path = endpoint_path
        #: The MCPSite served at the endpoint, whose entries' scopes are advertised; None: none.
        self.site = site

    async def send_headers(self, *, status: int = HTTPStatus.OK, headers: Any = None) -> None:
        # A plain int on the wire: on Python 3.10 str(HTTPStatus.OK) is "HTTPStatus.OK".
        await super().send_headers(status=int(status), headers=headers)

    async def handle(self, body: bytes) -> None:
        # Public metadata that browser-based clients must be able to read from any origin.
        cors = [
            (b"access-control-allow-origin", b"*"),
            (b"access-control-allow-methods", b"GET, OPTIONS"),
        ]
        method = self.scope["method"]
        if method == "OPTIONS":
            await self.send_response(
                HTTPStatus.NO_CONTENT,
                b"",
                headers=[*cors, (b"access-control-allow-headers", b"MCP-Protocol-Version")],
            )
            return
        if method not in ("GET", "HEAD"):
            await self.send_response(
                HTTPStatus.METHOD_NOT_ALLOWED, b"", headers=[(b"allow", b"GET, HEAD, OPTIONS")]
            )
            return
        request = ASGIRequest(self.scope, BytesIO(body))
        try:
            resource = resource_url(request, self.endpoint_path)
        except DisallowedHost:
            await self.send_response(
                HTTPStatus.BAD_REQUEST,
                b"Bad Request: invalid Host header",
                headers=[(b"content-type", b"text/plain")],
            )
            return
        declared = self.site.get_scopes() if self.site is not None else []
        document = encode(protected_resource_metadata(resource, declared))
        headers = [
            (b"content-type", b"application/json"),
            (b"cache-control", b"public, max-age=3600"),
            *cors,
        ]
        await self.send_response(
            HTTPStatus.OK, b"" if method == "HEAD" else document, headers=headers
        )
