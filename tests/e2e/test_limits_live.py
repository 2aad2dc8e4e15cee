"""Against the real example site (under each server under test): what hostile clients cost the server process is
bounded by the limits, not proportional to how many of them there are.

Memory is read from the process running the application (VmRSS in /proc/<pid>/status). The bounds are
far below what the unbounded behaviour cost (see each test) and far above the noise.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mcp_django.protocol.errors import INVALID_PARAMS

from .conftest import manage, run_server, server_env

pytestmark = pytest.mark.e2e

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
MB = 1024 * 1024


@dataclass(frozen=True)
class MeasuredServer:
    base_url: str
    pid: int
    env: dict[str, str]
    server: str = "daphne"

    def rss(self) -> int:
        """The server process's resident memory, in bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc/<pid>/status")

    def settled_rss(self, deadline: float = 15.0) -> int:
        """The highest RSS seen until it stops growing: sampled until six samples in a row
        bring no new maximum (bounded by ``deadline``). The server works on the requests in
        the background; this waits for that work to be done, not for a time to pass."""
        peak, calm, end = self.rss(), 0, time.monotonic() + deadline
        while calm < 6 and time.monotonic() < end:
            time.sleep(0.25)  # a sampling interval, bounded by the deadline above
            now = self.rss()
            calm = calm + 1 if now <= peak else 0
            peak = max(peak, now)
        return peak


@pytest.fixture(scope="module")
def server(asgi_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MeasuredServer]:
    """The example site on its own database, so that its memory is this module's alone."""
    workdir = tmp_path_factory.mktemp("e2e-limits")
    env = server_env(workdir / "example.sqlite3", auth="none")
    manage(env, "migrate", "--noinput")
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as running:
        yield MeasuredServer(running.base_url, running.application_pid, env, asgi_server)


def _initialize(http: httpx.Client, url: str, client_info: dict[str, str]) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client_info},
    }
    return http.post(
        url, content=json.dumps(body), headers={**HEADERS, "Content-Type": "application/json"}
    )


def _session(http: httpx.Client, url: str) -> str:
    response = _initialize(http, url, {"name": "live-limits", "version": "1"})
    assert response.status_code == 200
    return response.headers["mcp-session-id"]


def test_oversized_client_info_is_refused_and_leaves_no_memory_behind(
    server: MeasuredServer,
) -> None:
    # Unbounded, each of these was parsed, stored and cached: 50 of them took the site from
    # 109 MB to 581 MB for good. Measured here: +188 MB before the limits, +14 MB after.
    url = f"{server.base_url}/mcp"
    with httpx.Client(timeout=30) as http:
        _session(http, url)  # warm up the code paths
        before = server.rss()
        for _ in range(20):
            response = _initialize(
                http, url, {"name": "hostile", "version": "1", "title": "t" * 4_000_000}
            )
            assert response.json()["error"]["code"] == INVALID_PARAMS
            assert "clientInfo" in response.json()["error"]["message"]
            assert "mcp-session-id" not in response.headers
    growth = server.settled_rss() - before
    assert growth < 40 * MB, f"the server grew by {growth / MB:.0f} MB"


STREAMS = 20
EVENTS = 200
EVENT_BYTES = 20_000  # 200 x 20 KB: a 4 MB stream per session, 80 MB in all

STORE_SCRIPT = """
import json
from django.utils import timezone
from mcp_django.models import Event
from mcp_django.transport.layers import new_stream_token
payload = json.dumps({{"jsonrpc": "2.0", "method": "notifications/message", "params": {{"level": "info", "data": "x" * {size}}}}})
for session_id in {sessions!r}:
    token = new_stream_token(session_id)
    now = timezone.now()
    Event.objects.bulk_create(
        [Event(session_id=session_id, stream=token, seq=n, payload=payload, closes_stream=n == {events}, created_at=now)
         for n in range(1, {events} + 1)],
        batch_size=50,
    )
    print(token)
"""


def _resume_without_reading(server: MeasuredServer, session_id: str, token: str) -> socket.socket:
    """GET the stream from its start, read the status line and headers, then read nothing."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive window: the kernel absorbs little, as with a client that stalled.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    host, port = server.base_url.removeprefix("http://").split(":")
    sock.connect((host, int(port)))
    request = (
        f"GET /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
        f"MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: {session_id}\r\nLast-Event-ID: {token}:0\r\n\r\n"
    )
    sock.sendall(request.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, "the server closed the connection before its headers"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def test_resumes_from_clients_that_never_read_keep_memory_bounded(server: MeasuredServer) -> None:
    # Unbounded, each resume loaded the whole stream and handed all of it to Twisted's buffer:
    # 60 resumes of one 20 MB stream cost 1.1 GB. Here, measured: +77 MB before paging and
    # draining, +8 MB after (each resume holds at most a page and a socket buffer). uvicorn's
    # send waits while the socket is full, so it holds as little. granian's send waits only once
    # four body messages are queued for the response: a page being written and four queued
    # (5 x 256 KB, REPLAY_PAGE_BYTES) per stalled resume, measured +34 MB here.
    bound = 48 * MB if server.server == "granian" else 32 * MB
    url = f"{server.base_url}/mcp"
    with httpx.Client(timeout=30) as http:
        sessions = [_session(http, url) for _ in range(STREAMS)]
    out = manage(
        server.env,
        "shell",
        "-v0",
        "-c",
        STORE_SCRIPT.format(sessions=sessions, events=EVENTS, size=EVENT_BYTES),
    )
    tokens = out.split()
    assert len(tokens) == STREAMS
    before = server.rss()
    sockets = [_resume_without_reading(server, s, t) for s, t in zip(sessions, tokens)]
    try:
        peak = server.settled_rss()
        # The server still serves others meanwhile.
        with httpx.Client(timeout=30) as http:
            ping = http.post(
                url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=HEADERS
            )
        assert ping.json()["result"] == {}
    finally:
        for sock in sockets:
            sock.close()
    growth = peak - before
    assert growth < bound, f"the server grew by {growth / MB:.0f} MB for {STREAMS} stalled resumes"
