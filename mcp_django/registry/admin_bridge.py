"""Expose what a Django admin site already knows: its models and its actions.

``site.register_admin(admin.site)`` reuses each ``ModelAdmin``'s ``get_queryset``,
``search_fields`` / ``get_search_results``, ``list_display`` fields and ``has_*_permission``
methods, and offers its actions as tools taking a list of primary keys.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import logging
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.admin.utils import label_for_field, lookup_field
from django.contrib.messages.storage.base import BaseStorage
from django.core import checks
from django.core.checks import CheckMessage
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ObjectDoesNotExist
from django.db import models, transaction
from django.db.models.base import ModelBase
from django.http import HttpRequest, HttpResponseBase
from jsonschema import Draft202012Validator
from rest_framework import serializers

from ..db import in_healthy_thread
from ..protocol.errors import InvalidParamsError
from ..server.entries import TASK_SUPPORT, TaskSupport, ToolEntry, with_task_support
from .options import ModelMCP, _safe_name, malformed_pk
from .schemas import argument_error, invalid_arguments, nullable, pk_schema

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    from ..server.context import Context

logger = logging.getLogger(__name__)

MAX_ACTION_OBJECTS = 1000

#: ``register_admin(action_rows=...)``: the rows an admin action tool may act on. "admin": the
#: ``ModelAdmin.get_queryset`` rows, as the admin's changelist; "model_mcp": of those, only the
#: rows the model's ``ModelMCP`` on the same site lets the user see.
ACTION_ROWS = ("admin", "model_mcp")

# The ModelMCP hooks and options that decide who sees which rows: one overridden means the
# ModelMCP's audience may differ from the ModelAdmin's (check() then says so, W230).
AUDIENCE_HOOKS = ("get_queryset", "has_permission", "has_view_permission", "has_read_scopes")

# Never exposed, even when named: mcp_django's own sessions, events and secrets. Exposing them
# let one user read another's streams, and saving an Event announced a change, which saved
# Events... (an announcement loop). Nor service clients: an agent could bind one to a user.
NEVER_EXPOSED_APPS = frozenset({"mcp_django", "mcp_django.auth.service_clients"})

# Credential-bearing models an admin commonly registers: left out of register_admin() unless
# named in its ``models=``. Lower-case ``app_label.model_name`` labels or whole app labels;
# the swappable user and django-oauth-toolkit models are added by :func:`default_excluded`.
DEFAULT_EXCLUDED_MODELS = frozenset(
    {"auth.user", "auth.group", "auth.permission", "admin.logentry", "sessions.session"}
)
DEFAULT_EXCLUDED_APPS = frozenset({"oauth2_provider"})
_OAUTH2_SWAPPABLE = ("APPLICATION", "ACCESS_TOKEN", "REFRESH_TOKEN", "ID_TOKEN", "GRANT")


def is_never_exposed(model: type[models.Model]) -> bool:
    """True for mcp_django's own models, which no site may expose."""
    return model._meta.app_config is not None and model._meta.app_config.name in NEVER_EXPOSED_APPS


def refuse_own_model(model: type[models.Model]) -> None:
    if is_never_exposed(model):
        raise ImproperlyConfigured(
            f"{model._meta.label} is one of mcp_django's own models (sessions, events, secrets): "
            "it cannot be exposed over MCP."
        )


def is_excluded_by_default(model: type[models.Model]) -> bool:
    """True for the user, group, permission, session, admin log and OAuth models."""
    opts = model._meta
    if opts.app_label in DEFAULT_EXCLUDED_APPS or opts.label_lower in DEFAULT_EXCLUDED_MODELS:
        return True
    swapped = {settings.AUTH_USER_MODEL.lower()}
    swapped |= {
        getattr(settings, f"OAUTH2_PROVIDER_{name}_MODEL", "").lower() for name in _OAUTH2_SWAPPABLE
    }
    return opts.label_lower in swapped


def answers_with_response(func: Any) -> bool:
    """Tell whether an admin action can return something (a download, a confirmation page).

    Such actions need a browser, so they are not exposed; ``site.check()`` says which.
    """
    try:
        source = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return False
    function = next(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None
    )
    if function is None:
        return False
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            return True
    return False


F = TypeVar("F", bound=Callable[..., Any])


def mcp_action(
    *, expose: bool = True, destructive: bool | None = None, open_world: bool | None = None
) -> Callable[[F], F]:
    """What ``register_admin`` should know of an admin action, beside ``@admin.action``::

        @admin.action(description="Mark as returned")
        @mcp_action(destructive=False, open_world=False)
        def mark_returned(modeladmin, request, queryset): ...

    ``expose=False`` leaves the action out of every bridged ModelAdmin (the admin keeps it).
    ``destructive=False`` declares that it only adds or updates: its tool is announced with
    ``destructiveHint: false`` (an admin action is destructive unless declared so).
    ``open_world=False`` declares that it touches nothing outside the database (no mail, no
    other service): ``openWorldHint: false``, which is otherwise left out. The decorator only
    sets the attributes ``mcp_expose``, ``mcp_destructive`` and ``mcp_open_world``, which may
    also be set by hand.
    """

    def decorator(func: F) -> F:
        func.mcp_expose = expose  # type: ignore[attr-defined]
        if destructive is not None:
            func.mcp_destructive = destructive  # type: ignore[attr-defined]
        if open_world is not None:
            func.mcp_open_world = open_world  # type: ignore[attr-defined]
        return func

    return decorator


def admits(model_admin: ModelAdmin[Any], request: HttpRequest) -> bool:
    """Whether the admin site of ``model_admin`` lets the request's user in at all:
    ``AdminSite.has_permission`` (active staff, unless the site overrides it)."""
    return getattr(request, "user", None) is not None and bool(
        model_admin.admin_site.has_permission(request)
    )


@dataclass(frozen=True)
class DisplayColumn:
    """A ``list_display`` entry that is no field of the model: an ``@admin.display`` function, a
    ModelAdmin method, or a model method or property (named or passed), and how a row shows it."""

    #: The row's key for it: the function's or attribute's name.
    key: str
    #: The ``list_display`` entry itself, as ``lookup_field`` takes it.
    entry: Any
    #: The changelist's column header (``description=`` / ``short_description``).
    title: str
    #: ``@admin.display(boolean=True)``: a yes/no icon in the changelist, a boolean here.
    boolean: bool


def display_columns(
    model_admin: ModelAdmin[Any],
) -> tuple[list[DisplayColumn], list[tuple[str, str]]]:
    """The callable ``list_display`` entries of ``model_admin`` that rows can carry, and those
    that they cannot, each with the reason (reported by check(), W232)."""
    model = model_admin.model
    opts = model._meta
    field_names = {f.name for f in [*opts.concrete_fields, *opts.many_to_many]}
    columns: list[DisplayColumn] = []
    left_out: list[tuple[str, str]] = []
    for index, entry in enumerate(model_admin.list_display):
        if isinstance(entry, str) and (entry in field_names or entry == "__str__"):
            continue  # a field (serialized as such), or the row's name (its resource name)
        key = entry if isinstance(entry, str) else getattr(entry, "__name__", "")
        if not key.isidentifier():
            shown_as = getattr(entry, "__qualname__", None) or repr(entry)
            why = "it has no name a row could carry it under (a lambda?)"
            left_out.append((f"entry {index} ({shown_as})", why))
            continue
        if key in field_names:
            why = f"a field of {opts.label} has that name, and rows carry the field under it"
            left_out.append((key, why))
            continue
        if key in {column.key for column in columns}:
            left_out.append((key, "list_display names it twice"))
            continue
        try:
            label, attr = label_for_field(entry, model, model_admin, return_attr=True)
        except (AttributeError, FieldDoesNotExist):
            why = "it is no field, ModelAdmin method or model attribute (admin.E108)"
            left_out.append((key, why))
            continue
        shown = attr.fget if isinstance(attr, property) else attr
        columns.append(
            DisplayColumn(key, entry, str(label), bool(getattr(shown, "boolean", False)))
        )
    return columns, left_out


def json_safe(value: Any) -> Any:
    """A display's value as JSON: numbers, text and booleans as they are, dates and times in
    ISO 8601, anything else (a related row, a Decimal, a lazy translation) as its text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return str(value)


class _DisplayValue:
    """What a display column field answers for a row: the display's value, computed as the
    changelist computes it (``lookup_field``: called with the row, or the ModelAdmin's method)."""

    column: DisplayColumn
    model_admin: ModelAdmin[Any]

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # DRF copies a serializer's declared fields for each instance, arguments and all: the
        # ModelAdmin (and its admin site's locks) is shared, not copied.
        return cast("Any", type(self))(self.column, self.model_admin)

    def to_representation(self, obj: Any) -> Any:
        try:
            _field, _attr, value = lookup_field(self.column.entry, obj, self.model_admin)
        except ObjectDoesNotExist:
            return None  # a missing related row: the changelist's empty value
        if self.column.boolean:
            return None if value is None else bool(value)
        return json_safe(value)


# DRF ships no type information: hence the ignores on the two classes below.
class DisplayField(_DisplayValue, serializers.ReadOnlyField):  # type: ignore[misc]
    """A display column of any JSON value (its schema says no type: it is the display's)."""

    def __init__(self, column: DisplayColumn, model_admin: ModelAdmin[Any]) -> None:
        self.column, self.model_admin = column, model_admin
        super().__init__(source="*", label=column.title)


class BooleanDisplayField(_DisplayValue, serializers.BooleanField):  # type: ignore[misc]
    """A ``boolean=True`` display column: true, false, or null."""

    def __init__(self, column: DisplayColumn, model_admin: ModelAdmin[Any]) -> None:
        self.column, self.model_admin = column, model_admin
        super().__init__(source="*", label=column.title, read_only=True, allow_null=True)


class AdminModelMCP(ModelMCP):
    """A ``ModelMCP`` that asks a ``ModelAdmin`` for querysets, searches and permissions."""

    model_admin: ModelAdmin[Any]
    #: The callable ``list_display`` entries rows carry, beside the fields it names.
    display_columns: list[DisplayColumn]

    def __init__(
        self,
        model: type[models.Model],
        site: Any,
        model_admin: ModelAdmin[Any],
        tools: tuple[str, ...] = ("search", "get"),
        read_scopes: tuple[str, ...] = (),
        write_scopes: tuple[str, ...] = (),
    ) -> None:
        self.model_admin = model_admin
        self.tools = tools
        self.read_scopes = read_scopes
        self.write_scopes = write_scopes
        self.search_fields = tuple(str(f).lstrip("^=@") for f in model_admin.search_fields or ())
        field_names = {f.name for f in model._meta.concrete_fields}
        shown = [
            name
            for name in model_admin.list_display
            if isinstance(name, str) and name in field_names
        ]
        self.fields = shown or None
        self.display_columns, self.left_out_columns = display_columns(model_admin)
        ordering = model_admin.ordering or model._meta.ordering
        # Only field names: an expression (F("x").desc()) has no name a client could pass.
        names = tuple(o for o in ordering or () if isinstance(o, str))
        self.ordering = names or None
        list_select_related = model_admin.list_select_related
        self.list_select_related = (
            tuple(list_select_related) if isinstance(list_select_related, (list, tuple)) else ()
        )
        super().__init__(model, site)

    def get_queryset(self, request: HttpRequest) -> Any:
        return self.model_admin.get_queryset(request)

    def build_serializer_class(self) -> type[serializers.ModelSerializer]:
        """The fields ``list_display`` names, and its display columns as read-only fields."""
        base = super().build_serializer_class()
        if not self.display_columns:
            return base
        declared: dict[str, Any] = {
            column.key: (BooleanDisplayField if column.boolean else DisplayField)(
                column, self.model_admin
            )
            for column in self.display_columns
        }
        fields = base.Meta.fields
        meta_attrs = {} if fields == "__all__" else {"fields": (*fields, *declared)}
        meta = type("Meta", (base.Meta,), meta_attrs)
        model_admin = self.model_admin

        def to_representation(serializer: Any, instance: Any) -> Any:
            # A row just written (create, update) is read back through the ModelAdmin's
            # queryset, so that displays find its annotations; reads come through it already.
            request = serializer.context.get("request")
            if request is not None and instance.pk is not None:
                instance = (
                    model_admin.get_queryset(request).filter(pk=instance.pk).first() or instance
                )
            return base.to_representation(serializer, instance)

        attrs = {
            **declared,
            "Meta": meta,
            "to_representation": to_representation,
            "__module__": __name__,
        }
        return type(base.__name__, (base,), attrs)

    def field_schemas(self, *, writable: bool, output: bool = False) -> dict[str, Any]:
        schema = super().field_schemas(writable=writable, output=output)
        for column in self.display_columns:
            if column.key in schema["properties"]:
                # DRF maps a BooleanField subclass as text: a boolean display is said here. The
                # changelist's column header is the value's title.
                value = (
                    nullable({"type": "boolean"})
                    if column.boolean
                    else schema["properties"][column.key]
                )
                schema["properties"][column.key] = {"title": column.title, **value}
        return schema

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self._check_display_columns()]

    def _check_display_columns(self) -> list[checks.CheckMessage]:
        """W232: a list_display column the rows leave out, and why."""
        cls = type(self.model_admin)
        return [
            checks.Warning(
                f"{cls.__qualname__}.list_display has {name}, which the rows of "
                f"{self.opts.label} over MCP leave out: {why}.",
                hint="Make it a def (an @admin.display function or a ModelAdmin method) "
                "whose name is no field of the model.",
                obj=cls,
                id="mcp_django.W232",
            )
            for name, why in self.left_out_columns
        ]

    def get_search_results(self, request: HttpRequest, queryset: Any, term: str) -> Any:
        results, may_have_duplicates = self.model_admin.get_search_results(request, queryset, term)
        return results.distinct() if may_have_duplicates else results

    # Every permission asks the admin site first, as the admin's views do: a user the site would
    # not let in (not staff, by default) sees none of its models, rows or tools over MCP either.

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admits(self.model_admin, request) and self.model_admin.has_view_or_change_permission(
            request, obj
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return admits(self.model_admin, request) and self.model_admin.has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admits(self.model_admin, request) and self.model_admin.has_change_permission(
            request, obj
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admits(self.model_admin, request) and self.model_admin.has_delete_permission(
            request, obj
        )


def action_annotations(action_name: str, func: Any) -> dict[str, Any]:
    """The tool annotations of an admin action: destructive, and with no claim about the
    world outside, unless the action function declares otherwise (``@mcp_action``). An action
    may delete rows or send mail; a client told it is harmless may run it without asking."""
    if action_name == "delete_selected":
        # Ours (_delete_selected_without_confirmation): it deletes rows, and touches nothing else.
        return {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}
    annotations: dict[str, Any] = {
        "readOnlyHint": False,
        "destructiveHint": getattr(func, "mcp_destructive", True) is not False,
    }
    open_world = getattr(func, "mcp_open_world", None)
    if isinstance(open_world, bool):
        annotations["openWorldHint"] = open_world
    return annotations


class _CapturedMessages(BaseStorage):
    """Collect ``message_user()`` output so an action's messages become the tool's answer."""

    def _get(self, *args: Any, **kwargs: Any) -> tuple[list[Any], bool]:
        return [], True

    def _store(self, messages: list[Any], response: Any, *args: Any, **kwargs: Any) -> list[Any]:
        return []


class AdminActionTool(ToolEntry):
    """An admin action as a tool: ``<app>_<model>_<action>(pks=[...])``."""

    kind = "tool"
    streams = False
    icons = None
    meta = None
    permissions = ("admin action",)  # always checked against ModelAdmin.get_actions(request)

    def __init__(
        self,
        model_admin: ModelAdmin[Any],
        action_name: str,
        func: Any,
        description: str,
        scopes: tuple[str, ...] = (),
        task_support: TaskSupport = "forbidden",
        rows: str = "admin",
        site: Any = None,
    ) -> None:
        self.model_admin = model_admin
        #: Which rows the action may act on (register_admin's ``action_rows``), and the MCP site
        #: whose ModelMCP of the model "model_mcp" asks, at call time (it may be registered later).
        self.rows = rows
        self.site = site
        self._scopes = scopes
        #: Whether a call may run as a durable task (register_admin's ``task_actions``).
        self.task_support = task_support
        self.action_name = action_name
        self.func = func
        opts = model_admin.model._meta
        self.name = _safe_name(f"{opts.app_label}_{opts.model_name}_{action_name}")
        #: The admin's own label for the action ("Mark selected loans as returned").
        self.title = str(description)
        self.description = (
            f"{description} (admin action on {opts.verbose_name_plural}; give the primary keys)."
        )
        self.input_schema = {
            "type": "object",
            "properties": {
                "pks": {
                    "type": "array",
                    "items": pk_schema(model_admin.model),
                    "minItems": 1,
                    "maxItems": MAX_ACTION_OBJECTS,
                }
            },
            "required": ["pks"],
            "additionalProperties": False,
        }
        self.annotations = action_annotations(action_name, func)

    @property
    def scopes(self) -> tuple[str, ...]:
        return self._scopes

    def definition(self) -> dict[str, Any]:
        definition = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": self.annotations,
        }
        return with_task_support(definition, self.task_support)

    def has_permission(self, request: HttpRequest) -> bool:
        # The admin's gates, in its order: the site lets the user in (staff, by default), the
        # user may open the changelist, and get_actions() applies the action's permissions.
        return (
            admits(self.model_admin, request)
            and self.model_admin.has_view_or_change_permission(request)
            and self.action_name in self.model_admin.get_actions(request)
        )

    async def call(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        # The engine always gives tools the request (only unit tests build contexts without one).
        return await sync_to_async(in_healthy_thread(self._call), thread_sensitive=True)(
            arguments, cast("HttpRequest", ctx.request), ctx
        )

    def get_queryset(self, request: HttpRequest, pks: list[Any]) -> Any:
        """The selected rows the action acts on: the ModelAdmin's, as its changelist selects them,
        narrowed with ``rows="model_mcp"`` to those the model's ModelMCP lets the user see. The
        others drop out as keys that do not exist do, so nothing tells them apart."""
        queryset = self.model_admin.get_queryset(request).filter(pk__in=pks)
        if self.rows != "model_mcp":
            return queryset
        model_mcp = (
            self.site._registry.get(self.model_admin.model) if self.site is not None else None
        )
        if not isinstance(model_mcp, ModelMCP):
            return queryset.none()  # unregistered since: no ModelMCP lets anyone see a row
        if not model_mcp.has_read_scopes(request) or not model_mcp.has_view_permission(request):
            return queryset.none()
        # As the ModelMCP's get tool reads one row: its queryset, then the per-row permission.
        visible = [
            obj.pk
            for obj in model_mcp.get_queryset(request).filter(pk__in=pks)
            if model_mcp.has_view_permission(request, obj)
        ]
        return queryset.filter(pk__in=visible)

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: Context
    ) -> dict[str, Any] | None:
        """The ``isError`` result :meth:`call` answers to invalid ``arguments``, or None."""
        return await sync_to_async(in_healthy_thread(self._check), thread_sensitive=True)(arguments)

    def _check(self, arguments: dict[str, Any]) -> dict[str, Any] | None:
        errors = [
            argument_error(e)
            for e in sorted(
                Draft202012Validator(self.input_schema).iter_errors(arguments),
                key=lambda e: list(e.path),
            )
        ]
        if not errors:
            # Keys of the right JSON type may still be no keys ("not-a-uuid"): said like the
            # schema's complaints, as the generated tools say a malformed pk.
            model = self.model_admin.model
            errors = [
                f"pks.{i}: {problem}"
                for i, pk in enumerate(arguments["pks"])
                if (problem := malformed_pk(model, pk)) is not None
            ]
        if errors:
            return {
                "content": [{"type": "text", "text": invalid_arguments(errors)}],
                "isError": True,
            }
        return None

    def _call(
        self, arguments: dict[str, Any], request: HttpRequest, ctx: Context | None = None
    ) -> dict[str, Any]:
        if not self.is_visible(request):
            raise InvalidParamsError(f"Unknown tool: {self.name}")
        invalid = self._check(arguments)
        if invalid is not None:
            return invalid
        queryset = self.get_queryset(request, arguments["pks"])
        count = queryset.count()
        if count == 0:
            return {
                "content": [
                    {
                        "type": "text",
                        "text": "None of those objects exist (or you may not see them).",
                    }
                ],
                "isError": True,
            }
        if ctx is not None and ctx.task_phase == "task":
            # The task's statusMessage while the action runs: written now, before the action's
            # transaction, so that a tasks/get on another connection sees it.
            plural = self.model_admin.model._meta.verbose_name_plural
            async_to_sync(ctx.report_progress)(
                0, count, f"Running {self.action_name} on {count} {plural}"
            )
        # message_user() needs the messages framework: its messages become the answer (a
        # request built for a task, or by a transport without middleware, has none).
        request._messages = _CapturedMessages(request)  # type: ignore[attr-defined]
        with transaction.atomic():
            response = self.func(self.model_admin, request, queryset)
            if isinstance(response, HttpResponseBase):
                transaction.set_rollback(True)
                return {
                    "content": [
                        {
                            "type": "text",
                            "text": (
                                "This action answers with a web page or a download; "
                                "use the admin for it."
                            ),
                        }
                    ],
                    "isError": True,
                }
        messages = [str(m) for m in request._messages._queued_messages]  # type: ignore[attr-defined]
        text = "\n".join(messages) or f"Ran {self.action_name} on {count} object(s)."
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"affected": count, "messages": messages},
        }

    def __repr__(self) -> str:
        return f"<AdminActionTool {self.name}>"


def admin_actions(
    model_admin: ModelAdmin[Any],
    include_delete_selected: bool,
    scopes: tuple[str, ...] = (),
    task_actions: TaskActions | None = None,
    rows: str = "admin",
    site: Any = None,
) -> tuple[list[AdminActionTool], list[str]]:
    """The exposable actions of a ModelAdmin, and the names of those that are not (responses)."""
    task_actions = task_actions or TaskActions(None)
    tools: list[AdminActionTool] = []
    skipped: list[str] = []
    # The same list the changelist builds its action menu from (site-wide plus the model's).
    for action in model_admin._get_base_actions():  # type: ignore[attr-defined]  # private; no public equivalent
        func, name, description = action_parts(action)
        task_actions.seen.add(name)
        if name == "delete_selected" and not include_delete_selected:
            continue
        if not chosen_for_mcp(model_admin, name, func):
            continue  # left out by the project: not exposed, so not reported either (W101)
        if name != "delete_selected" and answers_with_response(func):
            skipped.append(name)
            continue
        text = str(description or name.replace("_", " ").capitalize())
        if name == "delete_selected":
            text = f"Delete selected {model_admin.model._meta.verbose_name_plural}"
            func = _delete_selected_without_confirmation
        support = task_actions.support(name)
        tools.append(AdminActionTool(model_admin, name, func, text, scopes, support, rows, site))
    return tools, skipped


def chosen_for_mcp(model_admin: ModelAdmin[Any], name: str, func: Any) -> bool:
    """Whether the project leaves the action ``name`` in the bridge: the ModelAdmin's
    ``mcp_actions`` (names, or None for every action) names it, and the action function was not
    marked ``mcp_expose = False`` (``@mcp_action(expose=False)``)."""
    if getattr(func, "mcp_expose", True) is False:
        return False
    chosen = getattr(model_admin, "mcp_actions", None)
    # A malformed mcp_actions (E230) exposes nothing rather than guessing what was meant.
    return chosen is None or (valid_action_names(chosen) and name in chosen)


def valid_action_names(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)


def check_action_choices(model_admin: ModelAdmin[Any]) -> list[CheckMessage]:
    """E230 / W231: a ModelAdmin's ``mcp_actions`` is not a list of names, or names an action
    the ModelAdmin does not offer."""
    chosen = getattr(model_admin, "mcp_actions", None)
    if chosen is None:
        return []
    cls = type(model_admin)
    if not valid_action_names(chosen):
        return [
            checks.Error(
                f"{cls.__qualname__}.mcp_actions is {chosen!r}, not a list of action names: "
                "none of its actions is exposed over MCP.",
                hint="A list or tuple of the names of its actions, e.g. "
                'mcp_actions = ["mark_returned"] (or None for all).',
                obj=cls,
                id="mcp_django.E230",
            )
        ]
    # The changelist's own list of actions (private; no public equivalent).
    base_actions = model_admin._get_base_actions()  # type: ignore[attr-defined]
    offered = {action_parts(action)[1] for action in base_actions}
    return [
        checks.Warning(
            f"{cls.__qualname__}.mcp_actions names {name!r}, which is not one of its actions.",
            hint="Use the names of the actions the ModelAdmin offers: its actions and "
            "the admin site's (AdminSite.add_action).",
            obj=cls,
            id="mcp_django.W231",
        )
        for name in chosen
        if name not in offered
    ]


def action_parts(action: Any) -> tuple[Any, str, Any]:
    """``(func, name, description)`` of an entry of ``ModelAdmin._get_base_actions()``: Django
    6.1 gives Action objects (unpacking one is deprecated), older versions tuples."""
    return (
        (action.func, action.name, action.description) if hasattr(action, "func") else tuple(action)
    )


def _delete_selected_without_confirmation(
    model_admin: ModelAdmin[Any], request: HttpRequest, queryset: Any
) -> None:
    """delete_selected, minus its confirmation page: the MCP client asks its user instead
    (the tool is marked destructive) and only exists when the site opts in."""
    # App loading: admin's models; this module imports before apps are ready (sites imports it).
    from django.contrib.admin.models import DELETION, LogEntry

    objects = list(queryset)
    for obj in objects:
        if not model_admin.has_delete_permission(request, obj):
            raise PermissionError(f"You may not delete {obj}")
    LogEntry.objects.log_actions(
        cast("int", request.user.pk), objects, DELETION, change_message="Deleted through MCP."
    )
    model_admin.delete_queryset(request, queryset)
    model_admin.message_user(
        request, f"Deleted {len(objects)} {model_admin.model._meta.verbose_name_plural}."
    )


class TaskActions:
    """``register_admin(task_actions=...)``: which admin actions may run as durable tasks.

    A dict from action names to "optional" or "required" (or "forbidden"), or "__all__" for
    every action "optional"; checked when register_admin() is called, like ``models=``.
    """

    def __init__(self, option: dict[str, str] | str | None) -> None:
        self.all = option == "__all__"
        self.names: dict[str, TaskSupport] = {}
        #: Action names of the bridged ModelAdmins (to report names in ``names`` that none has).
        self.seen: set[str] = set()
        if option is None or self.all:
            return
        if not isinstance(option, dict):
            raise ImproperlyConfigured(
                'register_admin(task_actions=...) takes a dict of action names to "optional" or '
                f'"required", or "__all__", not {option!r}.'
            )
        for name, support in option.items():
            if not isinstance(name, str) or support not in TASK_SUPPORT:
                raise ImproperlyConfigured(
                    f"register_admin(task_actions=...) gives {name!r} the value {support!r}: "
                    f"use one of {', '.join(map(repr, TASK_SUPPORT))}."
                )
        self.names = {
            name: next(known for known in TASK_SUPPORT if known == support)
            for name, support in option.items()
        }

    def support(self, action_name: str) -> TaskSupport:
        return "optional" if self.all else self.names.get(action_name, "forbidden")

    def unknown(self) -> list[str]:
        """Names given that no bridged ModelAdmin has as an action (so far)."""
        return sorted(set(self.names) - self.seen)


class AdminBridge:
    """A ``register_admin()`` call, kept so that it can be applied lazily (like
    ``AdminSite.get_urls``): the admin site may fill its registry after the MCP site's
    ``mcp.py`` ran, whatever the order of the apps in ``INSTALLED_APPS``."""

    def __init__(
        self,
        admin_site: Any,
        labels: frozenset[str] | None,
        tools: tuple[str, ...],
        actions: bool,
        include_delete_selected: bool,
        read_scopes: tuple[str, ...],
        write_scopes: tuple[str, ...],
        task_actions: TaskActions | None = None,
        action_rows: str = "admin",
    ) -> None:
        if action_rows not in ACTION_ROWS:
            raise ImproperlyConfigured(
                f"register_admin(action_rows=...) takes "
                f"{' or '.join(map(repr, ACTION_ROWS))}, not {action_rows!r}."
            )
        self.admin_site = admin_site
        self.action_rows = action_rows
        self.task_actions = task_actions or TaskActions(None)
        self.labels = labels  # lower-case "app_label.model_name" named in models=, or None for all
        self.tools = tools
        self.actions = actions
        self.include_delete_selected = include_delete_selected
        self.read_scopes = read_scopes
        self.write_scopes = write_scopes
        self.seen: set[type[models.Model]] = set()  # admin models already considered (once each)
        self.applied_size = -1  # len(admin_site._registry) when last applied
        # Action tool names already taken on the MCP site, each with the hint check() gives.
        self.conflicts: list[tuple[str, str]] = []
        # The action tools this call registered (for check(): whose rows they act on).
        self.tools_exposed: set[AdminActionTool] = set()
        # Without models=: labels that another register_admin() of the same admin site names.
        self.claimed: set[str] = set()
        self._registry: dict[Any, Any] | None = None  # admin_site._registry, once it is first read

    def is_stale(self) -> bool:
        # The registry dict itself, looked up once: admin.site is a LazyObject, and this runs on
        # every registry access of every request (bench/profile.py: 1-3 % of a call).
        registry = self._registry
        if registry is None:
            registry = self._registry = self.admin_site._registry
        return len(registry) != self.applied_size

    def wants(self, model: type[models.Model]) -> bool:
        if is_never_exposed(model):
            return False
        if self.labels is None:
            return not is_excluded_by_default(model) and model._meta.label_lower not in self.claimed
        return model._meta.label_lower in self.labels

    def exposed_labels(self) -> set[str]:
        """Labels of the models this call has exposed so far."""
        return {m._meta.label_lower for m in self.seen if self.wants(m)}

    def shared_with(self, later: AdminBridge) -> str | None:
        """What ``later``, another register_admin() of the same admin site, would expose a
        second time (for a message), or None. Like ``AdminSite.register`` refusing a model
        registered twice: each model of an admin site is bridged by one call, with its options;
        a call without ``models=`` takes the models the others name no more than once."""
        if self.labels is None and later.labels is None:
            return "every model (neither call names models=)"
        if later.labels is None:
            return None
        # A call without models= that already ran has exposed what it found; the rest is free.
        shared = later.labels & (self.exposed_labels() if self.labels is None else self.labels)
        return ", ".join(sorted(shared)) or None

    def make_room(self, later: AdminBridge) -> None:
        """Keep the models ``later`` names out of this call without ``models=``, or the models
        this call names out of ``later`` (once ``shared_with`` found nothing shared)."""
        if self.labels is None and later.labels is not None:
            self.claimed |= later.labels
        elif later.labels is None and self.labels is not None:
            later.claimed |= self.labels


def audience_hooks(model_mcp: ModelMCP[Any]) -> list[str]:
    """The hooks and options by which ``model_mcp`` chooses its own audience (who sees which
    rows) rather than the default one: what an admin action's rows may disagree with."""
    hooks = [
        name
        for name in AUDIENCE_HOOKS
        if getattr(type(model_mcp), name) is not getattr(ModelMCP, name)
    ]
    return [*hooks, "read_scopes"] if model_mcp.read_scopes else hooks


def model_labels(models_option: Any) -> frozenset[str] | None:
    """``models=`` of register_admin (model classes or "app_label.Model" labels), as lower-case
    labels; mcp_django's own models are refused here, at configuration time."""
    if models_option is None:
        return None
    if isinstance(models_option, (str, ModelBase)):
        models_option = [models_option]
    labels: set[str] = set()
    for item in models_option:
        if isinstance(item, ModelBase):
            model = cast("type[models.Model]", item)
            refuse_own_model(model)
            labels.add(model._meta.label_lower)
        elif isinstance(item, str) and item.count(".") == 1:
            if item.split(".")[0] in NEVER_EXPOSED_APPS:
                raise ImproperlyConfigured(
                    f"{item} is one of mcp_django's own models: it cannot be exposed over MCP."
                )
            labels.add(item.lower())
        else:
            raise ImproperlyConfigured(
                "register_admin(models=...) takes model classes or 'app_label.Model' labels, not "
                f"{item!r}."
            )
    return frozenset(labels)
