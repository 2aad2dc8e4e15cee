"""The standard MCP method handlers, built over an ``MCPSite``'s registry.

Each handler takes the request params and the :class:`~mcp_django.context.Context`, and returns
the result dict or raises a protocol error. ``initialize`` is not here: it creates the session,
which is the transport's business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from .conf import mcp_settings
from .context import Context
from .functions import run_completer
from .protocol.dispatcher import Handler
from .protocol.errors import InvalidParamsError, ResourceNotFoundError
from .protocol.lifecycle import parse_log_level
from .protocol.pagination import decode_cursor, encode_cursor, paginate
from .stores import SessionStore, SubscriptionStore

if TYPE_CHECKING:
    from .sites import MCPSite

MAX_COMPLETIONS = 100


def _require_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParamsError(f'Invalid params: "{key}" must be a non-empty string')
    return value


def _optional_object(params: dict[str, Any], key: str) -> dict[str, Any]:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParamsError(f'Invalid params: "{key}" must be an object')
    return value


def _page(items: list[dict[str, Any]], params: dict[str, Any], key: str) -> dict[str, Any]:
    page, next_cursor = paginate(items, params, mcp_settings.page_size)
    result: dict[str, Any] = {key: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


async def ping(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {}


async def set_log_level(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    level = parse_log_level(params)
    if ctx.session is not None:
        ctx.session.log_level = level
        await SessionStore().aupdate(ctx.session.pk, log_level=level)
    return {}


def _needs_permission_check(tool: Any) -> bool:
    return bool(getattr(tool, "permissions", True))


async def visible(entries: list[Any], ctx: Context) -> list[Any]:
    """The entries this user may use; permission checks touch the database, so off the loop."""
    if not any(_needs_permission_check(e) for e in entries):
        return entries
    return await sync_to_async(lambda: [e for e in entries if e.is_visible(ctx.request)])()


async def _usable(entry: Any, ctx: Context) -> bool:
    return entry is not None and (not _needs_permission_check(entry) or await sync_to_async(entry.is_visible)(ctx.request))


async def visible_tools(ctx: Context) -> list[Any]:
    return await visible(ctx.site.get_tools(), ctx)


async def list_tools(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return _page([t.definition() for t in await visible_tools(ctx)], params, "tools")


async def call_tool(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    name = _require_str(params, "name")
    arguments = _optional_object(params, "arguments")
    tool = ctx.site.get_tool(name)
    # A tool the user may not use answers like one that does not exist: nothing leaks.
    if not await _usable(tool, ctx):
        raise InvalidParamsError(f"Unknown tool: {name[:128]}")
    return await tool.call(arguments, ctx)


def _list_resources_page(site: MCPSite, request: Any, params: dict[str, Any], page_size: int) -> dict[str, Any]:
    """Function resources first, then each model's rows by primary key.

    The cursor holds the section and the last primary key seen (keyset pagination): page 1,000
    of a large table costs what page 1 costs, one query per section touched.
    """
    statics = [r for r in site.get_resources() if r.is_visible(request)]
    sections: list[Any] = [None, *site.get_model_mcps()]
    section, key = 0, None
    if params.get("cursor") is not None:
        position = decode_cursor(params["cursor"])
        section, key = position.get("s"), position.get("k")
        if not isinstance(section, int) or isinstance(section, bool) or not 0 <= section < len(sections):
            raise InvalidParamsError("Invalid params: invalid cursor")
    items: list[dict[str, Any]] = []
    while section < len(sections) and len(items) < page_size:
        want = page_size - len(items)
        if sections[section] is None:
            offset = key if isinstance(key, int) and not isinstance(key, bool) and key >= 0 else 0
            page = statics[offset : offset + want]
            items += [r.definition() for r in page]
            if offset + want < len(statics):
                return {"resources": items, "nextCursor": encode_cursor({"s": section, "k": offset + want})}
        else:
            model_mcp = sections[section]
            after = model_mcp.coerce_pk(key) if key is not None else None
            page = model_mcp.list_page(request, after, want + 1)
            items += [definition for _pk, definition in page[:want]]
            if len(page) > want:
                last_pk = page[want - 1][0]
                last_pk = last_pk if isinstance(last_pk, int) else str(last_pk)
                return {"resources": items, "nextCursor": encode_cursor({"s": section, "k": last_pk})}
        section, key = section + 1, None
    return {"resources": items}


async def list_resources(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if not ctx.site.get_model_mcps():
        return _page([r.definition() for r in await visible(ctx.site.get_resources(), ctx)], params, "resources")
    return await sync_to_async(_list_resources_page)(ctx.site, ctx.request, params, mcp_settings.page_size)


async def list_resource_templates(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    templates = [t.definition() for t in await visible(ctx.site.get_resource_templates(), ctx)]
    templates += [m.template_definition() for m in ctx.site.get_model_mcps()]
    return _page(templates, params, "resourceTemplates")


def _read_model(model_mcp: Any, request: Any, pk: str, uri: str) -> dict[str, Any]:
    import orjson

    obj = model_mcp.get_object(request, pk)
    if obj is None:
        raise ResourceNotFoundError(uri)  # missing and forbidden look the same
    return {"contents": [{"uri": uri, "mimeType": "application/json", "text": orjson.dumps(model_mcp.serialize(obj), default=str).decode()}]}


async def read_resource(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    uri = _require_str(params, "uri")
    resource = ctx.site.get_resource(uri)
    if resource is not None:
        if not await _usable(resource, ctx):
            raise ResourceNotFoundError(uri)
        return {"contents": await resource.read(uri, ctx)}
    found = ctx.site.get_model_mcp_for_uri(uri)
    if found is not None:
        return await sync_to_async(_read_model)(found[0], ctx.request, found[1], uri)
    for template in ctx.site.get_resource_templates():
        variables = template.match(uri)
        if variables is not None and await _usable(template, ctx):
            return {"contents": await template.read(uri, variables, ctx)}
    raise ResourceNotFoundError(uri)


def _known_resource(site: MCPSite, uri: str) -> bool:
    return (
        site.get_resource(uri) is not None
        or any(t.match(uri) is not None for t in site.get_resource_templates())
        or site.get_model_mcp_for_uri(uri) is not None
    )


async def subscribe(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    uri = _require_str(params, "uri")
    if len(uri) > 2000 or not _known_resource(ctx.site, uri):
        raise ResourceNotFoundError(uri[:2000])
    if ctx.session is not None:
        await SubscriptionStore().asubscribe(ctx.session.pk, uri)
    return {}


async def unsubscribe(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    uri = _require_str(params, "uri")
    if ctx.session is not None:
        await SubscriptionStore().aunsubscribe(ctx.session.pk, uri)
    return {}


async def list_prompts(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return _page([p.definition() for p in await visible(ctx.site.get_prompts(), ctx)], params, "prompts")


async def get_prompt(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    name = _require_str(params, "name")
    arguments = _optional_object(params, "arguments")
    prompt = ctx.site.get_prompt(name)
    if not await _usable(prompt, ctx):
        raise InvalidParamsError(f"Unknown prompt: {name[:128]}")
    return await prompt.get(arguments, ctx)


async def complete(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    ref = _optional_object(params, "ref")
    argument = _optional_object(params, "argument")
    name = argument.get("name")
    value = argument.get("value", "")
    if not isinstance(name, str) or not isinstance(value, str):
        raise InvalidParamsError('Invalid params: "argument" needs string "name" and "value"')
    context_args = _optional_object(_optional_object(params, "context"), "arguments")
    ref_type = ref.get("type")
    completers: dict[str, Any]
    if ref_type == "ref/prompt":
        prompt = ctx.site.get_prompt(_require_str(ref, "name"))
        if not await _usable(prompt, ctx):
            raise InvalidParamsError(f"Unknown prompt: {str(ref.get('name'))[:128]}")
        completers = prompt.complete
    elif ref_type == "ref/resource":
        uri = _require_str(ref, "uri")
        template = ctx.site.get_resource_template(uri)
        model_mcp = next((m for m in ctx.site.get_model_mcps() if m.uri_template == uri), None)
        if model_mcp is not None:
            if name != "pk":
                return {"completion": {"values": [], "total": 0, "hasMore": False}}
            values = await sync_to_async(model_mcp.complete_pk)(ctx.request, value, MAX_COMPLETIONS + 1)
            return {"completion": {"values": values[:MAX_COMPLETIONS], "hasMore": len(values) > MAX_COMPLETIONS}}
        if template is None:
            if ctx.site.get_resource(uri) is None:
                raise InvalidParamsError(f"Unknown resource template: {uri[:200]}")
            completers = {}
        else:
            completers = template.complete
    else:
        raise InvalidParamsError('Invalid params: "ref.type" must be "ref/prompt" or "ref/resource"')
    completer = completers.get(name)
    values = await run_completer(completer, value, context_args) if completer is not None else []
    return {"completion": {"values": values[:MAX_COMPLETIONS], "total": len(values), "hasMore": len(values) > MAX_COMPLETIONS}}


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
