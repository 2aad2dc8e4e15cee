"""Quotas across processes: two daphne processes of the example site sharing PostgreSQL and a
Redis cache (REDIS_URL) hold one rate limit together, whichever process a call reaches.

The deployment is this module's own (its quotas come from MCP_RATE_LIMIT and friends, which
the shared deployments leave unset); skipped without PostgreSQL and Redis, failed in CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_django.protocol.errors import QUOTA_EXCEEDED

from .conftest import _migrate
from .servers import Deployment, Inspector, PostgresDatabase, RedisDatabase, Server, base_env
from .test_stateless_processes import headers, message

pytestmark = pytest.mark.multiprocess

LIMIT = 4
# A day-long window: the test would have to straddle midnight UTC to see it reset.
QUOTAS = {"MCP_RATE_LIMIT": f"{LIMIT}/day", "MCP_RATE_LIMIT_PER_TOOL": "test_simple_text=2/day"}


def two_processes_on_postgres_and_redis(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    settings: dict[str, str],
) -> Iterator[Deployment]:
    """Two processes of the example site on a new PostgreSQL database and Redis, with ``settings``
    (environment variables) on top: a module fixture's body."""
    request.getfixturevalue("services")
    log_dir = tmp_path_factory.mktemp(name)
    database, cache = PostgresDatabase(), RedisDatabase()
    database.create()
    try:
        cache.claim()
        env = base_env(DATABASE_URL=database.url, REDIS_URL=cache.url, **settings)
        _migrate(env)
        deployed = Deployment(
            name,
            env,
            Inspector(postgres_url=database.url),
            [Server("process-1", env, log_dir), Server("process-2", env, log_dir)],
        )
        try:
            deployed.start()
            yield deployed
        finally:
            deployed.stop()
    finally:
        cache.release()
        database.drop()


@pytest.fixture(scope="module")
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    yield from two_processes_on_postgres_and_redis(request, tmp_path_factory, "quotas", QUOTAS)


async def _call(http: httpx.AsyncClient, url: str, name: str, **arguments: Any) -> httpx.Response:
    body = message("tools/call", {"name": name, "arguments": arguments})
    return await http.post(url, json=body, headers=headers(body))


async def test_two_processes_sharing_redis_hold_one_rate_limit_together(
    deployment: Deployment, http: httpx.AsyncClient
) -> None:
    urls = [deployment.p1.url, deployment.p2.url]
    # The per-tool budget (2), spent one call on each process, is spent on both.
    for url in urls:
        answered = await _call(http, url, "test_simple_text")
        assert answered.status_code == 200 and answered.json()["result"]["resultType"] == "complete"
    for url in urls:
        refused = await _call(http, url, "test_simple_text")
        assert refused.status_code == 429
        assert (
            refused.json()["error"]["data"]["limit"] == "PER_TOOL"
            and refused.json()["error"]["data"]["tool"] == "test_simple_text"
        )
    # The overall budget: two calls counted already; the rest, alternating, then none anywhere.
    statuses = [
        (await _call(http, urls[n % 2], "test_tool_with_logging")).status_code
        for n in range(LIMIT - 2)
    ]
    assert statuses == [200] * (LIMIT - 2)
    for url in urls:
        refused = await _call(http, url, "test_tool_with_logging")
        assert refused.status_code == 429
        assert 0 < int(refused.headers["retry-after"]) <= 24 * 3600
        error = refused.json()["error"]
        assert error["code"] == QUOTA_EXCEEDED and error["data"]["limit"] == "TOOL_CALLS"
