"""The bounded wait every test uses instead of a guessed sleep."""

from __future__ import annotations

import asyncio

import pytest

from tests.polling import until, until_sync


async def test_until_returns_what_the_condition_returned_once_it_holds() -> None:
    looks: list[int] = []

    def third_look() -> list[int] | None:
        looks.append(1)
        return looks if len(looks) == 3 else None

    assert await until(third_look) == [1, 1, 1]


async def test_until_awaits_an_async_condition() -> None:
    ready = asyncio.Event()
    asyncio.get_running_loop().call_soon(ready.set)

    async def is_ready() -> bool:
        return ready.is_set()

    assert await until(is_ready) is True


async def test_until_fails_with_what_never_happened_and_how_things_stand() -> None:
    with pytest.raises(AssertionError, match=r"no row yet; 0 rows \(waited 0.05 s\)"):
        await until(lambda: False, 0.05, failure=lambda: "no row yet; 0 rows")
    with pytest.raises(AssertionError, match=r"never held"):
        await until(lambda: None, 0)


async def test_an_exception_in_the_condition_ends_the_wait_at_once() -> None:
    def broken() -> bool:
        raise LookupError("gone")

    with pytest.raises(LookupError, match="gone"):
        await until(broken)


def test_until_sync_polls_without_a_loop() -> None:
    looks = iter([0, 0, "here"])
    assert until_sync(lambda: next(looks)) == "here"
    with pytest.raises(AssertionError, match="the server never answered"):
        until_sync(lambda: False, 0, failure="the server never answered")
