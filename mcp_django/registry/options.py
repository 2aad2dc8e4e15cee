"""``ModelMCP``: how one Django model is exposed over MCP, like ``ModelAdmin`` for the admin.

Usage::

    @site.register(Book)
    class BookMCP(ModelMCP):
        fields = ["title", "author", "isbn", "published"]
        search_fields = ["title", "author__name"]
        tools = ["search", "get", "create", "update"]

A registered model becomes a resource template ``django://<app_label>/<name>/{pk}``, its rows
(those ``get_queryset(request)`` returns) are listed in ``resources/list``, and the opted-in
tools read and write through a DRF serializer, checking the user's Django permissions on every
call and every row.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import cached_property, reduce
from operator import or_
from typing import TYPE_CHECKING, Any, Generic, cast

import orjson
from asgiref.sync import sync_to_async
from django.apps import apps
from django.core import checks
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models, transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from jsonschema import Draft202012Validator
from rest_framework import serializers
from typing_extensions import TypeVar

from ..auth.scopes import missing_scopes
from ..conf import mcp_settings
from ..db import in_healthy_thread
from ..protocol.errors import InvalidParamsError
from ..protocol.pagination import decode_cursor, encode_cursor
from ..server import sizing
from ..server.context import Completions
from ..server.entries import TASK_SUPPORT, TaskSupport, ToolEntry, with_task_support
from .functions import TOOL_NAME_RE
from .schemas import (
    ISODurationField,
    argument_error,
    error_message,
    invalid_arguments,
    nullable,
    pk_schema,
    serializer_schema,
)

if TYPE_CHECKING:
    from ..server.context import Context
    from ..server.entries import ServedSite

logger = logging.getLogger(__name__)

GENERATED_TOOLS = ("search", "get", "create", "update", "delete")
#: Completion values one answer carries (the spec's maximum).
COMPLETION_PAGE = 100

#: The model a ModelMCP exposes: ``class BookMCP(ModelMCP[Book])`` types ``self.model`` and
#: ``get_queryset``; a plain ``ModelMCP`` subclass means any model (the default).
M = TypeVar("M", bound=models.Model, default=models.Model)


def uri_scheme() -> str:
    """The scheme of model resource URIs (``MCP_DJANGO["MODEL_URI_SCHEME"]``, "django" by
    default)."""
    return str(mcp_settings.model_uri_scheme)


class ModelMCPChecks:
    """System checks for a ``ModelMCP``; each ``_check_*`` returns a list of errors."""

    def check(self, model_mcp: ModelMCP[Any]) -> list[checks.CheckMessage]:
        return [
            *self._check_fields(model_mcp, "fields"),
            *self._check_fields(model_mcp, "exclude"),
            *self._check_fields(model_mcp, "filter_fields"),
            *self._check_lookups(model_mcp, "search_fields"),
            *self._check_lookups(model_mcp, "ordering"),
            *self._check_tools(model_mcp),
            *self._check_task_tools(model_mcp),
        ]

    def _error(self, model_mcp: ModelMCP[Any], msg: str, hint: str, id: str) -> checks.Error:
        return checks.Error(msg, hint=hint, obj=model_mcp.__class__, id=id)

    def _check_fields(self, model_mcp: ModelMCP[Any], attr: str) -> list[checks.CheckMessage]:
        value = getattr(model_mcp, attr)
        if value is None or value == "__all__":
            return []
        if not isinstance(value, (list, tuple)):
            return [
                self._error(
                    model_mcp,
                    f"'{attr}' must be a list or tuple.",
                    "Use a list of field names.",
                    "mcp_django.E101",
                )
            ]
        errors: list[checks.CheckMessage] = []
        for name in value:
            try:
                model_mcp.opts.get_field(name)
            except FieldDoesNotExist:
                errors.append(
                    self._error(
                        model_mcp,
                        f"'{attr}' refers to {name!r}, which is not a field of "
                        f"{model_mcp.opts.label}.",
                        f"Fields of {model_mcp.opts.label}: "
                        f"{', '.join(f.name for f in model_mcp.opts.get_fields())}.",
                        "mcp_django.E102",
                    )
                )
        return errors

    def _check_lookups(self, model_mcp: ModelMCP[Any], attr: str) -> list[checks.CheckMessage]:
        value = getattr(model_mcp, attr) or []
        if not isinstance(value, (list, tuple)):
            return [
                self._error(
                    model_mcp,
                    f"'{attr}' must be a list or tuple.",
                    "Use a list of field lookups.",
                    "mcp_django.E101",
                )
            ]
        errors: list[checks.CheckMessage] = []
        for lookup in value:
            path = str(lookup).lstrip("-^=@").split("__")
            model = model_mcp.model
            for part in path:
                try:
                    field = model._meta.get_field(part)
                except FieldDoesNotExist:
                    if part in ("pk",) or (
                        part == path[-1] and part in ("iexact", "icontains", "istartswith", "exact")
                    ):
                        break
                    errors.append(
                        self._error(
                            model_mcp,
                            f"'{attr}' refers to {lookup!r}, which does not resolve on "
                            f"{model_mcp.opts.label}.",
                            "Use field names, following relations with '__'.",
                            "mcp_django.E103",
                        )
                    )
                    break
                if field.is_relation and field.related_model is not None:
                    model = field.related_model
        return errors

    def _check_tools(self, model_mcp: ModelMCP[Any]) -> list[checks.CheckMessage]:
        errors: list[checks.CheckMessage] = []
        for tool in model_mcp.tools:
            if tool not in GENERATED_TOOLS:
                errors.append(
                    self._error(
                        model_mcp,
                        f"'tools' has {tool!r}, which is not a generated tool.",
                        f"Choose from {', '.join(GENERATED_TOOLS)}.",
                        "mcp_django.E104",
                    )
                )
        return errors

    def _check_task_tools(self, model_mcp: ModelMCP[Any]) -> list[checks.CheckMessage]:
        value = model_mcp.task_tools
        if value == "__all__":
            return []
        if not isinstance(value, dict):
            return [
                self._error(
                    model_mcp,
                    "'task_tools' must be a dict or '__all__'.",
                    'Map generated tools to "optional" or "required", e.g. {"update": "optional"}.',
                    "mcp_django.E106",
                )
            ]
        errors: list[checks.CheckMessage] = []
        for tool, support in value.items():
            if support not in TASK_SUPPORT:
                errors.append(
                    self._error(
                        model_mcp,
                        f"'task_tools' gives {tool!r} the value {support!r}.",
                        f"Use one of {', '.join(map(repr, TASK_SUPPORT))}.",
                        "mcp_django.E106",
                    )
                )
            if tool not in model_mcp.tools:
                errors.append(
                    self._error(
                        model_mcp,
                        f"'task_tools' names {tool!r}, which is not one of the tools in 'tools'.",
                        f"Add {tool!r} to 'tools', or leave it out of 'task_tools'.",
                        "mcp_django.E107",
                    )
                )
        return errors


class ModelMCP(Generic[M]):
    """Options and hooks for exposing one model. Subclass it and register with the site."""

    #: Fields read and written by the generated serializer: a list, or None for all.
    fields: list[str] | tuple[str, ...] | str | None = None
    #: Fields left out of the generated serializer.
    exclude: list[str] | tuple[str, ...] | None = None
    #: Fields clients read but may not write.
    read_only_fields: list[str] | tuple[str, ...] = ()
    #: Lookups matched (icontains) by the ``search`` tool and by completion of ``{pk}``.
    search_fields: list[str] | tuple[str, ...] = ()
    #: Orderings the ``search`` tool accepts (the first is its default).
    ordering: list[str] | tuple[str, ...] | None = None
    #: Exact-match filters the ``search`` tool accepts.
    filter_fields: list[str] | tuple[str, ...] = ()
    #: A DRF ``ModelSerializer`` of your own, instead of one built from ``fields``.
    serializer_class: type[serializers.ModelSerializer] | None = None
    #: Generated tools to offer: any of "search", "get", "create", "update", "delete".
    tools: list[str] | tuple[str, ...] = ()
    #: Generated tools that may run as durable tasks (2026-07-28 tasks extension), like
    #: ``{"update": "optional"}`` ("required": only as a task), or "__all__" for every tool
    #: "optional".
    task_tools: dict[str, str] | str = {}
    #: The ``<name>`` in ``django://<app_label>/<name>/{pk}``; the model name by default.
    uri_name: str | None = None
    #: Relations to fetch with each listed row, so that ``str(obj)`` costs no extra query.
    list_select_related: list[str] | tuple[str, ...] = ()
    #: Upper bound (and default) of the ``search`` tool's ``limit``.
    search_limit: int = 50
    #: The start of the generated tools' names, ``<tool_prefix>_search`` and so on; None:
    #: ``<app_label>_<name>``. Shorten it when hosted clients refuse the names (64 characters).
    tool_prefix: str | None = None
    #: The description of the resource template (default: "One <verbose name> by primary key.").
    description: str | None = None
    #: How long 2026-07-28 clients may keep a row they read, in ms (None: READ_CACHE_TTL_MS).
    cache_ttl_ms: int | None = None
    #: OAuth scopes a token needs to read rows (list, read, search, get) and to write them.
    read_scopes: list[str] | tuple[str, ...] = ()
    #: OAuth scopes a token needs, besides ``read_scopes``, for the create, update and delete tools.
    write_scopes: list[str] | tuple[str, ...] = ()
    checks_class = ModelMCPChecks

    def __init__(self, model: type[M], site: ServedSite) -> None:
        self.model = model
        self.opts = model._meta
        self.site = site
        self.name = self.uri_name or self.opts.model_name
        self._generated_tools: list[ModelTool] | None = None
        self._generated_serializer: type[serializers.ModelSerializer] | None = None

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}: model={self.opts.label} site={self.site!r}>"

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return self.checks_class().check(self)

    # -- hooks you may override ---------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[M]:
        """Rows this request may see; every read, list, search and write starts here."""
        return self.model._default_manager.get_queryset()

    def get_related_queryset(
        self, request: HttpRequest, field: models.Field[Any, Any]
    ) -> QuerySet[Any]:
        """Rows a foreign key, one-to-one or many-to-many argument (``field``) may point at,
        like the admin's ``formfield_for_foreignkey``: the related model's ``get_queryset`` where
        it is registered on this site, else its default manager; ``limit_choices_to`` applies.

        A key outside it is refused exactly as a key that does not exist.
        """
        related = cast("type[models.Model]", field.related_model)
        mcps = self.site.get_model_mcps()
        registered = next((m for m in mcps if isinstance(m, ModelMCP) and m.model is related), None)
        if registered is not None:
            queryset: QuerySet[Any] = registered.get_queryset(request)
        else:
            queryset = related._default_manager.get_queryset()
        limit = field.get_limit_choices_to()  # type: ignore[attr-defined]
        return queryset.complex_filter(limit) if limit else queryset

    def get_serializer(
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> serializers.ModelSerializer:
        """The serializer that writes rows for ``request``: related keys limited to the rows
        :meth:`get_related_queryset` gives, whatever the serializer's own querysets."""
        serializer = self.get_serializer_class()(*args, context={"request": request}, **kwargs)
        for name, serializer_field in serializer.fields.items():
            relation = getattr(serializer_field, "child_relation", serializer_field)
            if serializer_field.read_only or not isinstance(relation, serializers.RelatedField):
                continue
            if relation.queryset is None or "." in (serializer_field.source or name):
                continue
            try:
                field = self.opts.get_field(serializer_field.source or name)
            except FieldDoesNotExist:
                continue
            if not field.is_relation or field.auto_created:  # reverse relations take no argument
                continue
            visible = self.get_related_queryset(request, cast("models.Field[Any, Any]", field))
            # A subquery, not "&": a get_queryset() with distinct() does not combine with "&".
            relation.queryset = relation.queryset.filter(pk__in=visible.values("pk"))
        return serializer

    def _has_perm(self, request: HttpRequest, action: str) -> bool:
        user = getattr(request, "user", None)
        return bool(
            user is not None
            and user.has_perm(f"{self.opts.app_label}.{action}_{self.opts.model_name}")
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Whether the user may read rows: Django's view or change permission on the model."""
        return self._has_perm(request, "view") or self._has_perm(request, "change")

    def has_read_scopes(self, request: HttpRequest) -> bool:
        """Whether the request's token (if any) carries ``read_scopes``."""
        return not missing_scopes(request, tuple(self.read_scopes))

    # The model's template and rows as one entry of the site's gate (``handlers.gate``): listed,
    # read, completed and subscribed to with view permission and ``read_scopes``.

    @property
    def scopes(self) -> tuple[str, ...]:
        """OAuth scopes a token needs to see this model's template and rows."""
        return tuple(self.read_scopes)

    def has_permission(self, request: HttpRequest) -> bool:
        """Whether the user may see this model at all (rows are then filtered one by one)."""
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Whether the user may use the ``create`` tool: Django's add permission."""
        return self._has_perm(request, "add")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Whether the user may use the ``update`` tool (on ``obj``): Django's change permission."""
        return self._has_perm(request, "change")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Whether the user may use the ``delete`` tool (on ``obj``): Django's delete permission."""
        return self._has_perm(request, "delete")

    def get_task_support(self, action: str) -> TaskSupport:
        """Whether the generated tool ``action`` may run as a task: its ``task_tools`` value."""
        if self.task_tools == "__all__":
            return "optional"
        support = (
            self.task_tools.get(action, "forbidden")
            if isinstance(self.task_tools, dict)
            else "forbidden"
        )
        # A wrong value is reported by check() (E106); until fixed, the tool is called plainly.
        return next((known for known in TASK_SUPPORT if known == support), "forbidden")

    def get_serializer_class(self) -> type[serializers.ModelSerializer]:
        """The serializer that reads and writes rows: ``serializer_class``, or one built once."""
        if self.serializer_class is not None:
            return self.serializer_class
        # Built once: a new class per call would make DRF map the model's fields every time.
        if self._generated_serializer is None:
            self._generated_serializer = self.build_serializer_class()
        return self._generated_serializer

    def build_serializer_class(self) -> type[serializers.ModelSerializer]:
        """A ModelSerializer over ``fields`` / ``exclude`` / ``read_only_fields``."""
        meta_attrs: dict[str, Any] = {
            "model": self.model,
            "read_only_fields": tuple(self.read_only_fields),
        }
        if self.exclude:
            meta_attrs["exclude"] = tuple(self.exclude)
        else:
            pk_name = self.opts.pk.name
            meta_attrs["fields"] = (
                "__all__"
                if self.fields in (None, "__all__")
                else tuple(self.fields if pk_name in self.fields else [pk_name, *self.fields])
            )
        meta = type("Meta", (), meta_attrs)
        # Durations travel as ISO 8601, as their schema says (DRF's default is Django's form).
        mapping = {
            **serializers.ModelSerializer.serializer_field_mapping,
            models.DurationField: ISODurationField,
        }
        attrs = {"Meta": meta, "serializer_field_mapping": mapping}
        return type(f"{self.model.__name__}MCPSerializer", (serializers.ModelSerializer,), attrs)

    def get_resource_name(self, obj: Any) -> str:
        """The name of a row in ``resources/list``: ``str(obj)``."""
        return str(obj)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], term: str
    ) -> QuerySet[Any]:
        """Filter ``queryset`` by ``term`` (``icontains`` on any of ``search_fields``)."""
        if not term or not self.search_fields:
            return queryset
        lookups = [Q(**{f"{f}__icontains": term}) for f in self.search_fields]
        return queryset.filter(reduce(or_, lookups)).distinct()

    # -- URIs -----------------------------------------------------------------------------

    @property
    def uri_template(self) -> str:
        return f"{uri_scheme()}://{self.opts.app_label}/{self.name}/{{pk}}"

    def uri_for(self, obj: Any) -> str:
        return f"{uri_scheme()}://{self.opts.app_label}/{self.name}/{obj.pk}"

    def template_definition(self) -> dict[str, Any]:
        definition = {
            "uriTemplate": self.uri_template,
            "name": f"{self.opts.app_label}.{self.name}",
            "title": str(self.opts.verbose_name).capitalize(),
            "description": self.description or f"One {self.opts.verbose_name} by primary key.",
            "mimeType": "application/json",
        }
        return definition

    def resource_definition(self, obj: Any) -> dict[str, Any]:
        return {
            "uri": self.uri_for(obj),
            "name": self.get_resource_name(obj),
            "mimeType": "application/json",
        }

    # -- sync work (runs in Django's thread) -------------------------------------------------

    def coerce_pk(self, value: Any) -> Any:
        """``value`` as a primary key the database can compare, or None (then no row has it)."""
        try:
            return db_value(self.opts.pk, value)
        except DjangoValidationError:
            return None

    def get_object(self, request: HttpRequest, pk: Any, permission: str = "view") -> Any:
        """The row ``pk`` if this request may see it and hold ``permission`` on it, else None.

        Missing and forbidden rows give the same answer, so nothing leaks.
        """
        pk = self.coerce_pk(pk)
        if pk is None or not self.has_read_scopes(request):
            return None
        obj = self.get_queryset(request).filter(pk=pk).first()
        if obj is None or not self.has_view_permission(request, obj):
            return None
        if permission == "change" and not self.has_change_permission(request, obj):
            return None
        if permission == "delete" and not self.has_delete_permission(request, obj):
            return None
        return obj

    def serialize(self, obj: Any) -> dict[str, Any]:
        """One row as the JSON a client reads."""
        return dict(self.get_serializer_class()(obj).data)

    def list_page(
        self, request: HttpRequest, after: Any, limit: int
    ) -> list[tuple[Any, dict[str, Any]]]:
        """Up to ``limit`` ``(pk, resource entry)`` pairs with pk greater than ``after``: keyset,
        not offset, so a deep page costs what the first one costs."""
        if not self.has_read_scopes(request) or not self.has_view_permission(request):
            return []
        queryset = self.get_queryset(request).order_by("pk")
        if self.list_select_related:
            queryset = queryset.select_related(*self.list_select_related)
        if after is not None:
            queryset = queryset.filter(pk__gt=after)
        return [(obj.pk, self.resource_definition(obj)) for obj in queryset[:limit]]

    async def completions(
        self, ctx: Context, argument: str, value: str, context: dict[str, str]
    ) -> Completions:
        """Primary keys of rows this request may see, for ``{pk}`` (counting stops past a page)."""
        if argument != "pk":
            return Completions([], 0)
        values = await sync_to_async(self.complete_pk)(
            cast("HttpRequest", ctx.request), value, COMPLETION_PAGE + 1
        )
        return Completions(values, None if len(values) > COMPLETION_PAGE else len(values))

    def complete_pk(self, request: HttpRequest, value: str, limit: int = 100) -> list[str]:
        if not self.has_read_scopes(request) or not self.has_view_permission(request):
            return []
        queryset = self.get_queryset(request)
        matches = Q()
        if value:
            matches = Q(pk__startswith=value)
            for field in self.search_fields:
                matches |= Q(**{f"{field}__icontains": value})
        return [
            str(pk)
            for pk in queryset.filter(matches)
            .order_by("pk")
            .values_list("pk", flat=True)
            .distinct()[:limit]
        ]

    # -- generated tools --------------------------------------------------------------------

    def get_generated_tools(self) -> list[ModelTool]:
        # Built once per ModelMCP: tools/list and every tools/call look them up.
        if self._generated_tools is None:
            self._generated_tools = [
                ModelTool(self, action) for action in self.tools if action in GENERATED_TOOLS
            ]
        return self._generated_tools

    def field_schemas(self, *, writable: bool, output: bool = False) -> dict[str, Any]:
        """The serializer's fields as JSON Schema: what a client may write (``writable``), or
        every field it may read, as sent in (``output=False``) or as returned."""
        return serializer_schema(self.get_serializer_class()(), writable=writable, output=output)


def _safe_name(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", value)


class ModelTool(ToolEntry):
    """A generated tool (search, get, create, update, delete) of one ``ModelMCP``."""

    kind = "tool"
    streams = False
    icons = None
    meta = None

    def __init__(self, model_mcp: ModelMCP[Any], action: str) -> None:
        self.model_mcp = model_mcp
        self.action = action
        self.task_support = model_mcp.get_task_support(action)
        opts = model_mcp.opts
        prefix = model_mcp.tool_prefix or f"{opts.app_label}_{model_mcp.name}"
        self.name = _safe_name(f"{prefix}_{action}")
        if not TOOL_NAME_RE.match(self.name):
            raise ValueError(f"Generated tool name {self.name!r} is not a valid tool name")
        verbose, plural = str(opts.verbose_name), str(opts.verbose_name_plural)
        self.title = {
            "search": f"Search {plural}",
            "get": f"Get one {verbose}",
            "create": f"Create one {verbose}",
            "update": f"Change one {verbose}",
            "delete": f"Delete one {verbose}",
        }[action]
        self.description = {
            "search": f"Search {plural}"
            + (f" by {', '.join(model_mcp.search_fields)}" if model_mcp.search_fields else "")
            + ".",
            "get": f"Get one {verbose} by primary key.",
            # "one", not "a": "a order", "an user" read badly, and a verbose name says nothing
            # of how it sounds.
            "create": f"Create one {verbose}.",
            "update": f"Change fields of one {verbose} (only the fields given).",
            "delete": f"Delete one {verbose}.",
        }[action]
        self.annotations = {
            "search": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
            "get": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
            "create": {
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": False,
            },
            "update": {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": True,
                "openWorldHint": False,
            },
            "delete": {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": True,
                "openWorldHint": False,
            },
        }[action]

    # -- schemas ------------------------------------------------------------------------------

    def _pk_schema(self) -> dict[str, Any]:
        return {
            **pk_schema(self.model_mcp.model),
            "description": f"Primary key of the {self.model_mcp.opts.verbose_name}.",
        }

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        mm = self.model_mcp
        if self.action == "search":
            properties: dict[str, Any] = {
                "query": {
                    "type": "string",
                    "description": "Text matched against "
                    + (", ".join(mm.search_fields) or "nothing"),
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": mm.search_limit,
                    "default": min(20, mm.search_limit),
                },
                "cursor": {"type": "string", "description": "nextCursor of a previous page."},
            }
            if mm.ordering:
                properties["ordering"] = {
                    "type": "string",
                    "enum": list(mm.ordering),
                    "default": mm.ordering[0],
                }
            fields = mm.field_schemas(writable=False)["properties"]
            for name in mm.filter_fields:
                # A filter is sent, whatever the field: readOnly would tell clients not to send it.
                schema = fields.get(name, {"type": "string"})
                properties[name] = {k: v for k, v in schema.items() if k != "readOnly"}
            return {"type": "object", "properties": properties, "additionalProperties": False}
        if self.action in ("get", "delete"):
            return {
                "type": "object",
                "properties": {"pk": self._pk_schema()},
                "required": ["pk"],
                "additionalProperties": False,
            }
        writable = mm.field_schemas(writable=True)
        if self.action == "create":
            return {**writable, "additionalProperties": False}
        return {
            "type": "object",
            "properties": {"pk": self._pk_schema(), **writable["properties"]},
            "required": ["pk"],
            "additionalProperties": False,
        }

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        item = self.model_mcp.field_schemas(writable=False, output=True)
        item = {"type": "object", "properties": item["properties"]}
        if self.action == "search":
            page = {
                "items": {"type": "array", "items": item},
                "nextCursor": nullable({"type": "string"}),
            }
            return {"type": "object", "properties": page, "required": ["items"]}
        if self.action == "delete":
            return {
                "type": "object",
                "properties": {"deleted": {"type": "boolean"}, "pk": self._pk_schema()},
                "required": ["deleted"],
            }
        return item

    def definition(self) -> dict[str, Any]:
        definition = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }
        return with_task_support(definition, self.task_support)

    # -- permission -------------------------------------------------------------------------

    @property
    def scopes(self) -> tuple[str, ...]:
        mm = self.model_mcp
        return (
            tuple(mm.read_scopes)
            if self.action in ("search", "get")
            else tuple(mm.read_scopes) + tuple(mm.write_scopes)
        )

    def has_permission(self, request: HttpRequest) -> bool:
        """Whether the user holds the model permission this action needs (view for reads)."""
        mm = self.model_mcp
        if self.action in ("search", "get"):
            return mm.has_view_permission(request)
        if self.action == "create":
            return mm.has_add_permission(request)
        if self.action == "update":
            return mm.has_change_permission(request)
        return mm.has_delete_permission(request)

    # -- calls --------------------------------------------------------------------------------

    async def call(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        # The engine always gives tools the request (only unit tests build contexts without one).
        return await sync_to_async(in_healthy_thread(self._call), thread_sensitive=True)(
            arguments, cast("HttpRequest", ctx.request)
        )

    def _result(self, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "content": [{"type": "text", "text": orjson.dumps(data, default=str).decode()}],
            "structuredContent": data,
        }

    def _error(self, text: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": text}], "isError": True}

    def _not_found(self, pk: Any) -> dict[str, Any]:
        return self._error(
            f"No {self.model_mcp.opts.verbose_name} with pk {pk!r} (or you may not see it)."
        )

    def _validation_error(self, errors: Any) -> dict[str, Any]:
        lines = []
        for field, messages in (
            errors.items() if isinstance(errors, dict) else [("non_field_errors", errors)]
        ):
            for message in messages if isinstance(messages, list) else [messages]:
                lines.append(f"{field}: {message}")
        return self._error("Invalid data:\n" + "\n".join(lines))

    @cached_property
    def validator(self) -> Any:
        return Draft202012Validator(self.input_schema)

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: Context
    ) -> dict[str, Any] | None:
        """The ``isError`` result :meth:`call` answers to invalid ``arguments``, or None."""
        request = cast("HttpRequest", ctx.request)
        return await sync_to_async(in_healthy_thread(self._check), thread_sensitive=True)(
            arguments, request
        )

    def _check(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any] | None:
        schema_errors = sorted(self.validator.iter_errors(arguments), key=lambda e: list(e.path))
        if schema_errors:
            return self._invalid(schema_errors, arguments, request)
        # A key of the right JSON type may still be no key at all ("not-a-uuid"): a bad argument
        # the caller can fix, said as such, not a row that "does not exist".
        problem = malformed_pk(self.model_mcp.model, arguments["pk"]) if "pk" in arguments else None
        if problem is not None:
            return self._error(invalid_arguments([f"pk: {problem}"]))
        return None

    def _call(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        if not self.is_visible(request):
            # Tools a user may not use are not listed; calling one anyway is refused the same way.
            raise InvalidParamsError(f"Unknown tool: {self.name}")
        invalid = self._check(arguments, request)
        if invalid is not None:
            return invalid
        action: Callable[[dict[str, Any], HttpRequest], dict[str, Any]] = getattr(
            self, f"_{self.action}"
        )
        return action(dict(arguments), request)

    def _invalid(
        self, schema_errors: list[Any], arguments: dict[str, Any], request: HttpRequest
    ) -> dict[str, Any]:
        """Every argument's problem in one answer: the schema's, then (for writes) what the
        serializer says of the arguments the schema let through, so an agent fixes all at once.

        Where the schema can only say that no alternative fits (a decimal given as "3.555", a
        nullable field), the serializer's words are clearer ("no more than 2 decimal places"),
        so such arguments go to the serializer too, and the schema speaks only if it is silent.
        """
        lines = []
        refused = set()
        vague: dict[str, list[Any]] = {}
        for error in schema_errors:
            field = error.path[0] if error.path else None
            if field is None and error.validator == "required":
                field = error.message.split("'")[1] if "'" in error.message else None
            if isinstance(field, str) and error.validator == "anyOf" and len(error.path) == 1:
                vague.setdefault(field, []).append(error)
                continue
            if field is not None:
                refused.add(field)
            lines.append(
                argument_error(error)
                if error.path
                else f"{field or 'arguments'}: {error_message(error)}"
            )
        if "pk" in arguments and "pk" not in refused:
            problem = malformed_pk(self.model_mcp.model, arguments["pk"])
            if problem is not None:
                lines.append(f"pk: {problem}")
        said: set[str] = set()
        if self.action in ("create", "update"):
            rest = {k: v for k, v in arguments.items() if k not in refused and k != "pk"}
            serializer = self.model_mcp.get_serializer(request, data=rest, partial=True)
            if not serializer.is_valid():
                for field, messages in serializer.errors.items():
                    said.add(field)
                    lines.extend(
                        f"{field}: {m}"
                        for m in (messages if isinstance(messages, list) else [messages])
                    )
        for field, errors in vague.items():
            if field not in said:
                lines.extend(f"{field}: {error_message(error)}" for error in errors)
        return self._error(invalid_arguments(lines))

    def _search(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        mm = self.model_mcp
        limit = arguments.pop("limit", min(20, mm.search_limit))
        ordering = arguments.pop("ordering", None) or (mm.ordering[0] if mm.ordering else "pk")
        queryset = mm.get_search_results(
            request, mm.get_queryset(request), arguments.pop("query", "")
        )
        filters = {}
        for name in mm.filter_fields:
            if name in arguments:
                field = mm.opts.get_field(name)
                try:
                    filters[name] = db_value(field, arguments[name])
                except DjangoValidationError as exc:
                    return self._error(f"{name}: {' '.join(exc.messages)}")
                if field.is_relation and not field.auto_created:
                    # A related row the user may not see matches nothing, as one that does not
                    # exist.
                    related = mm.get_related_queryset(
                        request, cast("models.Field[Any, Any]", field)
                    )
                    related_model = cast("type[models.Model]", field.related_model)
                    target = getattr(field, "target_field", None) or related_model._meta.pk
                    filters[f"{name}__in"] = related.values(target.attname)
        queryset = queryset.filter(**filters)
        try:
            keyset: KeysetOrdering | None = KeysetOrdering(mm.opts, ordering)
        except (ValueError, FieldDoesNotExist):
            keyset = None  # related or nullable ordering: page by offset instead
        offset = 0
        if "cursor" in arguments:
            # A cursor comes back from the client: anything in it is checked like an argument.
            try:
                position = decode_cursor(arguments.pop("cursor"))
                if keyset is not None:
                    queryset = queryset.filter(keyset.after(position))
                else:
                    offset = position["o"]
                    if (
                        not isinstance(offset, int)
                        or isinstance(offset, bool)
                        or not 0 <= offset <= MAX_OFFSET
                    ):
                        raise ValueError(offset)
            except (InvalidParamsError, DjangoValidationError, KeyError, TypeError, ValueError):
                return self._error(
                    "cursor: invalid cursor (it belongs to a search with the same ordering)"
                )
        queryset = queryset.order_by(*(keyset.order_by if keyset is not None else [ordering, "pk"]))
        if mm.list_select_related:
            queryset = queryset.select_related(*mm.list_select_related)
        rows = list(queryset[offset : offset + limit + 1])
        serializer = mm.get_serializer_class()(rows[:limit], many=True)

        def cursor_after(index: int) -> str:
            return encode_cursor(
                keyset.position(rows[index]) if keyset is not None else {"o": offset + index + 1}
            )

        # A page too large for the client's model keeps its first items and a cursor right after
        # the last one kept (sizing.fit_page): nothing is skipped, nothing repeated.
        return sizing.fit_page(
            list(serializer.data),
            cursor_after(limit - 1) if len(rows) > limit else None,
            cursor_after,
            lambda items, cursor: self._result({"items": items, "nextCursor": cursor}),
            mcp_settings.max_result_chars,
        )[0]

    def _get(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        obj = self.model_mcp.get_object(request, arguments["pk"])
        if obj is None:
            return self._not_found(arguments["pk"])
        return self._result(self.model_mcp.serialize(obj))

    def _create(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        serializer = self.model_mcp.get_serializer(request, data=arguments)
        if not serializer.is_valid():
            return self._validation_error(serializer.errors)
        with transaction.atomic():
            obj = serializer.save()
            log_change(request, obj, "add", "Added through MCP.")
        return self._result(dict(serializer.data))

    def _update(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        pk = arguments.pop("pk")
        obj = self.model_mcp.get_object(request, pk, permission="change")
        if obj is None:
            return self._not_found(pk)
        serializer = self.model_mcp.get_serializer(request, obj, data=arguments, partial=True)
        if not serializer.is_valid():
            return self._validation_error(serializer.errors)
        changed = changed_fields(obj, serializer.validated_data)
        if not changed:
            return self._result(dict(serializer.data))  # nothing to save, nothing for the history
        with transaction.atomic():
            obj = serializer.save()
            log_change(request, obj, "change", f"Changed {', '.join(changed)} through MCP.")
        return self._result(dict(serializer.data))

    def _delete(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        pk = arguments["pk"]
        obj = self.model_mcp.get_object(request, pk, permission="delete")
        if obj is None:
            return self._not_found(pk)
        with transaction.atomic():
            log_change(request, obj, "delete", "Deleted through MCP.")
            obj.delete()
        return self._result({"deleted": True, "pk": pk})


class KeysetOrdering:
    """Page through ``order_by(field, pk)`` by position, not offset: page N costs what page 1
    costs, and rows added meanwhile neither repeat nor vanish."""

    def __init__(self, opts: Any, ordering: str) -> None:
        self.pk = opts.pk
        self.descending = ordering.startswith("-")
        name = ordering.lstrip("-")
        if "__" in name:
            raise ValueError(f"ordering {ordering!r} follows a relation")
        self.field = None if name == "pk" else opts.get_field(name)
        if self.field is not None and self.field.null:
            # NULLs sort differently per database; a nullable key cannot be a reliable keyset.
            raise ValueError(
                f"ordering on nullable field {name!r} is not supported by keyset pagination"
            )
        # The column compared after "pk" (only used when ordering on a field).
        self.name: str = "pk" if self.field is None else self.field.attname
        self.order_by = ["pk"] if self.field is None else [ordering.replace(name, self.name), "pk"]

    def position(self, obj: Any) -> dict[str, Any]:
        position: dict[str, Any] = {"pk": obj.pk if isinstance(obj.pk, int) else str(obj.pk)}
        if self.field is not None:
            value = getattr(obj, self.name)
            position["v"] = value if isinstance(value, (int, float, str, bool)) else str(value)
        return position

    def after(self, position: dict[str, Any]) -> Q:
        """Rows after ``position``; a value the columns cannot hold raises ValidationError."""
        pk = db_value(self.pk, position["pk"])
        if self.field is None:
            return Q(pk__gt=pk)
        value = db_value(self.field, position["v"])
        beyond = Q(**{f"{self.name}__lt" if self.descending else f"{self.name}__gt": value})
        return beyond | Q(**{self.name: value, "pk__gt": pk})


#: The deepest offset a cursor may ask for; offset paging is the fallback for orderings that
#: keyset paging cannot follow, and nobody pages a billion rows by hand.
MAX_OFFSET = 10**9


def db_value(field: Any, value: Any) -> Any:
    """``value`` as the Python value of ``field`` (the target's, for a relation), checked
    against the field's validators, including the database's integer range: a value a client
    sends for a lookup fails here, as ValidationError, not in the database driver."""
    target = field
    if field.is_relation:
        target = getattr(field, "target_field", None) or field.related_model._meta.pk
    if value is None or isinstance(value, (dict, list)):
        raise DjangoValidationError("Enter a single value.")
    if (
        isinstance(value, float)
        and not value.is_integer()
        and isinstance(target, models.IntegerField)
    ):
        raise DjangoValidationError("Enter a whole number.")
    try:
        python = target.to_python(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DjangoValidationError(str(exc)) from None
    target.run_validators(python)
    if isinstance(python, int) and not isinstance(python, bool) and not -(2**63) <= python < 2**63:
        raise DjangoValidationError("Ensure this value fits a 64-bit integer.")
    return python


def malformed_pk(model: type[models.Model], value: Any) -> str | None:
    """What makes ``value`` no primary key of ``model`` ("“x” is not a valid UUID."), or None."""
    try:
        db_value(model._meta.pk, value)
    except DjangoValidationError as exc:
        return " ".join(exc.messages)
    return None


def changed_fields(obj: Any, data: dict[str, Any]) -> list[str]:
    """The names in ``data`` whose value differs from ``obj``'s (many-to-many by members)."""
    changed = []
    for name, value in data.items():
        try:
            field = obj._meta.get_field(name)
        except FieldDoesNotExist:
            changed.append(name)  # a serializer-only field: assume it does something
            continue
        if field.many_to_many:
            current = {o.pk for o in getattr(obj, name).all()} if obj.pk is not None else set()
            if current != {getattr(v, "pk", v) for v in value}:
                changed.append(name)
        elif getattr(obj, name) != value:
            changed.append(name)
    return sorted(changed)


def log_change(request: HttpRequest, obj: Any, action: str, message: str) -> None:
    """Write the admin's ``LogEntry`` so the change shows in the object's admin history."""
    if not apps.is_installed("django.contrib.admin"):
        return
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return
    # Optional app, checked above: importing admin's models without django.contrib.admin installed
    # raises.
    from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry

    flag = {"add": ADDITION, "change": CHANGE, "delete": DELETION}[action]
    LogEntry.objects.log_actions(user.pk, [obj], flag, change_message=message, single_object=True)
