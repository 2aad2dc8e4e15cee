"""A JSON document server on loopback for the test identity providers (``Provider`` of
tests/auth/test_external.py, ``IdentityProvider`` of tests/id_jag_idp.py): what mcp_django
fetches from an issuer (its metadata, its JWKS) comes over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackJSON:
    """Answers each GET with ``document(path)`` as application/json, or 404 with ``{}`` when it
    is None; ``requests`` lists the paths asked for, in order. ``start()``, then ``stop()``."""

    def __init__(self, document: Callable[[str], bytes | None]) -> None:
        self.requests: list[str] = []
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests.append(self.path)
                body = document(self.path)
                self.send_response(404 if body is None else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body or b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
