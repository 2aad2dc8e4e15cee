"""A ModelMCP opened to anonymous callers, exactly as the README's trial section shows it."""

from __future__ import annotations

from mcp_django import ModelMCP


class TrialTagMCP(ModelMCP):
    fields = ["slug"]
    tools = ["search", "get"]

    # Trial mode (AUTHENTICATION = "none"): nobody signs in, so let anonymous callers read.
    def has_view_permission(self, request, obj=None):
        return request.user.is_anonymous or super().has_view_permission(request, obj)
