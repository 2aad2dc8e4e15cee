"""Bookshelf's one API, and the access log the test reads."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.decorators import protected_resource

# Whatever the user is, their list is these books: two the example library has, one it has not.
READING_LIST = [
    {"isbn": "9780000100016", "title": "Pride and Prejudice"},
    {"isbn": "9780000500021", "title": "The Hound of the Baskervilles"},
    {"isbn": "9781111111111", "title": "A Book No Library Has"},
]


@protected_resource(scopes=["reading-list"])
def reading_list(request: HttpRequest) -> JsonResponse:
    """The reading list of the user the bearer token belongs to."""
    user = request.resource_owner  # type: ignore[attr-defined]
    return JsonResponse({"user": user.get_username(), "items": READING_LIST})


_lock = threading.Lock()


class AccessLogMiddleware:
    """Append each request (method, path, query, every header, body) to PROVIDER_ACCESS_LOG."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = settings.PROVIDER_ACCESS_LOG
        if path:
            entry = {
                "method": request.method,
                "path": request.path,
                "query": request.META.get("QUERY_STRING", ""),
                "headers": dict(request.headers),
                "body": request.body.decode("utf-8", "replace"),
            }
            with _lock, open(path, "a", encoding="utf-8") as log:
                log.write(json.dumps(entry) + "\n")
        return self.get_response(request)
