"""The standard method handlers and their declared params."""

from __future__ import annotations

from mcp_django.extensions.skills import SKILL_HANDLERS
from mcp_django.extensions.tasks.handshake import HANDSHAKE_TASK_HANDLERS
from mcp_django.extensions.tasks.runner import TASK_HANDLERS
from mcp_django.protocol.params import METHOD_PARAMS
from mcp_django.server.handlers import STANDARD_HANDLERS


def test_every_standard_task_and_skill_method_declares_its_params() -> None:
    served = set(STANDARD_HANDLERS) | set(TASK_HANDLERS) | set(HANDSHAKE_TASK_HANDLERS)
    assert served | set(SKILL_HANDLERS) == set(METHOD_PARAMS)


def test_standard_and_skill_handlers_take_their_methods_typed_params() -> None:
    for method, handler in {**STANDARD_HANDLERS, **SKILL_HANDLERS}.items():
        typed = handler.__wrapped__  # type: ignore[attr-defined]
        assert typed.__annotations__["params"] == METHOD_PARAMS[method].__name__, method
