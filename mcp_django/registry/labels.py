"""What hosted clients require of a tool's label: a ``title``, explicit ``readOnlyHint`` and
``destructiveHint``, and a name they accept.

Claude's directory requires a title and the two hints on every tool (it runs read-only tools
without asking), and Claude, ChatGPT and VS Code refuse names over 64 characters or with
characters outside ``[A-Za-z0-9_-]``, where the MCP spec allows 128 and dots. So every tool the
site lists carries a title and both hints (generated ones their own; a function tool registered
without them the spec's defaults, made explicit), and ``manage.py check`` names the tools whose
labels were not chosen by their author, and the names a host would refuse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from django.core.checks import CheckMessage, Warning

#: The tool names Claude, ChatGPT and VS Code accept (the spec's own rule is wider).
HOST_TOOL_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def humanized(name: str) -> str:
    """A title from a tool's name: ``slow_compute`` -> "Slow compute"."""
    words = re.sub(r"[_.\-]+", " ", name).strip()
    return words[:1].upper() + words[1:] if words else name


def explicit_hints(annotations: Mapping[str, Any] | None) -> dict[str, Any]:
    """``annotations`` with ``readOnlyHint`` and ``destructiveHint`` always present: the spec's
    defaults (not read-only, destructive) made explicit, and a read-only tool never
    destructive."""
    shown = dict(annotations or {})
    read_only = shown.setdefault("readOnlyHint", False) is True
    shown.setdefault("destructiveHint", not read_only)
    return shown


def label_checks(tools: Iterable[Any]) -> list[CheckMessage]:
    """W130 for a name a hosted client refuses, W131 for a function tool registered without a
    title or without its hints (``check --deploy`` shows them with the rest)."""
    messages: list[CheckMessage] = []
    for tool in tools:
        if not HOST_TOOL_NAME_RE.match(tool.name):
            messages.append(
                Warning(
                    f"The tool name {tool.name!r} is refused by hosted clients (Claude, ChatGPT, "
                    "VS Code): they accept 1-64 characters from A-Z, a-z, 0-9, '_' and '-'.",
                    hint=_rename_hint(tool),
                    obj=getattr(tool, "func", None) or tool,
                    id="mcp_django.W130",
                )
            )
        declared = getattr(tool, "declared_labels", None)
        if declared is None:
            continue  # generated: its labels are chosen by mcp_django
        missing = [
            label
            for label, given in (
                ("a title", declared.get("title")),
                ("readOnlyHint or destructiveHint", declared.get("hints")),
            )
            if not given
        ]
        if missing:
            messages.append(
                Warning(
                    f"The tool {tool.name!r} was registered without {' and '.join(missing)}: "
                    "hosted clients show and gate tools by them (Claude's directory requires "
                    "both), so it is listed with the cautious defaults (destructive).",
                    hint=f'@site.tool(title="{humanized(tool.name)}", annotations='
                    '{"readOnlyHint": True}) for a tool that only reads, or {"readOnlyHint": '
                    'False, "destructiveHint": False} for one that only adds.',
                    obj=getattr(tool, "func", None),
                    id="mcp_django.W131",
                )
            )
    return messages


def _rename_hint(tool: Any) -> str:
    if getattr(tool, "model_mcp", None) is not None:
        return (
            "Set a shorter tool_prefix on its ModelMCP (the generated names are <prefix>_<tool>)."
        )
    if getattr(tool, "action_name", None) is not None:
        return "Rename the admin action, or leave it out of register_admin(actions=...)."
    return "Give it a shorter name: @site.tool(name=...)."
