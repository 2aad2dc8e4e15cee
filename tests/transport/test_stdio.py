"""The stdio transport in-process: what it does when handling a line fails unexpectedly."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest

from mcp_django.protocol.errors import INTERNAL_ERROR
from mcp_django.registry.sites import site
from mcp_django.server.engine import Principal
from mcp_django.transport.stdio import StdioServer

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.mark.django_db(transaction=True)
async def test_a_failure_while_handling_a_request_answers_internal_error_and_the_next_line_is_served(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the exception ended the reading loop, the command swallowed it, and the client
    # waited for an answer that never came.
    lines: list[dict[str, Any]] = []

    async def write(data: bytes) -> None:
        lines.append(orjson.loads(data))

    async def broken(message: Any) -> None:
        raise RuntimeError("the database went away")

    request = HttpRequest()
    request.user = AnonymousUser()
    server = StdioServer(
        site.engine,
        Principal(request=request, user=request.user, transport="stdio"),
        write,
        max_line=1 << 20,
    )
    monkeypatch.setattr(server, "initialize", broken)
    with caplog.at_level(logging.ERROR, logger="mcp_django.transport"):
        await server.receive(orjson.dumps(INITIALIZE))
    monkeypatch.undo()
    await server.receive(orjson.dumps({**INITIALIZE, "id": 2}))
    await server.stop()
    assert lines[0] == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
    }
    assert lines[1]["id"] == 2 and "result" in lines[1]
    assert "the database went away" in caplog.text
