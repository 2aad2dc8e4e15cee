"""Method params, declared once per method and checked in one place.

Each method's params are a frozen dataclass whose fields say where their value sits in the
params (``param("ref.type", ...)``) and the checks it must pass, in order. :func:`parse` walks
the fields in declaration order, so the first check that fails is the one a client hears about,
and every failure is an :class:`~.errors.InvalidParamsError` (-32602) with a message of the form
``Invalid params: "<field>" must ...``. Handlers then take the typed object, not the dict.

Plain dataclasses rather than pydantic models: the messages on the wire are ours, and pydantic's
would change them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard, TypeVar

from .dispatcher import Handler
from .errors import InvalidParamsError
from .jsonrpc import is_valid_id
from .lifecycle import CLIENT_INFO_STRING_LIMITS, LOG_LEVELS, InitializeParams
from .limits import check_client_value
from .negotiation import negotiate_version
from .pagination import decode_cursor

P = TypeVar("P")

#: A check takes the value and the field's label, and returns the value (perhaps converted) or
#: raises InvalidParamsError.
Check = Callable[[Any, str], Any]

# C0, DEL and C1: no URI (RFC 3986) or name has them, and PostgreSQL refuses NUL in text.
CONTROL_CHARACTERS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def invalid(label: str, requirement: str) -> InvalidParamsError:
    """The one form of a params error: ``Invalid params: "<label>" <requirement>``."""
    return InvalidParamsError(f'Invalid params: "{label}" {requirement}')


def is_identifier(value: Any) -> TypeGuard[str]:
    """Whether ``value`` is a usable name or URI: a non-empty string without control characters."""
    return isinstance(value, str) and bool(value) and CONTROL_CHARACTERS.search(value) is None


# -- checks --------------------------------------------------------------------------------------


def non_empty_string(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(label, "must be a non-empty string")
    return value


def no_control_characters(value: Any, label: str) -> Any:
    """A string, or every string field of a parsed object, free of control characters."""
    texts = (
        [value]
        if isinstance(value, str)
        else [v for v in _field_values(value) if isinstance(v, str)]
    )
    if any(CONTROL_CHARACTERS.search(text) for text in texts):
        raise invalid(label, "must not contain control characters")
    return value


def optional_object(value: Any, label: str) -> dict[str, Any]:
    """An object, or nothing (absent or null) read as ``{}``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(label, "must be an object")
    return value


def required_object(value: Any, label: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(label, "must be an object")
    return value


def cursor(value: Any, label: str) -> str | None:
    """An opaque cursor made by this server, or nothing; where it points is the list's business."""
    if value is None:
        return None
    decode_cursor(value)
    return str(value)


def one_of(*choices: str) -> Check:
    def check(value: Any, label: str) -> str:
        if not isinstance(value, str) or value not in choices:
            raise invalid(label, f"must be one of {', '.join(choices)}")
        return value

    return check


def string(requirement: str) -> Check:
    """A string (empty allowed), with the requirement a client is told when it is not one."""

    def check(value: Any, label: str) -> str:
        if not isinstance(value, str):
            raise InvalidParamsError(f"Invalid params: {requirement}")
        return value

    return check


def nested(cls: type[Any]) -> Check:
    """An object parsed as ``cls``, whose fields are looked up inside it."""

    def check(value: Any, label: str) -> Any:
        return parse_as(cls, value)

    return check


def tagged(tag: str, variants: Mapping[str, type[Any]]) -> Check:
    """An object whose ``tag`` member chooses the class it is parsed as."""
    requirement = "must be " + " or ".join(f'"{name}"' for name in variants)

    def check(value: Any, label: str) -> Any:
        kind = value.get(tag) if isinstance(value, dict) else None
        if not isinstance(kind, str) or kind not in variants:
            raise invalid(f"{label}.{tag}", requirement)
        return parse_as(variants[kind], value)

    return check


def object_or_none(value: Any, label: str) -> dict[str, Any] | None:
    """An object, or nothing (absent or null) kept as None."""
    if value is not None and not isinstance(value, dict):
        raise invalid(label, "must be an object")
    return value


def strings(requirement: str) -> Check:
    """An array of strings, or nothing (absent or null) kept as None."""

    def check(value: Any, label: str) -> list[str] | None:
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(item, str) for item in value)
        ):
            raise invalid(label, requirement)
        return value

    return check


def client_info_strings(value: dict[str, Any], label: str) -> dict[str, Any]:
    """A ``clientInfo`` whose name and version, when given, are strings short enough to keep."""
    for key, limit in CLIENT_INFO_STRING_LIMITS.items():
        if key in value and not isinstance(value[key], str):
            raise invalid(f"{label}.{key}", "must be a string")
        if len(value.get(key, "")) > limit:
            raise invalid(f"{label}.{key}", f"is longer than {limit} characters")
    return value


def bounded(max_bytes: int, max_depth: int) -> Check:
    """A client value no deeper than ``max_depth`` and no larger than ``max_bytes`` as JSON."""

    def check(value: Any, label: str) -> Any:
        check_client_value(label, value, max_bytes=max_bytes, max_depth=max_depth)
        return value

    return check


def non_negative_int_or_none(value: Any, label: str) -> int | None:
    """A whole number of at least 0 (JSON has no integer type: ``5.0`` is one), or nothing."""
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 0:
        raise invalid(label, "must be a non-negative integer")
    return int(value)


def request_id_or_none(value: Any, label: str) -> Any:
    """A request id (string or integer), or None for anything else: a notification that names
    no request is not answered, so it has nothing to be refused with."""
    return value if is_valid_id(value) else None


@dataclass(frozen=True, slots=True)
class Supplied:
    """A check only the caller of :func:`parse_as` can make (a bound from its settings, a key
    to unseal with): it passes it by ``name`` as a keyword argument, in the fields' order."""

    name: str


def supplied(name: str) -> Supplied:
    return Supplied(name)


def at_most(limit: int, what: str) -> Check:
    """An array (or nothing) of at most ``limit`` items; ``what`` names them in the error."""

    def check(value: Any, label: str) -> Any:
        if value is not None and len(value) > limit:
            raise InvalidParamsError(f"Invalid params: at most {limit} {what}")
        return value

    return check


IDENTIFIER: Final = (non_empty_string, no_control_characters)


def param(
    path: str,
    *checks: Check | Supplied | tuple[Check, ...],
    missing: Any = None,
    label: str | None = None,
) -> Any:
    """Declare a params field: where it sits (dotted), its checks in order, the value an absent
    member stands for, and the name its errors use (the path's last part unless given)."""
    flat: list[Check | Supplied] = []
    for check in checks:
        flat.extend(check if isinstance(check, tuple) else (check,))
    keys = tuple(path.split("."))
    return field(
        metadata={
            "path": keys,
            "checks": tuple(flat),
            "missing": missing,
            "label": label or keys[-1],
        }
    )


def fresh_object() -> dict[str, Any]:
    """What an absent object member stands for: a new ``{}`` each time, as it may be kept."""
    return {}


def _field_values(value: Any) -> list[Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    return []


def _lookup(params: Any, keys: tuple[str, ...], missing: Any) -> Any:
    value = params
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return missing() if callable(missing) else missing
        value = value[key]
    return value


# -- the params of each method -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoParams:
    """A method that reads nothing from its params (``ping``)."""


@dataclass(frozen=True, slots=True)
class ListParams:
    """``tools/list``, ``resources/list``, ``resources/templates/list``, ``prompts/list``."""

    cursor: str | None = param("cursor", cursor)


@dataclass(frozen=True, slots=True)
class SetLevelParams:
    level: str = param("level", one_of(*LOG_LEVELS))


@dataclass(frozen=True, slots=True)
class CallToolParams:
    name: str = param("name", IDENTIFIER)
    arguments: dict[str, Any] = param("arguments", optional_object)
    #: 2025-11-25 tasks: an object (``{"ttl": ms}``) asks for the call to run as a task.
    task: dict[str, Any] | None = param("task", object_or_none)
    task_ttl: int | None = param("task.ttl", non_negative_int_or_none, label="task.ttl")


@dataclass(frozen=True, slots=True)
class GetPromptParams:
    name: str = param("name", IDENTIFIER)
    arguments: dict[str, Any] = param("arguments", optional_object)


@dataclass(frozen=True, slots=True)
class ResourceParams:
    """``resources/read``, ``resources/subscribe``, ``resources/unsubscribe``."""

    uri: str = param("uri", IDENTIFIER)


@dataclass(frozen=True, slots=True)
class SkillParams:
    """``skills/get`` (skills extension): the URI of a skill's ``SKILL.md``."""

    uri: str = param("uri", IDENTIFIER)


@dataclass(frozen=True, slots=True)
class DirectoryParams:
    """``resources/directory/read`` (skills extension): a directory's URI, and a cursor."""

    uri: str = param("uri", IDENTIFIER)
    cursor: str | None = param("cursor", cursor)


@dataclass(frozen=True, slots=True)
class PromptRef:
    name: str = param("name", IDENTIFIER)


@dataclass(frozen=True, slots=True)
class ResourceRef:
    uri: str = param("uri", IDENTIFIER)


_NAME_AND_VALUE = string('"argument" needs string "name" and "value"')


@dataclass(frozen=True, slots=True)
class CompletionArgument:
    name: str = param("name", _NAME_AND_VALUE)
    value: str = param("value", _NAME_AND_VALUE, missing="")


@dataclass(frozen=True, slots=True)
class CompleteParams:
    # ``ref`` is checked twice, first as an object and last for what it names: a client has
    # always been told about a malformed argument or context before an unknown ref type.
    ref_object: dict[str, Any] = param("ref", optional_object)
    argument: CompletionArgument = param(
        "argument", optional_object, nested(CompletionArgument), no_control_characters
    )
    context: dict[str, Any] = param("context", optional_object)
    context_arguments: dict[str, Any] = param("context.arguments", optional_object)
    ref: PromptRef | ResourceRef = param(
        "ref",
        optional_object,
        tagged("type", {"ref/prompt": PromptRef, "ref/resource": ResourceRef}),
    )


@dataclass(frozen=True, slots=True)
class TaskParams:
    """``tasks/get``, ``tasks/cancel``: any id; one that names no task of the caller's is "not
    found"."""

    task_id: Any = param("taskId")


@dataclass(frozen=True, slots=True)
class UpdateTaskParams:
    task_id: Any = param("taskId")
    input_responses: dict[str, Any] = param("inputResponses", required_object)


@dataclass(frozen=True, slots=True)
class ListenParams:
    """``subscriptions/listen`` (2026-07-28): what the stream is to follow. The caller supplies
    ``max_task_ids`` and ``max_uris`` (its bounds) and ``tasks_declared`` (a client following
    tasks must declare the extension), checked in this order."""

    notifications: dict[str, Any] = param("notifications", required_object, missing=fresh_object)
    task_ids: list[str] | None = param(
        "notifications.taskIds",
        strings("must be an array of task ids"),
        supplied("max_task_ids"),
        supplied("tasks_declared"),
        label="notifications.taskIds",
    )
    resource_subscriptions: list[str] | None = param(
        "notifications.resourceSubscriptions",
        strings("must be an array of URIs"),
        supplied("max_uris"),
        label="notifications.resourceSubscriptions",
    )


@dataclass(frozen=True, slots=True)
class RoundParams:
    """What a retried 2026-07-28 request brings beside its method's own params: the state a
    previous round sealed (the caller supplies ``unseal``, which checks it is this request's)
    and the client's new answers."""

    request_state: Any = param("requestState", supplied("unseal"))
    input_responses: dict[str, Any] = param("inputResponses", optional_object)


@dataclass(frozen=True, slots=True)
class InitializeRequestParams:
    """``initialize``: what the client asks for and says about itself. ``clientInfo`` and
    ``capabilities`` are kept with the session, so the caller supplies their bounds
    (``bound_client_info``, ``bound_capabilities``, see :func:`parse_initialize`)."""

    protocol_version: str = param("protocolVersion", non_empty_string)
    capabilities: dict[str, Any] = param("capabilities", required_object, missing=fresh_object)
    client_info: dict[str, Any] = param(
        "clientInfo",
        required_object,
        client_info_strings,
        supplied("bound_client_info"),
        missing=fresh_object,
    )
    # Checked again, last, for its size: a client has always heard of a malformed clientInfo first.
    bounded_capabilities: dict[str, Any] = param(
        "capabilities", supplied("bound_capabilities"), missing=fresh_object
    )


@dataclass(frozen=True, slots=True)
class CancelledParams:
    """``notifications/cancelled``: the request to stop (None when it names none)."""

    request_id: Any = param("requestId", request_id_or_none)


@dataclass(frozen=True, slots=True)
class MetaParams:
    """``_meta``, which any request may carry. Peeked (see :func:`peek`): its own checks
    (:func:`~.limits.check_progress_token`, :func:`~.modern.parse_request_meta`) answer for a
    malformed one."""

    meta: dict[str, Any] | None = param("_meta", object_or_none)


#: Each method's params class.
METHOD_PARAMS: Final[Mapping[str, type[Any]]] = {
    "ping": NoParams,
    "logging/setLevel": SetLevelParams,
    "tools/list": ListParams,
    "tools/call": CallToolParams,
    "resources/list": ListParams,
    "resources/templates/list": ListParams,
    "resources/read": ResourceParams,
    "resources/subscribe": ResourceParams,
    "resources/unsubscribe": ResourceParams,
    "prompts/list": ListParams,
    "prompts/get": GetPromptParams,
    "completion/complete": CompleteParams,
    "tasks/get": TaskParams,
    "tasks/update": UpdateTaskParams,
    "tasks/cancel": TaskParams,
    "tasks/result": TaskParams,
    "tasks/list": ListParams,
    "skills/list": ListParams,
    "skills/get": SkillParams,
    "resources/directory/read": DirectoryParams,
}


# -- parsing -------------------------------------------------------------------------------------


def parse_as(cls: type[P], params: dict[str, Any], **given: Check) -> P:
    """Check ``params`` against ``cls``'s fields, in order, and return the typed object;
    ``given`` are the checks its fields leave to the caller (:func:`supplied`)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        values[f.name] = _field(f, params, given)
    return cls(**values)


def _field(f: dataclasses.Field[Any], params: dict[str, Any], given: Mapping[str, Check]) -> Any:
    spec = f.metadata
    value = _lookup(params, spec["path"], spec["missing"])
    for check in spec["checks"]:
        value = (given[check.name] if isinstance(check, Supplied) else check)(value, spec["label"])
    return value


def peek(cls: type[Any], name: str, params: dict[str, Any]) -> Any:
    """Field ``name`` of ``cls`` as declared, or None when it fails its checks: for a value
    read to route a request (the tool a call names) before its handler parses the whole of it
    and answers for what is malformed."""
    try:
        return _field(_FIELDS[cls][name], params, {})
    except InvalidParamsError:
        return None


def request_meta(params: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``_meta`` object, or None when it has none (or a malformed one)."""
    meta: dict[str, Any] | None = peek(MetaParams, "meta", params)
    return meta


_FIELDS: Final[dict[type[Any], dict[str, dataclasses.Field[Any]]]] = {
    cls: {f.name: f for f in dataclasses.fields(cls)}
    for cls in (*METHOD_PARAMS.values(), InitializeRequestParams, CancelledParams, MetaParams)
}


def parse_initialize(
    params: dict[str, Any],
    *,
    max_client_info_bytes: int = 4 * 1024,
    max_capabilities_bytes: int = 64 * 1024,
    max_depth: int = 16,
) -> InitializeParams:
    """Validate ``initialize`` params and negotiate the version; -32602 when malformed.

    ``clientInfo`` and ``capabilities`` are kept with the session (and in each process's
    session cache), so their size and nesting are bounded here, before anything is stored.
    """
    parsed = parse_as(
        InitializeRequestParams,
        params,
        bound_client_info=bounded(max_client_info_bytes, max_depth),
        bound_capabilities=bounded(max_capabilities_bytes, max_depth),
    )
    version = parsed.protocol_version
    return InitializeParams(
        version, negotiate_version(version), parsed.capabilities, parsed.client_info
    )


def parse(method: str, params: dict[str, Any]) -> Any:
    """The typed params of ``method`` (see :data:`METHOD_PARAMS`); -32602 when malformed."""
    return parse_as(METHOD_PARAMS[method], params)


def takes(method: str) -> Callable[[Callable[[Any, Any], Awaitable[dict[str, Any]]]], Handler]:
    """Make a handler of the typed params of ``method`` into a dispatcher :data:`Handler`.

    Usage::

        @takes("tools/call")
        async def call_tool(params: CallToolParams, ctx: Context) -> dict[str, Any]: ...
    """
    cls = METHOD_PARAMS[method]

    def decorate(handler: Callable[[Any, Any], Awaitable[dict[str, Any]]]) -> Handler:
        async def handle(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
            return await handler(parse_as(cls, params), ctx)

        handle.__name__ = handler.__name__
        handle.__qualname__ = handler.__qualname__
        handle.__doc__ = handler.__doc__
        handle.__wrapped__ = handler  # type: ignore[attr-defined]
        return handle

    return decorate
