"""What test_url_elicitation.py plays besides the example site: the user's browser, an MCP
client that records everything it receives, and Bookshelf, a second OAuth server on loopback.

- ``Browser`` keeps a cookie jar per origin (cookies ignore ports, so on one loopback address
  two sites would otherwise share theirs; a real deployment has two hosts). It signs in on a
  site's login page when sent there, follows redirects from site to site, and submits forms
  with their CSRF tokens, as a person would.
- ``Recorder`` is the MCP client's side: an elicitation callback that agrees to open URL-mode
  requests (the SDK then declares ``elicitation: {form: {}, url: {}}``), a message handler
  that keeps every notification, and ``WireTap``, the bytes of every HTTP response the client
  read (so "never in any MCP message" covers results, errors and notifications alike).
- ``run_provider`` serves ``tests/e2e/provider`` with daphne on a free port;
  ``run_site_with_bookshelf`` serves the example site with Bookshelf as its "connect" provider
  (test_url_elicitation.py and the browser tests, tests/browser/).
- ``call_while_browsing`` calls a tool and lets the user act in their browser when the client
  is sent to a URL.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    ElicitCompleteNotification,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
)

from tests import asgi_servers

from .conftest import (
    LISTENING_RE,
    ROOT,
    STARTUP_TIMEOUT,
    ExampleServer,
    manage,
    run_server,
    server_env,
)
from .oauth_helpers import form_fields

WAIT = 20.0  # seconds: every wait in these tests is bounded by this


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# -- the user's browser -------------------------------------------------------------------------------


class Browser:
    """One person's browser, signed in (when asked) with the credentials given per origin."""

    def __init__(self, credentials: dict[str, tuple[str, str]]) -> None:
        self.credentials = credentials  # origin -> (username, password)
        self.jars: dict[str, httpx.AsyncClient] = {}
        self.history: list[str] = []  # every URL requested, in order
        self.logins: list[str] = []

    async def __aenter__(self) -> Browser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self.jars.values():
            await client.aclose()

    def _client(self, url: str) -> httpx.AsyncClient:
        origin = origin_of(url)
        if origin not in self.jars:
            self.jars[origin] = httpx.AsyncClient(timeout=WAIT, follow_redirects=False)
        return self.jars[origin]

    def cookies(self, origin: str) -> dict[str, str]:
        return dict(self.jars[origin].cookies) if origin in self.jars else {}

    async def get(self, url: str) -> httpx.Response:
        self.history.append(url)
        return await self._client(url).get(url)

    async def post(self, url: str, data: dict[str, str]) -> httpx.Response:
        self.history.append(url)
        return await self._client(url).post(url, data=data)

    async def sign_in(self, origin: str) -> None:
        """Sign in on the site's login page (GET for the CSRF token, then POST)."""
        page = await self.get(f"{origin}/accounts/login/")
        assert page.status_code == 200, page.status_code
        await self._login(page)

    async def _login(self, page: httpx.Response) -> httpx.Response:
        username, password = self.credentials[origin_of(str(page.url))]
        fields = {
            **form_fields(page.text, "login-form"),
            "username": username,
            "password": password,
        }
        response = await self.post(str(page.url), fields)
        assert response.is_redirect, (
            f"login as {username} failed: {response.status_code}\n{response.text[:1500]}"
        )
        self.logins.append(origin_of(str(page.url)))
        return response

    async def visit(self, url: str, *, stop_at: str | None = None) -> httpx.Response:
        """GET ``url`` and follow redirects (to any origin), signing in where a login page asks;
        return the first page that is not a redirect, or the redirect to a URL starting with
        ``stop_at``."""
        response = await self.get(url)
        for _ in range(20):
            if response.is_redirect:
                location = urljoin(str(response.url), response.headers["location"])
                if stop_at is not None and location.startswith(stop_at):
                    return response
                response = await self.get(location)
            elif (
                response.status_code == 200
                and 'id="login-form"' in response.text
                and origin_of(str(response.url)) in self.credentials
            ):
                response = await self._login(response)
            else:
                return response
        raise AssertionError(f"too many redirects from {url}: {self.history[-20:]}")

    async def submit(
        self, page: httpx.Response, button: str, form_id: str = "", **values: str
    ) -> httpx.Response:
        """Submit the form of ``page`` (to its own URL) with ``button`` pressed."""
        assert page.status_code == 200, f"{page.status_code}: {page.text[:1500]}"
        fields = {**form_fields(page.text, form_id), **values}
        name, _, value = button.partition("=")
        fields[name] = value or "1"
        return await self.post(str(page.url), fields)


# -- the MCP client -----------------------------------------------------------------------------------


class _Tee(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class WireTap(httpx2.AsyncBaseTransport):
    """An HTTP transport that keeps a copy of every response (headers and body) it receives."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.received = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        self.received.extend(b"".join(k + b": " + v + b"\n" for k, v in response.headers.raw))
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, self.received),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class Recorder:
    """The client-side record of one MCP client: the URL requests it was sent, every
    notification, and every byte it received."""

    answer: str = "accept"  # what the client answers to elicitation/create
    url_requests: list[ElicitRequestURLParams] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)
    wire: WireTap = field(default_factory=WireTap)
    _requests: asyncio.Queue[ElicitRequestURLParams] = field(default_factory=asyncio.Queue)

    async def elicitation_callback(self, context: Any, params: Any) -> ElicitResult | ErrorData:
        if not isinstance(params, ElicitRequestURLParams):
            return ErrorData(code=-32602, message="This client only opens URLs")
        self.url_requests.append(params)
        self._requests.put_nowait(params)
        # "accept" only means the user agreed to open the URL; the page does the rest.
        return ElicitResult(action=self.answer)  # type: ignore[arg-type]

    async def message_handler(self, message: Any) -> None:
        self.notifications.append(message)

    async def next_url_request(self) -> ElicitRequestURLParams:
        return await asyncio.wait_for(self._requests.get(), WAIT)

    def completed_ids(self) -> list[str]:
        return [
            n.params.elicitation_id
            for n in self.notifications
            if isinstance(n, ElicitCompleteNotification)
        ]

    async def wait_completed(self, elicitation_id: str) -> None:
        deadline = time.monotonic() + WAIT
        while elicitation_id not in self.completed_ids():
            assert time.monotonic() < deadline, (
                f"no notifications/elicitation/complete for {elicitation_id}: {self.notifications}"
            )
            await asyncio.sleep(0.05)

    def everything_received(self) -> str:
        """Every byte the client read from the server, and every notification it surfaced."""
        return self.wire.received.decode("utf-8", "replace") + "\n".join(
            repr(n) for n in self.notifications
        )


@asynccontextmanager
async def mcp_client(
    server: ExampleServer,
    cookies: dict[str, str] | None,
    recorder: Recorder,
    *,
    url_mode: bool = True,
    auth: Any = None,
    mode: str = "legacy",
) -> AsyncIterator[Client]:
    """The official SDK client with the user's session cookie (or an OAuth ``auth``). With
    ``url_mode`` it has an elicitation callback, so it declares ``elicitation: {form: {}, url: {}}``;
    without, it declares no elicitation at all. These tests follow 2025-11-25's URL elicitation
    (elicitationId, the completion notification, -32042) unless ``mode`` says otherwise."""
    async with (
        httpx2.AsyncClient(
            cookies=cookies, auth=auth, timeout=WAIT, transport=recorder.wire
        ) as http,
        Client(
            streamable_http_client(server.mcp_url, http_client=http),
            read_timeout_seconds=WAIT,
            elicitation_callback=recorder.elicitation_callback if url_mode else None,
            message_handler=recorder.message_handler,
            mode=mode,
        ) as client,
    ):
        yield client


# -- Bookshelf, the third-party OAuth server ------------------------------------------------------------


@dataclass(frozen=True)
class Provider:
    base_url: str
    env: dict[str, str]
    access_log_path: Path
    log_path: Path

    def access_log(self) -> str:
        return (
            self.access_log_path.read_text(errors="replace")
            if self.access_log_path.exists()
            else ""
        )

    def django(self, *args: str) -> str:
        return django_admin(self.env, *args)


def django_admin(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(
            f"django-admin {args[0]} (provider) failed:\n{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    return result.stdout


@contextmanager
def run_provider(env: dict[str, str], access_log: Path, log_path: Path) -> Iterator[Provider]:
    """Serve tests/e2e/provider with daphne on a port the system chooses, until the block ends."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                "0",
                "tests.e2e.provider.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        base_url = None
        while base_url is None or not _answers(base_url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"the provider did not start:\n{log_path.read_text(errors='replace')}",
                    pytrace=False,
                )
            found = LISTENING_RE.search(log_path.read_text(errors="replace"))
            base_url = f"http://127.0.0.1:{found.group(1)}" if found else None
            time.sleep(0.05)  # bounded by the deadline
        yield Provider(base_url=base_url, env=env, access_log_path=access_log, log_path=log_path)
    finally:
        asgi_servers.stop(process)


def _answers(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/accounts/login/", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


# -- the example site with Bookshelf as its "connect" provider ----------------------------------------

# Bookshelf: its client for the example site, and its user (not the same name as on the site).
CLIENT_ID = "example-library"
CLIENT_SECRET = "bookshelf-client-secret-" + secrets.token_hex(8)
BOOKSHELF_USER, BOOKSHELF_PASSWORD = "ada.lovelace", "bookshelf-pw-ada"

SITE_SETUP = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from example_site.library.models import Book, Loan, Member, today

for name in {users!r}:
    user = get_user_model().objects.create_user(name, name + "@example.com", name + "-pw")
    Member.objects.create(user=user)
# barbara's reading history: two returned loans, and one still out.
barbara = Member.objects.get(user__username="barbara")
books = list(Book.objects.filter(genre="poetry").order_by("isbn")[:3]) + list(Book.objects.filter(genre="history").order_by("isbn")[:1])
for days_ago, book in zip((90, 60), books[:2]):
    borrowed = today() - timedelta(days=days_ago)
    Loan.objects.create(book=book, member=barbara, borrowed_on=borrowed, due_on=borrowed + timedelta(days=21), returned_on=borrowed + timedelta(days=14))
Loan.objects.create(book=books[-1], member=barbara)
"""

PROVIDER_SETUP = """
from django.contrib.auth import get_user_model
from oauth2_provider.models import Application

get_user_model().objects.create_user({username!r}, password={password!r})
Application.objects.create(
    name="Example Library", client_id={client_id!r}, client_secret={client_secret!r},
    client_type=Application.CLIENT_CONFIDENTIAL, authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
    redirect_uris={redirect_uri!r}, skip_authorization=False, algorithm="",
)
"""


@contextmanager
def run_site_with_bookshelf(
    workdir: Path, server: str, users: list[str]
) -> Iterator[tuple[ExampleServer, Provider]]:
    """Bookshelf on a free port, then the example site under ``server`` with ``MCP_AUTH=django``
    (at a port chosen first: Bookshelf must know its callback URL) and CONNECT_PROVIDERS pointing
    at Bookshelf, on a fresh database in ``workdir``: the demo data, and ``users`` (password
    ``<name>-pw``), barbara among them with a reading history."""
    port = asgi_servers.free_port()
    site_url = f"http://127.0.0.1:{port}"
    provider_env = {
        **server_env(
            workdir / "unused.sqlite3", auth="none"
        ),  # the environment, less what the e2e tests pin
        "DJANGO_SETTINGS_MODULE": "tests.e2e.provider.settings",
        "PROVIDER_SQLITE_PATH": str(workdir / "bookshelf.sqlite3"),
        "PROVIDER_ACCESS_LOG": str(workdir / "bookshelf-access.log"),
    }
    django_admin(provider_env, "migrate", "--noinput", "-v0")
    django_admin(
        provider_env,
        "shell",
        "-v0",
        "-c",
        PROVIDER_SETUP.format(
            username=BOOKSHELF_USER,
            password=BOOKSHELF_PASSWORD,
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            redirect_uri=f"{site_url}/mcp/connect/callback/",
        ),
    )
    with run_provider(
        provider_env, workdir / "bookshelf-access.log", workdir / "bookshelf-daphne.log"
    ) as provider:
        env = {
            **server_env(workdir / "example.sqlite3", auth="django"),
            "MCP_RESOURCE_URL": f"{site_url}/mcp",
            "MCP_LOG_LEVEL": "DEBUG",  # the most the server ever logs: the secret must be in none of it
            "MCP_CONNECT_PROVIDER_URL": provider.base_url,
            "MCP_CONNECT_CLIENT_ID": CLIENT_ID,
            "MCP_CONNECT_CLIENT_SECRET": CLIENT_SECRET,
        }
        manage(env, "migrate", "--noinput")
        manage(env, "load_demo_data")
        manage(env, "shell", "-v0", "-c", SITE_SETUP.format(users=users))
        with run_server(env, workdir / f"{server}.log", port=port, server=server) as site:
            assert site.base_url == site_url
            yield site, provider


# -- a tool call while the user is in their browser ------------------------------------------------------


async def call_while_browsing(
    client: Any, recorder: Recorder, tool: str, arguments: dict[str, Any], browse: Any
) -> tuple[Any, Any]:
    """Call ``tool``; when the client is sent to a URL, run ``browse(request)`` (the user in
    their browser); return the tool's result and the URL request."""
    call = asyncio.ensure_future(client.call_tool(tool, arguments))
    try:
        request = await recorder.next_url_request()
        await browse(request)
        result = await asyncio.wait_for(call, WAIT)
    finally:
        call.cancel()
    return result, request
