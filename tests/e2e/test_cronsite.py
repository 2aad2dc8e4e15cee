"""A cron-monitoring project (tests/cronsite) whose users sign in by email on its own login page
through plain-class backends (no BaseBackend: no aget_user; permissions from a second plain
class with has_perm), driven by the official SDK client with the session cookie it got there.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.cronsite import seed

from .conftest import ROOT, ExampleServer, copy_database, manage, run_server, server_env, tool_names

pytestmark = pytest.mark.e2e

APPLICATION = "tests.cronsite.asgi:application"
ERAS = ["legacy", "2026-07-28"]


def cronsite_env(path: Path) -> dict[str, str]:
    return {**server_env(path, auth="django"), "DJANGO_SETTINGS_MODULE": "tests.cronsite.settings"}


@pytest.fixture(scope="module")
def cronsite_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Migrated and seeded once; the server and each stdio test work on a copy."""
    path = tmp_path_factory.mktemp("e2e-cronsite") / "cronsite.sqlite3"
    manage(cronsite_env(path), "migrate", "--noinput", "-v0")
    manage(cronsite_env(path), "shell", "-v0", "-c", "from tests.cronsite.seed import seed; seed()")
    return path


@pytest.fixture(scope="module")
def cronsite_server(
    asgi_server: str, cronsite_database: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    workdir = tmp_path_factory.mktemp(f"e2e-cronsite-{asgi_server}")
    env = cronsite_env(copy_database(cronsite_database, workdir / "cronsite.sqlite3"))
    with run_server(
        env, workdir / f"{asgi_server}.log", server=asgi_server, application=APPLICATION
    ) as server:
        yield server


def sign_in(server: ExampleServer, email: str, password: str = seed.PASSWORD) -> dict[str, str]:
    """Log in through the project's own login page, as a browser would; return its cookies."""
    with httpx.Client(base_url=server.base_url, timeout=10) as browser:
        browser.get("/login/")
        response = browser.post(
            "/login/",
            data={
                "email": email,
                "password": password,
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            },
        )
        assert response.status_code == 302, response.text
        return {"sessionid": browser.cookies["sessionid"]}


@asynccontextmanager
async def connect(
    server: ExampleServer, cookies: dict[str, str], era: str
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(cookies=cookies, timeout=10) as http,
        Client(
            streamable_http_client(server.mcp_url, http_client=http),
            read_timeout_seconds=10,
            mode=era,
        ) as client,
    ):
        yield client


@pytest.mark.parametrize("era", ERAS)
async def test_a_member_signed_in_by_email_through_a_plain_backend_lists_and_calls_tools(
    cronsite_server: ExampleServer, era: str
) -> None:
    cookies = sign_in(cronsite_server, seed.ANN)
    async with connect(cronsite_server, cookies, era) as client:
        names = await tool_names(client)
        me = await client.call_tool("whoami", {})
        found = await client.call_tool("monitor_check_search", {"query": "backup"})
        version = client.protocol_version
    assert version == ("2025-11-25" if era == "legacy" else era)
    # The model tools come from MemberPermissionBackend.has_perm: no ModelBackend here.
    assert names == {"whoami", "monitor_check_search", "monitor_check_get"}
    assert not me.is_error and me.content[0].text == seed.ANN  # type: ignore[union-attr]
    assert [row["name"] for row in found.structured_content["items"]] == [f"backup of {seed.ANN}"]


async def test_a_wrong_password_gets_no_session_and_the_endpoint_answers_401(
    cronsite_server: ExampleServer,
) -> None:
    with httpx.Client(base_url=cronsite_server.base_url, timeout=10) as browser:
        browser.get("/login/")
        response = browser.post(
            "/login/",
            data={
                "email": seed.ANN,
                "password": "wrong",
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            },
        )
        answer = browser.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 200 and "Wrong email or password" in response.text
    assert answer.status_code == 401


def test_the_project_passes_manage_py_check(tmp_path: Path) -> None:
    assert "no issues" in manage(cronsite_env(tmp_path / "cronsite.sqlite3"), "check")


@pytest.mark.parametrize("era", ERAS)
async def test_a_stdio_client_acts_as_a_member_with_permissions_from_a_plain_backend(
    cronsite_database: Path, tmp_path: Path, era: str
) -> None:
    # By the member's email, as the project signs people in (its usernames are random).
    env = cronsite_env(copy_database(cronsite_database, tmp_path / "cronsite.sqlite3"))
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_stdio", "--user", seed.ANN],
        env=env,
        cwd=str(ROOT),
    )
    async with Client(stdio_client(params), mode=era, read_timeout_seconds=20) as client:
        names = await tool_names(client)
        found = await client.call_tool("monitor_check_search", {"query": "backup"})
    assert names == {"whoami", "monitor_check_search", "monitor_check_get"}
    assert [row["name"] for row in found.structured_content["items"]] == [f"backup of {seed.ANN}"]
