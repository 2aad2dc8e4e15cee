"""A site's resources and skills as tools, for hosts that only call tools (opt-in).

Most hosts never call ``resources/read`` on their own, and none is known to call the skills
extension's methods: a site with ``resource_tools = True`` also serves ``list_resources``,
``list_resource_templates``, ``read_resource`` and, with skills, ``list_skills`` and
``read_skill``. Each answers by running the method it stands for from the site's own method
table, with the caller's request: the same gate, the same rows, the same pages and cursors,
the same digests. A URI the caller may not read answers the same tool error as one that does
not exist.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..protocol.errors import MCPError
from .context import Context
from .entries import ServedSite
from .handler_tools import HandlerTool, tool_error

#: The longest URI or cursor a client may give (as resources/read bounds nothing shorter).
MAX_ARGUMENT = 2000

_READS: Final = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
_CURSOR: Final = {
    "type": "object",
    "properties": {
        "cursor": {
            "type": "string",
            "maxLength": MAX_ARGUMENT,
            "description": "nextCursor of a previous page.",
        }
    },
    "additionalProperties": False,
}
_URI: Final = {
    "type": "object",
    "properties": {"uri": {"type": "string", "maxLength": MAX_ARGUMENT}},
    "required": ["uri"],
    "additionalProperties": False,
}


class EntryTool(HandlerTool):
    """A tool standing for one read-only method of the site (``resources/list``, ...)."""

    def __init__(self, name: str, title: str, method: str, description: str, argument: str):
        super().__init__(
            name, title, description, _CURSOR if argument == "cursor" else _URI, _READS
        )
        self.method = method
        #: "cursor" (a list page) or "uri" (a read).
        self.argument = argument

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: Context
    ) -> dict[str, Any] | None:
        value = arguments.get(self.argument)
        required = self.argument == "uri"
        if set(arguments) - {self.argument} or (value is None and required):
            return tool_error(f'Invalid arguments: give only "{self.argument}", a string.')
        if value is not None and (not isinstance(value, str) or len(value) > MAX_ARGUMENT):
            return tool_error(
                f'Invalid arguments: "{self.argument}" must be a string of at most '
                f"{MAX_ARGUMENT} characters."
            )
        return None

    async def answer(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        handler = ctx.site.get_handlers().get(self.method)
        if handler is None:
            return tool_error(f"This site serves no {self.method}.")
        try:
            result = await handler(dict(arguments), ctx)
        except MCPError as exc:
            # Unknown and forbidden URIs get the same answer from the method: so here.
            return tool_error(exc.message)
        if self.method == "resources/read":
            return {
                "content": [
                    {"type": "resource", "resource": content} for content in result["contents"]
                ]
            }
        page = {k: v for k, v in result.items() if k != "_meta"}
        return {
            "content": [{"type": "text", "text": orjson.dumps(page).decode()}],
            "structuredContent": page,
        }


RESOURCE_TOOLS: Final = (
    EntryTool(
        "list_resources",
        "List resources",
        "resources/list",
        "The resources you may read (URIs, names, types), a page at a time: read one with "
        "read_resource.",
        "cursor",
    ),
    EntryTool(
        "list_resource_templates",
        "List resource templates",
        "resources/templates/list",
        "URI templates of resources you may read (fill a template in, then read_resource).",
        "cursor",
    ),
    EntryTool(
        "read_resource",
        "Read a resource",
        "resources/read",
        "Read one resource by its URI (from list_resources, a template, or a skill's files).",
        "uri",
    ),
)
SKILL_TOOLS: Final = (
    EntryTool(
        "list_skills",
        "List skills",
        "skills/list",
        "The skills you may use: each one's SKILL.md URI, description and files with digests.",
        "cursor",
    ),
    EntryTool(
        "read_skill",
        "Read a skill",
        "skills/get",
        "A skill's SKILL.md and its files, by the URI list_skills gives; read a file of it with "
        "read_resource.",
        "uri",
    ),
)


def entry_tools(site: ServedSite) -> tuple[EntryTool, ...]:
    """The tools a site with ``resource_tools`` serves: the resource ones, and the skill ones
    when it has skills (each only for methods its table serves)."""
    if not getattr(site, "resource_tools", False):
        return ()
    table = site.get_handlers()
    return tuple(tool for tool in (*RESOURCE_TOOLS, *SKILL_TOOLS) if tool.method in table)
