"""Bounded waits for tests: look at a condition until it holds, or fail saying what never happened.

A test waits for the thing itself (an event, a future, a row, a line in a log), never for a
guessed duration. When the thing can only be seen by looking, ``until`` looks every
``interval`` until ``timeout``: a passing test waits only as long as the thing takes, and the
timeout only bounds a failing one (it is never a timing assertion).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Long enough for a loaded CI machine; only a failing test waits this long.
TIMEOUT = 10.0
#: Short, so that a passing test hardly waits past the moment its condition holds.
INTERVAL = 0.01


async def until(
    condition: Callable[[], T | Awaitable[T]],
    timeout: float = TIMEOUT,
    *,
    interval: float = INTERVAL,
    failure: str | Callable[[], str] = "",
) -> T:
    """Call ``condition`` (sync or async) until it returns something truthy, and return that.

    After ``timeout`` seconds raise ``AssertionError`` with ``failure`` (a callable is called
    then, to say how things stand). Exceptions from ``condition`` propagate at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(condition, timeout, failure))
        await asyncio.sleep(interval)


def until_sync(
    condition: Callable[[], T],
    timeout: float = TIMEOUT,
    *,
    interval: float = INTERVAL,
    failure: str | Callable[[], str] = "",
) -> T:
    """``until`` for code without an event loop (a test that drives a subprocess, say)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(condition, timeout, failure))
        time.sleep(interval)
    return value


def _failure(
    condition: Callable[..., object], timeout: float, failure: str | Callable[[], str]
) -> str:
    said = failure() if callable(failure) else failure
    if not said:
        try:  # a lambda says best what it waited for: its own line
            said = f"never held: {inspect.getsource(condition).strip()}"
        except (OSError, TypeError):
            said = f"{getattr(condition, '__qualname__', repr(condition))} never held"
    return f"{said} (waited {timeout:g} s)"
