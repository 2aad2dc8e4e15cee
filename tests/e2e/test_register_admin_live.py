"""A plain ``register_admin(admin.site)`` on the live example site: sessions do not feed an
announcement loop, and clients keep connecting."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from .conftest import ExampleServer, manage, run_server, server_env

pytestmark = pytest.mark.e2e

COUNT_EVENTS = (
    "from mcp_django.models import Event; "
    "print(Event.objects.count(), Event.objects.filter(payload__contains='list_changed').count())"
)


@pytest.fixture(scope="module")
def whole_admin_server(asgi_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleServer]:
    workdir = tmp_path_factory.mktemp("e2e-whole-admin")
    env = {**server_env(workdir / "example.sqlite3", auth="none"), "DJANGO_SETTINGS_MODULE": "tests.e2e.settings_whole_admin"}
    manage(env, "migrate", "--noinput")
    manage(env, "load_demo_data")
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as server:
        yield server


async def _list_tools(server: ExampleServer) -> list[str]:
    async with Client(server.mcp_url, read_timeout_seconds=10) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


async def test_two_clients_connect_one_after_the_other_and_the_event_table_stays_small(whole_admin_server: ExampleServer) -> None:
    first = await asyncio.wait_for(_list_tools(whole_admin_server), timeout=30)
    second = await asyncio.wait_for(_list_tools(whole_admin_server), timeout=30)
    assert first == second and "search_books" in first
    assert not [name for name in first if name.startswith(("mcp_django_", "oauth2_provider_", "auth_"))]
    events, announcements = map(int, manage(whole_admin_server.env, "shell", "-v0", "-c", COUNT_EVENTS).split())
    assert announcements == 0  # creating a session announced a change of the (exposed) Session list
    assert events <= 4  # at most a priming event or two per session
    log = whole_admin_server.log()
    assert "RecursionError" not in log and "Could not announce" not in log


async def test_the_server_stops_on_sigterm_with_a_client_connected(asgi_server: str, tmp_path: Path) -> None:
    """The announcement loop kept Daphne's reactor busy: it ignored SIGTERM. It must stop, and
    so must uvicorn and granian, which wait for open responses: the legacy client's GET SSE
    stream never ends by itself (their graceful timeout flags in tests/asgi_servers.py)."""
    env = {**server_env(tmp_path / "example.sqlite3", auth="none"), "DJANGO_SETTINGS_MODULE": "tests.e2e.settings_whole_admin"}
    manage(env, "migrate", "--noinput")
    manage(env, "load_demo_data")
    with run_server(env, tmp_path / f"{asgi_server}.log", server=asgi_server) as server:
        async with Client(server.mcp_url, read_timeout_seconds=10, mode="legacy") as client:
            await client.list_tools()
            process = server.process
            assert process is not None
            process.terminate()
            # Bounded so a hang fails the test instead of the run; the sole claim is "it exits".
            returncode = await asyncio.to_thread(process.wait, 20)
    assert returncode is not None
    assert "RecursionError" not in server.log()
