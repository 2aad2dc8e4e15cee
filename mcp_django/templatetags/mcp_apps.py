"""Template tags for MCP App templates (``{% load mcp_apps %}``): a host runs an app under a CSP
that loads nothing from an origin the UI did not declare, so its own scripts and styles are
inlined from the project's static files (docs/howto/apps.md).

``{% inline_script "library/availability.js" %}`` and ``{% inline_style "library/availability.css"
%}``
write the file, found by the staticfiles finders as ``{% static %}`` would find it, in a
``<script>`` or ``<style>`` element.
"""

from __future__ import annotations

import re
from pathlib import Path

from django import template
from django.contrib.staticfiles import finders
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# What would end the element early: a file that contains "</script" (in a string, say) must not
# close the <script> it is inlined in. "<\/" reads the same to JavaScript and to CSS.
_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)
_STYLE_END = re.compile(r"</(style)", re.IGNORECASE)


def _read(path: str) -> str:
    found = finders.find(path)
    if not isinstance(found, str):
        raise template.TemplateSyntaxError(
            f"The static file {path!r} was not found by the staticfiles finders."
        )
    return Path(found).read_text(encoding="utf-8")


@register.simple_tag
def inline_script(path: str) -> SafeString:
    """The static file ``path`` as an inline ``<script>``."""
    return format_html(
        "<script>{}</script>", mark_safe(_SCRIPT_END.sub(r"<\\/\1", _read(path)))
    )  # the project's own file, as it is


@register.simple_tag
def inline_style(path: str) -> SafeString:
    """The static file ``path`` as an inline ``<style>``."""
    return format_html(
        "<style>{}</style>", mark_safe(_STYLE_END.sub(r"<\\/\1", _read(path)))
    )  # the project's own file, as it is
