"""The endpoint's two big classes stay readable: each under 250 lines (issue 29). A class that
grows past it holds a second idea; give that idea its own collaborator, as
``transport.base``, ``transport.stateless`` and ``transport.clocks`` do."""

from __future__ import annotations

import inspect

import pytest

from mcp_django.transport.consumers import MCPConsumer
from mcp_django.transport.sse import SSEStream

LIMIT = 250


@pytest.mark.parametrize("cls", [MCPConsumer, SSEStream], ids=lambda cls: cls.__name__)
def test_the_class_body_stays_under_250_lines(cls: type) -> None:
    lines, _ = inspect.getsourcelines(cls)
    assert len(lines) < LIMIT, (
        f"{cls.__qualname__} is {len(lines)} lines; split a responsibility out"
    )
