"""A lean asyncio HTTP/1.1 keep-alive client that speaks just enough MCP for the bench.

Used for functional checks, session creation and holding thousands of idle GET streams; the
throughput cases use wrk. httpx is not used here: its per-request overhead would make the
client, not the server, the thing being measured on a 2-core machine.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field

PROTOCOL_VERSION = "2025-11-25"
ACCEPT_BOTH = "application/json, text/event-stream"

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# 2026-07-28: no handshake and no session; each request carries its version and the client's
# capabilities in `_meta`, and names its method (and tool) in headers (bench/wrk/tools_call.lua).
MODERN_VERSION = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


class HTTPError(Exception):
    pass


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def messages(self) -> list[dict]:
        """JSON-RPC messages in the body, whether it is plain JSON or an SSE stream."""
        ctype = (self.header("content-type") or "").split(";")[0].strip()
        if not self.body:
            return []
        if ctype == "text/event-stream":
            out = []
            data: list[str] = []
            for line in self.body.decode().splitlines() + [""]:
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    joined = "\n".join(data)
                    data = []
                    if joined.strip():
                        out.append(json.loads(joined))
            return out
        parsed = json.loads(self.body)
        return parsed if isinstance(parsed, list) else [parsed]


class Connection:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 20
        )

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass
            self.writer = None

    def _send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        assert self.writer is not None
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    async def _read_head(self) -> Response:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise HTTPError(f"bad status line {lines[0]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return Response(int(parts[1]), headers)

    async def _read_body(self, resp: Response) -> None:
        assert self.reader is not None
        if resp.status in (204, 304) or 100 <= resp.status < 200:
            return
        te = resp.headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                size_line = await self.reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    # Trailers, if any, end with an empty line.
                    while (await self.reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            resp.body = b"".join(chunks)
        elif "content-length" in resp.headers:
            resp.body = await self.reader.readexactly(int(resp.headers["content-length"]))
        else:
            resp.body = await self.reader.read()
            await self.close()

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Response:
        if self.writer is None:
            await self.connect()
        self._send(method, path, headers, body)
        resp = await self._read_head()
        await self._read_body(resp)
        if resp.headers.get("connection", "").lower() == "close":
            await self.close()
        return resp

    async def open_stream(self, path: str, headers: dict[str, str]) -> Response:
        """Send a GET and return once the head is read; the body stays on the socket."""
        if self.writer is None:
            await self.connect()
        self._send("GET", path, headers, b"")
        return await self._read_head()


@dataclass
class Session:
    conn: Connection
    session_id: str
    path: str = "/mcp"
    ids: itertools.count = field(default_factory=lambda: itertools.count(2))

    def headers(self, accept: str = ACCEPT_BOTH) -> dict[str, str]:
        return {
            "Accept": accept,
            "Content-Type": "application/json",
            "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }

    async def call(self, method: str, params: dict | None = None) -> dict:
        msg = {"jsonrpc": "2.0", "id": next(self.ids), "method": method}
        if params is not None:
            msg["params"] = params
        resp = await self.conn.request("POST", self.path, self.headers(), json.dumps(msg).encode())
        if resp.status != 200:
            raise HTTPError(f"{method}: HTTP {resp.status}: {resp.body[:300]!r}")
        for m in resp.messages():
            if m.get("id") == msg["id"]:
                if "error" in m:
                    raise HTTPError(f"{method}: JSON-RPC error {m['error']}")
                return m["result"]
        raise HTTPError(f"{method}: no answer in {resp.body[:300]!r}")


async def open_session(
    host: str, port: int, path: str = "/mcp", conn: Connection | None = None
) -> Session:
    """initialize + notifications/initialized, on one keep-alive connection."""
    conn = conn or Connection(host, port)
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    resp = await conn.request("POST", path, headers, json.dumps(INITIALIZE).encode())
    if resp.status != 200:
        raise HTTPError(f"initialize: HTTP {resp.status}: {resp.body[:300]!r}")
    sid = resp.header("mcp-session-id")
    if not sid:
        raise HTTPError(f"initialize: no Mcp-Session-Id header (headers {resp.headers})")
    msgs = resp.messages()
    if not msgs or "result" not in msgs[0]:
        raise HTTPError(f"initialize: unexpected answer {resp.body[:300]!r}")
    session = Session(conn, sid, path)
    resp = await conn.request("POST", path, session.headers(), json.dumps(INITIALIZED).encode())
    if resp.status not in (200, 202):
        raise HTTPError(f"notifications/initialized: HTTP {resp.status}: {resp.body[:300]!r}")
    return session


async def modern_echo(host: str, port: int, text: str, path: str = "/mcp") -> dict:
    """One 2026-07-28 tools/call of echo, on a connection of its own; raises unless the answer
    is a result holding `text`."""
    conn = Connection(host, port)
    try:
        msg = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}, "_meta": MODERN_META},
        }
        headers = {
            "Accept": ACCEPT_BOTH,
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "echo",
        }
        resp = await conn.request("POST", path, headers, json.dumps(msg).encode())
        if resp.status != 200:
            raise HTTPError(f"2026-07-28 tools/call: HTTP {resp.status}: {resp.body[:300]!r}")
        for m in resp.messages():
            if m.get("id") == 1 and "result" in m:
                content = m["result"].get("content") or [{}]
                if not m["result"].get("isError") and content[0].get("text") == text:
                    return m["result"]
        raise HTTPError(f"2026-07-28 tools/call: unexpected answer {resp.body[:300]!r}")
    finally:
        await conn.close()


async def functional_check(host: str, port: int) -> dict:
    """Exercise the whole surface once; raises with a message if anything is off."""
    session = await open_session(host, port)
    try:
        # Every page: the example site has more tools than one page (PAGE_SIZE) holds.
        names, cursor = [], None
        for _ in range(100):
            tools = await session.call("tools/list", {"cursor": cursor} if cursor else {})
            names += [t["name"] for t in tools["tools"]]
            cursor = tools.get("nextCursor")
            if not cursor:
                break
        names.sort()
        for needed in ("add", "echo"):
            if needed not in names:
                raise HTTPError(f"tools/list lacks {needed!r}: {names}")
        res = await session.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        if res.get("isError") or res["content"][0].get("text") != "hi":
            raise HTTPError(f"echo returned {res}")
        res = await session.call("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        if res.get("isError") or res["content"][0].get("text") != "5":
            raise HTTPError(f"add returned {res}")
        res = await session.call("resources/read", {"uri": "bench://hello"})
        if res["contents"][0].get("text") != "Hello, bench!":
            raise HTTPError(f"resources/read returned {res}")
        stream_conn = Connection(host, port)
        try:
            head = await asyncio.wait_for(
                stream_conn.open_stream(session.path, session.headers("text/event-stream")),
                10,
            )
            ctype = (head.header("content-type") or "").split(";")[0]
            if head.status != 200 or ctype != "text/event-stream":
                raise HTTPError(f"GET stream: HTTP {head.status} {ctype}")
        finally:
            await stream_conn.close()
        return {"tools": names, "ok": True}
    finally:
        await session.conn.close()
