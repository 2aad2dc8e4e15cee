"""Plain Python functions as MCP tools, resources, resource templates and prompts.

Schemas come from type hints through pydantic (JSON Schema 2020-12, the dialect MCP assumes),
descriptions from docstrings. Sync functions run off the event loop in Django's thread, so they
may use the ORM freely.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import is_dataclass
from typing import Any, cast, get_args, get_origin, get_type_hints
from urllib.parse import unquote

import orjson
import uritemplate
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model, QuerySet
from django.http import Http404
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)

from ..conf import mcp_settings
from ..db import in_healthy_thread
from ..exceptions import ClientRequestError, ToolError
from ..extensions.mcp_apps import UI
from ..protocol.errors import (
    InvalidParamsError,
    MCPError,
    ResourceNotFoundError,
)
from ..protocol.modern import mcp_header_params
from ..server.content import CONTENT_TYPES, EmbeddedResource, Message, ToolResult, to_content_block
from ..server.context import Completions, Context, current_context
from ..server.entries import (
    TASK_SUPPORT,
    PromptEntry,
    ResourceEntry,
    TaskSupport,
    TemplateEntry,
    ToolEntry,
    with_task_support,
)
from .labels import explicit_hints, humanized
from .schemas import (
    argument_error,
    ecma_patterns,
    invalid_arguments,
    result_schema,
    unresolvable_refs,
)

logger = logging.getLogger(__name__)

# SEP-986: tool names are 1-128 characters of A-Z a-z 0-9 _ - . (no spaces or commas).
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")

Completer = Callable[..., Any]


def _is_tool_error(exc: BaseException) -> bool:
    # Django data errors (a form or model's ValidationError, a missing row) are the caller's
    # fault, told back to it like a ToolError, never an internal failure.
    return isinstance(
        exc, (ToolError, ClientRequestError, DjangoValidationError, ObjectDoesNotExist, Http404)
    )


def data_error_message(exc: DjangoValidationError) -> str:
    """A Django ``ValidationError``'s messages, joined readably (``field: message``)."""
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
    return " ".join(exc.messages) or "Invalid data"


def _model_rows(value: Any) -> tuple[type[Model], list[Model], bool] | None:
    """``(model, rows, many)`` when ``value`` is a model instance, or a list, tuple or QuerySet
    of instances of one model; else None."""
    if isinstance(value, Model):
        return type(value), [value], False
    if isinstance(value, QuerySet):
        return value.model, list(value), True
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Model) for v in value):
        model = type(value[0])
        if all(type(v) is model for v in value):
            return model, list(value), True
    return None


def _serialize_rows(value: Any, ctx: Context | None, tool: str) -> Any:
    """Model rows a tool returned, as the site's ``ModelMCP`` for their model reads them.

    A row the caller may not view through that ModelMCP (its queryset, view permission and read
    scopes) never leaks: it is dropped from a list, and a single one is answered as not found.
    A model with no ModelMCP on the site is a bug in the tool, not ``str(instance)``.
    """
    found = _model_rows(value)
    if found is None:
        raise ImproperlyConfigured(f"Tool {tool!r} returned a list mixing models and other values")
    model, rows, many = found
    site = getattr(ctx, "site", None)
    model_mcp = (
        site.get_model_mcp(model) if site is not None and site.is_registered(model) else None
    )
    if model_mcp is None:
        raise ImproperlyConfigured(
            f"Tool {tool!r} returned {model.__name__} rows, but {model.__name__} has no ModelMCP "
            "on "
            "this site: return a dict or a pydantic model, or register a ModelMCP for it"
        )
    request = ctx.request if ctx is not None else None
    visible: list[dict[str, Any]] = []
    if model_mcp.has_read_scopes(request):
        allowed = model_mcp.get_queryset(request).filter(pk__in=[row.pk for row in rows])
        by_pk = {obj.pk: obj for obj in allowed}
        for row in rows:
            obj = by_pk.get(row.pk)
            if obj is not None and model_mcp.has_view_permission(request, obj):
                visible.append(model_mcp.serialize(obj))
    if many:
        return visible
    if not visible:
        raise ToolError(f"{model._meta.verbose_name} not found")
    return visible[0]


def _annotated_model(annotation: Any) -> tuple[type[Model] | None, bool]:
    """The model a return annotation names (``Note``, ``list[Note]``, ``tuple[Note, ...]``,
    ``QuerySet[Note]``) and whether it is many rows; ``(None, False)`` for anything else."""
    if inspect.isclass(annotation) and issubclass(annotation, Model):
        return annotation, False
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, tuple, QuerySet) or (
        inspect.isclass(origin) and issubclass(origin, QuerySet)
    ):
        item = args[0] if args else None
        if (
            inspect.isclass(item)
            and issubclass(item, Model)
            and all(a in (item, ...) for a in args)
        ):
            return item, True
    return None, False


def _returns_rows(value: Any) -> bool:
    """Whether ``value`` is model rows (checked without running a QuerySet's query)."""
    if isinstance(value, (Model, QuerySet)):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and isinstance(value[0], Model)


def _raised_converting_a_lookup_value(exc: BaseException) -> bool:
    """Whether a ``ValueError``/``TypeError`` was raised by a model field converting a value
    for the database (``Note.objects.get(pk="abc")``: "Field 'id' expected a number but got
    'abc'."): the caller's data. Raised anywhere else it may be a bug, so it stays internal."""
    if not isinstance(exc, (ValueError, TypeError)) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith("django.db.models.fields")


async def acall_with_data(func: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """:func:`acall` for a tool, resource or prompt: a value a model field cannot convert is
    the caller's data error, raised as Django's ``ValidationError`` with the field's message."""
    try:
        return await acall(func, kwargs)
    except (ValueError, TypeError) as exc:
        if _raised_converting_a_lookup_value(exc):
            raise DjangoValidationError(str(exc)) from exc
        raise


async def acall(func: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call a sync or async function; sync ones run in Django's thread, off the event loop."""
    if inspect.iscoroutinefunction(func):
        return await func(**kwargs)
    result = await sync_to_async(in_healthy_thread(func), thread_sensitive=True)(**kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def _description(func: Callable[..., Any], given: str | None) -> str:
    if given is not None:
        return given
    return inspect.cleandoc(func.__doc__) if func.__doc__ else ""


def _is_context(annotation: Any) -> bool:
    return inspect.isclass(annotation) and issubclass(annotation, Context)


def _type_hints(func: Callable[..., Any], owner: str) -> dict[str, Any]:
    try:
        return get_type_hints(func, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ImproperlyConfigured(f"Cannot read the type hints of {owner}: {exc}") from exc


def context_parameter(
    func: Callable[..., Any], hints: dict[str, Any], *, by_name: str | None = None
) -> str | None:
    """The parameter that receives the request's :class:`Context`: the one annotated ``Context``
    (tools, resources, prompts and completers alike), or, given ``by_name``, an unannotated
    parameter of that name (completers are often lambdas, which cannot be annotated)."""
    for name in inspect.signature(func).parameters:
        annotation = hints.get(name)
        if _is_context(annotation) or (name == by_name and annotation is None):
            return name
    return None


class Signature:
    """The arguments a function takes from the client, as a pydantic model and JSON Schema."""

    def __init__(self, func: Callable[..., Any], owner: str) -> None:
        self.owner = owner
        hints = _type_hints(func, owner)
        self.context_param = context_parameter(func, hints)
        fields: dict[str, Any] = {}
        for name, param in inspect.signature(func).parameters.items():
            annotation = hints.get(name, Any)
            if name == self.context_param:
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ImproperlyConfigured(
                    f"{owner}: parameter {name!r} must be an ordinary named parameter"
                )
            fields[name] = (annotation, ... if param.default is param.empty else param.default)
        self.names = list(fields)
        self.model: type[BaseModel] = create_model(
            f"{owner}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            **fields,
        )
        self.return_annotation = hints.get("return", inspect.Signature.empty)

    def json_schema(self) -> dict[str, Any]:
        try:
            schema = self.model.model_json_schema()
        except PydanticUserError as exc:  # a parameter type with no JSON Schema form
            raise ImproperlyConfigured(
                f"Cannot describe the parameters of {self.owner} in JSON Schema: {exc}"
            ) from exc
        schema.pop("title", None)
        for name, prop in schema.get("properties", {}).items():
            # pydantic invents a title from the name; it only adds noise for a model.
            if prop.get("title") == name.replace("_", " ").title():
                prop.pop("title")
        schema.setdefault("properties", {})
        return cast(
            "dict[str, Any]", ecma_patterns(schema)
        )  # pydantic copies Python patterns (constr, Field(pattern=)) as they are

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        instance = self.model.model_validate(arguments)
        return {name: getattr(instance, name) for name in self.names}

    def bind(self, kwargs: dict[str, Any], ctx: Context | None) -> dict[str, Any]:
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs


def format_validation_error(exc: ValidationError) -> str:
    """List each argument's problem on its own line, in words an LLM can act on."""
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        lines.append(f"{where}: {error['msg']}")
    return "\n".join(lines)


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _cache_ttl(value: int | None, uri: str) -> int | None:
    """A resource's own ``ttlMs`` for 2026-07-28 clients (None: READ_CACHE_TTL_MS)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ImproperlyConfigured(
            f"Resource {uri!r}: cache_ttl_ms must be a non-negative integer (milliseconds), not "
            f"{value!r}"
        )
    return value


class PermissionGated:
    """Entries a user sees and uses only with the given Django permissions and OAuth scopes."""

    permissions: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    def set_permissions(
        self, permission: str | list[str] | tuple[str, ...] | None, scopes: Any = None
    ) -> None:
        self.permissions = (permission,) if isinstance(permission, str) else tuple(permission or ())
        self.scopes = (scopes,) if isinstance(scopes, str) else tuple(scopes or ())

    def has_permission(self, request: Any) -> bool:
        """Whether the request's user holds ``permissions`` (no query when there are none)."""
        if not self.permissions:
            return True
        user = getattr(request, "user", None)
        return bool(user is not None and user.has_perms(self.permissions))

    #: Completers by argument (prompts) or variable (templates); none for tools and resources.
    complete: dict[str, Completer] = {}
    #: ``complete``, each with its calling convention read once, at registration.
    completers: dict[str, CompleterCall] = {}

    def set_completers(self, complete: dict[str, Completer] | None, owner: str) -> None:
        self.complete = dict(complete or {})
        self.completers = {
            name: CompleterCall(func, f"the completer of {name!r} of {owner}")
            for name, func in self.complete.items()
        }

    async def completions(
        self, ctx: Context, argument: str, value: str, context: dict[str, str]
    ) -> Completions:
        """Values for ``argument`` starting from ``value`` (``completion/complete``)."""
        completer = self.completers.get(argument)
        values = await completer(value, context, ctx) if completer is not None else []
        return Completions(values, len(values))


class FunctionTool(PermissionGated, ToolEntry):
    """A tool backed by a function."""

    kind = "tool"

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        permission: str | list[str] | tuple[str, ...] | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
        sensitive: list[str] | tuple[str, ...] | None = None,
        task: TaskSupport = "forbidden",
        prelude: bool = False,
        ui: UI | None = None,
    ) -> None:
        self.func = func
        self.set_permissions(permission, scopes)
        self.name = name or func.__name__
        #: The site that registered it: its ModelMCPs describe the model rows it returns.
        self.site: Any = None
        #: The model its return annotation names (``-> Note``, ``-> list[Note]``), and whether many.
        self.result_model: type[Model] | None = None
        self.result_many = False
        #: Its MCP App (``_meta.ui.resourceUri`` when listed), served by the site as a UIResource.
        self.ui = ui
        if task not in TASK_SUPPORT:
            raise ImproperlyConfigured(
                f"Tool {self.name!r}: task must be 'forbidden', 'optional' or 'required', not "
                f"{task!r}"
            )
        if prelude and task == "forbidden":
            raise ImproperlyConfigured(
                f"Tool {self.name!r}: prelude=True is for task tools (task='optional' or "
                "'required')"
            )
        #: Whether a call may (or must) run as a durable task (2026-07-28 tasks extension).
        self.task_support = task
        #: Whether it runs in the request until ``ctx.start_task()`` (see Context.start_task).
        self.prelude = prelude
        if not TOOL_NAME_RE.match(self.name):
            raise ImproperlyConfigured(
                f"Invalid tool name {self.name!r}: use 1-128 characters from A-Z, a-z, 0-9, '_', "
                "'-' and '.'"
            )
        if isinstance(sensitive, str) or not all(isinstance(n, str) and n for n in sensitive or ()):
            raise ImproperlyConfigured(
                f"Tool {self.name!r}: sensitive must be a list of argument names"
            )
        #: Argument names whose values the audit trail never stores (at any depth).
        self.sensitive: tuple[str, ...] = tuple(sensitive or ())
        self.title = title
        self.description = _description(func, description)
        self.annotations = annotations
        #: What its author chose of the labels hosted clients require (checked: W131).
        self.declared_labels = {
            "title": bool(title),
            "hints": annotations is not None
            and ("readOnlyHint" in annotations or "destructiveHint" in annotations),
        }
        self.icons = icons
        self.meta = meta
        self.signature = Signature(func, f"tool {self.name!r}")
        self._validator: Any = None
        if input_schema is not None:
            try:
                Draft202012Validator.check_schema(input_schema)
            except SchemaError as exc:
                raise ImproperlyConfigured(
                    f"Tool {self.name!r} has an invalid input_schema: {exc.message}"
                ) from exc
            # MCP's Tool.inputSchema is always an object schema: arguments are named.
            if input_schema.get("type") != "object":
                raise ImproperlyConfigured(
                    f'Tool {self.name!r}: input_schema must have "type": "object"'
                )
            # A $ref that leads nowhere fails every call, here and in clients that check arguments.
            nowhere = unresolvable_refs(input_schema)
            if nowhere:
                raise ImproperlyConfigured(
                    f"Tool {self.name!r}: input_schema has a $ref that does not resolve inside it: "
                    f"{', '.join(nowhere)}"
                )
            self._validator = Draft202012Validator(input_schema)
        self.input_schema = (
            input_schema if input_schema is not None else self.signature.json_schema()
        )
        try:
            # Clients drop a tool whose x-mcp-header annotations break the rules: refuse it here.
            mcp_header_params(self.input_schema)
        except ValueError as exc:
            raise ImproperlyConfigured(f"Tool {self.name!r}: {exc}") from exc
        self.output_adapter, self.output_schema, self.wrap_output = self._output()

    @property
    def streams(self) -> bool:
        """Tools that take a Context may send progress, logs or requests: answer them as SSE."""
        return self.signature.context_param is not None

    def _output(self) -> tuple[TypeAdapter[Any] | None, dict[str, Any] | None, bool]:
        annotation = self.signature.return_annotation
        if (
            annotation in (inspect.Signature.empty, None, type(None), str, Any)
            or annotation is ToolResult
        ):
            return None, None, False
        if inspect.isclass(annotation) and issubclass(annotation, CONTENT_TYPES):
            return None, None, False
        model, many = _annotated_model(annotation)
        if model is not None:
            # Described by the site's ModelMCP, which may be registered after the tool.
            self.result_model, self.result_many = model, many
            return None, None, False
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(annotation)
            schema = adapter.json_schema(mode="serialization")
        except Exception:
            return None, None, False  # not describable (e.g. content lists): plain content
        # Structured content must be an object: other values are wrapped as {"result": value}.
        output_schema, wrapped = result_schema(ecma_patterns(schema))
        return adapter, output_schema, wrapped

    def model_output_schema(self) -> dict[str, Any] | None:
        """The ``outputSchema`` of a tool annotated with a model: its ModelMCP's row schema."""
        model = self.result_model
        if model is None or self.site is None or not self.site.is_registered(model):
            return None
        fields = self.site.get_model_mcp(model).field_schemas(writable=False, output=True)
        row = {"type": "object", "properties": fields["properties"]}
        if not self.result_many:
            return row
        return {
            "type": "object",
            "properties": {"result": {"type": "array", "items": row}},
            "required": ["result"],
        }

    def definition(self) -> dict[str, Any]:
        tool: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        # Hosted clients require a title and both hints: the spec's defaults, made explicit.
        tool["title"] = self.title or humanized(self.name)
        output_schema = (
            self.output_schema if self.result_model is None else self.model_output_schema()
        )
        if output_schema is not None:
            tool["outputSchema"] = output_schema
        tool["annotations"] = explicit_hints(self.annotations)
        if self.icons:
            tool["icons"] = self.icons
        if self.meta or self.ui is not None:
            tool["_meta"] = {
                **(self.meta or {}),
                **(self.ui.tool_meta() if self.ui is not None else {}),
            }
        return with_task_support(tool, self.task_support)

    def _arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
            if errors:
                raise ToolError(invalid_arguments(argument_error(e) for e in errors))
            return dict(arguments)
        try:
            return self.signature.validate(arguments)
        except ValidationError as exc:
            raise ToolError(
                f"Invalid arguments for tool {self.name!r}:\n{format_validation_error(exc)}"
            ) from None

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: Context | None
    ) -> dict[str, Any] | None:
        """The ``isError`` result :meth:`call` answers to invalid ``arguments``, or None."""
        try:
            self._arguments(arguments)
        except ToolError as exc:
            return _error_result(str(exc))
        return None

    async def call(self, arguments: dict[str, Any], ctx: Context | None) -> dict[str, Any]:
        """Run the tool and return a ``CallToolResult``; failures become ``isError`` results."""
        if ctx is not None:
            ctx.loop = asyncio.get_running_loop()
            current_context.set(ctx)  # each request runs in its own task, so this stays local
        try:
            kwargs = self.signature.bind(self._arguments(arguments), ctx)
            value = await acall_with_data(self.func, kwargs)
            if _returns_rows(value):
                value = await sync_to_async(_serialize_rows, thread_sensitive=True)(
                    value, ctx, self.name
                )
                return self.to_model_result(value)
            return self.to_result(value)
        except MCPError:
            # Protocol answers by design (-32042, -32021, -32029, or an error the tool raised on
            # purpose, from mcp_django.exceptions), not tool failures.
            raise
        except Exception as exc:
            if isinstance(exc, DjangoValidationError):
                text = data_error_message(exc)
                return {"content": [{"type": "text", "text": text}], "isError": True}
            if isinstance(exc, (ObjectDoesNotExist, Http404)):
                text = str(exc) or f"Tool {self.name!r} found nothing for these arguments"
                return {"content": [{"type": "text", "text": text}], "isError": True}
            if _is_tool_error(exc):
                return _error_result(str(exc) or "Tool failed")
            logger.exception("Tool %r failed", self.name)
            text = f"Error running tool {self.name!r}"
            if mcp_settings.tool_error_details:
                text += f": {type(exc).__name__}: {exc}"
            return {"content": [{"type": "text", "text": text}], "isError": True}

    def to_model_result(self, data: dict[str, Any] | list[dict[str, Any]]) -> dict[str, Any]:
        """Serialized model rows: an object as is, a list wrapped as ``{"result": [...]}``."""
        structured = data if isinstance(data, dict) else {"result": data}
        text = orjson.dumps(data).decode()
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured}

    def to_result(self, value: Any) -> dict[str, Any]:
        if isinstance(value, ToolResult):
            return value.to_result()
        if self.output_adapter is not None:
            # structuredContent must match the advertised outputSchema (tools spec); a value
            # of the wrong type is a bug in the tool, answered like any other tool exception.
            value = self.output_adapter.validate_python(value)
            data = self.output_adapter.dump_python(value, mode="json")
            structured = {"result": data} if self.wrap_output else data
            # Older clients read text; newer ones read structuredContent (2025-06-18 tools spec).
            return {
                "content": [{"type": "text", "text": orjson.dumps(data).decode()}],
                "structuredContent": structured,
            }
        if value is None:
            return {"content": []}
        if isinstance(value, CONTENT_TYPES):
            # Content helpers are dataclasses too: they must not fall to the structured branch.
            return {"content": [to_content_block(value)]}
        if isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, *CONTENT_TYPES)) for v in value
        ):
            return {"content": [to_content_block(v) for v in value]}
        if isinstance(value, BaseModel):
            data = value.model_dump(mode="json")
        elif is_dataclass(value) and not isinstance(value, type):
            data = TypeAdapter(type(value)).dump_python(value, mode="json")
        else:
            return {"content": [to_content_block(value)]}
        return {
            "content": [{"type": "text", "text": orjson.dumps(data).decode()}],
            "structuredContent": data,
        }


def _resource_contents(value: Any, uri: str, mime_type: str | None) -> list[dict[str, Any]]:
    if isinstance(value, EmbeddedResource):
        return [value.contents()]
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, EmbeddedResource) for v in value)
    ):
        return [v.contents() for v in value]
    item: dict[str, Any] = {"uri": uri}
    if isinstance(value, bytes):
        item["blob"] = EmbeddedResource(uri, blob=value).contents()["blob"]
        item["mimeType"] = mime_type or "application/octet-stream"
    elif isinstance(value, str):
        item["text"] = value
        item["mimeType"] = mime_type or "text/plain"
    else:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        item["text"] = orjson.dumps(value, default=str).decode()
        item["mimeType"] = mime_type or "application/json"
    return [item]


class FunctionResource(PermissionGated, ResourceEntry):
    """A resource with a fixed URI, read by calling a function."""

    kind = "resource"

    def __init__(
        self,
        func: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        annotations: dict[str, Any] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
        cache_ttl_ms: int | None = None,
    ) -> None:
        self.func = func
        self.set_permissions(permission, scopes)
        self.cache_ttl_ms = _cache_ttl(cache_ttl_ms, uri)
        self.uri = uri
        self.name = name or func.__name__
        self.title = title
        self.description = _description(func, description)
        self.mime_type = mime_type
        self.icons = icons
        self.annotations = annotations
        self.signature = Signature(func, f"resource {uri!r}")
        if self.signature.names:
            raise ImproperlyConfigured(
                f"Resource {uri!r} takes parameters {self.signature.names}; use a URI template "
                "with "
                "matching variables"
            )

    def definition(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
        ):
            if value:
                resource[key] = value
        if self.icons:
            resource["icons"] = self.icons
        if self.annotations:
            resource["annotations"] = self.annotations
        return resource

    async def read(self, uri: str, ctx: Context | None) -> list[dict[str, Any]]:
        value = await read_answer(self.func, self.signature.bind({}, ctx), uri)
        return _resource_contents(value, uri, self.mime_type)


_OPERATOR_PATTERNS = {
    "": r"[^/?#,&]+",
    "+": r"[^?#]+?",
    "#": r".+?",
    ".": r"[^/?#.]+",
    "/": r"[^/?#]+",
    ";": r"[^/?#;]*",
    "?": r"[^&#]*",
    "&": r"[^&#]*",
}
_EXPRESSION_RE = re.compile(r"\{([+#./;?&]?)([^}]+)\}")


def template_regex(template: str) -> re.Pattern[str]:
    """Compile an RFC 6570 template into a regex that extracts its variables from a URI."""
    parts: list[str] = []
    last = 0
    for match in _EXPRESSION_RE.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        operator, names = (
            match.group(1),
            [n.strip().rstrip("*").split(":")[0] for n in match.group(2).split(",")],
        )
        value = _OPERATOR_PATTERNS[operator]
        if operator in ("?", "&"):
            lead = re.escape(operator)
            parts.append(lead + "&".join(f"{re.escape(n)}=(?P<{n}>{value})" for n in names))
        else:
            prefix = re.escape(operator) if operator in (".", "/", ";", "#") else ""
            sep = "," if operator in ("", "+", "#") else re.escape(operator)
            parts.append(prefix + sep.join(f"(?P<{n}>{value})" for n in names))
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("^" + "".join(parts) + "$")


class FunctionResourceTemplate(PermissionGated, TemplateEntry):
    """A family of resources named by an RFC 6570 URI template; variables become arguments."""

    kind = "template"

    def __init__(
        self,
        func: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
        cache_ttl_ms: int | None = None,
    ) -> None:
        self.func = func
        self.set_permissions(permission, scopes)
        self.cache_ttl_ms = _cache_ttl(cache_ttl_ms, uri_template)
        self.uri_template = uri_template
        self.name = name or func.__name__
        self.title = title
        self.description = _description(func, description)
        self.mime_type = mime_type
        self.icons = icons
        self.set_completers(complete, f"resource template {uri_template!r}")
        try:
            self.variables = sorted(uritemplate.variables(uri_template))
            self.regex = template_regex(uri_template)
        except (re.error, KeyError, ValueError) as exc:
            raise ImproperlyConfigured(f"Invalid URI template {uri_template!r}: {exc}") from exc
        self.signature = Signature(func, f"resource template {uri_template!r}")
        if sorted(self.signature.names) != self.variables:
            raise ImproperlyConfigured(
                f"Resource template {uri_template!r} has variables {self.variables} "
                f"but its function takes {sorted(self.signature.names)}"
            )
        for variable in self.complete:
            if variable not in self.variables:
                raise ImproperlyConfigured(
                    f"Completer for unknown variable {variable!r} of template {uri_template!r}"
                )

    def definition(self) -> dict[str, Any]:
        template: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
        ):
            if value:
                template[key] = value
        if self.icons:
            template["icons"] = self.icons
        return template

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.regex.match(uri)
        if found is None:
            return None
        return {k: unquote(v) for k, v in found.groupdict().items() if v is not None}

    async def read(
        self, uri: str, variables: dict[str, str], ctx: Context | None
    ) -> list[dict[str, Any]]:
        try:
            kwargs = self.signature.validate(variables)
        except ValidationError as exc:
            raise InvalidParamsError(
                f"Invalid params: {format_validation_error(exc)}", data={"uri": uri}
            ) from None
        value = await read_answer(self.func, self.signature.bind(kwargs, ctx), uri)
        return _resource_contents(value, uri, self.mime_type)


class FunctionPrompt(PermissionGated, PromptEntry):
    """A prompt template backed by a function returning text or messages."""

    kind = "prompt"

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        complete: dict[str, Completer] | None = None,
        permission: str | list[str] | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        self.func = func
        self.set_permissions(permission, scopes)
        self.name = name or func.__name__
        self.title = title
        self.description = _description(func, description)
        self.icons = icons
        self.set_completers(complete, f"prompt {self.name!r}")
        self.signature = Signature(func, f"prompt {self.name!r}")
        for argument in self.complete:
            if argument not in self.signature.names:
                raise ImproperlyConfigured(
                    f"Completer for unknown argument {argument!r} of prompt {self.name!r}"
                )
        self.arguments()  # fail at registration, not at prompts/list, on undescribable types

    def arguments(self) -> list[dict[str, Any]]:
        schema = self.signature.json_schema()
        required = set(schema.get("required", []))
        arguments = []
        for name in self.signature.names:
            argument: dict[str, Any] = {"name": name, "required": name in required}
            description = schema.get("properties", {}).get(name, {}).get("description")
            if description:
                argument["description"] = description
            arguments.append(argument)
        return arguments

    def definition(self) -> dict[str, Any]:
        prompt: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "arguments": self.arguments(),
        }
        if self.title:
            prompt["title"] = self.title
        if self.icons:
            prompt["icons"] = self.icons
        return prompt

    async def get(self, arguments: dict[str, Any], ctx: Context | None) -> dict[str, Any]:
        try:
            kwargs = self.signature.validate(arguments)
        except ValidationError as exc:
            raise InvalidParamsError(
                f"Invalid arguments for prompt {self.name!r}: {format_validation_error(exc)}"
            ) from None
        try:
            value = await acall_with_data(self.func, self.signature.bind(kwargs, ctx))
        except ToolError as exc:
            raise InvalidParamsError(
                str(exc) or f"Invalid arguments for prompt {self.name!r}"
            ) from None
        except (Http404, ObjectDoesNotExist):
            raise InvalidParamsError(
                f"Invalid params: prompt {self.name!r} found nothing for these arguments"
            ) from None
        except DjangoValidationError as exc:
            raise InvalidParamsError(f"Invalid params: {data_error_message(exc)}") from None
        if isinstance(value, (str, Message, *CONTENT_TYPES)):
            value = [value]
        messages = []
        for item in value:
            if isinstance(item, Message):
                messages.append(item.to_message())
            elif isinstance(item, dict) and "role" in item:
                messages.append(item)
            else:
                messages.append({"role": "user", "content": to_content_block(item)})
        result: dict[str, Any] = {"messages": messages}
        if self.description:
            result["description"] = self.description
        return result


class CompleterCall:
    """A completer and how to call it: the typed value to its first parameter, the other
    arguments already given to its second, and the request's :class:`Context` to the parameter
    that asks for it, found as a tool's is (:func:`context_parameter`), or named ``ctx``."""

    def __init__(self, func: Completer, owner: str) -> None:
        self.func = func
        try:
            parameters = list(inspect.signature(func).parameters)
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(f"Cannot read the signature of {owner}: {exc}") from exc
        # A partial or a callable object has no hints to read: it takes the value and arguments.
        hints = (
            _type_hints(func, owner) if inspect.isfunction(func) or inspect.ismethod(func) else {}
        )
        self.context_param = context_parameter(func, hints, by_name="ctx")
        self.positional = [name for name in parameters if name != self.context_param][:2]

    async def __call__(
        self, value: str, arguments: dict[str, str], ctx: Context | None
    ) -> list[str]:
        kwargs: dict[str, Any] = dict(
            zip(self.positional, (value, arguments), strict=False)
        )  # it may take fewer
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return [str(v) for v in await acall(self.func, kwargs)]


async def read_answer(func: Callable[..., Any], kwargs: dict[str, Any], uri: str) -> Any:
    """Call a resource's function. A missing object (``Http404``, ``ObjectDoesNotExist``) is
    "resource not found" (-32002) and a ``ToolError`` is invalid params (-32602) with its message,
    as the spec's errors for reads; anything else stays an internal error."""
    try:
        return await acall_with_data(func, kwargs)
    except (Http404, ObjectDoesNotExist):
        raise ResourceNotFoundError(uri) from None
    except ToolError as exc:
        raise InvalidParamsError(str(exc) or f"Cannot read {uri}", data={"uri": uri}) from None
    except DjangoValidationError as exc:
        message = f"Invalid params: {data_error_message(exc)}"
        raise InvalidParamsError(message, data={"uri": uri}) from None
