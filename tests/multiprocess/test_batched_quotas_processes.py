"""Limits large enough to be counted in batches (mcp_django.ops.quotas.batches), held by two daphne
processes of the example site sharing PostgreSQL and a Redis cache: a rate is never passed and,
asked for until refused on both, handed out whole; calls raced over both processes in one
session never run past RUNNING_PER_SESSION, and all but what the processes hold spare run.

Skipped without PostgreSQL and Redis, failed in CI.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mcp_django.ops.quotas import batches as quota_batches

from .servers import Deployment
from .test_caps_processes import _end_sessions, _race_calls, _ran_and_refused, _session
from .test_quotas_processes import _call, two_processes_on_postgres_and_redis

pytestmark = pytest.mark.multiprocess

RATE = 256  # batches of 4
RUNNING = 32  # batches of 2
RACERS = 40
ENV = {
    # A day-long window: the test would have to straddle midnight UTC to see it reset.
    "MCP_RATE_LIMIT": f"{RATE}/day",
    "MCP_MAX_RUNNING_PER_SESSION": str(RUNNING),
    "MCP_MAX_RUNNING_PER_USER": "1000",
}


@pytest.fixture(scope="module")
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    yield from two_processes_on_postgres_and_redis(request, tmp_path_factory, "batched", ENV)


def test_these_limits_are_counted_in_batches() -> None:
    assert quota_batches.rate_batch(RATE) == 4 and quota_batches.cap_batch(RUNNING) == 2


async def test_calls_raced_in_one_session_over_two_processes_never_run_past_the_cap(
    deployment: Deployment, http: httpx.AsyncClient
) -> None:
    urls = [deployment.p1.url, deployment.p2.url]
    session = await _session(http, urls[0])
    answers = await _race_calls(http, [(urls[n % 2], session) for n in range(RACERS)])
    ran = _ran_and_refused(answers, "RUNNING_PER_SESSION", RUNNING)
    # Every reservation but the last of each process was handed out: at most a batch less one
    # stays spare on each, and never one past the cap.
    assert RUNNING - 2 * (quota_batches.cap_batch(RUNNING) - 1) <= ran <= RUNNING
    runs = await deployment.db.arows(
        "SELECT COUNT(*) FROM live_taskrun WHERE session_id = %s", session
    )
    assert runs[0][0] == ran  # the refused ones never ran
    await _end_sessions(http, urls[0], [session])


async def test_two_processes_hand_out_a_batched_rate_whole_and_never_past_it(
    deployment: Deployment, http: httpx.AsyncClient
) -> None:
    urls = [deployment.p1.url, deployment.p2.url]
    statuses = [
        (await _call(http, urls[n % 2], "test_simple_text")).status_code for n in range(RATE + 12)
    ]
    assert set(statuses) == {200, 429}
    # Alternating until both refuse: every unit of the day's rate went to a call, none more
    # (the earlier test's calls were counted too: they were tools/call).
    assert statuses.count(200) == RATE - RACERS
    assert statuses[-4:] == [429] * 4
