"""What the audit trail keeps of a call's arguments, and which values it hides.

Argument names holding a secret word (:data:`SECRET_WORDS`), listed in
``AUDIT_SENSITIVE_ARGUMENTS``, in a tool's ``sensitive=[...]`` or ``writeOnly`` in its input
schema never have their values stored, nor quoted in the stored error; what is kept is bounded
in size and depth.
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from typing import Any

import orjson
from django.core.signals import setting_changed

from ...conf import mcp_settings

logger = logging.getLogger(__name__)

#: What a sensitive value is stored as.
REDACTED = "[redacted]"
#: Nesting below this depth is not stored (a hostile client can nest as deep as the parser allows).
MAX_DEPTH = 32


#: Words that make an argument's name secret wherever they stand in it ("db_password",
#: "x-api-key", "sessionToken"). Names are split into words first (see :func:`name_words`), so
#: "pin" hides "pin" and "pinCode" but not "spinning" or "pinned"; "tokens" is not here, as
#: "max_tokens" is no secret (allow a name back with AUDIT_ALLOWED_ARGUMENTS).
SECRET_WORDS: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "passcode",
        "secret",
        "token",
        "bearer",
        "credential",
        "credentials",
        "creds",
        "pin",
        "otp",
        "totp",
        "cvv2",
        "auth",
        "authorization",
        "cookie",
        "ssn",
        "cvv",
        "cvc",
        "apikey",
        "jwt",
        "privkey",
    }
)
#: Words written run together, or words that are secret only side by side.
SECRET_PHRASES: frozenset[tuple[str, ...]] = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("session", "id"),
        ("session", "key"),
        ("sessionid",),
        ("accesskey",),
        ("access", "key"),
        ("signing", "key"),
        ("card", "number"),
        ("security", "code"),
    }
)
#: A single word ending so is secret too ("dbpassword", "accesstoken", "csrftoken").
SECRET_ENDINGS = (
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "apikey",
    "accesstoken",
    "authtoken",
    "refreshtoken",
    "idtoken",
    "sessiontoken",
    "csrftoken",
    "xsrftoken",
    "privatekey",
    "secretkey",
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^0-9a-zA-Z]+")


@functools.lru_cache(maxsize=4096)
def name_words(name: str) -> tuple[str, ...]:
    """The words of an argument name, lower case: camelCase, snake_case, kebab-case, dots and
    spaces all split (``"xAPIKey"`` and ``"X-Api-Key"`` are both ``("x", "api", "key")``)."""
    return tuple(
        w.lower()
        for part in _SEPARATORS.split(unicodedata.normalize("NFKC", name))
        for w in _CAMEL.split(part)
        if w
    )


@functools.lru_cache(maxsize=4096)
def _normal(name: str) -> str:
    # One spelling per name, whatever its case and separators ("*": every argument).
    return "*" if name.strip() == "*" else "_".join(name_words(name))


@functools.lru_cache(maxsize=4096)
def has_secret_word(name: str) -> bool:
    """Whether the argument name ``name`` holds a secret word or phrase (:data:`SECRET_WORDS`)."""
    words = name_words(name)
    if any(w in SECRET_WORDS or w.endswith(SECRET_ENDINGS) for w in words):
        return True
    return any(
        words[i : i + len(phrase)] == phrase for phrase in SECRET_PHRASES for i in range(len(words))
    )


def clean(text: str, limit: int | None = None) -> str:
    # PostgreSQL refuses NUL in text and in jsonb strings; a client may send one anywhere.
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text if limit is None or len(text) <= limit else text[:limit]


def _write_only(prop: Any, defs: Any) -> bool:
    """Whether a property schema is ``writeOnly``, directly, through a local ``$ref``, or in
    one member of ``anyOf``/``oneOf``/``allOf`` (pydantic's ``SecretStr | None``)."""
    if not isinstance(prop, dict):
        return False
    if prop.get("writeOnly") is True:
        return True
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict) and target.get("writeOnly") is True:
            return True
    for key in ("anyOf", "oneOf", "allOf"):
        members = prop.get(key)
        if isinstance(members, list) and any(
            isinstance(m, dict) and m.get("writeOnly") is True for m in members
        ):
            return True
    return False


def write_only_properties(schema: Any) -> frozenset[str]:
    """The names of every ``writeOnly`` property in a JSON Schema, at any depth (``$defs`` too)."""
    found: set[str] = set()
    defs = schema.get("$defs") if isinstance(schema, dict) else None

    def walk(node: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                found.update(
                    _normal(str(name))
                    for name, prop in properties.items()
                    if _write_only(prop, defs)
                )
            for value in node.values():
                walk(value, depth + 1)
        elif isinstance(node, list):
            for value in node:
                walk(value, depth + 1)

    walk(schema, 0)
    return frozenset(found)


#: Per tool object: the sensitive names it adds (its schema does not change once registered).
_tool_names: dict[int, tuple[Any, frozenset[str]]] = {}


def tool_sensitive_names(tool: Any) -> frozenset[str]:
    """The argument names ``tool`` marks sensitive: its ``sensitive`` list and the ``writeOnly``
    properties of its input schema."""
    cached = _tool_names.get(id(tool))
    if cached is not None and cached[0] is tool:
        return cached[1]
    names = {_normal(str(n)) for n in getattr(tool, "sensitive", ()) or ()}
    try:
        names |= write_only_properties(tool.definition().get("inputSchema"))
    except Exception:
        # A tool whose definition fails is refused elsewhere; here its arguments are hidden whole.
        logger.exception(
            "Could not read the input schema of tool %r for the audit trail",
            getattr(tool, "name", tool),
        )
        names.add("*")
    if len(_tool_names) > 10_000:
        _tool_names.clear()  # sites built and dropped in a loop (tests): keep the cache bounded
    _tool_names[id(tool)] = (tool, frozenset(names))
    return frozenset(names)


#: AUDIT_SENSITIVE_ARGUMENTS and AUDIT_ALLOWED_ARGUMENTS as normal names, and the decisions of
#: is_sensitive under them, by (key, names); made on first use after each change of the settings.
_configured: (
    tuple[frozenset[str], frozenset[str], dict[tuple[str, frozenset[str]], bool]] | None
) = None
#: Per tool object: the settings' names it was merged with, and the merged names.
_merged: dict[int, tuple[Any, frozenset[str], frozenset[str]]] = {}


def _configured_names() -> tuple[frozenset[str], frozenset[str]]:
    """The names AUDIT_SENSITIVE_ARGUMENTS hides and AUDIT_ALLOWED_ARGUMENTS allows back, each
    spelled by :func:`_normal`; made again only when the settings change (this runs for every
    recorded call, and spelling each listed name again was a tenth of the trail's cost)."""
    configured = _configured_state()
    return configured[0], configured[1]


def _configured_state() -> tuple[
    frozenset[str], frozenset[str], dict[tuple[str, frozenset[str]], bool]
]:
    global _configured
    configured = _configured
    if configured is None:
        configured = _configured = (
            frozenset(_normal(n) for n in mcp_settings.audit_sensitive_arguments),
            frozenset(_normal(n) for n in mcp_settings.audit_allowed_arguments),
            {},
        )
    return configured


def _forget_configured(*, setting: str, **kwargs: Any) -> None:
    global _configured
    if setting == "MCP_DJANGO":
        _configured = None


setting_changed.connect(_forget_configured)


def sensitive_names(tool: Any = None) -> frozenset[str]:
    """Every argument name whose value is not stored for a call of ``tool`` (``"*"``: none is),
    besides the names holding a secret word (:func:`is_sensitive`)."""
    names = _configured_names()[0]
    if tool is None:
        return names
    merged = _merged.get(id(tool))
    if merged is not None and merged[0] is tool and merged[1] is names:
        return merged[2]
    union = names | tool_sensitive_names(tool)
    if len(_merged) > 10_000:
        _merged.clear()  # as _tool_names
    _merged[id(tool)] = (tool, names, union)
    return union


def is_sensitive(key: str, names: frozenset[str]) -> bool:
    """Whether the value under ``key`` is hidden: its name is listed in ``names`` or holds a
    secret word and is not allowed back by AUDIT_ALLOWED_ARGUMENTS."""
    _, allowed, decisions = _configured_state()
    decided = decisions.get((key, names))
    if decided is None:
        normal = _normal(key)
        decided = normal in names or (has_secret_word(key) and normal not in allowed)
        if len(decisions) < 10_000:  # names a client makes up are not remembered past that
            decisions[key, names] = decided
    return decided


def redact(
    value: Any, names: frozenset[str], depth: int = 0, hidden: list[str] | None = None
) -> Any:
    """``value`` with the value of every sensitive key (:func:`is_sensitive`) replaced by
    :data:`REDACTED`, at any depth; ``"*"`` in ``names`` redacts every value of the top-level
    object. The strings hidden are added to ``hidden``, to be kept out of error texts too."""
    if depth > MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, dict):
        every = "*" in names and depth == 0
        kept = {}
        for key, item in value.items():
            if every or is_sensitive(str(key), names):
                if hidden is not None:
                    _strings(item, hidden, depth)
                kept[clean(str(key))] = REDACTED
            else:
                kept[clean(str(key))] = redact(item, names, depth + 1, hidden)
        return kept
    if isinstance(value, list):
        return [redact(item, names, depth + 1, hidden) for item in value]
    if isinstance(value, str):
        return clean(value)
    return value


def _strings(value: Any, into: list[str], depth: int) -> None:
    """Every string and number in ``value`` (a redacted value), for :func:`scrub`."""
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        for item in value.values():
            _strings(item, into, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _strings(item, into, depth + 1)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        text = str(value)
        if text:
            into.append(text)


def scrub(text: str, hidden: list[str]) -> str:
    """``text`` without the hidden values: a rejected argument is quoted back in the error
    ("'hunter2' is not of type 'integer'"), which the trail keeps."""
    for value in sorted(set(hidden), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def stored_arguments(arguments: Any, names: frozenset[str], hidden: list[str] | None = None) -> Any:
    """What a ToolCall keeps of ``arguments``: redacted, or a marker with their size when they
    exceed ``AUDIT_MAX_ARGUMENTS_BYTES`` (measured before redacting, so a huge payload costs one
    C-speed serialisation on the request's path and nothing more). The values hidden are added
    to ``hidden``."""
    return None if arguments is None else stored_with_json(arguments, names, hidden)[0]


def _plain(arguments: dict[Any, Any], names: frozenset[str]) -> bool:
    """Whether no value of ``arguments`` is redacted: no key is sensitive and no value nests
    (nested ones go through :func:`redact`). NUL is ruled out by the caller, in the JSON."""
    return not any(
        type(value) is dict or type(value) is list or is_sensitive(str(key), names)
        for key, value in arguments.items()
    )


def stored_with_json(
    arguments: Any, names: frozenset[str], hidden: list[str] | None
) -> tuple[Any, bytes]:
    """:func:`stored_arguments` (of arguments that are not None) and their JSON."""
    limit = mcp_settings.audit_max_arguments_bytes
    try:
        given = orjson.dumps(arguments)
    except (TypeError, orjson.JSONEncodeError):
        kept: Any = {"_omitted": "arguments that are not JSON"}
        return kept, orjson.dumps(kept)
    if len(given) > limit:
        kept = {"_omitted": "arguments too large to keep", "bytes": len(given)}
        return kept, orjson.dumps(kept)
    if (
        type(arguments) is dict
        and "*" not in names
        and b"\\u0000" not in given
        and _plain(arguments, names)
    ):
        return arguments, given  # nothing to hide nor clean (most calls): the JSON just measured
    kept = redact(arguments, names, hidden=hidden)
    # Nothing hidden nor cleaned: the JSON just measured is the JSON to keep.
    encoded = given if kept == arguments else orjson.dumps(kept)
    if len(encoded) > limit:
        kept = {"_omitted": "arguments too large to keep", "bytes": len(encoded)}
        encoded = orjson.dumps(kept)
    return kept, encoded
