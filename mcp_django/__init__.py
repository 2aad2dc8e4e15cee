"""Serve the Model Context Protocol from Django: models, admin actions and functions as MCP
resources, tools and prompts, over Streamable HTTP.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

from .version import __version__ as __version__

if TYPE_CHECKING:
    # What mypy and editors see of the lazy attributes below: the real names, with their types.
    # At run time they stay lazy (see __getattr__).
    from collections.abc import Callable
    from typing import TypeVar

    from django.db.models import Model

    from .exceptions import InvalidParamsError as InvalidParamsError
    from .exceptions import ResourceNotFoundError as ResourceNotFoundError
    from .exceptions import ToolError as ToolError
    from .extensions.mcp_apps import UI as UI
    from .registry.admin_bridge import mcp_action as mcp_action
    from .registry.options import ModelMCP as ModelMCP
    from .registry.sites import MCPSite as MCPSite
    from .server.content import Audio as Audio
    from .server.content import EmbeddedResource as EmbeddedResource
    from .server.content import Image as Image
    from .server.content import Message as Message
    from .server.content import ResourceLink as ResourceLink
    from .server.content import Text as Text
    from .server.content import ToolResult as ToolResult
    from .server.context import Context as Context
    from .server.entries import Icon as Icon
    from .server.entries import ToolAnnotations as ToolAnnotations

    #: The default site: a lazy proxy at run time, an ``MCPSite`` in every way that matters.
    site: MCPSite

    _MC = TypeVar("_MC", bound="type[ModelMCP[Any]]")

__all__ = [
    "UI",
    "Audio",
    "Context",
    "EmbeddedResource",
    "Icon",
    "Image",
    "InvalidParamsError",
    "MCPSite",
    "Message",
    "ModelMCP",
    "ResourceLink",
    "ResourceNotFoundError",
    "Text",
    "ToolAnnotations",
    "ToolError",
    "ToolResult",
    "autodiscover",
    "mcp_action",
    "register",
    "site",
]


#: The module that defines each public name, imported on first use of the name: "import
#: mcp_django" in settings.py must not import models before the app registry is ready.
_LAZY = {
    "site": "registry.sites",
    "MCPSite": "registry.sites",
    "ModelMCP": "registry.options",
    "Context": "server.context",
    **dict.fromkeys(("ToolError", "InvalidParamsError", "ResourceNotFoundError"), "exceptions"),
    **dict.fromkeys(
        ("ToolResult", "Text", "Image", "Audio", "EmbeddedResource", "ResourceLink", "Message"),
        "server.content",
    ),
    **dict.fromkeys(("ToolAnnotations", "Icon"), "server.entries"),
    "UI": "extensions.mcp_apps",
    "mcp_action": "registry.admin_bridge",
}


def _load(name: str) -> Any:
    return getattr(import_module(f".{_LAZY[name]}", __name__), name)


def autodiscover() -> None:
    """Import every installed app's ``mcp.py`` so that its registrations run."""
    autodiscover_modules("mcp", register_to=_load("site"))


def register(*models: type[Model], site: MCPSite | None = None) -> Callable[[_MC], _MC]:
    """Register models with a ``ModelMCP`` subclass: ``@register(Book)`` (like
    ``admin.register``)."""

    def wrapper(model_mcp_class: _MC) -> _MC:
        (site or _load("site")).register(models, model_mcp_class)
        return model_mcp_class

    return wrapper


if not TYPE_CHECKING:  # mypy reads the imports above instead, so a misspelt name is an error

    def __getattr__(name: str) -> Any:
        if name in _LAZY:
            return _load(name)
        raise AttributeError(f"module 'mcp_django' has no attribute {name!r}")
