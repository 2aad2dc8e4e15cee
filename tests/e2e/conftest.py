"""Start the real example site (in a subprocess) for the e2e tests.

The server runs with ``example_site.settings`` on a fresh SQLite file in a temporary
directory, migrated and loaded with the demo data; this pytest process keeps
``tests.settings``. Daphne is asked for port 0 and reports the port it got; uvicorn and granian
do not say, so they get a port free just before they start.

Each test that takes ``asgi_server`` (directly or through a fixture such as ``example_server``)
runs once per server of ``MCP_TEST_SERVERS`` (tests/asgi_servers.py: daphne by default, daphne,
uvicorn and granian under CI), with the server in its id (``[uvicorn]``); the fixtures are
session-scoped per server, so pytest groups the tests and starts each server once.

``example_server`` serves without authentication (``MCP_AUTH=none``; the site defaults to OAuth)
on its own copy of the demo database; ``example_server_django_auth`` is a second process on the
same database with ``MCP_AUTH=django``, started only when a test asks for it; ``test_oauth.py``
and ``test_claude_flow.py`` start others with ``MCP_AUTH=oauth`` (``run_oauth_server``), which
fetch client ID metadata documents from ``document_host``. ``example_database`` is a copy no
server uses, for the tests that run ``manage.py`` commands only (stdio).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests import asgi_servers

from .oauth_helpers import DocumentHost

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 30.0
LISTENING_RE = re.compile(r"Listening on TCP address 127\.0\.0\.1:(\d+)")

# The fixture pins the configuration, whatever the developer's shell has set.
UNSET = (
    "DATABASE_URL",
    "REDIS_URL",
    "MCP_RESPONSE_MODE",
    "MCP_SSE_MAX_CONNECTION_SECONDS",
    "DJANGO_SECRET_KEY",
    "MCP_RESOURCE_URL",
    "OAUTH_ISSUER",
    "OAUTH_CIMD_ALLOW_LOOPBACK",
    "OAUTH_CIMD_LOOPBACK_CA_FILE",
    "OAUTH_DCR_RATE_LIMIT",
    "MCP_ELICITATION_TTL",
    "MCP_CONNECT_PROVIDER_URL",
    "MCP_CONNECT_CLIENT_ID",
    "MCP_CONNECT_CLIENT_SECRET",
    "MCP_RATE_LIMIT",
    "MCP_RATE_LIMIT_PER_CLIENT",
    "MCP_RATE_LIMIT_PER_TOOL",
    "MCP_MAX_SESSIONS_PER_USER",
    "MCP_AUDIT_DURABLE",
    "MCP_REQUEST_LEASE_SECONDS",
    "MCP_TASKS_BACKEND",
    "MCP_JWT_ISSUER",
    "MCP_JWT_USER_CLAIM",
    "MCP_JWT_USER_FIELD",
)

# Prints a session cookie value for a user, as django.test.Client.force_login builds it.
LOGIN_SCRIPT = """
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from importlib import import_module
user = get_user_model().objects.get(username={username!r})
session = import_module(settings.SESSION_ENGINE).SessionStore()
session[SESSION_KEY] = user._meta.pk.value_to_string(user)
session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key)
"""


@dataclass(frozen=True)
class ExampleDatabase:
    """A migrated copy of the demo database that no server serves, and the environment naming it."""

    env: dict[str, str]


@dataclass(frozen=True)
class ExampleServer:
    base_url: str
    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)
    server: str = "daphne"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def application_pid(self) -> int:
        """The process running the application (granian runs it in a worker process)."""
        assert self.process is not None
        return asgi_servers.application_pid(self.server, self.process.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def login(self, username: str) -> dict[str, str]:
        """Cookies of a Django session logged in as ``username`` (for ``MCP_AUTH=django``)."""
        session_key = manage(
            self.env, "shell", "-v0", "-c", LOGIN_SCRIPT.format(username=username)
        ).strip()
        return {"sessionid": session_key}


def server_env(sqlite_path: Path, auth: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(
        DJANGO_SETTINGS_MODULE="example_site.settings",
        SQLITE_PATH=str(sqlite_path),
        MCP_AUTH=auth,
        DJANGO_DEBUG="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(f"manage.py {args[0]} failed:\n{result.stdout}\n{result.stderr}", pytrace=False)
    return result.stdout


def _wait_until_ready(process: subprocess.Popen[bytes], log_path: Path, port: int = 0) -> str:
    """Return the server's base URL once it answers HTTP; fail after STARTUP_TIMEOUT. With
    ``port`` 0 the port is read from daphne's "Listening on" line."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    base_url: str | None = f"http://127.0.0.1:{port}" if port else None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"the server exited with {process.returncode}:\n{log_path.read_text(errors='replace')}",
                pytrace=False,
            )
        if base_url is None:
            found = LISTENING_RE.search(log_path.read_text(errors="replace"))
            if found:
                base_url = f"http://127.0.0.1:{found.group(1)}"
        if base_url is not None:
            try:
                # ping is the one request a server answers without a session (401 with auth on).
                response = httpx.post(
                    f"{base_url}/mcp",
                    json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                    headers={"Accept": "application/json, text/event-stream"},
                    timeout=2,
                )
                if response.status_code in (200, 401):
                    return base_url
            except httpx.TransportError:
                pass
        time.sleep(0.05)  # bounded by the deadline above
    pytest.fail(
        f"the server is not ready after {STARTUP_TIMEOUT}s:\n{log_path.read_text(errors='replace')}",
        pytrace=False,
    )


@contextmanager
def run_server(
    env: dict[str, str],
    log_path: Path,
    port: int = 0,
    server: str = "daphne",
    application: str = asgi_servers.APPLICATION,
    options: Sequence[str] = (),
) -> Iterator[ExampleServer]:
    """Run the example site (or another ``application``, such as tests/helpdesk's) under
    ``server`` (daphne, uvicorn or granian: tests/asgi_servers.py) until the block ends, whether
    it ends normally or not. ``port`` 0 lets the system choose; a server that must know its own
    URL up front (OAuth) passes one. ``options`` go to the server's command line."""
    if server != "daphne":
        port = port or asgi_servers.free_port()  # only daphne says which port 0 became
    log_path.unlink(missing_ok=True)
    process = asgi_servers.start(server, port, env, log_path, ROOT, application, options)
    try:
        base_url = _wait_until_ready(process, log_path, port)
        yield ExampleServer(
            base_url=base_url, log_path=log_path, env=env, process=process, server=server
        )
    finally:
        asgi_servers.stop(process)


@asynccontextmanager
async def connect_as(
    server: ExampleServer, username: str, mode: str = "auto"
) -> AsyncIterator[Client]:
    """The official SDK client, logged in as ``username`` through a Django session cookie; in its
    default mode it discovers the server and speaks 2026-07-28 (``mode="legacy"``: 2025-11-25)."""
    async with httpx2.AsyncClient(cookies=server.login(username), timeout=10) as http:
        async with Client(
            streamable_http_client(server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode=mode,
        ) as client:
            yield client


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that needs a server once per server under test (see the module's docstring)."""
    if "asgi_server" not in metafunc.fixturenames:
        return
    try:
        servers = asgi_servers.servers_under_test()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    metafunc.parametrize("asgi_server", servers, indirect=True, scope="session")


@pytest.fixture(scope="session")
def asgi_server(request: pytest.FixtureRequest) -> str:
    """The name of the ASGI server this test runs under (parametrized by pytest_generate_tests)."""
    return str(request.param)


@pytest.fixture(scope="session")
def demo_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file holding the demo data, never served: each fixture below serves a copy."""
    path = tmp_path_factory.mktemp("e2e-demo") / "demo.sqlite3"
    env = server_env(path, auth="none")
    manage(env, "migrate", "--noinput")
    manage(env, "load_demo_data")
    return path


def copy_database(source: Path, target: Path) -> Path:
    """Copy a SQLite file (and its write-ahead log, if one was left) to ``target``."""
    for suffix in ("", "-wal"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    return target


@pytest.fixture(scope="session")
def example_database(
    demo_database: Path, tmp_path_factory: pytest.TempPathFactory
) -> ExampleDatabase:
    """The demo database for tests that run the site's commands (stdio) without any server."""
    path = copy_database(demo_database, tmp_path_factory.mktemp("e2e-commands") / "example.sqlite3")
    return ExampleDatabase(server_env(path, auth="none"))


@pytest.fixture(scope="session")
def example_server(
    asgi_server: str, demo_database: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    """The example site without authentication, on a free loopback port for the whole session,
    on a fresh copy of the demo database for each server."""
    workdir = tmp_path_factory.mktemp(f"e2e-{asgi_server}")
    env = server_env(copy_database(demo_database, workdir / "example.sqlite3"), auth="none")
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as server:
        yield server


@pytest.fixture(scope="session")
def example_server_django_auth(example_server: ExampleServer) -> Iterator[ExampleServer]:
    """A second process on the same database with ``MCP_AUTH=django`` (session cookies)."""
    env = {**example_server.env, "MCP_AUTH": "django"}
    log_path = example_server.log_path.with_name(f"{example_server.server}-django-auth.log")
    with run_server(env, log_path, server=example_server.server) as server:
        yield server


@pytest.fixture(scope="session")
def document_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocumentHost]:
    """The https host on loopback of the tests' client ID metadata documents."""
    with DocumentHost(tmp_path_factory.mktemp("cimd")) as host:
        yield host


@contextmanager
def run_oauth_server(
    example_server: ExampleServer,
    documents: DocumentHost,
    name: str,
    settings: dict[str, str],
) -> Iterator[ExampleServer]:
    """Another process of the example site on ``example_server``'s database, with OAuth on
    (``MCP_AUTH=oauth``), at a URL it knows in advance, fetching metadata documents from
    ``documents``; ``settings`` adds to its environment, ``name`` names its log."""
    port = asgi_servers.free_port()
    env = {
        **example_server.env,
        "MCP_AUTH": "oauth",
        "MCP_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
        # Fetch the test's metadata documents from 127.0.0.1, trusting the test's CA.
        "OAUTH_CIMD_ALLOW_LOOPBACK": "1",
        "OAUTH_CIMD_LOOPBACK_CA_FILE": str(documents.ca_file),
        **settings,
    }
    log_path = example_server.log_path.with_name(f"{example_server.server}-{name}.log")
    with run_server(env, log_path, port=port, server=example_server.server) as server:
        assert server.base_url == f"http://127.0.0.1:{port}"
        yield server


async def tool_names(client: Client) -> set[str]:
    """Every tool the client's user may use, following nextCursor page after page."""
    names: set[str] = set()
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        names |= {t.name for t in page.tools}
        cursor = page.next_cursor
        if cursor is None:
            return names
