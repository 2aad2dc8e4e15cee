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

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast, overload
from weakref import WeakSet

from django.apps import apps
from django.core.checks import Error
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured
from django.db.models.base import ModelBase
from django.db.models.signals import post_delete, post_save
from django.utils.functional import LazyObject
from django.utils.module_loading import import_string

from ..exceptions import AlreadyRegistered, NotRegistered
from ..extensions.mcp_apps import UI, UIResource, as_ui, check_ui_resources
from ..extensions.skills import Skill
from .admin_bridge import (
    AdminActionTool,
    AdminBridge,
    AdminModelMCP,
    TaskActions,
    admin_actions,
    audience_hooks,
    check_action_choices,
    is_never_exposed,
    model_labels,
    refuse_own_model,
)
from .functions import (
    Completer,
    FunctionPrompt,
    FunctionResource,
    FunctionResourceTemplate,
    FunctionTool,
)
from .labels import label_checks
from .options import ModelMCP
from .serving import ServingMixin

# changes reaches the models: the method that needs it imports it, because this module imports
# before apps are ready ("from mcp_django import site" in any app, like the admin's sites.py).

if TYPE_CHECKING:
    import os

    from django.db.models import Model

    from ..server.entries import Icon, TaskSupport, ToolAnnotations

#: A decorated function: returned as it came, so it keeps its signature and return type.
F = TypeVar("F", bound=Callable[..., Any])
#: A ModelMCP subclass decorated with ``@site.register(Model)``.
MC = TypeVar("MC", bound="type[ModelMCP[Any]]")

all_sites: WeakSet[MCPSite] = WeakSet()


Entry = (
    FunctionTool | FunctionResource | FunctionResourceTemplate | FunctionPrompt | UIResource | Skill
)


class MCPSite(ServingMixin):
    """One MCP server: a registry of tools, resources and prompts, and its URL patterns.

    The methods here register entries, check them and build the URLs; what a request sees of
    the site, its entry lists, capabilities and method table, comes from ``ServingMixin``
    (mcp_django.registry.serving).
    """

    def __init__(self, name: str = "mcp") -> None:
        # One flat registry, so that a failed autodiscover import can be rolled back whole:
        # model classes map to ModelMCP instances, (kind, name) to function entries and
        # ("admin", n) to register_admin() calls applied lazily (see _registry).
        self._entries: dict[Any, Any] = {}
        self._bridges: list[AdminBridge] = []
        self._bridge_lock = threading.RLock()
        self.name = name
        # (ModelAdmin, action name) pairs that register_admin() could not expose.
        self._unexposable_actions: list[tuple[Any, str]] = []
        super().__init__()  # the method table, the engine and whether it is serving yet
        all_sites.add(self)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(name={self.name!r})"

    # -- registration -------------------------------------------------------------------

    @property
    def _registry(self) -> dict[Any, Any]:
        """The entries, with register_admin() calls applied once apps are ready: every lookup,
        the capabilities, the handler table, checks and change signals go through here."""
        if self._bridges and apps.ready:
            self._apply_admin_bridges()
        return self._entries

    @_registry.setter
    def _registry(self, value: dict[Any, Any]) -> None:
        self._entries = value  # autodiscover_modules() rolls a failed mcp.py back this way

    @staticmethod
    def _key(entry: Entry) -> tuple[str, str]:
        if isinstance(entry, (FunctionResource, UIResource)):
            return ("resource", entry.uri)
        if isinstance(entry, FunctionResourceTemplate):
            return ("template", entry.uri_template)
        if isinstance(entry, Skill):
            return ("skill", entry.name)
        return (entry.kind, entry.name)

    def register_entry(self, entry: Entry) -> Entry:
        """Add a built entry; raise ``AlreadyRegistered`` for a name or URI already taken."""
        key = self._key(entry)
        if key in self._registry:
            existing = self._registry[key]
            func = getattr(existing, "func", None)
            where = f"{func.__module__}.{func.__qualname__}" if func is not None else repr(existing)
            raise AlreadyRegistered(
                f"The {key[0]} {key[1]!r} is already registered on {self!r} (by {where})."
            )
        self._registry[key] = entry
        self._changed(entry.kind)
        return entry

    def register(
        self,
        model_or_iterable: type[Model] | Iterable[type[Model]],
        model_mcp_class: type[ModelMCP[Any]] | None = None,
        **options: Any,
    ) -> Callable[[MC], MC]:
        """Expose one or more models, with a ``ModelMCP`` subclass or the default options.

        ``site.register(Book)`` and ``site.register(Book, BookMCP)`` register at once;
        ``@site.register(Book)`` on a ``ModelMCP`` subclass registers with that class.
        """
        candidates = (
            [model_or_iterable]
            if isinstance(model_or_iterable, ModelBase)
            else list(model_or_iterable)
        )
        for candidate in candidates:
            if not isinstance(candidate, ModelBase):
                raise ImproperlyConfigured(f"{candidate!r} is not a Django model class.")
        models: list[type[Model]] = candidates
        for model in models:
            refuse_own_model(model)
            if model._meta.abstract:
                raise ImproperlyConfigured(
                    f"The model {model.__name__} is abstract, so it cannot be registered with MCP."
                )
            if model._meta.swapped:
                continue
            # An explicit registration wins over the admin bridge, whichever came first.
            if model in self._registry and not isinstance(self._registry[model], AdminModelMCP):
                raise AlreadyRegistered(
                    f"The model {model.__name__} is already registered with "
                    f"{self._registry[model].__class__.__name__} on {self!r}."
                )
            cls = model_mcp_class or ModelMCP
            if options:
                cls = type(f"{model.__name__}ModelMCP", (cls,), {"__module__": __name__, **options})
            self._registry[model] = cls(model, self)
            self._connect_signals(model)
        self._changed("model")

        def decorator(model_mcp_cls: MC) -> MC:
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
        task_actions: dict[str, str] | str | None = None,
        action_rows: str = "admin",
    ) -> None:
        """Expose the models of a Django admin site, with their ModelAdmins' querysets, search,
        permissions, and actions as tools (``delete_selected`` only when opted in).

        ``models`` (model classes or ``"app_label.Model"`` labels) limits it to those models.
        Without it, the user, group, permission, session, admin log and django-oauth-toolkit
        models are left out (see ``admin_bridge.DEFAULT_EXCLUDED_MODELS``); name them to expose
        them.
        mcp_django's own models are never exposed. The admin site is read lazily, on first use
        of this site once apps are ready, so the order of apps and registrations does not matter;
        a model registered here explicitly keeps its ModelMCP, and its admin actions are added.

        Only users the admin site lets in (``admin_site.has_permission(request)``: active staff
        by default) see and use what this exposes; the ModelAdmin permissions then apply. Each
        model of an admin site is bridged by one call: another call with the same admin site
        that would expose a model again raises ``AlreadyRegistered``; calls naming different
        ``models=`` may share it out, and one without ``models=`` takes the models they do not name.

        ``task_actions`` lets admin actions run as durable tasks (2026-07-28 tasks extension):
        ``{"mark_returned": "optional"}`` by action name ("required": only as a task), or
        ``"__all__"`` for every action "optional".

        ``action_rows`` says which selected rows an action acts on: ``"admin"`` (the default) the
        ``ModelAdmin.get_queryset`` rows, as the admin's changelist does; ``"model_mcp"`` only
        those of them that the model's ``ModelMCP`` on this site lets the user see (for a model
        also registered with a ModelMCP of its own). Other keys answer as keys that do not exist.

        A ModelAdmin's ``mcp_actions`` (a list of action names) chooses which of its actions are
        exposed; ``@mcp_action(expose=False)`` leaves an action function out everywhere, and
        ``@mcp_action(destructive=False, open_world=False)`` says what its tool may be announced
        as (an action is ``destructiveHint: true`` otherwise). Rows carry the ModelAdmin's
        ``list_display`` columns, computed ones included.
        """
        bridge = AdminBridge(
            admin_site,
            model_labels(models),
            tuple(tools),
            actions,
            include_delete_selected,
            tuple(read_scopes),
            tuple(write_scopes),
            TaskActions(task_actions),
            action_rows,
        )
        with self._bridge_lock:
            # Earlier calls with the same admin site (not rolled back with a failed mcp.py).
            earlier = [
                b
                for i, b in enumerate(self._bridges)
                if self._entries.get(("admin", i)) is b and b.admin_site is admin_site
            ]
            for other in earlier:
                shared = other.shared_with(bridge)
                if shared is not None:
                    raise AlreadyRegistered(
                        f"The admin site {admin_site.name!r} is already registered on {self!r} "
                        f"for {shared}: register_admin() was called twice with it. Call it once "
                        "per model of the admin site (models= gives each call its own)."
                    )
            for other in earlier:
                other.make_room(bridge)
            self._entries[("admin", len(self._bridges))] = bridge
            self._bridges.append(bridge)
        if apps.ready:
            self._apply_admin_bridges()

    def _apply_admin_bridges(self) -> None:
        """Expose what the bridged admin sites registered since last time (cheap when nothing
        did)."""
        if not any(b.is_stale() for b in self._bridges):
            return

        with self._bridge_lock:
            changed = announce = False
            for index, bridge in enumerate(self._bridges):
                if self._entries.get(("admin", index)) is not bridge or not bridge.is_stale():
                    continue  # rolled back with a failed mcp.py, or up to date
                # The first application is the site's starting state, even on the first request:
                # only admin registrations made later are news to connected clients.
                announce = announce or bridge.applied_size >= 0
                bridge.applied_size = len(bridge.admin_site._registry)
                for model, model_admin in list(bridge.admin_site._registry.items()):
                    if model in bridge.seen:
                        continue
                    bridge.seen.add(model)
                    if not bridge.wants(model):
                        continue
                    changed = True
                    if model not in self._entries:
                        self._entries[model] = AdminModelMCP(
                            model,
                            self,
                            model_admin,
                            tools=bridge.tools,
                            read_scopes=bridge.read_scopes,
                            write_scopes=bridge.write_scopes,
                        )
                        self._connect_signals(model)
                    if bridge.actions:
                        exposed, skipped = admin_actions(
                            model_admin,
                            bridge.include_delete_selected,
                            bridge.write_scopes,
                            bridge.task_actions,
                            bridge.action_rows,
                            self,
                        )
                        for tool in exposed:
                            # Raising here would break every lookup: reported by check() (E120).
                            holder = self._entries.get(("tool", tool.name))
                            if isinstance(holder, AdminActionTool):
                                # Two admin sites bridged here register the same model and action.
                                hint = (
                                    "The model is also registered on the admin site "
                                    f"{holder.model_admin.admin_site.name!r}, bridged too: leave "
                                    "it out of one register_admin() call with models=, or pass "
                                    "actions=False to one."
                                )
                                bridge.conflicts.append((tool.name, hint))
                            elif holder is not None:
                                hint = (
                                    "Rename the admin action or the tool, or pass actions=False "
                                    "to register_admin()."
                                )
                                bridge.conflicts.append((tool.name, hint))
                            else:
                                self._entries[("tool", tool.name)] = tool
                                bridge.tools_exposed.add(tool)
                        self._unexposable_actions += [(model_admin, name) for name in skipped]
            if changed:
                self._handlers = None
                if announce:
                    self._changed("model")

    def _ui_resource(self, ui: UI) -> UIResource | None:
        """The UI resource already registered for ``ui``'s URI (tools may share one), or None
        when there is none yet; a different UI or another resource at that URI is refused."""
        existing = self._registry.get(("resource", ui.resource_uri))
        if existing is None:
            return None
        if not isinstance(existing, UIResource):
            raise AlreadyRegistered(
                f"The resource {ui.resource_uri!r} is already registered on {self!r} "
                f"({existing!r}), so it cannot be a tool's UI."
            )
        if existing.ui != ui:
            raise ImproperlyConfigured(
                f"The UI {ui.resource_uri!r} is declared twice on {self!r} with different "
                "options: tools that share a UI must pass the same mcp_django.UI (one object, "
                "or equal ones)."
            )
        return existing

    def unregister(self, model_or_kind: Any, name: str | None = None) -> None:
        """Remove models (``unregister(Book)``) or a function entry (``unregister("tool", "add")``):
        kinds are "tool", "prompt", "resource" (by URI) and "template" (by URI template)."""
        if name is None:
            models = (
                [model_or_kind] if isinstance(model_or_kind, ModelBase) else list(model_or_kind)
            )
            for model in models:
                if model not in self._registry:
                    raise NotRegistered(
                        f"The model {model.__name__} is not registered on {self!r}."
                    )
                del self._registry[model]
        else:
            try:
                removed = self._registry.pop((model_or_kind, name))
            except KeyError:
                raise NotRegistered(
                    f"No {model_or_kind} {name!r} is registered on {self!r}."
                ) from None
            ui = getattr(removed, "ui", None)
            # A UI goes with the last tool that named it.
            if (
                isinstance(ui, UI)
                and isinstance(self._registry.get(("resource", ui.resource_uri)), UIResource)
                and not any(getattr(t, "ui", None) == ui for t in self.get_tools())
            ):
                del self._registry[("resource", ui.resource_uri)]
                self._changed("resource")
        # A model takes its generated tools and admin actions with it: every list it was in.
        self._changed("model" if name is None else model_or_kind)

    def is_registered(self, model_or_kind: Any, name: str | None = None) -> bool:
        """Whether a model (``is_registered(Book)``) or a named entry
        (``is_registered("tool", "add")``) is registered."""
        return (model_or_kind if name is None else (model_or_kind, name)) in self._registry

    def get_model_mcp(self, model: Any) -> ModelMCP[Any]:
        """The ``ModelMCP`` a model is registered with; raise ``NotRegistered`` if none."""
        try:
            return cast("ModelMCP", self._registry[model])
        except KeyError:
            raise NotRegistered(
                f"The model {model.__name__} is not registered on {self!r}."
            ) from None

    def _connect_signals(self, model: Any) -> None:
        from .changes import (
            ModelChanges,
        )  # app loading: changes imports models (see the imports above)

        if is_never_exposed(model):
            return  # its rows are written by announcements themselves: never announce them

        uid = f"mcp_django:{id(self)}:{model._meta.label}"
        receiver = ModelChanges(self)
        post_save.connect(receiver, sender=model, dispatch_uid=uid + ":save", weak=False)
        post_delete.connect(receiver, sender=model, dispatch_uid=uid + ":delete", weak=False)

    @overload
    def tool(
        self,
        func: F,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
        sensitive: list[str] | None = None,
        task: TaskSupport = "forbidden",
        prelude: bool = False,
        ui: UI | str | None = None,
    ) -> F: ...
    @overload
    def tool(
        self,
        func: None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
        sensitive: list[str] | None = None,
        task: TaskSupport = "forbidden",
        prelude: bool = False,
        ui: UI | str | None = None,
    ) -> Callable[[F], F]: ...
    def tool(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
        sensitive: list[str] | None = None,
        task: TaskSupport = "forbidden",
        prelude: bool = False,
        ui: UI | str | None = None,
    ) -> F | Callable[[F], F]:
        """Register a function as a tool: ``@site.tool`` or ``@site.tool(name=..., ...)``.

        The input schema comes from the type hints (or ``input_schema``, validated with
        JSON Schema 2020-12), the description from the docstring. A parameter annotated
        ``Context`` receives the request context and is not part of the schema. With
        ``permission`` (a Django permission name or a list), only users holding it see and call
        the tool; with ``scopes``, OAuth tokens need them to see it, and calling it without them
        answers 403 with a step-up challenge. The values of the arguments named in ``sensitive``
        (and of ``writeOnly`` properties, such as ``SecretStr`` parameters) are never stored in
        the audit trail. With ``task="optional"`` (or ``"required"``), a 2026-07-28 client that
        declares the tasks extension gets a durable task instead of waiting for the result (one
        that does not is answered directly, or refused for ``"required"``); with ``prelude=True``
        the tool runs in the request until it awaits ``ctx.start_task()`` (README "Durable tasks").
        ``ui`` (a template name, or a :class:`~mcp_django.UI`) gives the tool an MCP App: the
        template, rendered, is served as a ``ui://`` resource readable by whoever may use the tool
        (docs/howto/apps.md).
        """
        app = as_ui(ui)

        def decorator(f: F) -> F:
            tool = FunctionTool(
                f,
                name=name,
                title=title,
                description=description,
                input_schema=input_schema,
                annotations=annotations,
                icons=icons,
                meta=meta,
                permission=permission,
                scopes=scopes,
                sensitive=sensitive,
                task=task,
                prelude=prelude,
                ui=app,
            )
            # Model rows it returns are described and read by this site's ModelMCPs.
            tool.site = self
            shared = self._ui_resource(app) if app is not None else None
            self.register_entry(tool)
            if app is not None and shared is None:
                self.register_entry(UIResource(app, self))
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
        icons: list[Icon] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
        cache_ttl_ms: int | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a resource. A URI with ``{variables}`` (RFC 6570) makes a
        resource template whose variables are the function's arguments. With ``permission``,
        only users holding it see and read it. ``cache_ttl_ms`` is how long 2026-07-28 clients
        may keep what it reads (default: ``READ_CACHE_TTL_MS``)."""

        def decorator(f: F) -> F:
            entry: Entry
            if "{" in uri:
                entry = FunctionResourceTemplate(
                    f,
                    uri,
                    name=name,
                    title=title,
                    description=description,
                    mime_type=mime_type,
                    icons=icons,
                    complete=complete,
                    permission=permission,
                    scopes=scopes,
                    cache_ttl_ms=cache_ttl_ms,
                )
            else:
                if complete:
                    raise ImproperlyConfigured(
                        f"Resource {uri!r} has no template variables to complete"
                    )
                entry = FunctionResource(
                    f,
                    uri,
                    name=name,
                    title=title,
                    description=description,
                    mime_type=mime_type,
                    icons=icons,
                    permission=permission,
                    scopes=scopes,
                    cache_ttl_ms=cache_ttl_ms,
                )
            self.register_entry(entry)
            return f

        return decorator

    @overload
    def prompt(
        self,
        func: F,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Icon] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> F: ...
    @overload
    def prompt(
        self,
        func: None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Icon] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Callable[[F], F]: ...
    def prompt(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Icon] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> F | Callable[[F], F]:
        """Register a function returning text or messages as a prompt (``permission`` and
        ``scopes`` as for tools)."""

        def decorator(f: F) -> F:
            self.register_entry(
                FunctionPrompt(
                    f,
                    name=name,
                    title=title,
                    description=description,
                    icons=icons,
                    complete=complete,
                    permission=permission,
                    scopes=scopes,
                )
            )
            return f

        return decorator(func) if func is not None else decorator

    def skill(
        self,
        directory: str | os.PathLike[str],
        *,
        permission: str | list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Skill:
        """Serve the folder ``directory`` (with its ``SKILL.md``) as the skill named after the
        folder. With ``permission`` or ``scopes`` it is gated as a tool is: listed, got and read
        only by those who may. It takes the place of an app folder's skill of the same name, so
        registering an app's own folder is how to gate it::

            site.skill(
                Path(__file__).parent / "mcp_skills" / "lend-books",
                permission="library.add_loan",
            )
        """
        entry = Skill(directory, permission=permission, scopes=scopes)
        self.register_entry(entry)
        return entry

    # -- URLs ---------------------------------------------------------------------------

    #: Builds a site's URL patterns (``mcp_django.site_urls.site_urlpatterns``, handed over by
    #: mcp_django's AppConfig: the views sit above the registry).
    urlpatterns_builder: ClassVar[Callable[[MCPSite], list[Any]] | None] = None

    def get_urls(self) -> list[Any]:
        """The endpoint and the URL-elicitation pages, built on demand like
        ``AdminSite.get_urls``."""
        builder = type(self).urlpatterns_builder
        if builder is None:
            raise ImproperlyConfigured(
                "MCPSite.urls needs 'mcp_django' in INSTALLED_APPS (its AppConfig provides the "
                "views)."
            )
        return builder(self)

    @property
    def urls(self) -> tuple[list[Any], str, str]:
        """For a URLconf, as ``admin.site.urls``: ``path("mcp/", site.urls)`` (namespace
        ``mcp_django``, instance ``name``)."""
        return self.get_urls(), "mcp_django", self.name

    # -- checks -------------------------------------------------------------------------

    def check(self, app_configs: Any = None) -> list[Any]:
        """Run each registered ModelMCP's checks (only for the given apps, when given)."""
        errors: list[Any] = []
        for model_mcp in self.get_model_mcps():
            if app_configs is None or model_mcp.opts.app_config in app_configs:
                errors.extend(model_mcp.check())

        for model_admin, action in self._unexposable_actions:
            errors.append(
                CheckWarning(
                    f"The admin action {action!r} of {model_admin} can return an HTTP response "
                    "(a download or an intermediate page), so it is not exposed over MCP.",
                    hint="Split the work from the response into an action that returns None, "
                    "or add an @site.tool.",
                    obj=model_admin.__class__,
                    id="mcp_django.W101",
                )
            )

        errors += label_checks(self.get_tools())
        for tool in self.get_tools():
            # Checked here, not at @site.tool: the ModelMCP may be registered after the tool.
            model = getattr(tool, "result_model", None)
            if model is not None and not self.is_registered(model):
                errors.append(
                    Error(
                        f"The tool {tool.name!r} returns {model.__name__} rows, but "
                        f"{model.__name__} has no ModelMCP on {self!r} to read them through.",
                        hint="Return a dict or a pydantic model, or register a ModelMCP for "
                        f"{model.__name__} on this site (its fields and permissions apply).",
                        obj=getattr(tool, "func", None),
                        id="mcp_django.E240",
                    )
                )

        for bridge in self._bridges:
            for name, hint in bridge.conflicts:
                errors.append(
                    Error(
                        f"The admin action tool {name!r} from {bridge.admin_site!r} is already "
                        f"registered on {self!r}.",
                        hint=hint,
                        id="mcp_django.E120",
                    )
                )
            if bridge.labels is not None:
                registered = {m._meta.label_lower for m in bridge.admin_site._registry}
                for label in sorted(bridge.labels - registered):
                    errors.append(
                        CheckWarning(
                            f"register_admin(models=...) names {label}, which "
                            f"{bridge.admin_site!r} does not register.",
                            hint="Register it on the admin site, or remove it from models=.",
                            id="mcp_django.W120",
                        )
                    )
            errors.extend(self._check_action_rows(bridge))
            if bridge.actions:
                for model in sorted(bridge.seen, key=lambda m: m._meta.label_lower):
                    if bridge.wants(model) and model in bridge.admin_site._registry:
                        errors.extend(check_action_choices(bridge.admin_site._registry[model]))
            for action in bridge.task_actions.unknown():
                errors.append(
                    CheckWarning(
                        f"register_admin(task_actions=...) names {action!r}, which no "
                        "ModelAdmin it exposes has as an action.",
                        hint="Use the action's name (its function name, or the name given to "
                        "AdminSite.add_action).",
                        id="mcp_django.W121",
                    )
                )
        errors.extend(check_ui_resources(self._of(UIResource)))
        tool_names = [t.name for t in self.get_tools()]
        for name in sorted({n for n in tool_names if tool_names.count(n) > 1}):
            errors.append(
                Error(
                    f"Two tools are named {name!r} on {self!r}.",
                    hint="Rename one; tool names must be unique.",
                    id="mcp_django.E105",
                )
            )
        return errors

    def _check_action_rows(self, bridge: AdminBridge) -> list[Any]:
        """W230: a model whose admin actions act on the ModelAdmin's rows while its own ModelMCP
        chooses who sees which rows: the action could act on a row the ModelMCP hides."""
        if bridge.action_rows == "model_mcp":
            return []
        warnings: list[Any] = []
        acted_on = {
            t.model_admin.model for t in self._of(AdminActionTool) if t in bridge.tools_exposed
        }
        for model in sorted(acted_on, key=lambda m: m._meta.label_lower):
            model_mcp = self._entries.get(model)
            hooks = (
                audience_hooks(model_mcp)
                if isinstance(model_mcp, ModelMCP) and not isinstance(model_mcp, AdminModelMCP)
                else []
            )
            if hooks:
                warnings.append(
                    CheckWarning(
                        f"{model._meta.label} is exposed by {type(model_mcp).__name__}, which "
                        f"chooses its rows ({', '.join(hooks)}), and its admin actions from "
                        f"{bridge.admin_site!r} act on the rows of the ModelAdmin's "
                        "get_queryset(): an action may act on a row the ModelMCP does not let "
                        "the user see.",
                        hint='Pass register_admin(..., action_rows="model_mcp") so that actions '
                        "act only on the rows the ModelMCP lets the user see, or silence "
                        "mcp_django.W230 if the admin's rows are meant.",
                        obj=type(model_mcp),
                        id="mcp_django.W230",
                    )
                )
        return warnings


class DefaultMCPSite(LazyObject):  # type: ignore[type-arg]  # generic only in django-stubs
    """The default site, built on first use from the app config (like ``admin.site``)."""

    def _setup(self) -> None:
        try:
            config = apps.get_app_config("mcp_django")
        except LookupError:
            # Reached by including mcp_django.urls (or using `site`) in a project that did not
            # install the app: a LookupError from the app registry would not say what to do.
            raise ImproperlyConfigured(
                'mcp_django is not in INSTALLED_APPS: add "mcp_django" to INSTALLED_APPS before '
                'using its site or including "mcp_django.urls".'
            ) from None
        site_class = import_string(config.default_site)  # type: ignore[attr-defined]  # MCPDjangoConfig's
        self._wrapped = site_class()

    def __repr__(self) -> str:
        return repr(self._wrapped)


site = DefaultMCPSite()
