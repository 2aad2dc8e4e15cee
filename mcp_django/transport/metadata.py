"""RFC 9728 protected-resource metadata: which endpoint a well-known path names, and its document.

Clients look for it at the path-inserted URL (``/.well-known/oauth-protected-resource/mcp``)
and at the root (``/.well-known/oauth-protected-resource``). Under the ASGI router both are
answered by :class:`MetadataConsumer`, before the project's URLconf; under WSGI (or ASGI
without the router) by :func:`protected_resource_metadata_view`, which the project's root
URLconf includes (``mcp_django.urls.well_known_urlpatterns``). Both answer the same paths with
the same document.

Under a path prefix (``SCRIPT_NAME`` or ``root_path`` ``/app``), the resource
``https://host/app/mcp`` has its document at
``https://host/.well-known/oauth-protected-resource/app/mcp`` (RFC 9728 section 3.1), outside
the prefix. A proxy sends that path to the site under its prefix, so Django sees the path
``/.well-known/oauth-protected-resource/app/mcp`` below the script name ``/app``: the suffix is
the endpoint's public path, script name included, and is read as such. The suffix without the
script name (``/.well-known/oauth-protected-resource/mcp``, for a proxy that maps the document
into the prefix) names the same endpoint.
"""

from __future__ import annotations

from http import HTTPStatus
from io import BytesIO
from typing import Any
from urllib.parse import urlsplit

from channels.generic.http import AsyncHttpConsumer
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import NoReverseMatch, Resolver404, resolve, reverse

from ..auth.oauth import (
    PRM_PATH,
    protected_resource_metadata,
    resource_url,
    script_name,
    serves_resource_metadata,
)
from ..conf import mcp_settings
from ..protocol.jsonrpc import encode

#: Public metadata that browser-based clients must be able to read from any origin.
CORS_HEADERS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, OPTIONS"}
#: The preflight's answer adds the one request header a client sends.
PREFLIGHT_HEADERS = {**CORS_HEADERS, "Access-Control-Allow-Headers": "MCP-Protocol-Version"}
#: The document's headers, besides CORS.
DOCUMENT_HEADERS = {"Content-Type": "application/json", "Cache-Control": "public, max-age=3600"}
ALLOWED_METHODS = "GET, HEAD, OPTIONS"


def site_at(path: str) -> Any:
    """The MCPSite whose endpoint (any of its transports) is at ``path``, a path below the
    script name, with or without the trailing slash; None when there is none."""
    for candidate in (path, path + "/"):
        try:
            site = getattr(resolve(candidate).func, "mcp_site", None)
        except Resolver404:
            continue
        if site is not None:
            return site
    return None


def _default_endpoint(mount: str) -> str | None:
    """The endpoint the root form (no path after the well-known prefix) describes: the path of
    RESOURCE_URL, else the default site's endpoint; below the script name ``mount``."""
    configured = mcp_settings.resource_url
    if configured:
        path = urlsplit(configured).path
    else:
        try:
            path = reverse("mcp_django:endpoint")  # with the script prefix Django set
        except NoReverseMatch:
            return None
    if mount and path.startswith(mount + "/"):
        path = path[len(mount) :]
    return path.rstrip("/") or "/"


def metadata_target(path_info: str, mount: str = "") -> tuple[str, Any] | None:
    """Which endpoint the well-known request at ``path_info`` (below the script name ``mount``)
    asks about: its path below the script name, without the trailing slash, and its site (None
    for RESOURCE_URL's path when no endpoint is there); None when the path names none, or
    the site is no OAuth resource server ("oauth", "jwt"). See the module's docstring for the
    forms answered."""
    if not path_info.startswith(PRM_PATH) or not serves_resource_metadata():
        return None
    suffix = path_info[len(PRM_PATH) :]
    if suffix in ("", "/"):
        endpoint = _default_endpoint(mount)
        return None if endpoint is None else (endpoint, site_at(endpoint))
    if not suffix.startswith("/"):
        return None
    candidates = [suffix]
    if mount and suffix.startswith(mount + "/"):
        # The RFC 9728 form of the public URL comes first: /app/mcp below /app is /mcp.
        candidates.insert(0, suffix[len(mount) :])
    for candidate in candidates:
        site = site_at(candidate)
        if site is not None:
            return candidate.rstrip("/") or "/", site
    return None


def metadata_document(request: HttpRequest, endpoint: str, site: Any) -> bytes:
    """The RFC 9728 document of the endpoint at ``endpoint`` (below the request's script name)
    of ``site``; raises DisallowedHost when the resource is derived from a refused Host."""
    mount = script_name(request)
    resource = resource_url(request, mount + endpoint)
    declared = site.get_scopes() if site is not None else []
    return encode(protected_resource_metadata(resource, declared, mount))


def _wire(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


class MetadataConsumer(AsyncHttpConsumer):  # type: ignore[misc]  # channels ships no type information
    """Answer GET (and CORS preflight) for one endpoint's protected-resource metadata."""

    def __init__(self, endpoint_path: str, site: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: The endpoint's path below the script name (root_path), without the trailing slash.
        self.endpoint_path = endpoint_path
        #: The MCPSite served at the endpoint, whose entries' scopes are advertised; None: none.
        self.site = site

    async def send_headers(self, *, status: int = HTTPStatus.OK, headers: Any = None) -> None:
        # A plain int on the wire: on Python 3.10 str(HTTPStatus.OK) is "HTTPStatus.OK".
        await super().send_headers(status=int(status), headers=headers)

    async def handle(self, body: bytes) -> None:
        method = self.scope["method"]
        if method == "OPTIONS":
            await self.send_response(HTTPStatus.NO_CONTENT, b"", headers=_wire(PREFLIGHT_HEADERS))
            return
        if method not in ("GET", "HEAD"):
            await self.send_response(
                HTTPStatus.METHOD_NOT_ALLOWED, b"", headers=[(b"allow", ALLOWED_METHODS.encode())]
            )
            return
        request = ASGIRequest(self.scope, BytesIO(body))
        try:
            document = metadata_document(request, self.endpoint_path, self.site)
        except DisallowedHost:
            await self.send_response(
                HTTPStatus.BAD_REQUEST,
                b"Bad Request: invalid Host header",
                headers=[(b"content-type", b"text/plain")],
            )
            return
        await self.send_response(
            HTTPStatus.OK,
            b"" if method == "HEAD" else document,
            headers=_wire({**DOCUMENT_HEADERS, **CORS_HEADERS}),
        )


@login_not_required
def protected_resource_metadata_view(request: HttpRequest) -> HttpResponse:
    """Serve the protected-resource metadata where Django answers (WSGI, or ASGI without the
    router): the same paths and document as :class:`MetadataConsumer`; 404 when the site is no
    OAuth resource server or the path names no endpoint."""
    found = metadata_target(request.path_info, script_name(request))
    if found is None:
        raise Http404("No MCP endpoint has protected-resource metadata here.")
    if request.method == "OPTIONS":
        return HttpResponse(status=HTTPStatus.NO_CONTENT, headers=PREFLIGHT_HEADERS)
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(
            status=HTTPStatus.METHOD_NOT_ALLOWED, headers={"Allow": ALLOWED_METHODS}
        )
    # DisallowedHost propagates: Django answers it with 400, as for any view.
    document = metadata_document(request, *found)
    return HttpResponse(document, headers={**DOCUMENT_HEADERS, **CORS_HEADERS})
