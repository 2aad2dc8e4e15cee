"""ChatGPT's ``search`` and ``fetch`` tools over a site's registered models (opt-in).

The shape is the one OpenAI documents for connectors and deep research: ``search(query)``
answers ``{"results": [{id, title, url}]}`` and ``fetch(id)`` answers ``{id, title, text, url,
metadata}``, each as one JSON text item (and as ``structuredContent``). Every read goes through
the model's own ``get_queryset``, view permission and ``read_scopes``, as the generated
``<app>_<model>_search``/``_get`` tools do. An id is ``<app_label>.<model_name>:<pk>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import orjson
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from ..server.entries import TaskSupport, ToolEntry

if TYPE_CHECKING:
    from .options import ModelMCP

#: The longest query or id a client may send; a longer one is refused.
MAX_INPUT = 500
_ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "openWorldHint": False,
}
_RESULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "title": {"type": "string"},
                    "url": {"type": "string"},
                },
                "required": ["id", "title", "url"],
            },
        }
    },
    "required": ["results"],
}
_DOCUMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "text": {"type": "string"},
        "url": {"type": "string"},
        "metadata": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
    },
    "required": ["id", "title", "text", "url"],
}


def object_url(request: HttpRequest, model_mcp: ModelMCP[Any], obj: Any) -> str:
    """The row's page: ``get_absolute_url()``, else its admin change page if the user may view
    it there, else its resource URI."""
    get_absolute_url = getattr(obj, "get_absolute_url", None)
    if callable(get_absolute_url):
        return request.build_absolute_uri(get_absolute_url())
    model_admin = admin.site._registry.get(type(obj))
    if model_admin is not None and model_admin.has_view_or_change_permission(request, obj):
        opts = model_mcp.opts
        try:
            path = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        except NoReverseMatch:
            pass
        else:
            return request.build_absolute_uri(path)
    return model_mcp.uri_for(obj)


class SearchProvider(Protocol):
    """A project's own source for ``search``/``fetch`` (documents no registered model holds).

    ``search`` answers ``{"id", "title", "url"}`` dicts; ``fetch`` a ``{"title", "text", "url",
    "metadata"?}`` dict, or None when the id is unknown or the user may not read it. Each
    checks the request's user itself. Its ids are namespaced ``<name>:<id>`` by the tools.
    """

    name: str

    def search(self, request: HttpRequest, query: str, limit: int) -> list[dict[str, str]]: ...

    def fetch(self, request: HttpRequest, id: str) -> dict[str, Any] | None: ...


class SearchFetchTool(ToolEntry):
    """``search`` or ``fetch`` of one site (``action``)."""

    kind: ClassVar[str] = "tool"
    streams = False
    task_support: TaskSupport = "forbidden"
    prelude = False
    icons = None
    meta = None
    #: Results one search answers at most, shared across models.
    max_results: ClassVar[int] = 20

    def __init__(self, site: Any, action: str) -> None:
        self.site = site
        self.action = action
        self.name = action
        self.title = action.capitalize()

    # The tools gate nothing themselves: each model is filtered by its own read scopes and
    # view permission inside, so a token without a model's scope gets nothing from it.
    scopes: tuple[str, ...] = ()

    def has_permission(self, request: HttpRequest) -> bool:
        return True

    def definition(self) -> dict[str, Any]:
        arg = "query" if self.action == "search" else "id"
        return {
            "name": self.name,
            "title": self.title,
            "description": (
                "Search the site's records; answers ids that fetch reads."
                if self.action == "search"
                else "Fetch one record by an id that search answered."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {arg: {"type": "string", "maxLength": MAX_INPUT}},
                "required": [arg],
            },
            "outputSchema": _RESULTS_SCHEMA if self.action == "search" else _DOCUMENT_SCHEMA,
            "annotations": dict(_ANNOTATIONS),
        }

    async def check_arguments(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any] | None:
        arg = "query" if self.action == "search" else "id"
        value = arguments.get(arg)
        if not isinstance(value, str):
            return _error(f"Invalid arguments: {arg} (a string) is required.")
        if len(value) > MAX_INPUT:
            return _error(f"Invalid arguments: {arg} is longer than {MAX_INPUT} characters.")
        return None

    async def call(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        invalid = await self.check_arguments(arguments, ctx)
        if invalid is not None:
            return invalid
        work = self._search if self.action == "search" else self._fetch
        return await sync_to_async(work, thread_sensitive=True)(arguments, ctx.request)

    def _search(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        query = arguments["query"].strip()
        providers = self._providers()
        readable = [
            mm
            for mm in self.site.get_model_mcps()
            if mm.search_fields and mm.has_read_scopes(request) and mm.has_view_permission(request)
        ]
        results: list[dict[str, str]] = []
        share = max(1, self.max_results // max(1, len(readable) + len(providers)))
        for mm in readable:
            if len(results) >= self.max_results:
                break
            qs = mm.get_search_results(request, mm.get_queryset(request), query)
            ordering = list(mm.ordering) if mm.ordering else ["pk"]
            for obj in qs.order_by(*ordering)[:share]:
                if not mm.has_view_permission(request, obj):
                    continue
                results.append(
                    {
                        "id": f"{mm.opts.app_label}.{mm.name}:{obj.pk}",
                        "title": str(obj),
                        "url": object_url(request, mm, obj),
                    }
                )
        for provider in self._providers():
            room = self.max_results - len(results)
            if room <= 0:
                break
            for hit in provider.search(request, query, min(room, share))[:room]:
                results.append(
                    {
                        "id": f"{provider.name}:{hit['id']}",
                        "title": str(hit["title"]),
                        "url": str(hit["url"]),
                    }
                )
        return _result({"results": results[: self.max_results]})

    def _providers(self) -> list[SearchProvider]:
        return list(getattr(self.site, "search_providers", ()))

    def _fetch(self, arguments: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
        id_ = arguments["id"]
        label, _, pk = id_.partition(":")
        app_label, _, name = label.partition(".")
        for provider in self._providers():
            if label == provider.name and pk:
                doc = provider.fetch(request, pk)
                if doc is None:
                    break
                return _result(
                    {
                        "id": id_,
                        "title": str(doc["title"]),
                        "text": str(doc["text"]),
                        "url": str(doc["url"]),
                        "metadata": {k: str(v) for k, v in (doc.get("metadata") or {}).items()},
                    }
                )
        for mm in self.site.get_model_mcps():
            if mm.opts.app_label == app_label and mm.name == name and pk:
                obj = mm.get_object(request, pk)
                if obj is None:
                    break
                data = mm.serialize(obj)
                return _result(
                    {
                        "id": id_,
                        "title": str(obj),
                        "text": orjson.dumps(data, default=str).decode(),
                        "url": object_url(request, mm, obj),
                        "metadata": {"model": label, "pk": str(obj.pk)},
                    }
                )
        # Unknown, malformed and forbidden ids answer alike: nothing leaks.
        return _error(f"No record with id {id_!r} (or you may not see it).")


def _result(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": orjson.dumps(data, default=str).decode()}],
        "structuredContent": data,
    }


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
