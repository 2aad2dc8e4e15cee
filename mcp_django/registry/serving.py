"""Serving: what a site shows the requests it answers, built from what was registered.

``ServingMixin`` gives ``MCPSite`` the side the engine calls through the ``ServedSite`` protocol
(mcp_django.server.entries): the entry lists and lookups, the capabilities and the method table
built from them (once per registry change), the engine, ``serverInfo`` and ``instructions``; and
the change bookkeeping that tells connected clients a list or a resource changed. Registering
(``sites``) fills the registry; this reads it, as ``AdminSite`` views read its ``_registry``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote

from ..conf import mcp_settings
from ..extensions.mcp_apps import UI_EXTENSION, UIResource
from ..extensions.skills import SKILL_HANDLERS, SKILLS_EXTENSION, Skill, app_skills
from ..extensions.skills import capability as skills_capability
from ..protocol.dispatcher import Handler
from ..protocol.lifecycle import LIST_KINDS
from .functions import FunctionPrompt, FunctionResource, FunctionResourceTemplate
from .options import ModelMCP, uri_scheme
from .search_fetch import SearchFetchTool, SearchProvider

# changes, notifications, handlers and engine reach the models: the methods that need them import
# them, because this module imports before apps are ready (sites imports it).

if TYPE_CHECKING:
    from ..server.engine import Engine
    from ..server.entries import ResourceEntry, ToolEntry

#: The methods of each capability: a site that does not offer it does not serve them.

_CAPABILITY_METHODS = {
    "tools": ("tools/list", "tools/call"),
    "resources": (
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
    ),
    "prompts": ("prompts/list", "prompts/get"),
}


class ServingMixin:
    """The serving side of an ``MCPSite``: its entry lists, capabilities and method table."""

    #: Whether the site serves the skills of the installed apps' ``mcp_skills/`` folders
    #: (mcp_django.extensions.skills) besides those registered with :meth:`skill`.
    app_skills: ClassVar[bool] = True
    #: Whether the site serves ChatGPT's ``search`` and ``fetch`` tools over its models
    #: (mcp_django.registry.search_fetch). Off unless a site sets it.
    search_fetch: ClassVar[bool] = False
    #: Whether the site also serves its resources and skills as tools (list_resources,
    #: read_resource, list_skills, ...: mcp_django.server.entry_tools), for hosts that only
    #: call tools. Off unless a site sets it.
    resource_tools: ClassVar[bool] = False
    #: The project's own sources those tools search besides the models
    #: (:class:`~mcp_django.registry.search_fetch.SearchProvider`); append to it.
    search_providers: list[SearchProvider]

    #: The site's name and its registered entries: MCPSite's (``_registry`` applies the pending
    #: register_admin() calls first).
    name: str
    _registry: dict[Any, Any]

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] | None = None
        #: get_capabilities() as of the method table above, built and reset with it.
        self._capabilities: dict[str, Any] = {}
        self._engine: Engine | None = None
        # Set once this site answers requests in this process: only then can clients be listening.
        self.serving = False
        self.search_providers = []

    # -- lookups ------------------------------------------------------------------------

    def _of(self, cls: type | tuple[type, ...]) -> list[Any]:
        return [e for e in self._registry.values() if isinstance(e, cls)]

    def get_model_mcps(self) -> list[ModelMCP[Any]]:
        """Every registered ``ModelMCP``."""
        return [e for e in self._registry.values() if isinstance(e, ModelMCP)]

    def get_model_mcp_for_uri(self, uri: str) -> tuple[ModelMCP[Any], str] | None:
        """Find the ModelMCP of a ``django://<app_label>/<name>/<pk>`` URI; return it with the
        pk."""
        prefix = f"{uri_scheme()}://"
        if not uri.startswith(prefix):
            return None
        parts = uri[len(prefix) :].split("/")
        if len(parts) != 3 or not parts[2]:
            return None
        for model_mcp in self.get_model_mcps():
            if model_mcp.opts.app_label == parts[0] and model_mcp.name == parts[1]:
                return model_mcp, unquote(parts[2])
        return None

    def get_tools(self) -> list[ToolEntry]:
        """Function and admin-action tools, then each registered model's generated tools."""
        tools: list[ToolEntry] = [
            e for k, e in self._registry.items() if isinstance(k, tuple) and k[0] == "tool"
        ]
        for model_mcp in self.get_model_mcps():
            tools.extend(model_mcp.get_generated_tools())
        # -- ChatGPT's search and fetch (opt-in) --
        if self.search_fetch:
            tools.extend(SearchFetchTool(self, action) for action in ("search", "fetch"))
        return tools

    def get_tool(self, name: str) -> ToolEntry | None:
        """The tool named ``name`` (a function, admin-action or generated tool), or None."""
        entry: ToolEntry | None = self._registry.get(("tool", name))
        if entry is not None:
            return entry
        for model_mcp in self.get_model_mcps():
            for tool in model_mcp.get_generated_tools():
                if tool.name == name:
                    return tool
        # -- ChatGPT's search and fetch (opt-in) --
        if self.search_fetch and name in ("search", "fetch"):
            return SearchFetchTool(self, name)
        return None

    def get_resources(self) -> list[ResourceEntry]:
        """The resources with a fixed URI: function resources and tools' UIs."""
        return self._of((FunctionResource, UIResource))

    def get_resource(self, uri: str) -> ResourceEntry | None:
        """The function resource or tool UI registered at ``uri``, or None."""
        entry = self._registry.get(("resource", uri))
        return entry if isinstance(entry, (FunctionResource, UIResource)) else None

    def get_resource_templates(self) -> list[FunctionResourceTemplate]:
        """The function resource templates (URIs with ``{variables}``)."""
        return self._of(FunctionResourceTemplate)

    def get_resource_template(self, uri_template: str) -> FunctionResourceTemplate | None:
        """The function resource template registered as ``uri_template``, or None."""
        entry = self._registry.get(("template", uri_template))
        return entry if isinstance(entry, FunctionResourceTemplate) else None

    def get_prompts(self) -> list[FunctionPrompt]:
        """The registered prompts."""
        return self._of(FunctionPrompt)

    def get_prompt(self, name: str) -> FunctionPrompt | None:
        """The prompt named ``name``, or None."""
        entry = self._registry.get(("prompt", name))
        return entry if isinstance(entry, FunctionPrompt) else None

    def get_skills(self) -> list[Skill]:
        """The skills registered with :meth:`skill`, then the installed apps' (when
        ``app_skills``) whose names are not taken (the first app wins, as for templates)."""
        skills: list[Skill] = self._of(Skill)
        if self.app_skills:
            taken = {s.name for s in skills}
            skills += [s for s in app_skills() if s.name not in taken]
        return skills

    def get_skill(self, name: str) -> Skill | None:
        """The skill named ``name``, or None."""
        entry = self._registry.get(("skill", name))
        if isinstance(entry, Skill):
            return entry
        return next((s for s in app_skills() if s.name == name), None) if self.app_skills else None

    def get_scopes(self) -> list[str]:
        """Every OAuth scope an entry of this site declares, in registration order: what the
        protected-resource metadata and the 401 challenge advertise, so a client can ask up
        front."""
        entries: list[Any] = [
            *self.get_tools(),
            *self.get_resources(),
            *self.get_resource_templates(),
            *self.get_prompts(),
            *self.get_model_mcps(),
            *self.get_skills(),
        ]
        return list(
            dict.fromkeys(
                scope for entry in entries for scope in getattr(entry, "scopes", None) or ()
            )
        )

    # -- change announcements -------------------------------------------------------------

    def _changed(self, kind: str) -> None:
        """The registry changed: rebuild the method table and, once the project has started
        (not during autodiscover), tell connected clients that the list changed."""
        self._handlers = None
        if not self.serving:
            return  # still starting (autodiscover) or never served: nobody to tell
        lists = {
            "tool": ("tools",),
            "prompt": ("prompts",),
            "resource": ("resources",),
            "template": ("resources",),
            "skill": ("resources",),
        }.get(kind, LIST_KINDS)
        from ..server.notifications import (
            announce_soon,
            anotify_list_changed,
        )  # app loading: notifications imports models (see the imports above)

        for list_kind in lists:
            announce_soon(anotify_list_changed, self, list_kind)

    def notify_resource_updated(self, uri: str) -> int:
        """Tell subscribed sessions that ``uri`` changed; return how many were told.

        Callable from sync code anywhere; async code uses :meth:`anotify_resource_updated`.
        """
        from .changes import (
            notify_resource_updated,
        )  # app loading: changes imports models (see the imports above)

        return notify_resource_updated(self, uri)

    async def anotify_resource_updated(self, uri: str) -> int:
        """The async twin of :meth:`notify_resource_updated`."""
        from .changes import (
            anotify_resource_updated,
        )  # app loading: changes imports models (see the imports above)

        return await anotify_resource_updated(self, uri)

    def notify_list_changed(self, kind: str) -> int:
        """Tell every live session that the ``"tools"``, ``"resources"`` or ``"prompts"`` list
        changed."""
        from ..server.notifications import (
            notify_list_changed,
        )  # app loading: notifications imports models (see the imports above)

        return notify_list_changed(self, kind)

    async def anotify_list_changed(self, kind: str) -> int:
        """The async twin of :meth:`notify_list_changed`."""
        from ..server.notifications import (
            anotify_list_changed,
        )  # app loading: notifications imports models (see the imports above)

        return await anotify_list_changed(self, kind)

    # -- protocol -----------------------------------------------------------------------

    def get_capabilities(self) -> dict[str, Any]:
        """Declare exactly what this site offers (lifecycle spec: capability negotiation).

        Extensions are named under ``extensions`` (SEP-1724: a server names the extensions it
        serves); MCP Apps defines no server settings, so its entry is empty.
        """
        capabilities: dict[str, Any] = {"logging": {}, "completions": {}}
        if self.get_tools() or self.resource_tools:
            capabilities["tools"] = {"listChanged": True}
        skills = self.get_skills()
        # Skill files are read with resources/read: the extension requires the capability.
        if self.get_resources() or self.get_resource_templates() or self.get_model_mcps() or skills:
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if self.get_prompts():
            capabilities["prompts"] = {"listChanged": True}
        if skills:
            capabilities["extensions"] = {
                **capabilities.get("extensions", {}),
                **skills_capability(),
            }
        if self._of(UIResource):
            # Some tool has an app: announce the extension, which has no settings.
            capabilities["extensions"] = {**capabilities.get("extensions", {}), UI_EXTENSION: {}}
        return capabilities

    def get_handlers(self) -> dict[str, Handler]:
        """The method table for the dispatcher: only methods of offered capabilities."""
        self._registry  # noqa: B018 - applies pending register_admin() calls, which reset the table
        if self._handlers is None:
            from ..server.handlers import (
                STANDARD_HANDLERS,
            )  # app loading: handlers imports models (see the imports above)

            offered = self.get_capabilities()
            hidden = {
                m
                for cap, methods in _CAPABILITY_METHODS.items()
                if cap not in offered
                for m in methods
            }
            self._capabilities = offered
            self._handlers = {m: h for m, h in STANDARD_HANDLERS.items() if m not in hidden}
            if SKILLS_EXTENSION in offered.get("extensions", {}):
                self._handlers.update(SKILL_HANDLERS)
        return self._handlers

    def offered_capabilities(self) -> dict[str, Any]:
        """:meth:`get_capabilities` as the method table was built with it, once per registry
        change: what ``initialize`` and ``server/discover`` declare then always matches the
        methods served, and they do not walk every tool and resource on each call (that was 10 %
        of a session set-up, bench/profile.py). A copy: the caller may change it."""
        self.get_handlers()
        return dict(self._capabilities)

    @property
    def engine(self) -> Engine:
        """The protocol engine under every transport of this site."""
        if self._engine is None:
            from ..server.engine import (
                Engine,
            )  # app loading: engine imports models (see the imports above)

            self._engine = Engine(self)
        return self._engine

    def get_server_info(self) -> dict[str, Any]:
        """``serverInfo``: ``SERVER_NAME``, ``SERVER_VERSION`` and ``SERVER_TITLE``."""
        info: dict[str, Any] = {
            "name": mcp_settings.server_name,
            "version": mcp_settings.server_version,
        }
        title = mcp_settings.server_title
        if title:
            info["title"] = title
        return info

    def get_instructions(self) -> str | None:
        """The ``instructions`` sent to clients (``INSTRUCTIONS``)."""
        return mcp_settings.instructions
