"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): a tool's interactive UI, rendered
from a Django template and served as a ``ui://`` resource.

``@site.tool(ui="library/availability.html")`` (or ``ui=UI(...)`` for the CSP and the rest)
gives the tool ``_meta.ui.resourceUri`` in ``tools/list`` and registers a :class:`UIResource`
at that URI. A host reads it with ``resources/read`` (``text/html;profile=mcp-app``, with the
``_meta.ui`` CSP and permissions the host builds its sandbox from), renders it in a sandboxed
iframe, and forwards the app's ``tools/call`` requests back to this server as the same user.

A UI resource is gated by the tools that name it: a user (and a token) may read it only if it
may use every one of them, so nobody reads the UI of a tool hidden from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal

from asgiref.sync import sync_to_async
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.template import TemplateDoesNotExist
from django.template.loader import render_to_string

from ..server.entries import Completions, RequestContext, ResourceEntry, ServedSite, ToolEntry

#: The extension's identifier, as ``capabilities.extensions`` names it (SEP-1865).
UI_EXTENSION: Final = "io.modelcontextprotocol/ui"
#: The one MIME type of an MCP App resource (MUST, apps spec "Content Requirements").
MIME_TYPE: Final = "text/html;profile=mcp-app"
#: The deprecated flat key hosts still read beside ``_meta.ui.resourceUri`` (the reference
#: SDK's ``registerAppTool`` writes both, so older hosts find the UI too).
LEGACY_RESOURCE_URI_KEY: Final = "ui/resourceUri"

Permission = Literal["camera", "microphone", "geolocation", "clipboardWrite"]
PERMISSIONS: Final[tuple[Permission, ...]] = (
    "camera",
    "microphone",
    "geolocation",
    "clipboardWrite",
)
Visibility = Literal["model", "app"]
VISIBILITIES: Final[tuple[Visibility, ...]] = ("model", "app")

# The CSP lists of McpUiResourceCsp, as UI's attributes and as the wire names them.
_CSP_FIELDS: Final = (
    ("connect_domains", "connectDomains"),
    ("resource_domains", "resourceDomains"),
    ("frame_domains", "frameDomains"),
    ("base_uri_domains", "baseUriDomains"),
)


def _strings(value: Iterable[str] | str, what: str, owner: str) -> tuple[str, ...]:
    # A bare string would be read as its characters: refuse it rather than declare "h", "t"...
    if isinstance(value, str) or not all(isinstance(item, str) and item for item in value):
        raise ImproperlyConfigured(f"{owner}: {what} must be a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class UI:
    """A tool's MCP App: the Django template that renders it, and what the host should allow it.

    ``template`` is found by the project's template loaders (an app's ``templates/`` folder).
    The resource is served at ``uri`` (default ``ui://<template>``). The CSP lists are origins
    (``https://cdn.example.com``, ``https://*.example.com``): the host denies every origin not
    declared, so an app that loads nothing from elsewhere inlines its scripts and styles.
    ``permissions`` asks for browser features (``camera``, ``microphone``, ``geolocation``,
    ``clipboardWrite``); ``visibility=["app"]`` keeps the tool out of the model's tool list.
    """

    template: str
    uri: str | None = None
    name: str | None = None
    title: str | None = None
    description: str | None = None
    connect_domains: Sequence[str] = ()
    resource_domains: Sequence[str] = ()
    frame_domains: Sequence[str] = ()
    base_uri_domains: Sequence[str] = ()
    permissions: Sequence[Permission] = ()
    domain: str | None = None
    prefers_border: bool | None = None
    visibility: Sequence[Visibility] | None = None
    #: Set from ``uri`` or the template: the URI the resource is served at.
    resource_uri: str = field(init=False)

    def __post_init__(self) -> None:
        owner = f"UI {self.template!r}"
        if not isinstance(self.template, str) or not self.template:
            raise ImproperlyConfigured(
                "UI: template must be a template name, such as 'library/availability.html'"
            )
        uri = self.uri if self.uri is not None else f"ui://{self.template}"
        if not uri.startswith("ui://") or len(uri) == len("ui://"):
            raise ImproperlyConfigured(
                f"{owner}: the uri must use the ui:// scheme (apps spec), not {uri!r}"
            )
        object.__setattr__(self, "resource_uri", uri)
        for attribute, _wire in _CSP_FIELDS:
            object.__setattr__(
                self, attribute, _strings(getattr(self, attribute), attribute, owner)
            )
        permissions = _strings(self.permissions, "permissions", owner)
        unknown = [p for p in permissions if p not in PERMISSIONS]
        if unknown:
            raise ImproperlyConfigured(
                f"{owner}: unknown permissions {unknown}; use {', '.join(PERMISSIONS)}"
            )
        object.__setattr__(self, "permissions", permissions)
        if self.visibility is not None:
            visibility = _strings(self.visibility, "visibility", owner)
            if not visibility or any(v not in VISIBILITIES for v in visibility):
                raise ImproperlyConfigured(
                    f"{owner}: visibility must list 'model', 'app' or both, not {list(visibility)}"
                )
            object.__setattr__(self, "visibility", visibility)
        if self.prefers_border is not None and not isinstance(self.prefers_border, bool):
            raise ImproperlyConfigured(f"{owner}: prefers_border must be True, False or None")

    def tool_meta(self) -> dict[str, Any]:
        """The tool's ``_meta`` keys (``McpUiToolMeta``, and the legacy flat key)."""
        ui: dict[str, Any] = {"resourceUri": self.resource_uri}
        if self.visibility is not None:
            ui["visibility"] = list(self.visibility)
        return {"ui": ui, LEGACY_RESOURCE_URI_KEY: self.resource_uri}

    def resource_meta(self) -> dict[str, Any]:
        """``_meta.ui`` of the resource (``McpUiResourceMeta``): CSP, permissions, domain,
        border."""
        meta: dict[str, Any] = {}
        csp = {
            wire: list(getattr(self, attribute))
            for attribute, wire in _CSP_FIELDS
            if getattr(self, attribute)
        }
        if csp:
            meta["csp"] = csp
        if self.permissions:
            meta["permissions"] = {p: {} for p in self.permissions}
        if self.domain:
            meta["domain"] = self.domain
        if self.prefers_border is not None:
            meta["prefersBorder"] = self.prefers_border
        return meta


def as_ui(value: UI | str | None) -> UI | None:
    """``ui=`` of a tool: a :class:`UI`, a template name standing for ``UI(template)``, or None."""
    if value is None or isinstance(value, UI):
        return value
    if isinstance(value, str):
        return UI(value)
    raise ImproperlyConfigured(f"ui= must be a template name or a mcp_django.UI, not {value!r}")


class UIResource(ResourceEntry):
    """The ``ui://`` resource of one or more tools' :class:`UI`, rendered from its template.

    It is given its site (as a ``ModelMCP`` is) and finds the tools that name it there on each
    decision, so it follows them as they are registered and unregistered: with none left, it is
    hidden.
    """

    kind: ClassVar[str] = "resource"
    #: Reads follow the site's READ_CACHE_TTL_MS, as other resources do.
    cache_ttl_ms: int | None = None

    def __init__(self, ui: UI, site: ServedSite) -> None:
        self.ui = ui
        self.site = site
        self.uri = ui.resource_uri
        self.name = ui.name or ui.template

    def __repr__(self) -> str:
        return f"UIResource({self.uri!r}, template={self.ui.template!r})"

    def tools(self) -> list[ToolEntry]:
        """The site's tools whose UI this is."""
        return [
            t
            for t in self.site.get_tools()
            if getattr(getattr(t, "ui", None), "resource_uri", None) == self.uri
        ]

    # -- the gate: whatever every tool naming it needs --------------------------------------

    @property
    def permissions(self) -> tuple[str, ...]:
        """The Django permissions of every tool naming it (:func:`entries.queries` reads this)."""
        return tuple(dict.fromkeys(p for t in self.tools() for p in getattr(t, "permissions", ())))

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for t in self.tools() for s in t.scopes))

    def has_permission(self, request: Any) -> bool:
        tools = self.tools()
        return bool(tools) and all(t.has_permission(request) for t in tools)

    # -- the entry --------------------------------------------------------------------------

    def definition(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri, "name": self.name, "mimeType": MIME_TYPE}
        if self.ui.title:
            resource["title"] = self.ui.title
        if self.ui.description:
            resource["description"] = self.ui.description
        meta = self.ui.resource_meta()
        if meta:
            resource["_meta"] = {"ui": meta}  # hosts fall back to the listing's (apps spec)
        return resource

    def template_context(self) -> dict[str, Any]:
        """What the template is rendered with: no request and no user, since hosts fetch a UI
        ahead of any call and cache it; the data comes later, in the tool's result."""
        return {"resource_uri": self.uri, "tool_names": [t.name for t in self.tools()]}

    def render(self) -> str:
        """The app's HTML (raises TemplateDoesNotExist or the template's own error)."""
        return render_to_string(self.ui.template, self.template_context())

    async def read(self, uri: str, ctx: RequestContext) -> list[dict[str, Any]]:
        # Loaders read files and tags may query: off the event loop, as sync tools run.
        html = await sync_to_async(self.render)()
        content: dict[str, Any] = {"uri": uri, "mimeType": MIME_TYPE, "text": html}
        meta = self.ui.resource_meta()
        if meta:
            content["_meta"] = {"ui": meta}
        return [content]

    async def completions(
        self, ctx: RequestContext, argument: str, value: str, context: dict[str, str]
    ) -> Completions:
        return Completions([], 0)  # a fixed URI has nothing to complete


def check_ui_resources(resources: Iterable[UIResource]) -> list[CheckMessage]:
    """Render each tool UI once, without a request, as hosts will fetch it: a missing template
    (E200) or one that fails to render (E201) is found at start-up, not by the first host."""
    errors: list[CheckMessage] = []
    for resource in resources:
        tools = ", ".join(repr(t.name) for t in resource.tools()) or "no tool"
        try:
            resource.render()
        except TemplateDoesNotExist as exc:
            errors.append(
                Error(
                    f"The UI template {resource.ui.template!r} of {tools} ({resource.uri}) does "
                    "not "
                    "exist.",
                    hint=(
                        f"Create it in an app's templates/ folder (the loaders looked for {exc}), "
                        "or fix ui= on the tool."
                    ),
                    obj=resource,
                    id="mcp_django.E200",
                )
            )
        except Exception as exc:  # any error of the template's own code: reported, not raised
            errors.append(
                Error(
                    f"The UI template {resource.ui.template!r} of {tools} ({resource.uri}) fails "
                    "to "
                    f"render: {type(exc).__name__}: {exc}.",
                    hint="It is rendered without a request or user (hosts fetch it before any "
                    "call): "
                    "take the data from the tool's result in the page's script, not from the "
                    "template context.",
                    obj=resource,
                    id="mcp_django.E201",
                )
            )
    return errors
