"""The base of the tools the server makes for itself and serves at handler level.

Such a tool (the resources and skills as tools, the tasks' ``task_*`` tools) is no project's
registration: it has a fixed input schema of one or a few strings, no Django permission or scope
of its own (what it reaches is gated where it is reached), and answers invalid arguments with a
tool error before it does anything.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .context import Context
from .entries import ToolEntry


def tool_error(text: str) -> dict[str, Any]:
    """The ``isError`` result saying ``text``."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


class HandlerTool(ToolEntry):
    """A tool the server makes for itself: listed with a fixed schema and annotations, open to
    every caller, its arguments checked before :meth:`answer` runs."""

    kind: ClassVar[str] = "tool"
    streams = False
    scopes: tuple[str, ...] = ()

    def __init__(
        self,
        name: str,
        title: str,
        description: str,
        input_schema: dict[str, Any],
        annotations: dict[str, bool],
    ) -> None:
        self.name = name
        self.title = title
        self.description = description
        self.input_schema = input_schema
        self.annotations = annotations

    # -- subclass implementation --------------------------------------------------------------

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: Context
    ) -> dict[str, Any] | None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement check_arguments(arguments, ctx): the "
            "isError result for invalid arguments, or None"
        )

    async def answer(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The ``CallToolResult`` for valid ``arguments``."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement answer(arguments, ctx): the result of a call "
            "with valid arguments"
        )

    # -- shouldn't need to override -----------------------------------------------------------

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": self.annotations,
        }

    def has_permission(self, request: Any) -> bool:
        return True  # what it reaches is gated where it is reached

    async def call(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        invalid = await self.check_arguments(arguments, ctx)
        if invalid is not None:
            return invalid
        return await self.answer(arguments, ctx)
