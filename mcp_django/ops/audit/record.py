"""The audit trail: a :class:`~mcp_django.models.ToolCall` row for every ``tools/call``.

Three parts:

- :func:`observe`, an observer (:mod:`~mcp_django.ops.observation`) that the engine opens around
  every request of every transport and revision; for a ``tools/call`` it notes, on the way out,
  who called what, with which arguments (redacted, bounded) and how it ended. :func:`record_refused`
  does the same for a call refused before it reached the engine's dispatch (a token lacking a
  scope, a quota).
- Redaction: argument names holding a secret word (:data:`SECRET_WORDS`), listed in
  ``AUDIT_SENSITIVE_ARGUMENTS``, in a tool's ``sensitive=[...]`` or ``writeOnly`` in its input
  schema never have their values stored, nor quoted in the stored error.
- :class:`AuditWriter`, a bounded in-process buffer written to the database in batches by a
  task of its own, so a request never waits on an INSERT; when the buffer is full, calls are
  dropped and counted, never waited for. :func:`flush` writes what is buffered now (tests,
  management commands); the process writes the rest when it exits. A crash (``kill -9``)
  loses what is buffered: up to ``AUDIT_FLUSH_INTERVAL`` of answered calls.
- :class:`DurableTrail`, with ``AUDIT_DURABLE``: the row is written as the call starts and
  given its outcome before the call is answered; the sweep after dead processes marks the
  calls they were running "interrupted".
- In the buffered default, a call answered on an SSE stream that lasts carries its record on
  its claim (RunningRequest): the sweep that ends the stream of a dead process writes it
  "interrupted" (:func:`on_request_orphaned`). A call answered with plain JSON has no claim,
  and so no row when a crash cuts it off.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import logging
import re
import threading
import unicodedata
from collections import deque
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connections, router
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ...conf import mcp_settings
from ...models import ToolCall
from ...protocol.errors import INVALID_PARAMS
from ...protocol.modern import META_PROTOCOL_VERSION
from ...server.entries import Access, agate
from ...server.rounds import InputRequired
from ...signals import request_orphaned, sweeping
from ...stores import RawJSON, column, insert_values, prepare_row
from ...transport.process import leases
from ..observation import Observation, register_observer

if TYPE_CHECKING:
    from ...models import Session
    from ...protocol.jsonrpc import Request
    from ...server.principal import Principal

logger = logging.getLogger(__name__)

#: What a sensitive value is stored as.
REDACTED = "[redacted]"
#: Nesting below this depth is not stored (a hostile client can nest as deep as the parser allows).
MAX_DEPTH = 32
#: Rows per INSERT, and per trip to Django's sync thread (see AuditWriter._write_soon). A stream's
#: events are stored on that thread too and wait for the trip in flight (3.5 to 7.5 ms for 200
#: rows under load); trips of 50 made that wait shorter, but four times as many trips cost JSON
#: calls at concurrency 32 7 % more CPU and 50 % more p99 (docs/performance.md, seventh pass).
BATCH_SIZE = 200
#: Longest error summary kept (the column's size).
MAX_ERROR = 500

Outcome = ToolCall.Outcome


# -- redaction ---------------------------------------------------------------------------


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


def _clean(text: str, limit: int | None = None) -> str:
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
                kept[_clean(str(key))] = REDACTED
            else:
                kept[_clean(str(key))] = redact(item, names, depth + 1, hidden)
        return kept
    if isinstance(value, list):
        return [redact(item, names, depth + 1, hidden) for item in value]
    if isinstance(value, str):
        return _clean(value)
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
    return None if arguments is None else _stored(arguments, names, hidden)[0]


def _plain(arguments: dict[Any, Any], names: frozenset[str]) -> bool:
    """Whether no value of ``arguments`` is redacted: no key is sensitive and no value nests
    (nested ones go through :func:`redact`). NUL is ruled out by the caller, in the JSON."""
    return not any(
        type(value) is dict or type(value) is list or is_sensitive(str(key), names)
        for key, value in arguments.items()
    )


def _stored(arguments: Any, names: frozenset[str], hidden: list[str] | None) -> tuple[Any, bytes]:
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


# -- records -----------------------------------------------------------------------------


def _request_id(message: Request) -> str:
    return _clean(orjson.dumps(message.id).decode(), 300) if message.id is not None else ""


def _who(user: Any, request: Any) -> dict[str, Any]:
    user_id = getattr(user, "pk", None)
    username = ""
    if user_id is not None:
        get_username = getattr(user, "get_username", None)
        username = str(get_username() if callable(get_username) else user_id)
    token = getattr(request, "auth_token", None) if request is not None else None
    # The token's application is not loaded with it: its client id is read by the writer.
    return {
        "user_id": user_id,
        "username": _clean(username, 150),
        "application_id": getattr(token, "application_id", None),
    }


def _record(
    *,
    site: Any,
    message: Request,
    user: Any,
    request: Any,
    transport: str,
    revision: str,
    session_id: str | None,
    outcome: str,
    error: str = "",
    error_code: int | None = None,
    duration: float = 0.0,
    trace_id: str | None = None,
    started_at: Any = None,
    task_id: str = "",
) -> dict[str, Any]:
    name = message.params.get("name")
    tool = site.get_tool(name) if site is not None and isinstance(name, str) else None
    # Without the site the tool's own marks are unknown: store no value at all.
    names = sensitive_names(tool) if site is not None else frozenset({"*"})
    hidden: list[str] = []
    given = message.params.get("arguments")
    # Kept as JSON text, serialised once: written as it is (AuditWriter._row), and a buffered row
    # of plain strings and numbers is not tracked by the garbage collector (a str subclass would be).
    arguments = None if given is None else _stored(given, names, hidden)[1].decode()
    return {
        "started_at": started_at or timezone.now(),
        "site_name": _clean(str(getattr(site, "name", "") or "mcp"), 100),
        **_who(user, request),
        "session_id": _clean(session_id or "", 64),
        "transport": _clean(transport, 20),
        "protocol_version": _clean(revision or "", 20),
        "request_id": _request_id(message),
        "tool_name": _clean(name, 200) if isinstance(name, str) else "",
        "arguments": arguments,
        "outcome": outcome,
        "error_code": error_code
        if isinstance(error_code, int) and not isinstance(error_code, bool)
        else None,
        "error": _clean(scrub(error, hidden) if hidden else error, MAX_ERROR),
        "duration_ms": round(duration * 1000, 3),
        "trace_id": _clean(trace_id or "", 32),
        "task_id": _clean(task_id, 64),
        "lease_until": None,
    }


def _result_text(result: dict[str, Any]) -> str:
    """The first text of an ``isError`` result: what the tool said went wrong."""
    for block in result.get("content") or ():
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            return str(block["text"])
    return "tool error"


async def _refusal(observation: Observation, message: str) -> str | None:
    """Why ``call_tool`` answered "Unknown tool" (asked of the gate again), or None when the error
    is something else. The client is told only "Unknown tool"; the trail keeps the reason."""
    name = observation.message.params.get("name")
    if not isinstance(name, str) or not message.startswith("Unknown tool"):
        return None
    ctx = observation.ctx
    tool = ctx.site.get_tool(name)
    if tool is None:
        return "unknown tool"
    access = await agate(tool, ctx.request)
    if access is Access.HIDDEN:
        return "not permitted: the user may not use this tool"
    if access is Access.MISSING_SCOPES:
        return "missing scope: the token lacks a scope this tool needs"
    return None


async def _aending(observation: Observation) -> tuple[str, str, int | None]:
    """The outcome of a call that ran to its response: outcome, error summary, error code."""
    ending = _ending(observation)
    if ending is not None:
        return ending
    error = (observation.response or {})["error"]
    code, text = error.get("code"), str(error.get("message", ""))
    reason = await _refusal(observation, text)
    return (
        (Outcome.DENIED, reason, code)
        if reason is not None
        else (Outcome.PROTOCOL_ERROR, text, code)
    )


def _ending(observation: Observation) -> tuple[str, str, int | None] | None:
    """:func:`_aending`, or None when only the gate can tell (an "Unknown tool" refusal): most
    calls, without the coroutine."""
    response = observation.response or {}
    error = response.get("error")
    if isinstance(error, dict):
        code, text = error.get("code"), str(error.get("message", ""))
        if code == INVALID_PARAMS and text.startswith("Unknown tool"):
            return None
        return Outcome.PROTOCOL_ERROR, text, code
    result = response.get("result")
    if isinstance(result, dict) and result.get("resultType") == "task":
        return Outcome.TASK, "", None
    if isinstance(result, dict) and result.get("isError") is True:
        timed_out = observation.ctx.client_timed_out
        return (Outcome.TIMED_OUT if timed_out else Outcome.TOOL_ERROR), _result_text(result), None
    return Outcome.OK, "", None


def _from_observation(
    observation: Observation, outcome: str, error: str = "", error_code: int | None = None
) -> dict[str, Any]:
    ctx = observation.ctx
    result = (observation.response or {}).get("result") if outcome == Outcome.TASK else None
    return _record(
        site=ctx.site,
        message=observation.message,
        user=ctx.user,
        request=ctx.request,
        transport=observation.transport,
        revision=observation.revision,
        session_id=ctx.session_id,
        outcome=outcome,
        error=error,
        error_code=error_code,
        duration=observation.duration,
        trace_id=observation.trace_id,
        started_at=observation.started_at,
        task_id=str(result.get("taskId", "")) if isinstance(result, dict) else "",
    )


def observe(observation: Observation) -> AbstractAsyncContextManager[None]:
    """Record the ``tools/call`` running inside this block (other methods pass through).

    With ``AUDIT_DURABLE`` the row is written as the call starts ("running", under a lease this
    process renews) and updated with the outcome before the answer leaves this block."""
    return _Recorded(observation) if observation.message.method == "tools/call" else _UNOBSERVED


_UNOBSERVED: AbstractAsyncContextManager[None] = nullcontext()


class _Recorded(AbstractAsyncContextManager[None]):
    """:func:`observe` around one ``tools/call``. A class, not a generator: the generator and its
    context manager cost more than the record itself (bench/profile.py)."""

    __slots__ = ("key", "observation", "row")

    def __init__(self, observation: Observation) -> None:
        self.observation = observation
        self.row: int | None = None
        self.key: tuple[str, str] | None = None

    async def __aenter__(self) -> None:
        if mcp_settings.audit_durable:
            self.row = await durable.astart(_from_observation(self.observation, Outcome.RUNNING))
        session_id = self.observation.ctx.session_id
        if self.row is None and session_id is not None:
            # No row yet: should this call be streamed, its claim carries one (running_tool_calls).
            self.key = (session_id, orjson.dumps(self.observation.message.id).decode())
            _running[self.key] = self.observation

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        observation, row = self.observation, self.row
        if self.key is not None:
            _running.pop(self.key, None)
        if exc is not None:  # recorded, and raised on (this returns None)
            if isinstance(exc, asyncio.CancelledError):
                # Nothing may be awaited here: the task is being cancelled.
                _keep(observation, Outcome.CANCELLED, "cancelled before it finished", row=row)
            elif isinstance(exc, InputRequired):
                await _akeep(
                    observation,
                    Outcome.INPUT_REQUIRED,
                    "asked the client for input; the client retries the call",
                    row=row,
                )
            else:
                _keep(
                    observation,
                    Outcome.PROTOCOL_ERROR,
                    f"{type(exc).__name__} while answering",
                    row=row,
                )
            return
        try:
            ending = _ending(observation)
            outcome, error, code = ending if ending is not None else await _aending(observation)
        except asyncio.CancelledError:
            _keep(observation, Outcome.CANCELLED, "cancelled as it finished", row=row)
            raise
        except Exception:
            # The trail must never break the call it records.
            logger.exception("Could not determine the outcome of a tools/call for the audit trail")
            outcome, error, code = (
                Outcome.PROTOCOL_ERROR,
                "outcome unknown: see the server log",
                None,
            )
            if row is None:
                return
        if row is None:
            _keep(observation, outcome, error, code)  # buffered: nothing to wait for
        else:
            await _akeep(observation, outcome, error, code, row=row)


def _keep(
    observation: Observation,
    outcome: str,
    error: str = "",
    error_code: int | None = None,
    *,
    row: int | None = None,
) -> None:
    """Record the call's end without waiting: buffered, or (a durable row) updated by a task."""
    try:
        record = _from_observation(observation, outcome, error, error_code)
        if row is None:
            writer.add(record)
        else:
            durable.finish_soon(row, record)
    except Exception:
        logger.exception("Could not record a tools/call in the audit trail")


async def _akeep(
    observation: Observation,
    outcome: str,
    error: str = "",
    error_code: int | None = None,
    *,
    row: int | None = None,
) -> None:
    """Record the call's end: buffered, or (a durable row) updated before the call is answered."""
    if row is None:
        _keep(observation, outcome, error, error_code)
        return
    try:
        await durable.afinish(row, _from_observation(observation, outcome, error, error_code))
    except Exception:
        logger.exception("Could not record a tools/call in the audit trail")


def _refused(
    principal: Principal,
    session: Session | None,
    message: Request,
    reason: str,
    site: Any,
    error_code: int | None,
) -> dict[str, Any] | None:
    if message.method != "tools/call" or not mcp_settings.audit_tool_calls:
        return None
    revision = session.protocol_version if session is not None else ""
    meta = message.params.get("_meta")
    if (
        session is None
        and isinstance(meta, dict)
        and isinstance(meta.get(META_PROTOCOL_VERSION), str)
    ):
        revision = meta[META_PROTOCOL_VERSION]
    return _record(
        site=site,
        message=message,
        user=principal.user,
        request=principal.request,
        transport=principal.transport,
        revision=revision,
        session_id=session.pk if session is not None else None,
        outcome=Outcome.DENIED,
        error=reason,
        error_code=error_code,
    )


def record_refused(
    principal: Principal,
    session: Session | None,
    message: Request,
    reason: str,
    *,
    site: Any = None,
    error_code: int | None = None,
) -> None:
    """Record a ``tools/call`` refused before it ran (``denied``, with ``reason``): a token
    lacking a scope, a quota. ``site`` lets the tool's own sensitive arguments be redacted;
    without it no argument value is stored. Other methods, and a trail turned off, record nothing."""
    try:
        record = _refused(principal, session, message, reason, site, error_code)
        if record is not None:
            writer.add(record)
    except Exception:
        logger.exception("Could not record a refused tools/call in the audit trail")


async def arecord_refused(
    principal: Principal,
    session: Session | None,
    message: Request,
    reason: str,
    *,
    site: Any = None,
    error_code: int | None = None,
) -> None:
    """:func:`record_refused`, written before the refusal is answered under ``AUDIT_DURABLE``."""
    if not mcp_settings.audit_durable:
        record_refused(principal, session, message, reason, site=site, error_code=error_code)
        return
    try:
        record = _refused(principal, session, message, reason, site, error_code)
        if record is not None:
            await durable.awrite(record)
    except Exception:
        logger.exception("Could not record a refused tools/call in the audit trail")


# -- durable mode -------------------------------------------------------------------------

#: The error of a call its process died running.
INTERRUPTED_MESSAGE = "the server process stopped while the call ran"


class DurableTrail:
    """``AUDIT_DURABLE``: each call's row written on its request's path.

    A call's row is inserted "running" with a lease (REQUEST_LEASE_SECONDS) that a task of this
    process renews while the call runs; its outcome is written before it is answered. A row
    still "running" once its lease lapsed belongs to a process that died: the sweep after dead
    processes (:func:`on_sweep`) marks it "interrupted". Should a write fail, the call goes to
    the buffered writer instead (logged), so the trail never breaks the call.
    """

    def __init__(self) -> None:
        #: Rows of the calls this process is running, by primary key.
        self.running: set[int] = set()
        self._renewer: asyncio.Task[None] | None = None
        self._ends: set[asyncio.Task[None]] = set()

    @staticmethod
    def _lease() -> Any:
        return timezone.now() + timedelta(seconds=mcp_settings.request_lease_seconds)

    def _insert(self, record: dict[str, Any]) -> int:
        clients = AuditWriter._client_ids(
            {record["application_id"]} if record.get("application_id") is not None else set()
        )
        fields = AuditWriter._row(record, clients)
        if type(fields["arguments"]) is RawJSON:
            fields["arguments"] = orjson.loads(
                str(fields["arguments"])
            )  # for the ORM, which serialises it
        try:
            return int(ToolCall.objects.create(**fields).pk)
        except IntegrityError:
            fields["user_id"] = (
                None  # a user deleted since the call: kept unlinked, as by the writer
            )
            return int(ToolCall.objects.create(**fields).pk)

    async def astart(self, record: dict[str, Any]) -> int | None:
        """Insert a running call's row; its primary key, or None (buffered) when that failed."""
        record["lease_until"] = self._lease()
        try:
            row = await sync_to_async(self._insert, thread_sensitive=True)(record)
        except Exception:
            logger.exception(
                "Could not write a running tools/call to the audit trail; its outcome will be buffered"
            )
            return None
        self.running.add(row)
        self._renew_soon()
        return row

    async def awrite(self, record: dict[str, Any]) -> None:
        """Insert a finished call's row now (a refusal), or buffer it when that fails."""
        try:
            await sync_to_async(self._insert, thread_sensitive=True)(record)
        except Exception:
            logger.exception("Could not write a tools/call to the audit trail; it is buffered")
            writer.add(record)

    @staticmethod
    def _update(row: int, record: dict[str, Any]) -> None:
        ToolCall.objects.filter(pk=row).update(
            outcome=record["outcome"],
            error=record["error"],
            error_code=record["error_code"],
            duration_ms=record["duration_ms"],
            trace_id=record["trace_id"],
            task_id=record["task_id"],
            lease_until=None,
        )

    async def afinish(self, row: int, record: dict[str, Any]) -> None:
        """Write a call's outcome on its row (before the call is answered)."""
        try:
            await sync_to_async(self._update, thread_sensitive=True)(row, record)
        finally:
            # Not renewed any more: should the write have failed, the row ends "interrupted".
            self.running.discard(row)

    def finish_soon(self, row: int, record: dict[str, Any]) -> None:
        """:meth:`afinish` in a task of its own, for a call being cancelled."""
        task = contextvars.Context().run(
            asyncio.get_running_loop().create_task, self.afinish(row, record)
        )
        self._ends.add(task)
        task.add_done_callback(self._ends.discard)

    def _renew_soon(self) -> None:
        if (
            self._renewer is None
            or self._renewer.done()
            or self._renewer.get_loop() is not asyncio.get_running_loop()
        ):
            self._renewer = contextvars.Context().run(
                asyncio.get_running_loop().create_task, self._renew()
            )

    async def _renew(self) -> None:
        while self.running:
            await asyncio.sleep(mcp_settings.request_lease_seconds / 3)
            rows = list(self.running)
            if not rows:
                return
            try:
                # Not on Django's sync thread: a long sync tool holds that one, and the lease
                # must not lapse behind it.
                await sync_to_async(self._extend, thread_sensitive=False)(rows)
            except Exception:
                logger.exception("Could not renew the leases of running tool calls")

    def _extend(self, rows: list[int]) -> None:
        try:
            ToolCall.objects.filter(pk__in=rows, outcome=Outcome.RUNNING).update(
                lease_until=self._lease()
            )
        finally:
            connections.close_all()  # this worker thread's connection: not left open between beats


def close_interrupted() -> int:
    """Mark "interrupted" every running call whose lease lapsed (its process died); return how many."""
    return ToolCall.objects.filter(outcome=Outcome.RUNNING, lease_until__lt=timezone.now()).update(
        outcome=Outcome.INTERRUPTED, error=INTERRUPTED_MESSAGE, lease_until=None
    )


# -- calls a crash cut off, in the buffered default ------------------------------------------

#: The tools/call this process runs with no row in the trail yet (buffered), by request key
#: (session id, JSON-RPC id as JSON text): a dict entry per call, nothing computed until needed.
_running: dict[tuple[str, str], Observation] = {}


def running_tool_calls(keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The records, "interrupted", of those of ``keys`` that are tools/call this process runs
    with no row yet. The claim on a streamed request (RunningRequest) carries its record, written
    only after the claim's delay (so only for calls that last): should the process die, the
    sweep that ends the request's stream writes the row (:func:`on_request_orphaned`)."""
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for key in keys:
        observation = _running.get(key)
        if observation is None:
            continue
        try:
            record = _from_observation(observation, Outcome.INTERRUPTED, INTERRUPTED_MESSAGE)
        except Exception:
            logger.exception("Could not record a running tools/call for the audit trail")
            continue
        record["duration_ms"] = 0.0  # how long it ran before the crash is unknown
        # To the microsecond (the JSON encoder would cut it to the millisecond): it identifies the call.
        record["started_at"] = record["started_at"].isoformat()
        records[key] = record
    return records


def on_request_orphaned(
    sender: Any, session_id: str, request_id: str, tool_call: Any = None, **kwargs: Any
) -> None:
    """Receiver of ``signals.request_orphaned`` (connected by :func:`install`): write the
    "interrupted" row of a streamed tools/call whose process died before its row was written."""
    if not isinstance(tool_call, dict):
        return
    record = dict(
        tool_call, started_at=parse_datetime(str(tool_call.get("started_at"))) or timezone.now()
    )
    # Once only: a row written for that call already (answered just before the crash, and flushed) wins.
    if ToolCall.objects.filter(
        session_id=record["session_id"],
        request_id=record["request_id"],
        started_at=record["started_at"],
    ).exists():
        return
    durable._insert(record)
    logger.warning(
        "A tools/call of session %s was interrupted by the end of its server process", session_id
    )


async def on_sweep(sender: Any, **kwargs: Any) -> None:
    """Receiver of ``signals.sweeping`` (connected by :func:`install`)."""
    count = await sync_to_async(close_interrupted)()
    if count:
        logger.warning("%d tool calls were interrupted by the end of their server process", count)


#: The process's durable trail (used when AUDIT_DURABLE is on).
durable = DurableTrail()


# -- the writer --------------------------------------------------------------------------


class AuditWriter:
    """Buffered ToolCall records and the task that writes them, one batch at a time.

    The buffer is bounded (``AUDIT_BUFFER_SIZE``): a call recorded when it is full is dropped,
    counted in :attr:`dropped` and logged, so a slow or unavailable database never makes a
    request wait nor the process grow. The task runs on the event loop of the call that needed
    it and writes through Django's thread for sync code (``thread_sensitive``), the thread and
    connection every other ORM call of the request uses: no connection of its own to hold open,
    and in tests no second writer on the test database.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer: deque[dict[str, Any]] = deque()
        #: Calls dropped since the process started, because the buffer was full or a write failed twice.
        self.dropped = 0
        self._unreported = 0
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._buffer)

    def add(self, record: dict[str, Any]) -> None:
        """Buffer ``record``, or drop it when the buffer is full; never blocks."""
        record["_database"] = _database()
        # No row is made for a call a full buffer will drop (a flood while the database is away).
        record["_row"] = (
            _prepared(record) if len(self._buffer) < mcp_settings.audit_buffer_size else None
        )
        with self._lock:
            full = len(self._buffer) >= mcp_settings.audit_buffer_size
            if full:
                self.dropped += 1
                self._unreported += 1
                first = self._unreported == 1
            else:
                self._buffer.append(record)
        if full:
            if first:
                logger.warning(
                    "The audit trail's buffer is full (AUDIT_BUFFER_SIZE=%d): tool calls are being dropped until it is written",
                    mcp_settings.audit_buffer_size,
                )
            return
        self._schedule()

    def _schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (sync code): flush() or the process's exit writes it
        task = self._task
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        # An empty context: the task must not inherit the request's (its thread-sensitive
        # executor ends with the request, and its tool Context has nothing to do with the writer).
        self._task = contextvars.Context().run(loop.create_task, self._write_soon())

    async def _write_soon(self) -> None:
        while self._buffer:
            await asyncio.sleep(mcp_settings.audit_flush_interval)
            # One batch per trip to Django's sync thread: the sync tools queued there meanwhile
            # run between two batches. Written all at once, a second's worth of calls held that
            # thread for tens of milliseconds, and every tool waited behind it (the p99 at
            # concurrency 32, bench/).
            # Only full batches go at once; what is left waits for the next interval. While a
            # trip to the sync thread waits for the GIL, calls keep coming: writing whatever
            # had come meanwhile made batches of a dozen rows under load, and a row cost three
            # times as much (the thread hop, BEGIN and COMMIT are per batch).
            full = True
            while full and self._buffer:
                full = len(self._buffer) >= BATCH_SIZE
                try:
                    if not await sync_to_async(self._flush_batch, thread_sensitive=True)():
                        break  # the batch is put back: try again after the interval
                except Exception:
                    # The writer's top level: a failure is logged, the task goes on with the next batch.
                    logger.exception("Could not write the audit trail")
                    break

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            count = min(BATCH_SIZE, len(self._buffer))
            batch = [self._buffer.popleft() for _ in range(count)]
            unreported, self._unreported = self._unreported, 0
        if unreported:
            logger.warning(
                "%d tool calls were dropped from the audit trail: its buffer (AUDIT_BUFFER_SIZE) was full",
                unreported,
            )
        return batch

    def _flush_once(self) -> bool:
        """Write what is buffered now, batch by batch; False when a write failed (the batch is
        put back once, to be tried on the next flush)."""
        while self._buffer:
            if not self._flush_batch():
                return False
        return True

    def _flush_batch(self) -> bool:
        """Write one batch of what is buffered; False when the write failed (see _flush_once)."""
        batch = self._take()
        if not batch:
            return True
        try:
            self._write(batch)
        except DatabaseError as exc:
            self._put_back(batch, exc)
            return False
        except Exception:
            self.dropped += len(batch)
            raise
        return True

    def flush(self) -> int:
        """Write every buffered call now, in this thread; return how many are still waiting (0
        unless a write failed). For sync code: tests, management commands, the process's exit."""
        self._flush_once()
        return len(self._buffer)

    async def aflush(self) -> int:
        """:meth:`flush`, from async code."""
        return await sync_to_async(self.flush, thread_sensitive=True)()

    def discard(self) -> None:
        """Forget every buffered call and the drop count (tests)."""
        with self._lock:
            self._buffer.clear()
            self._unreported = 0
            self.dropped = 0

    def _put_back(self, batch: list[dict[str, Any]], exc: Exception) -> None:
        again = [r for r in batch if not r.get("_retried")]
        lost = len(batch) - len(again)
        with self._lock:
            room = max(mcp_settings.audit_buffer_size - len(self._buffer), 0)
            for record in reversed(again[:room]):
                record["_retried"] = True
                self._buffer.appendleft(record)
            lost += max(len(again) - room, 0)
            self.dropped += lost
        logger.warning(
            "Could not write %d tool calls to the audit trail (%s); %d will be tried again, %d are lost",
            len(batch),
            exc,
            len(batch) - lost,
            lost,
        )

    def _write(self, batch: list[dict[str, Any]]) -> None:
        # A call is written only to the database it was made against: a test run's calls, left
        # in the buffer when its test database is gone, must not land in the real one at exit.
        database = _database()
        stale = [r for r in batch if r.get("_database") != database]
        if stale:
            self.dropped += len(stale)
            logger.info(
                "%d tool calls recorded against another database were not written", len(stale)
            )
            batch = [r for r in batch if r.get("_database") == database]
            if not batch:
                return
        clients = self._client_ids(
            {r["application_id"] for r in batch if r["application_id"] is not None}
        )
        rows = self._rows(batch, clients)
        try:
            insert_values(ToolCall, rows)
        except IntegrityError:
            # A user deleted since the call: keep the call, unlinked (the username stays).
            user = column(ToolCall, "user_id")
            ids = {row[user] for row in rows if row[user] is not None}
            existing = set(
                get_user_model()._default_manager.filter(pk__in=ids).values_list("pk", flat=True)
            )
            for record, row in zip(batch, rows, strict=True):
                if row[user] not in existing:
                    record["user_id"] = row[user] = None
            insert_values(ToolCall, rows)

    @staticmethod
    def _client_ids(application_ids: set[Any]) -> dict[Any, str]:
        if not application_ids:
            return {}
        # Optional dependency: only tokens from django-oauth-toolkit carry an application, so it is installed.
        from oauth2_provider.models import get_application_model

        return dict(
            get_application_model()
            .objects.filter(pk__in=application_ids)
            .values_list("pk", "client_id")
        )

    @staticmethod
    def _row(record: dict[str, Any], clients: dict[Any, str]) -> dict[str, Any]:
        """``record`` as ToolCall's field values, for the ORM (the durable trail's one row at a time)."""
        fields = _fields(
            {
                k: v
                for k, v in record.items()
                if k not in ("application_id", "_retried", "_database", "_row")
            }
        )
        fields["client_id"] = _clean(clients.get(record.get("application_id"), ""), 255)
        return fields

    @staticmethod
    def _rows(batch: list[dict[str, Any]], clients: dict[Any, str]) -> list[list[Any]]:
        """The rows of ``batch`` to INSERT: each made on the event loop as its call ended
        (:func:`_prepared`), with the client id of an OAuth application, known only here."""
        rows = []
        client = column(ToolCall, "client_id")
        for record in batch:
            row = record["_row"]
            if row is None:
                row = record["_row"] = prepare_row(
                    ToolCall, _fields(record)
                )  # its making failed: fails again, here
            application = record["application_id"]
            if application is not None:
                row[client] = _clean(clients.get(application, ""), 255)
            rows.append(row)
        return rows

    def flush_at_exit(self) -> None:
        if not self._buffer:
            return
        try:
            self.flush()
        except Exception:
            # The process is ending: say what is lost, and let it end.
            logger.exception(
                "Could not write %d tool calls to the audit trail at exit", len(self._buffer)
            )


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as ToolCall's field values (in place: the writer owns it)."""
    if type(record["arguments"]) is str:
        record["arguments"] = RawJSON(record["arguments"])  # its JSON text (see _record)
    if not settings.USE_TZ and record["started_at"].tzinfo is not None:
        record["started_at"] = timezone.make_naive(record["started_at"])
    record["client_id"] = ""  # an OAuth application's is read by the writer (AuditWriter._rows)
    return record


def _prepared(record: dict[str, Any]) -> list[Any] | None:
    """The row the writer will INSERT for ``record``, made now, on the event loop (stores.prepare_row):
    plain multi-row INSERTs, not bulk_create, whose ToolCall per row cost a fifth of a JSON
    tools/call's CPU (bench/profile.py). None when it cannot be made: the writer tries again."""
    try:
        return prepare_row(ToolCall, _fields(record))
    except Exception:
        logger.exception("Could not make the audit trail's row of a tools/call")
        return None


def _database() -> Any:
    """The name of the database ToolCall rows are written to."""
    # From the settings, not connections[...]: that builds a connection object per asyncio
    # context, and this runs for every recorded call on the event loop. Without routers the
    # answer is the default database, without asking them.
    alias = router.db_for_write(ToolCall) if router.routers else DEFAULT_DB_ALIAS
    return connections.settings[alias].get("NAME")


#: The process's writer.
writer = AuditWriter()


def flush() -> int:
    """Write the buffered tool calls now (sync code); return how many are still waiting."""
    return writer.flush()


async def aflush() -> int:
    """Write the buffered tool calls now (async code); return how many are still waiting."""
    return await writer.aflush()


def _enabled() -> bool:
    return bool(mcp_settings.audit_tool_calls)


def install() -> None:
    """Run :func:`observe` around every request while ``AUDIT_TOOL_CALLS`` is on, and write the
    buffer when the process exits (called by the AppConfig; calling it again does nothing more)."""
    register_observer(observe, _enabled)
    sweeping.connect(on_sweep, dispatch_uid="mcp_django.ops.audit.on_sweep")
    request_orphaned.connect(
        on_request_orphaned, dispatch_uid="mcp_django.ops.audit.on_request_orphaned"
    )
    leases.tool_calls = running_tool_calls  # each streamed call's claim carries its record
    atexit.unregister(writer.flush_at_exit)
    atexit.register(writer.flush_at_exit)
