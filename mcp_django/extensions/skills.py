"""Skills (the ``io.modelcontextprotocol/skills`` extension, SEP-2640): folders of files, each
with a ``SKILL.md``, served as ``skill://<name>/<path>`` resources.

A skill is a folder ``<app>/mcp_skills/<name>/`` of an installed app, found the way the
app-directories template loader finds templates (:func:`app_skills`, ``INSTALLED_APPS`` order,
first app wins), or a folder registered in code with ``site.skill(path)``. A :class:`Skill` is
an entry like a tool or a resource: the site's one gate (:func:`mcp_django.server.entries.gate`)
decides from its ``permissions`` and ``scopes`` whether a request may list it, get it and read
its files.

What a skill's files say is read from disk when asked and kept while the file is unchanged:
digests and the frontmatter are keyed by path, modification time and size, so a skill is hashed
once per version of its files, not on every ``skills/list``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import mimetypes
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

import yaml
from asgiref.sync import sync_to_async
from django.apps import apps
from django.core.signals import setting_changed
from django.dispatch import receiver

from ..conf import mcp_settings
from ..protocol.dispatcher import Handler
from ..protocol.errors import InvalidParamsError, ResourceNotFoundError
from ..protocol.pagination import page_result
from ..protocol.params import DirectoryParams, ListParams, SkillParams, takes
from ..server.entries import Access, RequestContext, SkillEntry, agate, gate, listed

logger = logging.getLogger(__name__)

#: The extension's identifier, under ``capabilities.extensions``.
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
#: The folder of an installed app whose subfolders are skills.
APP_FOLDER: Final = "mcp_skills"
#: The file every skill has at its root.
SKILL_MD: Final = "SKILL.md"
SCHEME: Final = "skill"
#: ``mimeType`` of a directory in ``resources/directory/read``.
DIRECTORY_MIME_TYPE: Final = "inode/directory"
#: SEP-2640's limits: servers SHOULD NOT serve a skill with more files, or more bytes in all.
MAX_RESOURCES: Final = 512
MAX_TOTAL_BYTES: Final = 16 * 1024 * 1024
#: The Agent Skills specification's naming rule: 1-64 characters, lowercase letters, digits and
#: hyphens, no hyphen first, last or twice in a row.
NAME_RE: Final = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
MAX_DESCRIPTION: Final = 1024
MAX_COMPATIBILITY: Final = 500
#: The frontmatter fields the Agent Skills specification defines.
KNOWN_FIELDS: Final = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
#: ``metadata`` keys with this prefix are reserved for MCP extensions (none defined yet).
RESERVED_METADATA_PREFIX: Final = "io.modelcontextprotocol/"

_FRONTMATTER_RE = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)
#: Types found by extension but unknown to the platform's tables on some systems.
_MIME_TYPES: Final = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".py": "text/x-python",
}


class SkillError(ValueError):
    """A skill that cannot be served as it is on disk; ``problems`` says why, one line each."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Problem:
    """One rule a skill breaks: the check id that reports it, what is wrong, and what to do."""

    id: str
    message: str
    hint: str

    @property
    def is_error(self) -> bool:
        """An error stops the skill from being served; a warning does not."""
        return ".E" in self.id


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill: its path inside the skill (``/``-separated), where it is, and what
    its ``resources`` entry says of it."""

    path: str
    location: Path
    size: int
    digest: str


@dataclass(frozen=True)
class Loaded:
    """A skill as its files are now: the parsed frontmatter and every file, SKILL.md first."""

    frontmatter: dict[str, Any]
    files: tuple[SkillFile, ...]


# -- reading files, once per version ---------------------------------------------------------

_cache_lock = threading.Lock()
#: path -> (mtime_ns, size, digest)
_digests: dict[str, tuple[int, int, str]] = {}
#: path -> (mtime_ns, size, frontmatter or the problems found)
_frontmatters: dict[str, tuple[int, int, dict[str, Any] | list[Problem]]] = {}
#: (folder, reason) of the skills already logged as not served.
_logged: set[tuple[str, str]] = set()


def file_digest(location: Path, stat: os.stat_result) -> str:
    """``sha256:<hex>`` of the file's bytes, computed once per (path, mtime, size)."""
    key = str(location)
    with _cache_lock:
        cached = _digests.get(key)
    if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
        return cached[2]
    digest = "sha256:" + hashlib.sha256(location.read_bytes()).hexdigest()
    with _cache_lock:
        _digests[key] = (stat.st_mtime_ns, stat.st_size, digest)
    return digest


def clear_caches() -> None:
    """Forget every digest and frontmatter (and the app folders found): tests, reloads."""
    with _cache_lock:
        _digests.clear()
        _frontmatters.clear()
        _logged.clear()
    app_skill_folders.cache_clear()


def _is_json_value(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False


def parse_frontmatter(text: str) -> dict[str, Any]:
    """The YAML frontmatter at the head of a SKILL.md, as a JSON object; ``SkillError`` if
    there is none, it is not valid YAML, not a mapping, or holds values JSON has no type for."""
    match = _FRONTMATTER_RE.match(text.removeprefix("\ufeff"))
    if match is None:
        raise SkillError(
            [
                Problem(
                    "mcp_django.E190",
                    "SKILL.md does not begin with a YAML frontmatter block between '---' lines.",
                    "Start SKILL.md with '---', the name and description fields, then '---'.",
                )
            ]
        )
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise SkillError(
            [
                Problem(
                    "mcp_django.E190",
                    f"The frontmatter of SKILL.md is not valid YAML: {exc}".replace("\n", " "),
                    "Fix the YAML between the '---' lines (quote values that hold ': ').",
                )
            ]
        ) from None
    if not isinstance(data, dict):
        raise SkillError(
            [
                Problem(
                    "mcp_django.E190",
                    "The frontmatter of SKILL.md is not a mapping of fields.",
                    "Write 'name: ...' and 'description: ...' lines between the '---' lines.",
                )
            ]
        )
    if not _is_json_value(data):
        # Listed as JSON, and compared by clients with the file's: a YAML date has no JSON twin.
        raise SkillError(
            [
                Problem(
                    "mcp_django.E190",
                    "The frontmatter of SKILL.md holds a value JSON cannot carry (a date, a "
                    "binary, "
                    "a non-text key).",
                    "Quote it, so that YAML reads a string.",
                )
            ]
        )
    return data


def frontmatter_problems(frontmatter: dict[str, Any], folder_name: str) -> list[Problem]:
    """What the Agent Skills specification and SEP-2640 say against ``frontmatter`` of the skill
    in folder ``folder_name`` (errors E191-E193, warning W190)."""
    problems: list[Problem] = []
    name = frontmatter.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        problems.append(
            Problem(
                "mcp_django.E191",
                f"The skill name {name!r} breaks the naming rules.",
                "1-64 characters: lowercase letters, digits and hyphens; no hyphen first, last or "
                "twice in a row.",
            )
        )
    elif name != folder_name:
        problems.append(
            Problem(
                "mcp_django.E191",
                f"The skill name {name!r} is not its folder's name {folder_name!r}.",
                "Rename the folder or the name: a skill's URI is skill://<name>/SKILL.md, its "
                "folder's name.",
            )
        )
    description = frontmatter.get("description")
    if (
        not isinstance(description, str)
        or not description.strip()
        or len(description) > MAX_DESCRIPTION
    ):
        problems.append(
            Problem(
                "mcp_django.E192",
                "The skill description is missing, empty, not text or longer than 1024 characters.",
                "Say in one or two sentences what the skill does and when to use it.",
            )
        )
    compatibility = frontmatter.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY
    ):
        problems.append(
            Problem(
                "mcp_django.E193",
                "The skill's compatibility field is not text of at most 500 characters.",
                "Shorten it, or remove it.",
            )
        )
    # Text in the Agent Skills specification. PyYAML reads YAML 1.1, where `license: no` or
    # `allowed-tools: on` is a boolean; a host parsing YAML 1.2 reads the text, and refuses a
    # listing whose frontmatter differs from the file's.
    for field in ("license", "allowed-tools"):
        if field in frontmatter and not isinstance(frontmatter[field], str):
            problems.append(
                Problem(
                    "mcp_django.E193",
                    f"The skill's {field} field is not text.",
                    "Quote its value, so that every YAML parser reads text.",
                )
            )
    metadata = frontmatter.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        problems.append(
            Problem(
                "mcp_django.E193",
                "The skill's metadata field is not a mapping of names to strings.",
                "Quote each value.",
            )
        )
    elif isinstance(metadata, dict) and any(
        k.startswith(RESERVED_METADATA_PREFIX) for k in metadata
    ):
        problems.append(
            Problem(
                "mcp_django.W190",
                f"The skill's metadata uses keys under {RESERVED_METADATA_PREFIX!r}, reserved for "
                "MCP extensions.",
                "Use a prefix of your own.",
            )
        )
    unknown = sorted(set(frontmatter) - KNOWN_FIELDS)
    if unknown:
        problems.append(
            Problem(
                "mcp_django.W190",
                "The skill's frontmatter has fields the Agent Skills specification does not "
                f"define: {', '.join(unknown)}.",
                "Move them under metadata.",
            )
        )
    return problems


def _frontmatter(location: Path, stat: os.stat_result) -> dict[str, Any] | list[Problem]:
    key = str(location)
    with _cache_lock:
        cached = _frontmatters.get(key)
    if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
        return cached[2]
    parsed: dict[str, Any] | list[Problem]
    try:
        parsed = parse_frontmatter(location.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        parsed = [Problem("mcp_django.E190", "SKILL.md is not UTF-8 text.", "Save it as UTF-8.")]
    except SkillError as exc:
        parsed = exc.problems
    with _cache_lock:
        _frontmatters[key] = (stat.st_mtime_ns, stat.st_size, parsed)
    return parsed


def _walk(root: Path) -> Iterable[tuple[str, Path, os.stat_result]]:
    """Every regular file under ``root``, sorted, as (relative path, location, stat). Hidden
    names (``.git``, ``.DS_Store``) and ``__pycache__`` are left out; symbolic links are not
    followed, so a skill never serves a file from outside its folder."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        base = Path(dirpath)
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            location = base / filename
            stat = location.lstat()
            if location.is_symlink() or not location.is_file():
                continue
            yield location.relative_to(root).as_posix(), location, stat


def mime_type(path: str) -> str:
    """The ``mimeType`` a skill file is served with (SKILL.md: ``text/markdown``)."""
    suffix = os.path.splitext(path)[1].lower()
    return _MIME_TYPES.get(suffix) or mimetypes.guess_type(path)[0] or "application/octet-stream"


# -- the entry ---------------------------------------------------------------------------------


class Skill:
    """A folder served as a skill, gated like any entry by ``permission`` and ``scopes``."""

    kind: ClassVar[str] = "skill"
    #: How long 2026-07-28 clients may keep a file read (None: ``READ_CACHE_TTL_MS``).
    cache_ttl_ms: int | None = None

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        permission: str | list[str] | tuple[str, ...] | None = None,
        scopes: str | list[str] | tuple[str, ...] | None = None,
        origin: str = "",
    ) -> None:
        #: The skill's folder.
        self.directory = Path(directory)
        #: The folder's name: the skill's name, and its URI's authority.
        self.name = self.directory.name
        #: Django permissions a user needs to see and use it.
        self.permissions: tuple[str, ...] = (
            (permission,) if isinstance(permission, str) else tuple(permission or ())
        )
        #: OAuth scopes a token needs, on top of the site's REQUIRED_SCOPES.
        self.scopes: tuple[str, ...] = (scopes,) if isinstance(scopes, str) else tuple(scopes or ())
        #: Where it came from, for messages: "app library" or "code".
        self.origin = origin or "code"

    def __repr__(self) -> str:
        return f"<Skill {self.name!r} at {self.directory}>"

    def has_permission(self, request: Any) -> bool:
        """Whether the request's user holds ``permissions`` (no query when there are none)."""
        if not self.permissions:
            return True
        user = getattr(request, "user", None)
        return bool(user is not None and user.has_perms(self.permissions))

    @property
    def uri(self) -> str:
        """The skill's URI: its SKILL.md's."""
        return self.file_uri(SKILL_MD)

    @property
    def root_uri(self) -> str:
        """The URI of the skill's folder (``resources/directory/read``)."""
        return f"{SCHEME}://{self.name}"

    def file_uri(self, path: str) -> str:
        return f"{self.root_uri}/{path}"

    def path_of(self, uri: str) -> str | None:
        """The path inside this skill that ``uri`` names ("" for the skill's folder), or None."""
        if uri == self.root_uri:
            return ""
        prefix = self.root_uri + "/"
        return uri[len(prefix) :].rstrip("/") if uri.startswith(prefix) else None

    # -- what is on disk -------------------------------------------------------------------

    def problems(self) -> list[Problem]:
        """Every rule the skill breaks as its files are now (the system check reports these)."""
        return self._inspect()[0]

    def _inspect(
        self,
    ) -> tuple[list[Problem], dict[str, Any] | None, list[tuple[str, Path, os.stat_result]]]:
        """The problems, the frontmatter (None if unreadable) and the files, in one walk."""
        manifest = self.directory / SKILL_MD
        if not self.directory.is_dir():
            return (
                [
                    Problem(
                        "mcp_django.E194",
                        f"The skill folder {self.directory} does not exist.",
                        "Create it, or register the right path.",
                    )
                ],
                None,
                [],
            )
        if not manifest.is_file():
            return (
                [
                    Problem(
                        "mcp_django.E194",
                        f"The skill folder {self.directory} has no {SKILL_MD}.",
                        "Every skill has a SKILL.md at its root.",
                    )
                ],
                None,
                [],
            )
        parsed = _frontmatter(manifest, manifest.stat())
        frontmatter: dict[str, Any] | None = None
        if isinstance(parsed, dict):
            frontmatter = parsed
            problems = frontmatter_problems(parsed, self.name)
        else:
            problems = list(parsed)
        files = list(_walk(self.directory))
        if len(files) > MAX_RESOURCES:
            problems.append(
                Problem(
                    "mcp_django.E195",
                    f"The skill {self.name!r} has {len(files)} files; at most {MAX_RESOURCES} are "
                    "served.",
                    "Split it into skills, or move what it does not need out of its folder.",
                )
            )
        total = sum(stat.st_size for _path, _location, stat in files)
        if total > MAX_TOTAL_BYTES:
            problems.append(
                Problem(
                    "mcp_django.E196",
                    f"The skill {self.name!r} holds {total} bytes; at most {MAX_TOTAL_BYTES} (16 "
                    "MiB) are served.",
                    "Move large files out, or serve them as resources of their own.",
                )
            )
        return problems, frontmatter, files

    def load(self) -> Loaded:
        """The frontmatter and files as they are now; ``SkillError`` if it cannot be served
        (errors only: warnings do not stop a skill). Blocking: stats every file, hashes the
        changed ones."""
        problems, frontmatter, walked = self._inspect()
        errors = [p for p in problems if p.is_error]
        if errors or frontmatter is None:
            raise SkillError(errors)
        files = [
            SkillFile(path, location, stat.st_size, file_digest(location, stat))
            for path, location, stat in walked
        ]
        files.sort(key=lambda f: f.path != SKILL_MD)  # SKILL.md first, the rest in path order
        return Loaded(frontmatter, tuple(files))

    def loaded(self) -> Loaded | None:
        """:meth:`load`, or None (logged once per reason) when the skill cannot be served now."""
        try:
            return self.load()
        except (SkillError, OSError) as exc:
            reason = (str(self.directory), str(exc))
            if reason not in _logged:  # every list would say it again
                _logged.add(reason)
                logger.warning(
                    "The skill %r (%s) is not served: %s", self.name, self.directory, exc
                )
            return None

    # -- what the wire says ----------------------------------------------------------------

    def entry(self, loaded: Loaded) -> dict[str, Any]:
        """The skill entry of ``skills/list`` and ``skills/get``."""
        return {
            "uri": self.uri,
            "frontmatter": loaded.frontmatter,
            "resources": [
                {"uri": self.file_uri(f.path), "digest": f.digest, "size": f.size}
                for f in loaded.files
            ],
        }

    def definition(self, loaded: Loaded) -> dict[str, Any]:
        """SKILL.md as ``resources/list`` lists it: named and described by its frontmatter."""
        return {
            "uri": self.uri,
            "name": loaded.frontmatter["name"],
            "description": loaded.frontmatter["description"],
            "mimeType": mime_type(SKILL_MD),
            "size": loaded.files[0].size,
        }

    def children(self, loaded: Loaded, path: str) -> list[dict[str, Any]] | None:
        """The direct children of the folder ``path`` ("" for the skill's own) as resources,
        folders first; None when ``path`` is not a folder of the skill."""
        prefix = f"{path}/" if path else ""
        folders: dict[str, None] = {}
        files: list[dict[str, Any]] = []
        for f in loaded.files:
            if not f.path.startswith(prefix):
                continue
            head, _, rest = f.path[len(prefix) :].partition("/")
            if rest:
                folders[head] = None
            else:
                files.append(
                    {
                        "uri": self.file_uri(f.path),
                        "name": head,
                        "mimeType": mime_type(f.path),
                        "size": f.size,
                    }
                )
        if path and not folders and not files:
            return None
        listed = [
            {"uri": self.file_uri(prefix + d), "name": d, "mimeType": DIRECTORY_MIME_TYPE}
            for d in sorted(folders)
        ]
        return listed + sorted(files, key=lambda r: r["uri"] != self.uri)

    def has_file(self, uri: str) -> bool:
        """Whether ``uri`` is one of the files served now (blocking: it reads the folder)."""
        path = self.path_of(uri)
        loaded = self.loaded()
        return loaded is not None and any(f.path == path for f in loaded.files)

    async def read(self, uri: str, ctx: Any) -> list[dict[str, Any]]:
        """``resources/read`` of one of the skill's files: text when it is UTF-8, else a blob."""
        return await sync_to_async(self._read)(uri)

    def _read(self, uri: str) -> list[dict[str, Any]]:
        path = self.path_of(uri)
        loaded = self.loaded()
        # Only a listed file is served: a path with "..", a hidden file or a link is never one.
        found = (
            next((f for f in loaded.files if f.path == path), None)
            if loaded is not None and path
            else None
        )
        if found is None:
            raise ResourceNotFoundError(uri)
        data = found.location.read_bytes()
        content: dict[str, Any] = {"uri": uri, "mimeType": mime_type(found.path)}
        try:
            content["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            content["blob"] = base64.b64encode(data).decode("ascii")
        return [content]


def skill_name(uri: str) -> str | None:
    """The skill a ``skill://`` URI names (its authority), or None for other URIs."""
    prefix = f"{SCHEME}://"
    if not uri.startswith(prefix):
        return None
    return uri[len(prefix) :].split("/", 1)[0] or None


# -- app folders ---------------------------------------------------------------------------------


def discover(app_configs: Iterable[Any]) -> list[Skill]:
    """The skills in ``<app>/mcp_skills/<name>/`` of ``app_configs``, in their order: where two
    apps have a skill of one name the first wins, as for templates."""
    found: dict[str, Skill] = {}
    for app_config in app_configs:
        folder = Path(app_config.path) / APP_FOLDER
        if not folder.is_dir():
            continue
        for child in sorted(folder.iterdir()):
            if child.is_dir() and not child.name.startswith((".", "_")) and child.name not in found:
                found[child.name] = Skill(child, origin=f"app {app_config.label}")
    return list(found.values())


@functools.lru_cache(maxsize=1)
def app_skill_folders() -> tuple[Skill, ...]:
    """:func:`discover` over the installed apps, once (reset when ``INSTALLED_APPS`` changes):
    a new skill folder is found at the next start, as a new template folder is."""
    return tuple(discover(apps.get_app_configs()))


@receiver(setting_changed)
def _installed_apps_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "INSTALLED_APPS":
        app_skill_folders.cache_clear()


def app_skills() -> Sequence[Skill]:
    """The skills of the installed apps' ``mcp_skills`` folders (empty before apps are ready)."""
    return app_skill_folders() if apps.ready else ()


# -- the methods ---------------------------------------------------------------------------------


def _page(items: list[dict[str, Any]], cursor: str | None, key: str) -> dict[str, Any]:
    return page_result(items, cursor, mcp_settings.page_size, key)


async def served(ctx: RequestContext) -> list[tuple[SkillEntry, Any]]:
    """The skills this request may list, each with what its files are now (skills that cannot
    be served are left out, logged). One thread hop: the gate may query, the files are stat'ed."""
    request = ctx.request

    def pick() -> list[tuple[SkillEntry, Any]]:
        return [
            (skill, loaded)
            for skill in ctx.site.get_skills()
            if listed(gate(skill, request)) and (loaded := skill.loaded()) is not None
        ]

    return await sync_to_async(pick)()


async def named(ctx: RequestContext, uri: str) -> tuple[SkillEntry, Any]:
    """The skill ``uri`` is in, if this request may use it, and its files now; anything else
    is the -32602 of an unknown skill, revealing nothing."""
    name = skill_name(uri)
    skill = ctx.site.get_skill(name) if name is not None else None
    if skill is not None and await agate(skill, ctx.request) is Access.VISIBLE:
        loaded = await sync_to_async(skill.loaded)()
        if loaded is not None:
            return skill, loaded
    raise InvalidParamsError(f"Invalid params: no skill at {uri[:200]}")


@takes("skills/list")
async def list_skills(params: ListParams, ctx: RequestContext) -> dict[str, Any]:
    return _page(
        [skill.entry(loaded) for skill, loaded in await served(ctx)], params.cursor, "skills"
    )


@takes("skills/get")
async def get_skill(params: SkillParams, ctx: RequestContext) -> dict[str, Any]:
    skill, loaded = await named(ctx, params.uri)
    if params.uri != skill.uri:
        raise InvalidParamsError(f"Invalid params: {params.uri[:200]} is not a skill's SKILL.md")
    return {"skill": skill.entry(loaded)}


@takes("resources/directory/read")
async def read_directory(params: DirectoryParams, ctx: RequestContext) -> dict[str, Any]:
    skill, loaded = await named(ctx, params.uri)
    path = skill.path_of(params.uri)
    children = skill.children(loaded, path) if path is not None else None
    if children is None:
        raise InvalidParamsError(f"Invalid params: {params.uri[:200]} is not a directory")
    return _page(children, params.cursor, "resources")


#: The extension's methods, served by a site with skills.
SKILL_HANDLERS: dict[str, Handler] = {
    "skills/list": list_skills,
    "skills/get": get_skill,
    "resources/directory/read": read_directory,
}


def capability() -> dict[str, Any]:
    """What a site with skills declares under ``capabilities.extensions``."""
    return {SKILLS_EXTENSION: {"directoryRead": True}}
