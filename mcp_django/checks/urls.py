"""Checks of the URLconf: a URL reaches each MCP site's endpoint, under a prefix that ends in a
slash."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning
from django.urls import URLResolver, get_resolver

from ..registry.sites import all_sites
from ..registry.sites import site as default_site
from .registry import check_empty_sites


def _endpoint_routes() -> list[tuple[Any, str]]:
    """``(site, prefix)`` for each URL of ROOT_URLCONF that reaches an MCP site's endpoint;
    ``prefix`` is the route of the includes above it, joined (``"mcp/"``)."""
    found: list[tuple[Any, str]] = []

    def walk(patterns: Any, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern).removeprefix("^"))
            else:
                site = getattr(pattern.callback, "mcp_site", None)
                if (
                    site is not None
                    and getattr(pattern.callback, "mcp_transport", None) == "streamable-http"
                ):
                    found.append((site, prefix))

    walk(get_resolver().url_patterns, "")
    return found


def check_urls(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An MCP site that no URL reaches answers nothing: POST /mcp gets Django's HTML 404."""
    try:
        routes = _endpoint_routes()
    except Exception:
        return []
    routed = {site.name for site, _ in routes}
    hint = 'In your ROOT_URLCONF: urlpatterns += [path("mcp/", include("mcp_django.urls"))].'
    messages: list[CheckMessage] = []
    if default_site.name not in routed:
        messages.append(
            Error(
                "No URL routes to the MCP endpoint, so clients get a 404.",
                hint=hint,
                id="mcp_django.E170",
            )
        )
    for other in list(all_sites):
        if (
            other.name != default_site.name
            and other.name not in routed
            and (other.get_tools() or other.get_model_mcps())
        ):
            messages.append(
                Warning(
                    f"No URL routes to the endpoint of the MCP site {other.name!r}.",
                    hint='Route it in your ROOT_URLCONF, as admin.site.urls: path("<prefix>/", '
                    "<that site>.urls).",
                    obj=other,
                    id="mcp_django.W170",
                )
            )
    messages += _check_prefixes(routes)
    messages += check_empty_sites(routes)
    return messages


def _check_prefixes(routes: list[tuple[Any, str]]) -> list[CheckMessage]:
    """``path("mcp", include(...))``: Django joins the prefix and each route as they are, so the
    endpoint answers at /mcp but its other URLs become /mcpsse/, /mcphealth/, /mcpelicitations/.
    Reported rather than mended: the site cannot tell its prefix from inside the include, and a
    route that began with "/" would double the slash under the usual "mcp/"."""
    messages: list[CheckMessage] = []
    for site, prefix in routes:
        if prefix and not prefix.endswith("/"):
            shown = prefix.removesuffix("$")
            messages.append(
                Error(
                    f"The MCP site {site.name!r} is included at {shown!r}, without a trailing "
                    f"slash: its other URLs become /{shown}sse/, /{shown}health/ and "
                    f"/{shown}elicitations/..., which no client or probe looks for.",
                    hint=f'End the prefix with a slash: path("{shown}/", include(...)). '
                    f"Clients may still call /{shown} without it.",
                    obj=site,
                    id="mcp_django.E180",
                )
            )
    return messages
