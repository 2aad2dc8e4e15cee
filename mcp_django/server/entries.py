"""The one interface every registry entry offers the server, and the one gate deciding what a
request may do with an entry.

Function tools, resources, templates and prompts, model tools and admin-action tools all
subclass one of the protocols below; the handlers see only these. Whether a request may see and
use an entry (Django permissions, then OAuth scopes) is decided by :func:`gate` alone: lists,
calls, reads, completions, subscriptions and the transport's step-up check all come through it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Literal,
    NamedTuple,
    Protocol,
    TypeAlias,
    TypedDict,
    runtime_checkable,
)

from asgiref.sync import sync_to_async

from ..auth.scopes import missing_scopes
from ..conf import mcp_settings

if TYPE_CHECKING:
    from ..protocol.dispatcher import Handler

#: The :class:`~mcp_django.server.context.Context` a handler passes an entry. Not named here: a
#: Context carries its :class:`ServedSite`, whose entries are these, so naming it back would
#: be an import cycle (tests/test_architecture.py counts type imports too).
RequestContext: TypeAlias = Any


class Completions(NamedTuple):
    """What an entry offers for one argument: the values, and how many there are in all
    (None when it stopped counting)."""

    values: list[str]
    total: int | None


class ToolAnnotations(TypedDict, total=False):
    """``annotations=`` of a tool: hints for clients, never a guarantee (MCP ``ToolAnnotations``).

    A plain dict literal with these keys is one: ``@site.tool(annotations={"readOnlyHint": True})``.
    """

    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class _IconBase(TypedDict):
    src: str


class Icon(_IconBase, total=False):
    """One of ``icons=``: an image a client may show beside the entry (MCP ``Icon``, 2025-11-25)."""

    mimeType: str
    sizes: list[str]
    theme: Literal["light", "dark"]


@runtime_checkable
class Gated(Protocol):
    """Something a request is let near by Django permissions and OAuth scopes."""

    #: OAuth scopes a token needs, on top of the site's REQUIRED_SCOPES.
    @property
    def scopes(self) -> Sequence[str]: ...

    def has_permission(self, request: Any) -> bool:
        """Whether the request's user holds the Django permissions (it may query)."""
        ...


class Completable(Gated, Protocol):
    """What ``completion/complete`` can ask: prompts, templates and models' row templates."""

    async def completions(
        self, ctx: RequestContext, argument: str, value: str, context: dict[str, str]
    ) -> Completions: ...


class Entry(Gated, Protocol):
    """A tool, resource, resource template or prompt as the server sees it."""

    kind: ClassVar[str]

    def definition(self) -> dict[str, Any]:
        """The entry as listed (``Tool``, ``Resource``, ``ResourceTemplate``, ``Prompt``)."""
        ...

    def is_visible(self, request: Any) -> bool:
        """Whether ``request`` may see and use this entry: :func:`gate` says VISIBLE."""
        return gate(self, request) is Access.VISIBLE


#: ``taskSupport`` values of a tool (the 2026-07-28 tasks extension keeps the 2025-11-25
#: ``Tool.execution`` field): whether a call may, or must, run as a durable task.
TaskSupport = Literal["forbidden", "optional", "required"]
TASK_SUPPORT: Final[tuple[TaskSupport, ...]] = ("forbidden", "optional", "required")


class ToolEntry(Entry, Protocol):
    name: str
    #: One of :data:`TASK_SUPPORT`: "optional" or "required" tools are answered with a task.
    task_support: TaskSupport = "forbidden"
    #: Whether it runs in the request until it awaits ``ctx.start_task()`` (task tools only).
    prelude: bool = False

    @property
    def streams(self) -> bool:
        """Whether its answer goes on an SSE stream (it may send progress, logs or requests)."""
        ...

    async def call(self, arguments: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """The ``CallToolResult``; a tool's own failure is a result with ``isError``."""
        ...

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: RequestContext
    ) -> dict[str, Any] | None:
        """The ``isError`` result :meth:`call` answers to invalid ``arguments`` (the same
        validation, run alone), or None when they are valid: a task is made only of valid ones."""
        ...


class ResourceEntry(Entry, Protocol):
    uri: str

    async def read(self, uri: str, ctx: RequestContext) -> list[dict[str, Any]]: ...

    async def completions(
        self, ctx: RequestContext, argument: str, value: str, context: dict[str, str]
    ) -> Completions: ...


class TemplateEntry(Entry, Protocol):
    uri_template: str

    def match(self, uri: str) -> dict[str, str] | None:
        """The template's variables in ``uri``, or None when it does not match."""
        ...

    async def read(
        self, uri: str, variables: dict[str, str], ctx: RequestContext
    ) -> list[dict[str, Any]]: ...

    async def completions(
        self, ctx: RequestContext, argument: str, value: str, context: dict[str, str]
    ) -> Completions: ...


class PromptEntry(Entry, Protocol):
    name: str

    async def get(self, arguments: dict[str, Any], ctx: RequestContext) -> dict[str, Any]: ...

    async def completions(
        self, ctx: RequestContext, argument: str, value: str, context: dict[str, str]
    ) -> Completions: ...


class SkillEntry(Gated, Protocol):
    """A skill (the skills extension: ``mcp_django.extensions.skills.Skill``) as the server sees it.
    What
    its files are now comes from :meth:`loaded`, and is handed back to the other methods, so
    one request reads the disk once."""

    kind: ClassVar[str]
    name: str
    cache_ttl_ms: int | None

    @property
    def uri(self) -> str:
        """The URI of its SKILL.md, which names the skill."""
        ...

    def path_of(self, uri: str) -> str | None:
        """The path inside the skill ``uri`` names ("" for its folder), or None."""
        ...

    def loaded(self) -> Any:
        """Its frontmatter and files as they are now, or None when it cannot be served."""
        ...

    def has_file(self, uri: str) -> bool:
        """Whether ``uri`` is one of its files now (blocking: it reads the folder)."""
        ...

    def entry(self, loaded: Any) -> dict[str, Any]: ...

    def definition(self, loaded: Any) -> dict[str, Any]: ...

    def children(self, loaded: Any, path: str) -> list[dict[str, Any]] | None: ...

    async def read(self, uri: str, ctx: RequestContext) -> list[dict[str, Any]]: ...


class ModelRows(Completable, Protocol):
    """A registered model's rows as resources (a ``ModelMCP``), as the handlers see it."""

    @property
    def uri_template(self) -> str: ...

    def template_definition(self) -> dict[str, Any]: ...

    def coerce_pk(self, value: Any) -> Any: ...

    def get_object(self, request: Any, pk: Any, permission: str = "view") -> Any: ...

    def serialize(self, obj: Any) -> dict[str, Any]: ...

    def list_page(
        self, request: Any, after: Any, limit: int
    ) -> list[tuple[Any, dict[str, Any]]]: ...


class ServedSite(Protocol):
    """What the server needs of the site it serves: its name, its entries and its method table.

    An ``MCPSite`` is one. The engine, the handlers, ``Context`` and durable tasks name this
    rather than ``MCPSite``, as admin's ``options.py`` never imports ``sites.py``: the registry
    sits above the server and imports it, never the other way round.
    """

    @property
    def name(self) -> str: ...

    def get_tools(self) -> Sequence[ToolEntry]: ...

    def get_tool(self, name: str) -> ToolEntry | None: ...

    def get_resources(self) -> Sequence[ResourceEntry]: ...

    def get_resource(self, uri: str) -> ResourceEntry | None: ...

    def get_resource_templates(self) -> Sequence[TemplateEntry]: ...

    def get_resource_template(self, uri_template: str) -> TemplateEntry | None: ...

    def get_prompts(self) -> Sequence[PromptEntry]: ...

    def get_prompt(self, name: str) -> PromptEntry | None: ...

    def get_model_mcps(self) -> Sequence[ModelRows]: ...

    def get_skills(self) -> Sequence[SkillEntry]: ...

    def get_skill(self, name: str) -> SkillEntry | None: ...

    def get_model_mcp_for_uri(self, uri: str) -> tuple[ModelRows, str] | None: ...

    def get_handlers(self) -> dict[str, Handler]: ...

    def offered_capabilities(self) -> dict[str, Any]: ...

    def get_server_info(self) -> dict[str, Any]: ...

    def get_instructions(self) -> str | None: ...


class Access(enum.Enum):
    """What a request may do with an entry, as decided by :func:`gate`."""

    #: Listed, and every method on it runs.
    VISIBLE = "visible"
    #: The user holds its permissions but the OAuth token lacks its scopes: listed unless
    #: ``UNSCOPED_ENTRIES`` is "hide" (see :func:`listed`), and call/get/read answer 403 with a
    #: step-up challenge so that the user can grant them.
    MISSING_SCOPES = "missing_scopes"
    #: Absent from lists, and every method answers as for an entry that does not exist.
    HIDDEN = "hidden"


def gate(entry: Gated | None, request: Any) -> Access:
    """Decide what ``request`` may do with ``entry``: the one permission and scope decision.

    Django permissions come first: an entry the user may not use never reveals itself with a
    403. ``has_permission`` may query, so call this off the event loop unless
    :func:`queries` says otherwise (or use :func:`agate`).
    """
    if entry is None or not entry.has_permission(request):
        return Access.HIDDEN
    if missing_scopes(request, tuple(entry.scopes)):
        return Access.MISSING_SCOPES
    return Access.VISIBLE


def listed(access: Access) -> bool:
    """Whether lists show an entry with ``access``. A MISSING_SCOPES entry is listed by default:
    a client that only calls what it sees must see it to reach the 403 that makes it step up."""
    return access is Access.VISIBLE or (
        access is Access.MISSING_SCOPES and mcp_settings.unscoped_entries == "list"
    )


def queries(entry: Gated) -> bool:
    """Whether deciding ``entry`` may query: function entries without ``permissions`` decide
    in memory (scopes only); model and admin entries decide through hooks that may."""
    return bool(getattr(entry, "permissions", True))


async def agate(entry: Gated | None, request: Any) -> Access:
    """:func:`gate` from async code, off the event loop when the decision may query."""
    if entry is not None and queries(entry):
        return await sync_to_async(gate)(entry, request)
    return gate(entry, request)


def with_task_support(definition: dict[str, Any], task_support: str) -> dict[str, Any]:
    """``definition`` with ``execution.taskSupport`` when the tool may run as a task."""
    if task_support != "forbidden":
        definition["execution"] = {**definition.get("execution", {}), "taskSupport": task_support}
    return definition
