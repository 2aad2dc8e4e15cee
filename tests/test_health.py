"""The readiness view (``<endpoint>/health/``): 200 when the database and the channel layer
answer, 503 when either does not, broken for real (a database file that cannot be opened, a
Redis channel layer on a closed port)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.test import override_settings
from django.urls import reverse

from mcp_django.testing import MCPTestClient, Response
from tests.conftest import BASE_SETTINGS, SessionsOn, database_alias

pytestmark = pytest.mark.django_db(transaction=True)

IN_MEMORY = {"BACKEND": "mcp_django.transport.layers.InMemoryChannelLayer"}
CLOSED_PORT_REDIS = {
    "BACKEND": "channels_redis.core.RedisChannelLayer",
    "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
}
HEALTHY = {"status": "ok", "checks": {"database": "ok", "migrations": "ok", "channel_layer": "ok"}}


@pytest.fixture(autouse=True)
async def _flush_layer(fresh_channel_layer: None) -> None:
    """The in-memory layer starts empty (tests/conftest.py)."""


async def get_health(**headers: str | None) -> Response:
    return await MCPTestClient().send("GET", headers=headers, path="/mcp/health/")


@asynccontextmanager
async def layer_alias(alias: str, config: dict[str, Any]) -> AsyncIterator[Any]:
    """Run MCP_DJANGO["CHANNEL_LAYER"] on ``alias``; close its connections afterwards."""
    with override_settings(
        CHANNEL_LAYERS={"default": IN_MEMORY, alias: config},
        MCP_DJANGO={**BASE_SETTINGS, "CHANNEL_LAYER": alias},
    ):
        layer = get_channel_layer(alias)
        try:
            yield layer
        finally:
            await layer.close_pools()


@pytest.fixture
def unreachable_database(tmp_path: Path) -> Iterator[str]:
    """A database alias whose SQLite file lies in a directory that does not exist."""
    with database_alias(
        "unreachable",
        {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "gone" / "db.sqlite3")},
    ) as alias:
        yield alias


async def test_health_is_200_when_the_database_and_the_layer_answer():
    response = await get_health()
    assert response.status == 200
    assert response.json() == HEALTHY
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"


async def test_health_lives_under_the_endpoint():
    assert reverse("mcp_django:health") == "/mcp/health/"


async def test_health_needs_no_credentials_nor_an_allowed_origin():
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "AUTHENTICATION": "django"}):
        response = await get_health(origin="https://elsewhere.example")
    assert response.status == 200 and response.json() == HEALTHY


async def test_health_stays_open_under_login_required_middleware():
    from django.conf import settings

    with override_settings(
        MIDDLEWARE=[*settings.MIDDLEWARE, "django.contrib.auth.middleware.LoginRequiredMiddleware"]
    ):
        response = await get_health()
    assert response.status == 200


async def test_health_answers_get_and_head_only():
    head = await MCPTestClient().send("HEAD", path="/mcp/health/")
    assert (
        head.status == 200 and head.headers["cache-control"] == "no-store"
    )  # the server drops a HEAD's body
    post = await MCPTestClient().send("POST", b"{}", path="/mcp/health/")
    assert post.status == 405 and post.headers["allow"] == "GET, HEAD"


async def test_health_is_503_when_the_database_cannot_be_reached(unreachable_database):
    with override_settings(DATABASE_ROUTERS=[SessionsOn(unreachable_database)]):
        response = await get_health()
    assert response.status == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "error", "migrations": "error", "channel_layer": "ok"},
    }
    assert response.headers["cache-control"] == "no-store"
    assert (
        b"gone" not in response.body and b"sqlite" not in response.body.lower()
    )  # no detail leaks


async def test_health_is_503_when_the_channel_layer_cannot_be_reached():
    async with layer_alias("broken", CLOSED_PORT_REDIS):
        response = await get_health()
    assert response.status == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "migrations": "ok", "channel_layer": "error"},
    }
    assert b"6379" not in response.body and b"127.0.0.1" not in response.body


async def test_health_round_trips_through_a_real_redis_layer():
    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT, require_redis

    require_redis()
    config = {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [f"redis://{REDIS_HOST}:{REDIS_PORT}/0"], "prefix": "mcp-health-test"},
    }
    async with layer_alias("redis", config):
        response = await get_health()
    assert response.status == 200 and response.json() == HEALTHY


async def test_health_round_trips_while_the_process_channel_listens_on_a_real_redis_layer():
    """The process's own channel blocks in a receive on Redis (for up to 5 s at a time) once the
    process served an MCP request; channels_redis lets one receive at a time read from Redis, so
    the health check's message must come through that same read (the same "specific." channel),
    not wait behind it for its own, past its 2 s bound (behind HAProxy, both hosts went DOWN)."""
    import asyncio

    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT, require_redis
    from tests.polling import until

    require_redis()
    config = {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [f"redis://{REDIS_HOST}:{REDIS_PORT}/0"],
            "prefix": "mcp-health-listen-test",
        },
    }
    async with layer_alias("redis", config) as layer:
        listening = asyncio.ensure_future(
            layer.receive(await layer.new_channel())
        )  # as ProcessChannel.listen does
        try:
            # The listener holds the layer's receive lock, blocked on Redis.
            await until(
                lambda: layer.receive_lock is not None and layer.receive_lock.locked(),
                5,
                failure="the listener never took the lock",
            )
            response = await asyncio.wait_for(get_health(), 10)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
    assert response.status == 200 and response.json() == HEALTHY
