"""The checks over MCP: Django's model permissions, granted by MemberPermissionBackend."""

from typing import Any

from mcp_django import Context, ModelMCP, site

from .models import Check


@site.register(Check)
class CheckMCP(ModelMCP):
    fields = ["name"]
    search_fields = ["name"]
    tools = ["search", "get"]

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).filter(owner_id=request.user.pk)


@site.tool(title="Who am I", annotations={"readOnlyHint": True})
def whoami(ctx: Context) -> str:
    """The signed-in user's email."""
    return str(ctx.user.email)
