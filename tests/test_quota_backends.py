"""The quota counter backends (mcp_django.ops.quotas.backends): one per cache, chosen by its kind.

The quotas' own behaviour is tested through them in tests/test_quotas.py (the local-memory
cache, and Redis when it runs here); these tests pin the choice and the third backend, any
other Django cache, which nothing else in the suite counts in.
"""

from __future__ import annotations

import ast
import secrets
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

import mcp_django
from mcp_django.ops.quotas import backends as quota_backends
from mcp_django.ops.quotas import limits as quotas
from mcp_django.protocol.errors import QuotaExceededError
from tests.test_quotas import Clock, limits

LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(quotas, "now", moved)
    return moved


def _file_caches(tmp_path: Path) -> dict[str, Any]:
    return {
        "default": LOCMEM,
        "quota": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path),
        },
    }


def test_a_local_memory_cache_counts_in_the_process_and_any_other_in_the_cache(
    tmp_path: Path,
) -> None:
    caches = {
        **_file_caches(tmp_path),
        "dummy": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
    }
    with override_settings(CACHES=caches):
        assert type(quota_backends.counters_for("default")) is quota_backends.InProcessCounters
        assert type(quota_backends.counters_for("quota")) is quota_backends.CacheCounters
        assert type(quota_backends.counters_for("dummy")) is quota_backends.CacheCounters


def test_a_redis_cache_counts_with_pipelines() -> None:
    from tests.multiprocess.servers import REDIS_HOST, REDIS_PORT, require_redis

    require_redis()
    redis_cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": f"redis://{REDIS_HOST}:{REDIS_PORT}/14",
    }
    with override_settings(CACHES={"default": LOCMEM, "quota": redis_cache}):
        assert type(quota_backends.counters_for("quota")) is quota_backends.RedisCounters


def test_the_backend_is_chosen_once_per_cache_and_again_when_caches_change(tmp_path: Path) -> None:
    with override_settings(CACHES=_file_caches(tmp_path)):
        counters = quota_backends.counters_for("quota")
        assert quota_backends.counters_for("quota") is counters
        assert quota_backends.cache_for("quota") is counters.cache
        assert quotas.current().counters is quota_backends.counters_for(
            quotas.current().cache_alias
        )
    with override_settings(CACHES=_file_caches(tmp_path)):
        assert quota_backends.counters_for("quota") is not counters


def test_counters_on_any_other_django_cache_count_and_give_back(tmp_path: Path) -> None:
    with override_settings(CACHES=_file_caches(tmp_path)):
        counters = quota_backends.counters_for("quota")
        key, other = quotas.cache_key("test", "who"), quotas.cache_key("test", "other")
        assert [counters.hit([key, other], 30) for _ in range(3)] == [[1, 1], [2, 2], [3, 3]]
        assert counters.cache.get(key) == 3 and counters.get(key) == 3
        counters.unhit([key])
        assert counters.get(key) == 2 and counters.get(other) == 3
        counters.cache.delete(key)
        counters.unhit([key])  # a counter that lapsed stays gone (never -1)
        assert counters.cache.get(key) is None and counters.get(key) == 0
        assert counters.hit([key], 30) == [1]


async def test_counters_on_any_other_django_cache_count_from_the_event_loop(tmp_path: Path) -> None:
    with override_settings(CACHES=_file_caches(tmp_path)):
        counters = quota_backends.counters_for("quota")
        key = quotas.cache_key("test", "async")
        assert await counters.ahit([key], 30) == [1]
        assert await counters.ahit([key], 30) == [2]
        await counters.aunhit([key])
        assert counters.get(key) == 1
        assert await counters.ahit([], 30) == []


def test_a_cache_that_keeps_no_counters_says_so() -> None:
    caches = {
        "default": LOCMEM,
        "dummy": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
    }
    with (
        override_settings(CACHES=caches),
        pytest.raises(RuntimeError, match="does not keep counters"),
    ):
        quota_backends.counters_for("dummy").hit([quotas.cache_key("test", "who")], 30)


async def test_slots_on_any_other_django_cache_are_leased_refused_and_given_back(
    tmp_path: Path, clock: Clock
) -> None:
    with (
        override_settings(CACHES=_file_caches(tmp_path)),
        limits(CACHE="quota", STREAMS_PER_USER=1),
    ):
        caller = quotas.Caller("user:21", 21)
        slot = await quotas.StreamSlot.acquire(caller, None)
        assert (
            slot is not None and slot.buckets and slot in quotas._renewer.slots
        )  # leased: renewed while held
        with pytest.raises(QuotaExceededError) as refused:
            await quotas.StreamSlot.acquire(caller, None)
        assert refused.value.limit == "STREAMS_PER_USER"
        assert (
            quotas.open_streams("STREAMS_PER_USER", "user:21") == 1
        )  # the refused one gave back its count
        await slot.release()
        assert quotas.open_streams("STREAMS_PER_USER", "user:21") == 0
        assert slot not in quotas._renewer.slots


def test_a_rate_limit_on_any_other_django_cache_refuses_over_the_rate(
    tmp_path: Path, clock: Clock
) -> None:
    with (
        override_settings(CACHES=_file_caches(tmp_path)),
        limits(CACHE="quota", TOOL_CALLS="2/minute"),
    ):
        caller = quotas.Caller(f"user:{secrets.randbelow(10**6)}", 1)
        results = [quotas.check_tool_calls(caller, ["add"])[0] for _ in range(3)]
    assert results[:2] == [None, None]
    assert isinstance(results[2], QuotaExceededError) and results[2].limit == "TOOL_CALLS"


def test_only_one_function_reads_django_s_redis_cache_internals() -> None:
    # RedisCache's client (cache._cache) and its pools, options and servers are Django's
    # private state: a Django release may change them, and one function should break then.
    private = {"_cache", "_pools", "_pool_options", "_pool_class", "_servers"}
    package = Path(mcp_django.__file__).parent
    readers = set()
    for path in package.rglob("*.py"):
        functions = [
            node
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for function in functions:
            if any(
                isinstance(node, ast.Attribute) and node.attr in private
                for node in ast.walk(function)
            ):
                readers.add(f"{path.relative_to(package)}:{function.name}")
    assert readers == {"ops/quotas/backends.py:read_django_redis_cache"}
