"""Fixtures that deploy the example site for real, in two shapes:

* ``postgres-redis``: two daphne processes sharing a fresh PostgreSQL database and a fresh
  Redis database (the scaled-out set-up). Skipped, with instructions, when PostgreSQL or Redis
  is not running, unless ``CI=true``, where that is a failure.
* ``sqlite-memory``: one daphne process on SQLite with the in-memory channel layer (the
  embedded defaults); "process 1" and "process 2" are then the same process.

Tests take the ``deployment`` fixture and run once per shape.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from .servers import (
    HOW_TO_START,
    Deployment,
    Inspector,
    PostgresDatabase,
    RedisDatabase,
    Server,
    base_env,
    services_problem,
)
from .wire import RawClient

SHAPES = ["postgres-redis", "sqlite-memory"]


@pytest.fixture(scope="session")
def services() -> None:
    """PostgreSQL and Redis must answer: skip without them, but fail in CI."""
    problem = services_problem()
    if problem is None:
        return
    message = (
        f"The multi-process tests need PostgreSQL and Redis on 127.0.0.1: {problem}. {HOW_TO_START}"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _migrate(env: dict[str, str]) -> None:
    Deployment("migrate", env, Inspector(), []).manage("migrate", "--noinput", "-v", "0")


@pytest.fixture(scope="session")
def postgres_redis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    request.getfixturevalue("services")
    log_dir = tmp_path_factory.mktemp("postgres-redis")
    database, layer = PostgresDatabase(), RedisDatabase()
    database.create()
    try:
        layer.claim()
        env = base_env(DATABASE_URL=database.url, REDIS_URL=layer.url)
        _migrate(env)
        deployment = Deployment(
            "postgres-redis",
            env,
            Inspector(postgres_url=database.url),
            [Server("process-1", env, log_dir), Server("process-2", env, log_dir)],
        )
        try:
            deployment.start()
            yield deployment
        finally:
            deployment.stop()
    finally:
        layer.release()
        database.drop()


@pytest.fixture(scope="session")
def sqlite_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    log_dir = tmp_path_factory.mktemp("sqlite-memory")
    path = log_dir / "example_site.sqlite3"
    env = base_env(SQLITE_PATH=str(path))
    _migrate(env)
    deployment = Deployment(
        "sqlite-memory", env, Inspector(sqlite_path=path), [Server("process", env, log_dir)]
    )
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(params=SHAPES)
def deployment(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    deployed: Deployment = request.getfixturevalue(request.param.replace("-", "_"))
    deployed.ensure_running()  # a test may have killed a process
    offsets = {server.name: server.log_size() for server in deployed.servers}
    request.node.mcp_logs = lambda: {
        s.name: s.log_tail(offsets.get(s.name, 0)) for s in deployed.servers
    }
    yield deployed
    deployed.ensure_running()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    logs = getattr(item, "mcp_logs", None)
    if report.failed and logs is not None:
        for name, text in logs().items():
            report.sections.append((f"server log: {name}", text or "(empty)"))
    return report


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=60.0)) as client:
        yield client


@pytest.fixture
def raw(http: httpx.AsyncClient) -> RawClient:
    return RawClient(http)
