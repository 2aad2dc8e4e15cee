"""Raw 2026-07-28 requests for the tasks extension (``io.modelcontextprotocol/tasks``).

The official SDK client (``mcp`` 2.3) has no client for the extension, so the tests write the
requests by hand: :func:`message` and :func:`headers` build one (usable with any transport, e.g.
``MCPTestClient.post``), :class:`TasksClient` sends them to a real server with httpx and answers
JSON or SSE alike (``MCP_RESPONSE_MODE``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from mcp_types import _v2025_11_25 as schema

from tests import polling

VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: What a client that takes tasks and answers questions declares on every request.
CAPABILITIES = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
#: Seconds a task may take to reach an expected status before a test gives up.
WAIT = 20.0

_ids = itertools.count(1)


def message(
    method: str, params: dict[str, Any] | None = None, *, capabilities: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A 2026-07-28 JSON-RPC request: everything about the client travels in ``params._meta``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES
        if capabilities is None
        else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-tests", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


def headers(body: dict[str, Any]) -> dict[str, str]:
    """The standard headers of ``body``: Mcp-Name is the tool of a tools/call, the task of tasks/*."""
    sent = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": VERSION,
        "mcp-method": body["method"],
    }
    params = body["params"]
    if body["method"] == "tools/call":
        sent["mcp-name"] = params["name"]
    elif body["method"].startswith("tasks/") and isinstance(params.get("taskId"), str):
        sent["mcp-name"] = params["taskId"]
    return sent


def answer_of(body: dict[str, Any], content_type: str, text: str) -> dict[str, Any]:
    """The JSON-RPC response to ``body`` in an HTTP answer, JSON or SSE."""
    if not content_type.startswith("text/event-stream"):
        return dict(json.loads(text))
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        )
        if data:
            parsed = json.loads(data)
            if parsed.get("id") == body["id"] and "method" not in parsed:
                return dict(parsed)
    raise AssertionError(f"no response to request {body['id']} in the SSE answer: {text[:1000]}")


def acknowledged(result: dict[str, Any]) -> None:
    """tasks/update and tasks/cancel answer an empty complete result (``_meta`` aside)."""
    assert result.get("resultType") == "complete", result
    assert set(result) <= {"resultType", "_meta"}, result


async def reached_by(
    get: Callable[[], Awaitable[dict[str, Any]]], task_id: str, statuses: tuple[str, ...]
) -> dict[str, Any]:
    """``get()`` (the task, as either form's tasks/get answers it) until its status is one of
    ``statuses`` (a bounded wait); the task."""
    last: dict[str, Any] = {}

    async def there() -> dict[str, Any] | None:
        last.update(await get())
        return dict(last) if last["status"] in statuses else None

    return await polling.until(
        there, failure=lambda: f"task {task_id} never reached {statuses}: {last}"
    )


class TasksClient:
    """A client of the tasks extension over httpx; every method names the endpoint it talks to."""

    def __init__(
        self, http: httpx.AsyncClient, extra_headers: dict[str, str] | None = None
    ) -> None:
        self.http = http
        self.extra_headers = extra_headers or {}

    async def send(
        self, url: str, method: str, params: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """Send one request; return the HTTP status and the JSON-RPC response (result or error)."""
        body = message(method, params)
        response = await self.http.post(
            url, json=body, headers={**headers(body), **self.extra_headers}
        )
        return response.status_code, answer_of(
            body, response.headers.get("content-type", ""), response.text
        )

    async def result(self, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        status, answer = await self.send(url, method, params)
        assert status == 200 and "result" in answer, (status, answer)
        return dict(answer["result"])

    async def call(
        self, url: str, name: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return await self.result(url, "tools/call", {"name": name, "arguments": arguments or {}})

    async def create(self, url: str, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Call a task tool; return the id of the task it answered with."""
        created = await self.call(url, name, arguments)
        assert created["resultType"] == "task", created
        assert created["status"] == "working", created
        return str(created["taskId"])

    async def get(self, url: str, task_id: str) -> dict[str, Any]:
        return await self.result(url, "tasks/get", {"taskId": task_id})

    async def update(self, url: str, task_id: str, responses: dict[str, Any]) -> None:
        acknowledged(
            await self.result(url, "tasks/update", {"taskId": task_id, "inputResponses": responses})
        )

    async def cancel(self, url: str, task_id: str) -> None:
        acknowledged(await self.result(url, "tasks/cancel", {"taskId": task_id}))

    async def wait(
        self, url: str, task_id: str, *until: str, timeout: float = WAIT
    ) -> tuple[dict[str, Any], list[str]]:
        """Poll tasks/get until the task's status is one of ``until`` (bounded); return the task
        and every status seen on the way."""
        seen: list[str] = []
        last: dict[str, Any] = {}

        async def there() -> dict[str, Any] | None:
            last.update(await self.get(url, task_id))
            if not seen or seen[-1] != last["status"]:
                seen.append(last["status"])
            return dict(last) if last["status"] in until else None

        task = await polling.until(  # looked at as often as a client would (its poll interval)
            there,
            timeout,
            interval=0.1,
            failure=lambda: (
                f"task {task_id} not {' or '.join(until)}; statuses seen {seen}, last: {last}"
            ),
        )
        return task, seen


# -- the 2025-11-25 form (SEP-1686), in a handshake-era session ---------------------------------


HANDSHAKE_VERSION = "2025-11-25"
RELATED_TASK = "io.modelcontextprotocol/related-task"


class HandshakeTasksClient:
    """A client of the 2025-11-25 form of tasks written to that revision's schema: one session
    (initialize, notifications/initialized, Mcp-Session-Id), JSON or SSE answers, and the
    server's requests on an SSE answer (a task's questions on tasks/result) answered with
    ``answers[method](params)``. Every result is checked against the revision's schema (the
    SDK's generated ``mcp_types`` models); the SDK's own client has no tasks."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        answers: dict[str, Any] | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.http = http
        self.url = url
        self.answers = dict(answers or {})
        self.extra_headers = extra_headers or {}
        self.session_id: str | None = None
        #: The server's requests seen on SSE answers, in order.
        self.server_requests: list[dict[str, Any]] = []
        self.capabilities: dict[str, Any] = {}

    def _headers(self) -> dict[str, str]:
        sent = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": HANDSHAKE_VERSION,
            **self.extra_headers,
        }
        if self.session_id is not None:
            sent["mcp-session-id"] = self.session_id
        return sent

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": next(_ids),
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": capabilities if capabilities is not None else {"elicitation": {}},
                "clientInfo": {"name": "handshake-tasks-tests", "version": "1"},
            },
        }
        response = await self.http.post(self.url, json=body, headers=self._headers())
        assert response.status_code == 200, response.text
        result = answer_of(body, response.headers["content-type"], response.text)["result"]
        schema.InitializeResult.model_validate(result)
        self.session_id = response.headers["mcp-session-id"]
        self.capabilities = result["capabilities"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = await self.http.post(self.url, json=initialized, headers=self._headers())
        assert sent.status_code == 202, sent.text
        return dict(result)

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request; its JSON-RPC response. The server's requests met on its SSE answer are
        answered (POSTed back) before the response is read on."""
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        async with self.http.stream(
            "POST", self.url, json=body, headers=self._headers()
        ) as response:
            assert response.status_code == 200, (response.status_code, await response.aread())
            if not response.headers["content-type"].startswith("text/event-stream"):
                return dict(json.loads(await response.aread()))
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                    continue
                if line or not data:
                    continue
                text, data = "\n".join(data), []
                if not text:
                    continue  # a priming event
                message = json.loads(text)
                if "method" in message and "id" in message:
                    await self._answer(message)
                elif message.get("id") == body["id"]:
                    return dict(message)
        raise AssertionError(f"the SSE answer to {method} ended without its response")

    async def _answer(self, request: dict[str, Any]) -> None:
        self.server_requests.append(request)
        answer = self.answers.get(request["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if answer is None:
            reply["error"] = {"code": -32601, "message": f"Method not found: {request['method']}"}
        else:
            reply["result"] = answer(request.get("params") or {})
        sent = await self.http.post(self.url, json=reply, headers=self._headers())
        assert sent.status_code == 202, sent.text

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.send(method, params)
        assert "result" in answer, answer
        return dict(answer["result"])

    async def create(
        self, name: str, arguments: dict[str, Any] | None = None, ttl: int | None = None
    ) -> str:
        """Call ``name`` with ``params.task``; the id of the task it answered with."""
        task: dict[str, Any] = {} if ttl is None else {"ttl": ttl}
        created = await self.result(
            "tools/call", {"name": name, "arguments": arguments or {}, "task": task}
        )
        schema.CreateTaskResult.model_validate(created)
        assert created["task"]["status"] == "working", created
        return str(created["task"]["taskId"])

    async def get(self, task_id: str) -> dict[str, Any]:
        task = await self.result("tasks/get", {"taskId": task_id})
        schema.GetTaskResult.model_validate(task)
        return task

    async def outcome(self, task_id: str) -> dict[str, Any]:
        """tasks/result: the JSON-RPC response (it blocks until the task ends)."""
        return await self.send("tasks/result", {"taskId": task_id})

    async def list(self, cursor: str | None = None) -> dict[str, Any]:
        page = await self.result("tasks/list", {"cursor": cursor} if cursor else {})
        schema.ListTasksResult.model_validate(page)
        return page

    async def cancel(self, task_id: str) -> dict[str, Any]:
        cancelled = await self.result("tasks/cancel", {"taskId": task_id})
        schema.CancelTaskResult.model_validate(cancelled)
        return cancelled

    async def wait(
        self, task_id: str, *until: str, timeout: float = WAIT
    ) -> tuple[dict[str, Any], list[str]]:
        """Poll tasks/get until the task's status is one of ``until`` (bounded)."""
        seen: list[str] = []
        last: dict[str, Any] = {}

        async def there() -> dict[str, Any] | None:
            last.update(await self.get(task_id))
            if not seen or seen[-1] != last["status"]:
                seen.append(last["status"])
            return dict(last) if last["status"] in until else None

        task = await polling.until(
            there,
            timeout,
            interval=0.1,
            failure=lambda: f"task {task_id} not {' or '.join(until)}; seen {seen}, last {last}",
        )
        return task, seen
