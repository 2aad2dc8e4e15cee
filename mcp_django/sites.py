"""The registry: an ``MCPSite`` holds what a server offers, like ``AdminSite`` holds ModelAdmins.

Usage::

    from mcp_django import site

    @site.tool()
    def add(a: int, b: int) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

Apps put registrations in an ``mcp.py`` module; ``autodiscover()`` imports them from
``AppConfig.ready()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from weakref import WeakSet

from django.core.exceptions import ImproperlyConfigured
from django.db.models.base import ModelBase
from django.utils.functional import LazyObject

from .conf import mcp_settings
from .exceptions import AlreadyRegistered, NotRegistered
from .functions import Completer, FunctionPrompt, FunctionResource, FunctionResourceTemplate, FunctionTool
from .protocol.dispatcher import Handler

F = TypeVar("F", bound=Callable[..., Any])

all_sites: WeakSet[MCPSite] = WeakSet()

LIST_KINDS_ALL = ("tools", "resources", "prompts")

Entry = FunctionTool | FunctionResource | FunctionResourceTemplate | FunctionPrompt

_CAPABILITY_METHODS = {
    "tools": ("tools/list", "tools/call"),
    "resources": ("resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe"),
    "prompts": ("prompts/list", "prompts/get"),
}


class MCPSite:
    """One MCP server: a registry of tools, resources and prompts, and its URL patterns."""

    def __init__(self, name: str = "mcp") -> None:
        # One flat registry, so that a failed autodiscover import can be rolled back whole:
        # model classes map to ModelMCP instances, (kind, name) to function entries.
        self._registry: dict[Any, Any] = {}
        self.name = name
        self._handlers: dict[str, Handler] | None = None
        # (ModelAdmin, action name) pairs that register_admin() could not expose.
        self._unexposable_actions: list[tuple[Any, str]] = []
        # Set once this site answers requests in this process: only then can clients be listening.
        self.serving = False
        all_sites.add(self)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(name={self.name!r})"

    # -- registration -------------------------------------------------------------------

    @staticmethod
    def _key(entry: Entry) -> tuple[str, str]:
        if isinstance(entry, FunctionResource):
            return ("resource", entry.uri)
        if isinstance(entry, FunctionResourceTemplate):
            return ("template", entry.uri_template)
        return (entry.kind, entry.name)

    def register_entry(self, entry: Entry) -> Entry:
        """Add a built entry; raise ``AlreadyRegistered`` for a name or URI already taken."""
        key = self._key(entry)
        if key in self._registry:
            existing = self._registry[key]
            func = getattr(existing, "func", None)
            where = f"{func.__module__}.{func.__qualname__}" if func is not None else repr(existing)
            raise AlreadyRegistered(f"The {key[0]} {key[1]!r} is already registered on {self!r} (by {where}).")
        self._registry[key] = entry
        self._changed(entry.kind)
        return entry

    def register(self, model_or_iterable: Any, model_mcp_class: Any = None, **options: Any) -> Callable[[Any], Any]:
        """Expose one or more models, with a ``ModelMCP`` subclass or the default options.

        ``site.register(Book)`` and ``site.register(Book, BookMCP)`` register at once;
        ``@site.register(Book)`` on a ``ModelMCP`` subclass registers with that class.
        """
        from .options import ModelMCP

        models = [model_or_iterable] if isinstance(model_or_iterable, ModelBase) else list(model_or_iterable)
        for model in models:
            if not isinstance(model, ModelBase):
                raise ImproperlyConfigured(f"{model!r} is not a Django model class.")
            if model._meta.abstract:
                raise ImproperlyConfigured(f"The model {model.__name__} is abstract, so it cannot be registered with MCP.")
            if model._meta.swapped:
                continue
            if model in self._registry:
                raise AlreadyRegistered(f"The model {model.__name__} is already registered with {self._registry[model].__class__.__name__} on {self!r}.")
            cls = model_mcp_class or ModelMCP
            if options:
                cls = type(f"{model.__name__}ModelMCP", (cls,), {"__module__": __name__, **options})
            self._registry[model] = cls(model, self)
            self._connect_signals(model)
        self._changed("model")

        def decorator(model_mcp_cls: Any) -> Any:
            if not (isinstance(model_mcp_cls, type) and issubclass(model_mcp_cls, ModelMCP)):
                raise ValueError("Wrapped class must subclass ModelMCP.")
            for model in models:
                self._registry[model] = model_mcp_cls(model, self)
            self._handlers = None
            return model_mcp_cls

        return decorator

    def register_admin(
        self,
        admin_site: Any,
        *,
        models: Any = None,
        tools: tuple[str, ...] = ("search", "get"),
        actions: bool = True,
        include_delete_selected: bool = False,
        read_scopes: tuple[str, ...] = (),
        write_scopes: tuple[str, ...] = (),
    ) -> None:
        """Expose the models of a Django admin site, with their ModelAdmins' querysets, search,
        permissions, and actions as tools (``delete_selected`` only when opted in).

        Models already registered with a ModelMCP keep it; their admin actions are still added.
        """
        from .adminsite import AdminModelMCP, admin_actions

        for model, model_admin in list(admin_site._registry.items()):
            if models is not None and model not in models:
                continue
            if model not in self._registry:
                self._registry[model] = AdminModelMCP(
                    model, self, model_admin, tools=tuple(tools), read_scopes=tuple(read_scopes), write_scopes=tuple(write_scopes)
                )
                self._connect_signals(model)
            if actions:
                exposed, skipped = admin_actions(model_admin, include_delete_selected, tuple(write_scopes))
                for tool in exposed:
                    if ("tool", tool.name) in self._registry:
                        raise AlreadyRegistered(f"The tool {tool.name!r} is already registered on {self!r}.")
                    self._registry[("tool", tool.name)] = tool
                self._unexposable_actions += [(model_admin, name) for name in skipped]
        self._changed("model")

    def unregister(self, model_or_kind: Any, name: str | None = None) -> None:
        """Remove models (``unregister(Book)``) or a function entry (``unregister("tool", "add")``):
        kinds are "tool", "prompt", "resource" (by URI) and "template" (by URI template)."""
        if name is None:
            models = [model_or_kind] if isinstance(model_or_kind, ModelBase) else list(model_or_kind)
            for model in models:
                if model not in self._registry:
                    raise NotRegistered(f"The model {model.__name__} is not registered on {self!r}.")
                del self._registry[model]
        else:
            try:
                del self._registry[(model_or_kind, name)]
            except KeyError:
                raise NotRegistered(f"No {model_or_kind} {name!r} is registered on {self!r}.") from None
        self._changed("resource" if name is None else model_or_kind)

    def _changed(self, kind: str) -> None:
        """The registry changed: rebuild the method table and, once the project has started
        (not during autodiscover), tell connected clients that the list changed."""
        self._handlers = None
        if not self.serving:
            return  # still starting (autodiscover) or never served: nobody to tell
        lists = {"tool": ("tools",), "prompt": ("prompts",), "resource": ("resources",), "template": ("resources",)}.get(kind, LIST_KINDS_ALL)
        from .notifications import anotify_list_changed, announce_soon

        for list_kind in lists:
            announce_soon(anotify_list_changed, self, list_kind)

    def is_registered(self, model_or_kind: Any, name: str | None = None) -> bool:
        return (model_or_kind if name is None else (model_or_kind, name)) in self._registry

    def get_model_mcp(self, model: Any) -> Any:
        try:
            return self._registry[model]
        except KeyError:
            raise NotRegistered(f"The model {model.__name__} is not registered on {self!r}.") from None

    def get_model_mcps(self) -> list[Any]:
        from .options import ModelMCP

        return [e for e in self._registry.values() if isinstance(e, ModelMCP)]

    def get_model_mcp_for_uri(self, uri: str) -> tuple[Any, str] | None:
        """Find the ModelMCP of a ``django://<app_label>/<name>/<pk>`` URI; return it with the pk."""
        from .options import uri_scheme

        prefix = f"{uri_scheme()}://"
        if not uri.startswith(prefix):
            return None
        parts = uri[len(prefix):].split("/")
        if len(parts) != 3 or not parts[2]:
            return None
        for model_mcp in self.get_model_mcps():
            if model_mcp.opts.app_label == parts[0] and model_mcp.name == parts[1]:
                from urllib.parse import unquote

                return model_mcp, unquote(parts[2])
        return None

    def _connect_signals(self, model: Any) -> None:
        from django.db.models.signals import post_delete, post_save

        from .notifications import model_changed

        uid = f"mcp_django:{id(self)}:{model._meta.label}"
        post_save.connect(model_changed, sender=model, dispatch_uid=uid + ":save", weak=False)
        post_delete.connect(model_changed, sender=model, dispatch_uid=uid + ":delete", weak=False)

    def tool(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Any:
        """Register a function as a tool: ``@site.tool`` or ``@site.tool(name=..., ...)``.

        The input schema comes from the type hints (or ``input_schema``, validated with
        JSON Schema 2020-12), the description from the docstring. A parameter annotated
        ``Context`` receives the request context and is not part of the schema. With
        ``permission`` (a Django permission name or a list), only users holding it see and call
        the tool; with ``scopes``, OAuth tokens need them to see it, and calling it without them
        answers 403 with a step-up challenge.
        """

        def decorator(f: F) -> F:
            self.register_entry(
                FunctionTool(
                    f, name=name, title=title, description=description, input_schema=input_schema,
                    annotations=annotations, icons=icons, meta=meta, permission=permission, scopes=scopes,
                )
            )
            return f

        return decorator(func) if func is not None else decorator

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a resource. A URI with ``{variables}`` (RFC 6570) makes a
        resource template whose variables are the function's arguments. With ``permission``,
        only users holding it see and read it."""

        def decorator(f: F) -> F:
            entry: Entry
            if "{" in uri:
                entry = FunctionResourceTemplate(
                    f, uri, name=name, title=title, description=description, mime_type=mime_type, icons=icons,
                    complete=complete, permission=permission, scopes=scopes,
                )
            else:
                if complete:
                    raise ImproperlyConfigured(f"Resource {uri!r} has no template variables to complete")
                entry = FunctionResource(
                    f, uri, name=name, title=title, description=description, mime_type=mime_type, icons=icons,
                    permission=permission, scopes=scopes,
                )
            self.register_entry(entry)
            return f

        return decorator

    def prompt(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Any:
        """Register a function returning text or messages as a prompt (``permission`` and
        ``scopes`` as for tools)."""

        def decorator(f: F) -> F:
            self.register_entry(
                FunctionPrompt(f, name=name, title=title, description=description, icons=icons, complete=complete, permission=permission, scopes=scopes)
            )
            return f

        return decorator(func) if func is not None else decorator

    # -- lookups ------------------------------------------------------------------------

    def _of(self, cls: type) -> list[Any]:
        return [e for e in self._registry.values() if isinstance(e, cls)]

    def get_tools(self) -> list[Any]:
        """Function and admin-action tools, then each registered model's generated tools."""
        tools: list[Any] = [e for k, e in self._registry.items() if isinstance(k, tuple) and k[0] == "tool"]
        for model_mcp in self.get_model_mcps():
            tools.extend(model_mcp.get_generated_tools())
        return tools

    def get_tool(self, name: str) -> Any:
        entry = self._registry.get(("tool", name))
        if entry is not None:
            return entry
        for model_mcp in self.get_model_mcps():
            for tool in model_mcp.get_generated_tools():
                if tool.name == name:
                    return tool
        return None

    def get_resources(self) -> list[FunctionResource]:
        return self._of(FunctionResource)

    def get_resource(self, uri: str) -> FunctionResource | None:
        entry = self._registry.get(("resource", uri))
        return entry if isinstance(entry, FunctionResource) else None

    def get_resource_templates(self) -> list[FunctionResourceTemplate]:
        return self._of(FunctionResourceTemplate)

    def get_resource_template(self, uri_template: str) -> FunctionResourceTemplate | None:
        entry = self._registry.get(("template", uri_template))
        return entry if isinstance(entry, FunctionResourceTemplate) else None

    def get_prompts(self) -> list[FunctionPrompt]:
        return self._of(FunctionPrompt)

    def get_prompt(self, name: str) -> FunctionPrompt | None:
        entry = self._registry.get(("prompt", name))
        return entry if isinstance(entry, FunctionPrompt) else None

    # -- change announcements -------------------------------------------------------------

    def notify_resource_updated(self, uri: str) -> int:
        """Tell subscribed sessions that ``uri`` changed; return how many were told.

        Callable from sync code anywhere; async code uses :meth:`anotify_resource_updated`.
        """
        from .notifications import notify_resource_updated

        return notify_resource_updated(self, uri)

    async def anotify_resource_updated(self, uri: str) -> int:
        from .notifications import anotify_resource_updated

        return await anotify_resource_updated(self, uri)

    def notify_list_changed(self, kind: str) -> int:
        """Tell every live session that the ``"tools"``, ``"resources"`` or ``"prompts"`` list changed."""
        from .notifications import notify_list_changed

        return notify_list_changed(self, kind)

    async def anotify_list_changed(self, kind: str) -> int:
        from .notifications import anotify_list_changed

        return await anotify_list_changed(self, kind)

    # -- protocol -----------------------------------------------------------------------

    def get_capabilities(self) -> dict[str, Any]:
        """Declare exactly what this site offers (lifecycle spec: capability negotiation)."""
        capabilities: dict[str, Any] = {"logging": {}, "completions": {}}
        if self.get_tools():
            capabilities["tools"] = {"listChanged": True}
        if self.get_resources() or self.get_resource_templates() or self.get_model_mcps():
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if self.get_prompts():
            capabilities["prompts"] = {"listChanged": True}
        return capabilities

    def get_handlers(self) -> dict[str, Handler]:
        """The method table for the dispatcher: only methods of offered capabilities."""
        if self._handlers is None:
            from .handlers import STANDARD_HANDLERS

            offered = self.get_capabilities()
            hidden = {m for cap, methods in _CAPABILITY_METHODS.items() if cap not in offered for m in methods}
            self._handlers = {m: h for m, h in STANDARD_HANDLERS.items() if m not in hidden}
        return self._handlers

    def get_server_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"name": mcp_settings.server_name, "version": mcp_settings.server_version}
        title = mcp_settings.SERVER_TITLE
        if title:
            info["title"] = title
        return info

    def get_instructions(self) -> str | None:
        return mcp_settings.INSTRUCTIONS

    # -- URLs ---------------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        from django.urls import path

        from .elicitation import connect, views
        from .transport.endpoint import endpoint_view

        # The router also serves the endpoint without its trailing slash.
        return [
            path("", endpoint_view(self), name="endpoint"),
            path("elicitations/<str:elicitation_id>/secret/", views.SecretElicitationView.as_view(site=self), name="elicit-secret"),
            path("elicitations/<str:elicitation_id>/confirm/", views.ConfirmElicitationView.as_view(site=self), name="elicit-confirm"),
            path("elicitations/<str:elicitation_id>/connect/", connect.ConnectElicitationView.as_view(site=self), name="elicit-connect"),
            path("connect/callback/", connect.ConnectCallbackView.as_view(site=self), name="connect-callback"),
        ]

    @property
    def urls(self) -> tuple[list[Any], str, str]:
        return self.get_urls(), "mcp_django", self.name

    # -- checks -------------------------------------------------------------------------

    def check(self, app_configs: Any = None) -> list[Any]:
        """Run each registered ModelMCP's checks (only for the given apps, when given)."""
        errors: list[Any] = []
        for model_mcp in self.get_model_mcps():
            if app_configs is None or model_mcp.opts.app_config in app_configs:
                errors.extend(model_mcp.check())
        from django.core.checks import Warning

        for model_admin, action in self._unexposable_actions:
            errors.append(
                Warning(
                    f"The admin action {action!r} of {model_admin} can return an HTTP response "
                    "(a download or an intermediate page), so it is not exposed over MCP.",
                    hint="Split the work from the response into an action that returns None, or add an @site.tool.",
                    obj=model_admin.__class__,
                    id="mcp_django.W101",
                )
            )
        tool_names = [t.name for t in self.get_tools()]
        for name in sorted({n for n in tool_names if tool_names.count(n) > 1}):
            from django.core.checks import Error

            errors.append(Error(f"Two tools are named {name!r} on {self!r}.", hint="Rename one; tool names must be unique.", id="mcp_django.E105"))
        return errors


class DefaultMCPSite(LazyObject):
    """The default site, built on first use from the app config (like ``admin.site``)."""

    def _setup(self) -> None:
        from django.apps import apps
        from django.utils.module_loading import import_string

        site_class = import_string(apps.get_app_config("mcp_django").default_site)
        self._wrapped = site_class()

    def __repr__(self) -> str:
        return repr(self._wrapped)


site = DefaultMCPSite()
