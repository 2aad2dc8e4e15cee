"""The floor under any Python MCP server on its ASGI server: a bare ASGI app that only parses JSON-RPC and answers.

It is not an MCP server. It knows the three messages the tools/call and session set-up cases
send (initialize, notifications/initialized, tools/call of ``echo``), keeps session ids in a set
and answers in JSON or as one SSE event; a tools/call of ``echo`` whose
``MCP-Protocol-Version`` header is 2026-07-28 (the modern case) needs no session, as that
revision has none, with none of a real server's work: no validation
beyond the message's shape, no authentication, permissions, quotas, audit or storage. Its CPU
per call is the part of every server's cost that the ASGI server, the event loop and JSON take,
so ``bench/run.py --servers reference ours-uvicorn ours-daphne floor floor-daphne --cases tools``
shows how far each server is above the floor on its own ASGI server.

Run under uvicorn: python bench/floor_server.py --port 8123 [--json | --sse]
Run under Daphne:  BENCH_RESPONSE_MODE=json|sse python -m daphne -p 8123 bench.floor_server:application
"""

from __future__ import annotations

import argparse
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn

PROTOCOL_VERSION = "2025-11-25"
# A request in this revision stands alone: no initialize, no session id.
STATELESS_VERSION = b"2026-07-28"
MAX_BODY = 4 * 1024 * 1024
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


def well_formed(message: Any) -> bool:
    """An object with a string method and object params; an id unless it is the one notification."""
    return (
        isinstance(message, dict)
        and isinstance(message.get("method"), str)
        and isinstance(message.get("params", {}), dict)
        and ("id" in message or message["method"] == "notifications/initialized")
    )


def make_app(sse: bool) -> App:
    sessions: set[bytes] = set()
    content_type = b"text/event-stream" if sse else b"application/json"

    async def read_body(receive: Receive) -> bytes | None:
        """The request body, or None past MAX_BODY."""
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await receive()
            chunk = event.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
            if not event.get("more_body"):
                return b"".join(chunks)

    async def answer(
        send: Send, status: int, body: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        head = [(b"content-type", content_type if body else b"application/json"), *(headers or [])]
        if body and sse:
            body = b"event: message\ndata: " + body + b"\n\n"
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await receive()  # lifespan.startup
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] != "POST" or scope["path"] != "/mcp":
            await answer(send, 405)
            return
        session = version = None
        for k, v in scope["headers"]:
            if k == b"mcp-session-id":
                session = v
            elif k == b"mcp-protocol-version":
                version = v
        body = await read_body(receive)
        if body is None:
            await answer(send, 413)
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            await answer(
                send,
                400,
                orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32700, "message": "Parse error"},
                    }
                ),
            )
            return
        if not well_formed(message):
            await answer(
                send,
                400,
                orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32600, "message": "Invalid Request"},
                    }
                ),
            )
            return
        method, params = message["method"], message.get("params", {})
        if method == "initialize":
            sid = secrets.token_hex(16).encode()
            sessions.add(sid)
            result: dict[str, Any] = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "floor", "version": "0"},
            }
            await answer(
                send,
                200,
                orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}),
                [(b"mcp-session-id", sid)],
            )
            return
        if session not in sessions and version != STATELESS_VERSION:
            await answer(send, 404)
            return
        if "id" not in message:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        arguments = params.get("arguments")
        if (
            method != "tools/call"
            or params.get("name") != "echo"
            or not isinstance(arguments, dict)
        ):
            error = {
                "code": -32601,
                "message": "the floor answers only tools/call of echo with an arguments object",
            }
            await answer(
                send, 200, orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
            )
            return
        text = str(arguments.get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        await answer(
            send, 200, orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        )

    return app


# For an ASGI server that imports the app by name (Daphne): the mode comes from the environment,
# as ours's does (bench/oursite/settings.py).
application = make_app(os.environ.get("BENCH_RESPONSE_MODE", "json") == "sse")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--json", dest="sse", action="store_false", default=False)
    mode.add_argument("--sse", dest="sse", action="store_true")
    args = parser.parse_args()
    # The reference's uvicorn settings: default loop and parser, no access log.
    uvicorn.run(
        make_app(args.sse),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        backlog=8192,
    )


if __name__ == "__main__":
    main()
