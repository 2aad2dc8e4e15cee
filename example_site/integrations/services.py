"""What the integration tools do besides talking MCP: the (simulated) reviews service, and the
Bookshelf API call made with the user's third-party token.

Nothing here imports models, so the e2e tests can import it to check the tools' results.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Reviews:
    count: int
    average_rating: float


def simulated_reviews(api_key: str, isbn: str) -> Reviews:
    """What the fictional reviews service would answer for ``isbn`` to the holder of ``api_key``.

    A real integration would send the key to the service over HTTPS; this demo makes no network
    call and derives a stable answer from a hash of the key and the ISBN instead, so that the
    result shows which key was used without revealing it.
    """
    digest = hashlib.sha256(hashlib.sha256(api_key.encode()).digest() + isbn.encode()).digest()
    count = 1 + int.from_bytes(digest[:2], "big") % 500
    average = 1 + (int.from_bytes(digest[2:4], "big") % 401) / 100  # 1.00 .. 5.00
    return Reviews(count=count, average_rating=round(average, 2))


class BookshelfError(Exception):
    """The Bookshelf API could not be used; ``status`` is its HTTP status when it answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib copies the Authorization header onto a redirect, to any host: refuse to follow.
    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        return None


def check_api_url(url: str) -> None:
    """Bearer tokens go over HTTPS, or over plain HTTP to this machine only (development)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    host = parts.hostname or ""
    loopback = host == "localhost"
    try:
        loopback = loopback or ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if parts.scheme != "http" or not loopback:
        raise BookshelfError(
            f"Refusing to send a token to {parts.scheme}://{host}: use https (http only on loopback)"
        )


def fetch_reading_list(url: str, access_token: str, *, timeout: float = 10) -> dict[str, Any]:
    """GET the user's reading list with their Bookshelf access token (server-side only)."""
    check_api_url(url)
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json"}
    )
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(request, timeout=timeout) as response:
            data = json.loads(response.read(1_000_000))
    except urllib.error.HTTPError as exc:
        raise BookshelfError(f"Bookshelf answered {exc.code}", status=exc.code) from None
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        raise BookshelfError(f"Bookshelf could not be reached: {exc.__class__.__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise BookshelfError("Bookshelf answered something that is not a reading list")
    return data
