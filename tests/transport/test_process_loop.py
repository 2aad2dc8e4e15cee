"""The plain view's per-process event loop (transport.process_loop)."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from mcp_django.transport.process_loop import ProcessLoop

language: contextvars.ContextVar[str] = contextvars.ContextVar("language", default="en")


@pytest.fixture
def process():
    made = ProcessLoop()
    yield made
    if made.started():
        loop, thread = made.loop(), made._thread
        loop.call_soon_threadsafe(loop.stop)
        assert thread is not None
        thread.join(timeout=5)
        loop.close()


async def _where() -> tuple[str, str]:
    await asyncio.sleep(0)
    return threading.current_thread().name, language.get()


async def _fail() -> None:
    raise LookupError("no such thing")


def test_a_coroutine_runs_on_the_loop_thread_in_the_callers_context(process):
    token = language.set("fr")
    try:
        assert process.run(_where()) == ("mcp_django process loop", "fr")
    finally:
        language.reset(token)
    assert process.started()


def test_the_coroutines_exception_is_raised_in_the_caller(process):
    with pytest.raises(LookupError, match="no such thing"):
        process.run(_fail())


def test_a_loop_whose_thread_ended_is_made_again(process):
    # A stopped loop leaves its thread; a request handed to it would wait for ever.
    first = process.loop()
    first.call_soon_threadsafe(first.stop)
    assert process._thread is not None
    process._thread.join(timeout=5)
    assert not process.started()
    assert process.run(_where())[0] == "mcp_django process loop"
    assert process.loop() is not first
    first.close()
