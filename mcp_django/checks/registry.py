"""Checks of the MCP sites (mcp_django.registry): each site's own check, a routed site with
nothing registered (and the modules that look like registrations nothing imported), and the
skills on disk."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Warning

from ..extensions.skills import APP_FOLDER, Skill, discover
from ..registry.sites import all_sites
from .auth import check_permission_sources


def check_sites(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for site in list(all_sites):
        errors.extend(site.check(app_configs))
    errors += check_permission_sources()
    return errors


#: Module names (besides ``mcp``) where registrations are put by mistake, in an app or its ``mcp/``.
LOOKALIKE_MODULES = ("mcp_tools", "mcp_server", "mcp_site", "mcp_registry", "mcps", "tools")


# What registrations look like in source: ``@site.tool``, ``site.register(...)``,
# ``register_admin(...)``.
REGISTRATION_RE = re.compile(
    r"\.(tool|resource|prompt|register|register_admin)\(|@(tool|resource|prompt|register)\b|mcp_django"
)


def _unloaded_registrations() -> list[str]:
    """``app/module.py`` paths that look like MCP registrations but that nothing imported."""
    found: list[str] = []
    for config in apps.get_app_configs():
        if config.name == "mcp_django" or not config.path:
            continue
        root = Path(config.path)
        candidates = [root / f"{name}.py" for name in LOOKALIKE_MODULES]
        candidates += sorted((root / "mcp").glob("*.py")) if (root / "mcp").is_dir() else []
        for path in candidates:
            module = ".".join([config.name, *path.relative_to(root).with_suffix("").parts])
            if module.endswith(".__init__") or module in sys.modules or not path.is_file():
                continue
            try:
                source = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if REGISTRATION_RE.search(source):
                found.append(f"{config.label}/{path.relative_to(root).as_posix()}")
    return found


def check_empty_sites(routes: list[tuple[Any, str]]) -> list[CheckMessage]:
    """A routed site with nothing registered: most often the registrations sit in a module that
    autodiscovery never imports (``tools.py``, ``mcp_tools.py``), so the server is empty."""
    messages: list[CheckMessage] = []
    for site in {site for site, _ in routes}:
        if (
            site.get_tools()
            or site.get_resources()
            or site.get_resource_templates()
            or site.get_prompts()
            or site.get_model_mcps()
        ):
            continue
        unloaded = _unloaded_registrations()
        hint = (
            "Autodiscovery imports the module mcp of each installed app (<app>/mcp.py or "
            "<app>/mcp/__init__.py), and only with the default AppConfig (not "
            "SimpleMcpDjangoConfig); register there, or import your module from it."
        )
        if unloaded:
            hint += f" Not imported, and they look like registrations: {', '.join(unloaded)}."
        messages.append(
            Warning(
                f"The MCP site {site.name!r} has no tools, resources or prompts: clients see an "
                "empty server.",
                hint=hint,
                obj=site,
                id="mcp_django.W182",
            )
        )
    return messages


def check_skills(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every skill as it is on disk (E190-E196, W190), once however many sites serve it, and
    the app-folder skills another app's folder of the same name hides (W191)."""
    configs = list(apps.get_app_configs()) if app_configs is None else list(app_configs)
    skills: list[Skill] = discover(configs)
    if app_configs is None:
        skills += [s for mcp_site in list(all_sites) for s in mcp_site.get_skills()]
    messages: list[CheckMessage] = []
    seen: set[Path] = set()
    for skill in skills:
        where = skill.directory.resolve()
        if where in seen:
            continue
        seen.add(where)
        for problem in skill.problems():
            kind = Error if problem.is_error else Warning
            message = (
                f"The skill {skill.name!r} ({skill.origin}, {skill.directory}): {problem.message}"
            )
            messages.append(kind(message, hint=problem.hint, obj=skill, id=problem.id))
    first: dict[str, str] = {}
    for app_config in configs:
        folder = Path(app_config.path) / APP_FOLDER
        names = (
            sorted(
                c.name for c in folder.iterdir() if c.is_dir() and not c.name.startswith((".", "_"))
            )
            if folder.is_dir()
            else []
        )
        for name in names:
            if name in first:
                messages.append(
                    Warning(
                        f"The skill {name!r} of app {app_config.label} is hidden by the one of app "
                        f"{first[name]}, earlier in INSTALLED_APPS.",
                        hint="Rename one of the folders, or order INSTALLED_APPS so that the one "
                        "to serve comes first (as for templates).",
                        obj=f"{app_config.path}/{APP_FOLDER}/{name}",
                        id="mcp_django.W191",
                    )
                )
            else:
                first[name] = app_config.label
    return messages
