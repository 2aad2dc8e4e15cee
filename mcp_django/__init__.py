"""Serve the Model Context Protocol from Django: models, admin actions and functions as MCP
resources, tools and prompts, over Streamable HTTP.
"""

from __future__ import annotations

from typing import Any

from .version import __version__ as __version__

__all__ = [
    "Audio",
    "Context",
    "EmbeddedResource",
    "Image",
    "InvalidParamsError",
    "MCPSite",
    "Message",
    "ModelMCP",
    "ResourceLink",
    "ResourceNotFoundError",
    "Text",
    "ToolError",
    "ToolResult",
    "autodiscover",
    "register",
    "site",
]


def autodiscover() -> None:
    """Import every installed app's ``mcp.py`` so that its registrations run."""
    from django.utils.module_loading import autodiscover_modules

    from .sites import site

    autodiscover_modules("mcp", register_to=site)


def register(*models: Any, site: Any = None) -> Any:
    """Register models with a ``ModelMCP`` subclass: ``@register(Book)`` (like ``admin.register``)."""

    def wrapper(model_mcp_class: Any) -> Any:
        from .sites import site as default_site

        (site or default_site).register(models, model_mcp_class)
        return model_mcp_class

    return wrapper


def __getattr__(name: str) -> Any:
    # Lazy, so that "import mcp_django" in settings.py does not import models before setup.
    if name in ("site", "MCPSite"):
        from . import sites

        return getattr(sites, name)
    if name == "ModelMCP":
        from .options import ModelMCP

        return ModelMCP
    if name == "Context":
        from .context import Context

        return Context
    if name in ("ToolError", "InvalidParamsError", "ResourceNotFoundError"):
        from . import exceptions

        return getattr(exceptions, name)
    if name in ("ToolResult", "Text", "Image", "Audio", "EmbeddedResource", "ResourceLink", "Message"):
        from . import content

        return getattr(content, name)
    raise AttributeError(f"module 'mcp_django' has no attribute {name!r}")
