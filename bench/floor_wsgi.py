"""The floor of ours under gunicorn: the URLconf of bench.oursite.floor_settings, one route.

Not an MCP server. The endpoint's path (``/mcp``, where bench/run.py and wrk send every call)
goes to a plain sync view that does the least any Django MCP server must for the modern case's
call: parse the JSON-RPC body and answer the echo tool's result as JSON. No validation beyond
that, no negotiation, authentication, quotas, audit or storage, and no mcp_django code. Served
with ours's settings (apps, middleware, database) under gunicorn's sync worker as ours-gunicorn
is, its CPU per call is what Django and that server take of any Django MCP server's call, so
ours-gunicorn's cost above it is what mcp_django adds.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def echo(request: HttpRequest) -> HttpResponse:
    """A tools/call of ``echo``: its text back as one text content block."""
    message = json.loads(request.body)
    result = {
        "content": [{"type": "text", "text": message["params"]["arguments"]["text"]}],
        "isError": False,
    }
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    return HttpResponse(json.dumps(answer, separators=(",", ":")), content_type="application/json")


# "mcp", not "mcp/": wrk posts to /mcp, which this route matches before APPEND_SLASH looks.
urlpatterns = [path("mcp", echo)]
