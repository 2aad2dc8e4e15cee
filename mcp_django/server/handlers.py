"""The standard MCP method handlers, built over a site's registry (an ``MCPSite``, seen as an
:class:`~mcp_django.server.entries.ServedSite`).

Each handler takes its method's params, checked and typed by :mod:`mcp_django.protocol.params`
(``@takes(method)`` makes it the dispatcher's ``(params dict, Context)`` handler), and returns the
result dict or raises a protocol error. ``initialize`` is not here: it creates the session,
which is the transport's business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from asgiref.sync import sync_to_async

from ..conf import mcp_settings
from ..extensions import skills
from ..extensions.tasks import deadline
from ..extensions.tasks import runner as taskrun
from ..protocol.dispatcher import Handler
from ..protocol.errors import InvalidParamsError, ResourceNotFoundError
from ..protocol.pagination import decode_cursor, encode_cursor, page_result
from ..protocol.params import (
    CallToolParams,
    CompleteParams,
    GetPromptParams,
    ListParams,
    NoParams,
    PromptRef,
    ResourceParams,
    SetLevelParams,
    TaskParams,
    UpdateTaskParams,
    peek,
    takes,
)
from ..stores import SessionStore, SubscriptionStore
from . import sizing
from .context import Context
from .entries import Access, Completable, agate, gate, listed, queries
from .entry_tools import entry_tools

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .entries import ServedSite, ToolEntry

MAX_COMPLETIONS = 100


def _page(items: list[dict[str, Any]], params: ListParams, key: str) -> dict[str, Any]:
    return page_result(items, params.cursor, mcp_settings.page_size, key)


@takes("ping")
async def ping(params: NoParams, ctx: Context) -> dict[str, Any]:
    return {}


@takes("logging/setLevel")
async def set_log_level(params: SetLevelParams, ctx: Context) -> dict[str, Any]:
    level = params.level
    if ctx.session is not None:
        ctx.session.log_level = level
        await SessionStore().aupdate(ctx.session.pk, log_level=level)
    return {}


def site_tools(site: ServedSite) -> list[ToolEntry]:
    """Every tool ``site`` serves: those it registered and generated, then the ones the tasks
    extension adds while ``TASK_DEADLINE_SECONDS`` is set (task_status, task_result,
    task_cancel: they need the task rows, which a registry cannot reach while it loads), and
    its resources and skills as tools when it sets ``resource_tools`` (they run its methods)."""
    tools = list(site.get_tools())
    return [*tools, *deadline.polling_tools(tools), *entry_tools(site)]


def site_tool(site: ServedSite, name: str) -> ToolEntry | None:
    """The tool ``name`` of :func:`site_tools`, or None."""
    return (
        site.get_tool(name)
        or deadline.polling_tool(site, name)
        or next((t for t in entry_tools(site) if t.name == name), None)
    )


async def visible(entries: Sequence[Any], ctx: Context) -> list[Any]:
    """The entries this request may see, each decided by :func:`gate`."""
    request = ctx.request
    if any(queries(e) for e in entries):
        return await sync_to_async(lambda: [e for e in entries if listed(gate(e, request))])()
    return [e for e in entries if listed(gate(e, request))]


class Found(NamedTuple):
    """The entry answering a URI, the request's access to it, and what the URI carries."""

    entry: Any  # a function resource or template, or the ModelMCP of a row URI; None if unknown
    access: Access
    pk: str | None = None
    variables: dict[str, str] | None = None


async def find_resource(site: ServedSite, request: Any, uri: str) -> Found:
    """The entry a resource URI names for this request: a function resource, a model row, or
    the first matching template the user may use (a hidden one does not shadow the next)."""
    resource = site.get_resource(uri)
    if resource is not None:
        return Found(resource, await agate(resource, request))
    name = skills.skill_name(uri)
    skill = site.get_skill(name) if name is not None else None
    if skill is not None:
        # A skill answers for every skill://<name>/... URI; its read refuses a path it lacks.
        return Found(skill, await agate(skill, request))
    row = site.get_model_mcp_for_uri(uri)
    if row is not None:
        return Found(row[0], await agate(row[0], request), pk=row[1])
    for template in site.get_resource_templates():
        variables = template.match(uri)
        if variables is not None:
            access = await agate(template, request)
            if access is not Access.HIDDEN:
                return Found(template, access, variables=variables)
    return Found(None, Access.HIDDEN)


#: The declared field that names the entry of each method with one (read by :func:`target`).
_TARGETS: dict[str, tuple[type[Any], str]] = {
    "tools/call": (CallToolParams, "name"),
    "prompts/get": (GetPromptParams, "name"),
    "resources/read": (ResourceParams, "uri"),
    "skills/get": (ResourceParams, "uri"),
    "resources/directory/read": (ResourceParams, "uri"),
    # Answering a task's question lets its tool go on: it needs what calling the tool needs.
    "tasks/update": (UpdateTaskParams, "task_id"),
    # 2025-11-25: tasks/result relays the task's questions and returns what the tool returned.
    "tasks/result": (TaskParams, "task_id"),
}


async def target(
    site: ServedSite, request: Any, method: str, params: dict[str, Any]
) -> tuple[Any, Access]:
    """The entry a ``tools/call``, ``prompts/get``, ``resources/read`` or skills method names
    (for ``tasks/update``, the tool of the task it answers), and the request's access to it;
    ``(None, HIDDEN)`` for other methods and for names the handler will refuse."""
    if method not in _TARGETS:
        return None, Access.HIDDEN
    value = peek(*_TARGETS[method], params)
    if value is None:
        return None, Access.HIDDEN
    if method == "resources/read":
        found = await find_resource(site, request, value)
        return found.entry, found.access
    if method in ("tasks/update", "tasks/result"):
        tool = await taskrun.task_tool(site, request, value)
        return tool, await agate(tool, request)
    if method in skills.SKILL_HANDLERS:
        name = skills.skill_name(value)
        skill = site.get_skill(name) if name is not None else None
        return skill, await agate(skill, request)
    entry = site_tool(site, value) if method == "tools/call" else site.get_prompt(value)
    return entry, await agate(entry, request)


@takes("tools/list")
async def list_tools(params: ListParams, ctx: Context) -> dict[str, Any]:
    tools = [t.definition() for t in await visible(site_tools(ctx.site), ctx)]
    if ctx.request_meta is None and not taskrun.speaks_handshake_tasks(ctx):
        # Revisions before 2025-11-25 have no tasks: they call every tool plainly.
        tools = [_without_task_support(t) for t in tools]
    return _page(tools, params, "tools")


def _without_task_support(tool: dict[str, Any]) -> dict[str, Any]:
    execution = tool.get("execution")
    if not isinstance(execution, dict) or "taskSupport" not in execution:
        return tool
    rest = {k: v for k, v in execution.items() if k != "taskSupport"}
    return {
        **{k: v for k, v in tool.items() if k != "execution"},
        **({"execution": rest} if rest else {}),
    }


@takes("tools/call")
async def call_tool(params: CallToolParams, ctx: Context) -> dict[str, Any]:
    name, arguments = params.name, params.arguments
    tool = site_tool(ctx.site, name)
    # A tool the user may not use answers like one that does not exist: nothing leaks. (A token
    # lacking the scopes of a tool the user may use got its 403 from the transport already.)
    if tool is None or await agate(tool, ctx.request) is not Access.VISIBLE:
        raise InvalidParamsError(f"Unknown tool: {name[:128]}")
    if deadline.applies(tool, ctx, params.task):
        result = await deadline.call(tool, arguments, ctx)
    elif tool.task_support != "forbidden" or params.task is not None:
        result = await taskrun.call(tool, arguments, ctx, params.task, params.task_ttl)
    else:
        result = await tool.call(arguments, ctx)
    if "content" not in result:
        return result  # a task's handle, not the tool's result (a task fits its own: Runner.end)
    result, cut = sizing.fit_result(result, mcp_settings.max_result_chars)
    if cut:
        ctx.result_cut = True  # the audit trail records it
        result = dict(result)
    return result


def _list_resources_page(
    site: ServedSite,
    request: Any,
    cursor: str | None,
    page_size: int,
    extra: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Function resources first (then ``extra``: the skills' SKILL.md), then each model's rows by
    primary key.

    The cursor holds the section and the last primary key seen (keyset pagination): page 1,000
    of a large table costs what page 1 costs, one query per section touched.
    """
    statics = [*(r.definition() for r in site.get_resources() if listed(gate(r, request))), *extra]
    sections: list[Any] = [None, *site.get_model_mcps()]
    section: Any = 0
    key: Any = None
    if cursor is not None:
        position = decode_cursor(cursor)
        section, key = position.get("s"), position.get("k")
        if (
            not isinstance(section, int)
            or isinstance(section, bool)
            or not 0 <= section < len(sections)
        ):
            raise InvalidParamsError("Invalid params: invalid cursor")
    items: list[dict[str, Any]] = []
    while section < len(sections) and len(items) < page_size:
        want = page_size - len(items)
        if sections[section] is None:
            offset = key if isinstance(key, int) and not isinstance(key, bool) and key >= 0 else 0
            items += statics[offset : offset + want]
            if offset + want < len(statics):
                return {
                    "resources": items,
                    "nextCursor": encode_cursor({"s": section, "k": offset + want}),
                }
        else:
            model_mcp = sections[section]
            after = model_mcp.coerce_pk(key) if key is not None else None
            page = (
                model_mcp.list_page(request, after, want + 1)
                if listed(gate(model_mcp, request))
                else []
            )
            items += [definition for _pk, definition in page[:want]]
            if len(page) > want:
                last_pk = page[want - 1][0]
                last_pk = last_pk if isinstance(last_pk, int) else str(last_pk)
                return {
                    "resources": items,
                    "nextCursor": encode_cursor({"s": section, "k": last_pk}),
                }
        section, key = section + 1, None
    return {"resources": items}


@takes("resources/list")
async def list_resources(params: ListParams, ctx: Context) -> dict[str, Any]:
    # Each skill's SKILL.md is listed, named and described by its frontmatter (SEP-2640).
    manifests = (
        [skill.definition(loaded) for skill, loaded in await skills.served(ctx)]
        if ctx.site.get_skills()
        else []
    )
    if not ctx.site.get_model_mcps():
        return _page(
            [*(r.definition() for r in await visible(ctx.site.get_resources(), ctx)), *manifests],
            params,
            "resources",
        )
    return await sync_to_async(_list_resources_page)(
        ctx.site, ctx.request, params.cursor, mcp_settings.page_size, manifests
    )


@takes("resources/templates/list")
async def list_resource_templates(params: ListParams, ctx: Context) -> dict[str, Any]:
    models = ctx.site.get_model_mcps()
    shown = await visible([*ctx.site.get_resource_templates(), *models], ctx)
    templates = [e.template_definition() if e in models else e.definition() for e in shown]
    return _page(templates, params, "resourceTemplates")


def _read_model(model_mcp: Any, request: Any, pk: str, uri: str) -> dict[str, Any]:
    obj = model_mcp.get_object(request, pk)
    if obj is None:
        raise ResourceNotFoundError(uri)  # missing and forbidden look the same
    return {
        "contents": [
            {
                "uri": uri,
                "mimeType": "application/json",
                "text": orjson.dumps(model_mcp.serialize(obj), default=str).decode(),
            }
        ]
    }


@takes("resources/read")
async def read_resource(params: ResourceParams, ctx: Context) -> dict[str, Any]:
    uri = params.uri
    found = await find_resource(ctx.site, ctx.request, uri)
    if found.access is not Access.VISIBLE:
        raise ResourceNotFoundError(uri)
    ctx.cache_ttl_ms = getattr(found.entry, "cache_ttl_ms", None)
    if found.pk is not None:
        return await sync_to_async(_read_model)(found.entry, ctx.request, found.pk, uri)
    if found.variables is not None:
        return {"contents": await found.entry.read(uri, found.variables, ctx)}
    return {"contents": await found.entry.read(uri, ctx)}


async def readable(site: ServedSite, request: Any, uri: str) -> bool:
    """Whether ``request`` may read ``uri`` now: the gate, then the row itself for model URIs.

    Subscriptions ask it twice: when made, and again for each ``resources/updated`` (with a
    request carrying the session's user), so a right lost since then stops the announcements.
    """
    found = await find_resource(site, request, uri)
    if found.access is not Access.VISIBLE:
        return False
    if found.pk is not None:
        return await sync_to_async(found.entry.get_object)(request, found.pk) is not None
    if found.entry is not None and found.entry.kind == "skill":
        return bool(
            await sync_to_async(found.entry.has_file)(uri)
        )  # a made-up path under it is not
    return True


@takes("resources/subscribe")
async def subscribe(params: ResourceParams, ctx: Context) -> dict[str, Any]:
    uri = params.uri
    # Only what the user may read now: a subscription would otherwise announce changes to rows
    # (and reveal URIs) the user may not see.
    if len(uri) > 2000 or not await readable(ctx.site, ctx.request, uri):
        raise ResourceNotFoundError(uri[:2000])
    if ctx.session is not None:
        await SubscriptionStore().asubscribe(ctx.session.pk, uri)
    return {}


@takes("resources/unsubscribe")
async def unsubscribe(params: ResourceParams, ctx: Context) -> dict[str, Any]:
    uri = params.uri
    if ctx.session is not None:
        await SubscriptionStore().aunsubscribe(ctx.session.pk, uri)
    return {}


@takes("prompts/list")
async def list_prompts(params: ListParams, ctx: Context) -> dict[str, Any]:
    return _page(
        [p.definition() for p in await visible(ctx.site.get_prompts(), ctx)], params, "prompts"
    )


@takes("prompts/get")
async def get_prompt(params: GetPromptParams, ctx: Context) -> dict[str, Any]:
    name, arguments = params.name, params.arguments
    prompt = ctx.site.get_prompt(name)
    if prompt is None or await agate(prompt, ctx.request) is not Access.VISIBLE:
        raise InvalidParamsError(f"Unknown prompt: {name[:128]}")
    return await prompt.get(arguments, ctx)


@takes("completion/complete")
async def complete(params: CompleteParams, ctx: Context) -> dict[str, Any]:
    name, value = params.argument.name, params.argument.value
    entry: Completable | None
    # Completion offers values, so it is gated like a read: anything short of VISIBLE answers
    # exactly as a prompt or template that does not exist.
    if isinstance(params.ref, PromptRef):
        prompt_name = params.ref.name
        entry = ctx.site.get_prompt(prompt_name)
        if entry is None or await agate(entry, ctx.request) is not Access.VISIBLE:
            raise InvalidParamsError(f"Unknown prompt: {prompt_name[:128]}")
    else:
        uri = params.ref.uri
        model_mcp = next((m for m in ctx.site.get_model_mcps() if m.uri_template == uri), None)
        entry = model_mcp or ctx.site.get_resource_template(uri) or ctx.site.get_resource(uri)
        if entry is None or await agate(entry, ctx.request) is not Access.VISIBLE:
            raise InvalidParamsError(f"Unknown resource template: {uri[:200]}")
    # The entry gets the whole Context: model row templates read ctx.request.user, and a
    # function's completer may ask for ctx to filter by the user, as any read path must.
    values, total = await entry.completions(ctx, name, value, params.context_arguments)
    completion: dict[str, Any] = {
        "values": values[:MAX_COMPLETIONS],
        "hasMore": len(values) > MAX_COMPLETIONS,
    }
    if total is not None:
        completion["total"] = total
    return {"completion": completion}


STANDARD_HANDLERS: dict[str, Handler] = {
    "ping": ping,
    "logging/setLevel": set_log_level,
    "tools/list": list_tools,
    "tools/call": call_tool,
    "resources/list": list_resources,
    "resources/templates/list": list_resource_templates,
    "resources/read": read_resource,
    "resources/subscribe": subscribe,
    "resources/unsubscribe": unsubscribe,
    "prompts/list": list_prompts,
    "prompts/get": get_prompt,
    "completion/complete": complete,
}
