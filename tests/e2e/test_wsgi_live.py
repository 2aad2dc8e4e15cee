"""The example site under WSGI, where the endpoint's plain view serves MCP (issue 46): gunicorn's
sync worker, its gthread worker, and ``manage.py runserver`` without daphne.

Each server runs the site as a deployment would: OAuth on (django-oauth-toolkit, this site as
authorization server), durable tasks run by django-tasks-db's ``db_worker`` in a process of its
own. The official SDK client signs in with its OAuth client flow in every test (registration,
a browser's sign-in and consent, the token exchange: a DOT token), then speaks 2026-07-28 in its
default mode (``server/discover``) or the handshake era in legacy mode, answered as JSON.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitResult, EmbeddedResource, Request, Result
from mcp_types import TextResourceContents
from pydantic import ConfigDict

from tests import asgi_servers
from tests.e2e.test_example_tasks import BOOKS, TASK_ROW, TASKS
from tests.e2e.test_oauth import client_metadata

from .conftest import ROOT, ExampleServer, copy_database, manage, run_server, server_env
from .oauth_helpers import Browser, BrowserHandlers, MemoryTokenStorage

pytestmark = pytest.mark.e2e

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
#: Seconds a durable task may take from its creation to its end (db_worker polls every second).
TASK_WAIT = 30.0
#: What each server prints that says it serves WSGI (runserver with daphne would say "ASGI/Daphne").
SERVED_BY = {
    "gunicorn": "Using worker: sync",
    "gunicorn-gthread": "Using worker: gthread",
    "runserver": "Starting development server at",
}


@dataclass(frozen=True)
class WSGISite:
    """The example site under one WSGI server, and the db_worker beside it."""

    server: ExampleServer
    worker: subprocess.Popen[bytes]


@pytest.fixture(scope="module", params=asgi_servers.WSGI_SERVERS)
def wsgi_site(
    request: pytest.FixtureRequest, demo_database: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WSGISite]:
    """The example site with OAuth and a task worker, under the WSGI server of the parameter."""
    server = str(request.param)
    workdir = tmp_path_factory.mktemp(f"wsgi-{server}")
    port = asgi_servers.free_port()
    env = {
        **server_env(copy_database(demo_database, workdir / "example.sqlite3"), auth="oauth"),
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
        "MCP_TASKS_BACKEND": "database",
    }
    manage(env, "migrate", "--noinput")  # django_tasks_db's tables, as `make run-wsgi` does
    with (
        asgi_servers.db_worker(env, workdir / "db_worker.log", ROOT) as worker,
        run_server(
            env,
            workdir / f"{server}.log",
            port=port,
            server=server,
            application=asgi_servers.WSGI_APPLICATION,
        ) as site,
    ):
        yield WSGISite(site, worker)
        log = site.log()
    assert "Traceback" not in log, log


@dataclass
class Exchanges:
    """What the client sent and got back, from httpx's event hooks: (method, request body,
    status, response content type), one per exchange with the endpoint."""

    seen: list[tuple[str, dict[str, Any], int, str]] = field(default_factory=list)

    async def on_response(self, response: httpx2.Response) -> None:
        if response.request.url.path.rstrip("/") != "/mcp":
            return  # the OAuth endpoints and metadata
        body = response.request.content
        message = json.loads(body) if body else {}
        kind = response.headers.get("content-type", "").partition(";")[0]
        self.seen.append((response.request.method, message, response.status_code, kind))

    def calls(self, tool: str) -> list[dict[str, Any]]:
        """The request bodies of every ``tools/call`` of ``tool``."""
        return [
            message
            for method, message, _, _ in self.seen
            if method == "POST"
            and message.get("method") == "tools/call"
            and message["params"]["name"] == tool
        ]


@contextlib.asynccontextmanager
async def signed_in(
    site: WSGISite, username: str, mode: str = "auto", **options: Any
) -> AsyncIterator[tuple[Client, MemoryTokenStorage, Exchanges]]:
    """The official SDK client with its OAuth client flow, its user played by a ``Browser``
    signed in as ``username``; ``options`` go to ``Client``."""
    server = site.server
    storage = MemoryTokenStorage()
    exchanges = Exchanges()
    async with Browser(server.base_url, username) as browser:
        handlers = BrowserHandlers(browser)
        provider = OAuthClientProvider(
            server_url=server.mcp_url,
            client_metadata=client_metadata(name="WSGI e2e client"),
            storage=storage,
            redirect_handler=handlers.redirect_handler,
            callback_handler=handlers.callback_handler,
        )
        async with (
            httpx2.AsyncClient(
                auth=provider, timeout=20, event_hooks={"response": [exchanges.on_response]}
            ) as http,
            Client(
                streamable_http_client(server.mcp_url, http_client=http),
                read_timeout_seconds=20,
                mode=mode,
                **options,
            ) as client,
        ):
            yield client, storage, exchanges
        assert len(handlers.authorization_urls) == 1  # signed in once, by OAuth


async def test_auto_mode_speaks_2026_07_28_with_a_dot_token(wsgi_site: WSGISite) -> None:
    async with signed_in(wsgi_site, "reader") as (client, storage, exchanges):
        version = client.protocol_version
        tools = await client.list_tools()
        found = await client.call_tool("search_books", {"query": "wells"})
        loans = await client.call_tool("member_loans", {"member_username": "reader"})
        stats = await client.read_resource("library://catalogue/stats")

    assert SERVED_BY[wsgi_site.server.server] in wsgi_site.server.log()
    assert version == MODERN
    assert {"search_books", "borrow_book", "export_catalogue"} <= {t.name for t in tools.tools}
    assert not found.is_error and found.structured_content and found.structured_content["books"]
    assert not loans.is_error, loans  # the token acts for reader: the tool sees ctx.user
    assert stats.contents
    assert storage.tokens is not None
    assert set(storage.tokens.scope.split()) == {"library:read", "library:write"}
    # The challenge came from the plain view, and everything after it went with the token as
    # one POST answered by one JSON body: no session, no stream.
    statuses = [(method, status, kind) for method, _, status, kind in exchanges.seen]
    assert statuses[0] == ("POST", 401, "application/json")
    assert set(statuses[1:]) == {("POST", 200, "application/json")}
    assert exchanges.seen[1][1]["method"] == "server/discover"


async def test_legacy_mode_holds_a_session_answered_in_json(wsgi_site: WSGISite) -> None:
    async with signed_in(wsgi_site, "reader", mode="legacy") as (client, _, exchanges):
        version = client.protocol_version
        found = await client.call_tool("search_books", {"query": "wells"})
        prompt = await client.list_prompts()
        stats = await client.read_resource("library://catalogue/stats")

    assert version == LEGACY
    assert not found.is_error and found.structured_content and found.structured_content["books"]
    assert prompt.prompts and stats.contents
    seen = [
        (method, message.get("method"), status, kind)
        for method, message, status, kind in exchanges.seen
    ]
    assert seen[:4] == [
        ("POST", "initialize", 401, "application/json"),  # the challenge, then OAuth
        ("POST", "initialize", 200, "application/json"),
        ("POST", "notifications/initialized", 202, ""),
        # The GET stream needs a stream held between requests: 405, which the SDK accepts.
        ("GET", None, 405, "application/json"),
    ]
    # Every request's answer is one JSON body, whatever the client accepts; DELETE ends it.
    assert {(m, status, kind) for m, _, status, kind in seen[4:-1]} == {
        ("POST", 200, "application/json")
    }
    assert seen[-1] == ("DELETE", None, 204, "")


async def test_an_elicitation_is_a_request_state_round_in_2026_07_28(
    wsgi_site: WSGISite,
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True, "note": "by Friday"})

    async with signed_in(wsgi_site, "reader", elicitation_callback=elicit) as (
        client,
        _,
        exchanges,
    ):
        result = await client.call_tool("confirm_reservation", {"title": "Emma"})
        version = client.protocol_version

    assert version == MODERN
    assert not result.is_error, result
    assert result.structured_content == {
        "title": "Emma",
        "action": "accept",
        "confirmed": True,
        "note": "by Friday",
    }
    assert asked == ["Reserve Emma?"]
    # Two POSTs: the call, answered input_required, then its retry carrying the answer and the
    # request state the server sealed: no stream held between them.
    first, retry = exchanges.calls("confirm_reservation")
    assert "inputResponses" not in first["params"]
    assert retry["params"]["requestState"] and retry["params"]["inputResponses"]


# -- a durable task, through the SDK client's extension interface --------------------------------


class CreatedTask(Result):
    """The tasks extension's ``CreateTaskResult``: a ``tools/call`` answered with a task."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


class TaskRequest(Request[dict[str, Any], str]):
    """A ``tasks/*`` request; SEP-2663 has its task id mirrored in ``Mcp-Name``."""

    name_param = "taskId"


class DetailedTask(Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


@dataclass
class Tasks(ClientExtension):
    """The io.modelcontextprotocol/tasks extension, as far as this test needs it: a task made
    by ``tools/call`` is polled with ``tasks/get``; a form it asks is answered with ``answer``
    through ``tasks/update``; its result is the call's."""

    answer: dict[str, Any]
    identifier: str = TASKS
    seen: list[DetailedTask] = field(default_factory=list)

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        deadline = time.monotonic() + TASK_WAIT
        while time.monotonic() < deadline:
            task = await ctx.session.send_request(
                TaskRequest(method="tasks/get", params={"taskId": created.task_id}), DetailedTask
            )
            self.seen.append(task)
            if task.status == "completed":
                assert task.result is not None
                return CallToolResult.model_validate(task.result)
            if task.status == "input_required":
                assert task.input_requests is not None
                responses = {
                    key: {"action": "accept", "content": self.answer} for key in task.input_requests
                }
                await ctx.session.send_request(
                    TaskRequest(
                        method="tasks/update",
                        params={"taskId": created.task_id, "inputResponses": responses},
                    ),
                    Result,
                )
            else:
                assert task.status == "working", task
            await anyio.sleep(0.1)  # the poll interval, bounded by the deadline
        pytest.fail(f"task {created.task_id} did not end in {TASK_WAIT} s: {self.seen[-1]}")


async def test_a_durable_task_is_completed_by_db_worker(wsgi_site: WSGISite) -> None:
    tasks = Tasks(answer={"format": "csv"})
    asked_directly: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        # Declares the elicitation capability the tool needs; a task asks through tasks/get.
        asked_directly.append(params.message)
        return ElicitResult(action="decline")

    async with signed_in(
        wsgi_site, "librarian", extensions=[tasks], elicitation_callback=elicit
    ) as (client, _, _):
        result = await client.call_tool("export_catalogue", {})

    assert not result.is_error, result
    assert result.structured_content is not None
    assert result.structured_content["exported"] == BOOKS
    assert result.structured_content["format"] == "csv"
    (resource,) = [b.resource for b in result.content if isinstance(b, EmbeddedResource)]
    assert isinstance(resource, TextResourceContents)
    assert len(resource.text.splitlines()) == BOOKS + 1
    assert asked_directly == []
    statuses = [task.status for task in tasks.seen]
    assert "input_required" in statuses and statuses[-1] == "completed"
    # The task ran in db_worker, not in the web server's worker.
    row = json.loads(
        manage(
            wsgi_site.server.env,
            "shell",
            "-v0",
            "-c",
            TASK_ROW.format(task_id=tasks.seen[-1].task_id),
        )
        .strip()
        .splitlines()[-1]
    )
    assert row["status"] == "completed" and row["job"] == "SUCCESSFUL"
    assert int(row["worker"].rpartition(":")[2]) == wsgi_site.worker.pid
