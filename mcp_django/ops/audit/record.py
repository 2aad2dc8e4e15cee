"""The observer that records every ``tools/call``, of every transport and revision.

:func:`observe`, opened by the engine around every request, notes on the way out who called
what, with which arguments (redacted, bounded) and how it ended, and hands the record to the
buffered writer or, under ``AUDIT_DURABLE``, to the durable trail. :func:`record_refused` does
the same for a call refused before it reached the engine's dispatch (a token lacking a scope, a
quota).

In the buffered default, a call answered on an SSE stream that lasts carries its record on its
claim (RunningRequest, through :func:`running_tool_calls`): the sweep that ends the stream of a
dead process writes it "interrupted" (:func:`~mcp_django.ops.audit.trail.on_request_orphaned`).
A call answered with plain JSON has no claim, and so no row when a crash cuts it off.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import orjson
from django.conf import settings
from django.utils import timezone

from ...auth.base import token_client
from ...conf import mcp_settings
from ...models import ToolCall
from ...protocol.errors import INVALID_PARAMS
from ...protocol.modern import META_PROTOCOL_VERSION
from ...server.entries import Access, agate
from ...server.rounds import InputRequired
from ...stores import RawJSON
from ..observation import Observation
from .buffer import VARYING, writer
from .redaction import clean, scrub, sensitive_names, stored_with_json
from .trail import INTERRUPTED_MESSAGE, durable

if TYPE_CHECKING:
    from ...models import Session
    from ...protocol.jsonrpc import Request
    from ...server.principal import Principal

logger = logging.getLogger(__name__)

#: Longest error summary kept (the column's size).
MAX_ERROR = 500

Outcome = ToolCall.Outcome


def _request_id(message: Request) -> str:
    return clean(orjson.dumps(message.id).decode(), 300) if message.id is not None else ""


def _who(user: Any, request: Any) -> dict[str, Any]:
    user_id = getattr(user, "pk", None)
    username = ""
    if user_id is not None:
        get_username = getattr(user, "get_username", None)
        username = str(get_username() if callable(get_username) else user_id)
    token = getattr(request, "auth_token", None) if request is not None else None
    # The token's application is not loaded with it: its client id is read by the writer. An
    # external IdP's token names its client itself.
    return {
        "user_id": user_id,
        "username": clean(username, 150),
        "application_id": getattr(token, "application_id", None),
        "client_id": clean(token_client(request), 255),
    }


def _record(
    *,
    site: Any,
    message: Request,
    user: Any,
    request: Any,
    transport: str,
    revision: str,
    varying: tuple[Any, ...],
) -> dict[str, Any]:
    """A whole record: the call's :func:`_varying` values and the columns its caller's calls of
    the tool share."""
    name = message.params.get("name")
    return {
        **dict(zip(VARYING, varying, strict=True)),
        "site_name": clean(str(getattr(site, "name", "") or "mcp"), 100),
        **_who(user, request),
        "transport": clean(transport, 20),
        "protocol_version": clean(revision or "", 20),
        "tool_name": clean(name, 200) if isinstance(name, str) else "",
        "lease_until": None,
    }


def _names(site: Any, message: Request) -> frozenset[str]:
    """The argument names whose values the trail hides, for the tool ``message`` calls."""
    if site is None:
        return frozenset({"*"})  # the tool's own marks are unknown: store no value at all
    name = message.params.get("name")
    return sensitive_names(site.get_tool(name) if isinstance(name, str) else None)


def _varying(
    message: Request,
    names: frozenset[str],
    *,
    session_id: str | None,
    outcome: str,
    error: str,
    error_code: int | None,
    duration: float,
    trace_id: str | None,
    started_at: Any,
    task_id: str,
    result_cut: bool,
) -> tuple[Any, ...]:
    """The values of a call's :data:`~.buffer.VARYING` columns, in that order: what a whole
    record (:func:`_record`) and a row made from its caller's template (:func:`_buffer`) both
    take. The arguments are redacted of ``names`` and kept as JSON text, serialised once: a
    row of plain strings and numbers is not tracked by the garbage collector (a str subclass
    would be)."""
    hidden: list[str] = []
    given = message.params.get("arguments")
    return (
        started_at or timezone.now(),
        clean(session_id or "", 64),
        _request_id(message),
        None if given is None else stored_with_json(given, names, hidden)[1].decode(),
        outcome,
        clean(scrub(error, hidden) if hidden else error, MAX_ERROR),
        error_code if isinstance(error_code, int) and not isinstance(error_code, bool) else None,
        round(duration * 1000, 3),
        clean(trace_id or "", 32),
        clean(task_id, 64),
        result_cut,
    )


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
    return _record(
        site=ctx.site,
        message=observation.message,
        user=ctx.user,
        request=ctx.request,
        transport=observation.transport,
        revision=observation.revision,
        varying=_observed(
            observation, outcome, error, error_code, _names(ctx.site, observation.message)
        ),
    )


def _observed(
    observation: Observation,
    outcome: str,
    error: str,
    error_code: int | None,
    names: frozenset[str],
) -> tuple[Any, ...]:
    """:func:`_varying` of the call ``observation`` saw end."""
    ctx = observation.ctx
    return _varying(
        observation.message,
        names,
        session_id=ctx.session_id,
        outcome=outcome,
        error=error,
        error_code=error_code,
        duration=observation.duration,
        trace_id=observation.trace_id,
        started_at=observation.started_at,
        task_id=_task_id(observation, outcome),
        result_cut=ctx.result_cut,
    )


def _task_id(observation: Observation, outcome: str) -> str:
    """The id of the task a call was answered with, or ""."""
    result = (observation.response or {}).get("result") if outcome == Outcome.TASK else None
    return str(result.get("taskId", "")) if isinstance(result, dict) else ""


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
        if row is None:
            _buffer(observation, outcome, error, error_code)
        else:
            durable.finish_soon(row, _from_observation(observation, outcome, error, error_code))
    except Exception:
        logger.exception("Could not record a tools/call in the audit trail")


def _buffer(observation: Observation, outcome: str, error: str, error_code: int | None) -> None:
    """Buffer the call's row: only the values of the columns in which it differs from its
    caller's earlier calls of the same tool (buffer.VARYING) are worked out here, as
    :func:`_from_observation` works them out; the writer makes the row from those calls'
    template (AuditWriter.add_like)."""
    ctx, message = observation.ctx, observation.message
    site, name = ctx.site, message.params.get("name")
    if site is None or not isinstance(name, str):
        writer.add(_from_observation(observation, outcome, error, error_code))
        return
    who = _who(ctx.user, ctx.request)
    key = (
        who["application_id"],
        who["client_id"],
        who["user_id"],
        who["username"],
        getattr(site, "name", ""),
        observation.transport,
        observation.revision,
        name,
    )
    started_at, *rest = _observed(
        observation, outcome, error, error_code, sensitive_names(site.get_tool(name))
    )
    # As the writer's _fields leaves a whole record's: the JSON text marked, the time naive
    # without USE_TZ.
    if not settings.USE_TZ and started_at.tzinfo is not None:
        started_at = timezone.make_naive(started_at)
    if rest[2] is not None:
        rest[2] = RawJSON(rest[2])
    varying = (started_at, *rest)
    writer.add_like(
        key, varying, lambda: _from_observation(observation, outcome, error, error_code)
    )


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
        varying=_varying(
            message,
            _names(site, message),
            session_id=session.pk if session is not None else None,
            outcome=Outcome.DENIED,
            error=reason,
            error_code=error_code,
            duration=0.0,
            trace_id=None,
            started_at=None,
            task_id="",
            result_cut=False,
        ),
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
    without it no argument value is stored. Other methods, and a trail turned off, record
    nothing."""
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
        # To the microsecond (the JSON encoder would cut it to the millisecond): it identifies
        # the call.
        record["started_at"] = record["started_at"].isoformat()
        records[key] = record
    return records
