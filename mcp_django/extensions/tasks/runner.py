"""Durable tasks: the 2026-07-28 ``io.modelcontextprotocol/tasks`` extension.

A ``tools/call`` of a tool registered with ``task="optional"`` or ``"required"``, from a client
that declares the extension on the request, is answered with a task (``CreateTaskResult``) as
soon as its row is written. The tool then runs from that row, in a worker of the project's
Django task framework (``MCP_DJANGO["TASKS_BACKEND"]`` names the ``TASKS`` alias) or, without
one, in the web process that made it. Whatever process runs it:

- progress goes to the row (``statusMessage``); a question (``ctx.elicit``, ``ctx.sample``...)
  the client has not answered parks the task: its questions go to ``inputRequests``, its answers
  so far into its payload, and its run ends, holding no worker while the client thinks. The
  client's ``tasks/update`` (on any web process) answers them; the last answer runs the task
  again, and the tool replays from its first line with every answer, as a 2026-07-28 input
  round does (:mod:`mcp_django.server.rounds`). A task parked longer than ``TASK_INPUT_TIMEOUT``
  fails;
- it renews a heartbeat every ``TASK_HEARTBEAT_SECONDS`` and polls its row every
  ``TASK_POLL_INTERVAL_MS`` for cancellation, so ``tasks/cancel`` on any process stops it, and
  a task whose process died is failed after ``TASK_HEARTBEAT_TIMEOUT``;
- it ends the row ``completed`` (a tool error too, with ``isError``), ``failed`` (a JSON-RPC
  error) or ``cancelled``, and ``tasks/get`` inlines the result or the error.

A tool declared with ``prelude=True`` first runs in the request until it awaits
``ctx.start_task()``: its questions before that are answered with input-required rounds, and the
task replays that part with the same answers.

The same rows serve the 2025-11-25 form of tasks (SEP-1686, experimental in that revision) to
handshake-era sessions: a ``tools/call`` with ``params.task`` is answered with that form's
``CreateTaskResult`` (:func:`handshake_wire`), and :mod:`.handshake` answers its ``tasks/*``
methods. Runner, store, admin, quotas and revocation are the same for both forms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import connections, router, transaction
from django.db.models.signals import post_delete
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ...auth.oauth import access_token_model
from ...conf import mcp_settings
from ...models import Task
from ...ops import tracing
from ...ops.audit.redaction import sensitive_names, stored_arguments
from ...ops.quotas import limits as quotas
from ...ops.quotas.limits import Caller, RunningSlot, caller_of
from ...protocol.errors import (
    INTERNAL_ERROR,
    InternalError,
    InvalidParamsError,
    MCPError,
    MethodNotFoundError,
    MissingRequiredClientCapabilityError,
    QuotaExceededError,
)
from ...protocol.jsonrpc import notification_message
from ...protocol.modern import RequestMeta
from ...protocol.negotiation import V2025_11_25
from ...protocol.params import TaskParams, UpdateTaskParams, parse_as
from ...server import sizing
from ...server.context import Context
from ...server.entries import TASK_SUPPORT as TASK_SUPPORT  # its values, kept importable from here
from ...server.entries import Access, ToolEntry, agate, gate
from ...server.notifications import tell_listeners
from ...server.rounds import InputRequired, InputRounds, StartTask, well_formed
from ...transport.streams import send_to_session
from . import store as taskstore

if TYPE_CHECKING:
    from ...server.entries import ServedSite

logger = logging.getLogger("mcp_django.tasks")

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: The ``_meta`` key tying a message to its task (2025-11-25 form).
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
#: What a host may pass its model at once for a 2025-11-25 task (that revision's provisional key).
IMMEDIATE_RESPONSE: Final = "io.modelcontextprotocol/model-immediate-response"
#: The longest lifetime a client may ask for when TASK_TTL_MS sets none (30 days).
MAX_REQUESTED_TTL_MS: Final = 30 * 24 * 3600 * 1000
#: The django.tasks task that runs a task in a worker (a module-level Task, as django.tasks needs).
WORKER_TASK: Final = "mcp_django.task_worker.run_mcp_task"
#: This process, as the rows name the process running a task.
WORKER_NAME: Final = f"{socket.gethostname()}:{os.getpid()}"

Status = Task.Status

#: The error of a task whose authorization ended: its user was deactivated, or no live OAuth
#: token of its user and client holds its scopes any more (revoked, expired, narrowed).
REVOKED: Final = {"code": INTERNAL_ERROR, "message": taskstore.REVOKED_MESSAGE}


def required_capability() -> dict[str, Any]:
    return {"extensions": {TASKS_EXTENSION: {}}}


def declares_tasks(ctx: Context) -> bool:
    """Whether the request declares the tasks extension (2026-07-28 requests only: the
    extension is declared per request, in ``_meta``)."""
    return ctx.request_meta is not None and declares_tasks_in(ctx.request_meta.client_capabilities)


def declares_tasks_in(capabilities: dict[str, Any]) -> bool:
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def speaks_handshake_tasks(ctx: Context) -> bool:
    """Whether the request comes from a handshake-era session of the revision whose tasks are
    the 2025-11-25 form (earlier revisions have no tasks; 2026-07-28 has the extension)."""
    return (
        ctx.request_meta is None
        and ctx.session is not None
        and ctx.session.protocol_version == V2025_11_25
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wire(task: Task, *, detailed: bool = True) -> dict[str, Any]:
    """The task as the extension shows it: a ``DetailedTask`` (tasks/get, notifications/tasks),
    or with ``detailed=False`` the fields of a ``CreateTaskResult``."""
    shown: dict[str, Any] = {
        "taskId": task.pk,
        "status": task.status,
        "createdAt": _iso(task.created_at),
        "lastUpdatedAt": _iso(task.updated_at),
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_interval_ms,
    }
    if task.status_message:
        shown["statusMessage"] = task.status_message
    if detailed:
        if task.status == Status.INPUT_REQUIRED:
            shown["inputRequests"] = task.input_requests
        elif task.status == Status.COMPLETED:
            shown["result"] = task.result or {"content": []}
        elif task.status == Status.FAILED:
            shown["error"] = task.error or {"code": INTERNAL_ERROR, "message": "Internal error"}
    return shown


def handshake_status(task: Task) -> str:
    """The task's status in the 2025-11-25 form: a tool result with ``isError`` ends it
    ``failed`` there (its result is still what ``tasks/result`` returns)."""
    if task.status == Status.COMPLETED and (task.result or {}).get("isError") is True:
        return str(Status.FAILED)
    return str(task.status)


def handshake_wire(task: Task) -> dict[str, Any]:
    """The task as the 2025-11-25 form shows it (``Task``: tasks/get, tasks/list, tasks/cancel,
    notifications/tasks/status, and inside that form's ``CreateTaskResult``)."""
    shown: dict[str, Any] = {
        "taskId": task.pk,
        "status": handshake_status(task),
        "createdAt": _iso(task.created_at),
        "lastUpdatedAt": _iso(task.updated_at),
        "ttl": task.ttl_ms,
        "pollInterval": task.poll_interval_ms,
    }
    message = task.status_message or (task.error or {}).get("message")
    if message:
        shown["statusMessage"] = str(message)
    return shown


def client_id(request: Any) -> str:
    """The OAuth client of the request's token, "" without one (sync: may read the application)."""
    token = getattr(request, "auth_token", None)
    application = getattr(token, "application", None) if token is not None else None
    return str(getattr(application, "client_id", "") or "")


def _scopes(request: Any) -> list[str] | None:
    granted = getattr(request, "auth_scopes", None)
    return sorted(granted) if granted is not None else None


# -- the request: a call answered with a task ------------------------------------------------


async def call(
    tool: ToolEntry,
    arguments: dict[str, Any],
    ctx: Context,
    task: dict[str, Any] | None = None,
    ttl_ms: int | None = None,
) -> dict[str, Any]:
    """Answer a ``tools/call`` of a tool that may run as a task: with a task when the request
    declares the extension, or (2025-11-25 sessions) carries ``params.task`` (``task``, asking
    for ``ttl_ms``); synchronously otherwise (-32021, or -32601 in 2025-11-25, for a
    ``required`` tool)."""
    support = tool.task_support
    if speaks_handshake_tasks(ctx):
        # SEP-1686's tool-level negotiation: -32601 for a call that breaks the tool's taskSupport.
        if task is not None and support == "forbidden":
            raise MethodNotFoundError(
                f"The tool {tool.name!r} does not run as a task: call it without params.task"
            )
        if task is None:
            if support == "required":
                raise MethodNotFoundError(
                    f"The tool {tool.name!r} runs only as a task: call it with params.task"
                )
            return await tool.call(arguments, ctx)
    elif support == "forbidden":
        return await tool.call(arguments, ctx)  # params.task means nothing outside 2025-11-25
    elif not declares_tasks(ctx):
        if support == "required" and ctx.request_meta is not None:
            raise MissingRequiredClientCapabilityError(
                f"The tool {tool.name!r} runs only as a task: declare the {TASKS_EXTENSION} "
                "extension",
                required_capabilities=required_capability(),
            )
        return await tool.call(arguments, ctx)
    # Arguments the call would refuse get the call's answer, and no row (nor a run to fail).
    invalid = await tool.check_arguments(arguments, ctx)
    if invalid is not None:
        return invalid
    answers: dict[str, Any] = {}
    notes: dict[str, Any] = {}
    if tool.prelude:
        ctx.task_phase = "prelude"
        try:
            return await tool.call(arguments, ctx)  # it ended before it started a task
        except StartTask:
            # The prelude's answers: its input rounds (2026-07-28), or what a session's client
            # answered on the call's stream; the task replays the prelude with them.
            rounds = ctx._rounds if ctx._rounds is not None else ctx.prelude_answers
            if rounds is not None:
                answers, notes = dict(rounds.answers), dict(rounds.notes)
    opened = await open_task(tool, arguments, ctx, answers, notes, ttl_ms=ttl_ms)
    return created(tool, opened, ctx)


def _client_meta(ctx: Context) -> dict[str, Any] | None:
    """What the run's Context needs of the client: the request's ``_meta`` (2026-07-28), or its
    session's (2025-11-25 tasks), as a ``RequestMeta`` is built from in :meth:`Runner._prepare`."""
    meta, session = ctx.request_meta, ctx.session
    if meta is not None:
        return {
            "version": meta.version,
            "capabilities": meta.client_capabilities,
            "client_info": meta.client_info,
            "log_level": meta.log_level,
        }
    if session is not None:
        return {
            "version": session.protocol_version,
            "capabilities": session.client_capabilities,
            "client_info": session.client_info,
            "log_level": session.log_level or None,
        }
    return None


def _lifetime(requested: int | None) -> int | None:
    """The task's TTL: the client's ``requested`` one (2025-11-25), within ``TASK_TTL_MS``."""
    configured = mcp_settings.task_ttl_ms
    if requested is None:
        return configured
    return min(requested, configured if configured is not None else MAX_REQUESTED_TTL_MS)


def created(tool: ToolEntry, task: Task, ctx: Context) -> dict[str, Any]:
    """The ``CreateTaskResult`` of the request's form for ``task``, just opened by
    :func:`open_task` (the row exists before the answer leaves: a tasks/get right after it finds
    the task)."""
    if speaks_handshake_tasks(ctx):
        return {
            "task": handshake_wire(task),
            "_meta": {
                IMMEDIATE_RESPONSE: f"Started {tool.name} as task {task.pk}; its result will "
                "follow when it is done."
            },
        }
    return {"resultType": "task", **wire(task, detailed=False)}


async def open_task(
    tool: ToolEntry,
    arguments: dict[str, Any],
    ctx: Context,
    answers: dict[str, Any],
    notes: dict[str, Any] | None = None,
    *,
    ttl_ms: int | None = None,
) -> Task:
    """Write the task's row (within the caller's caps) and start it; the row."""
    caller = caller_of(ctx.request, ctx.user)
    handshake = speaks_handshake_tasks(ctx)
    payload = {
        "arguments": arguments,
        "answers": answers,
        "notes": notes or {},
        "meta": _client_meta(ctx),
    }
    ttl = _lifetime(ttl_ms)
    # A 2025-11-25 task belongs to its session too: its status notifications go there, and an
    # anonymous caller's tasks are told apart by it.
    session_id = ctx.session.pk if handshake and ctx.session is not None else None
    try:
        # Bounded before anything is written: the payload stays in the row until the task ends.
        sealed = taskstore.seal(payload)
    except taskstore.TooLarge as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None
    backend = mcp_settings.tasks_backend or ""
    # The call's span is current here: the run's span continues its trace, wherever it runs.
    trace_context = tracing.current_trace_context()

    def write() -> Task:
        cap = quotas.current().live_tasks_per_user
        task = taskstore.create_within_cap(
            cap,
            site_name=ctx.site.name,
            user_id=getattr(ctx.user, "pk", None),
            owner=caller.key,
            client_id=client_id(ctx.request),
            scopes=_scopes(ctx.request),
            tool_name=tool.name,
            backend=backend,
            arguments=stored_arguments(arguments, sensitive_names(tool)),
            payload=sealed,
            heartbeat_at=None,
            trace_context=trace_context,
            session_id=session_id,
            ttl_ms=ttl,
        )
        if task is None:
            raise QuotaExceededError(
                f"Too many live tasks: at most {cap} per user; wait for one to finish or cancel "
                "one",
                limit="LIVE_TASKS_PER_USER",
            )
        return task

    await quotas.acheck_new_task(caller)
    task = await sync_to_async(write)()
    await start_or_fail(ctx.site, task, backend)
    return task


def outcome(task: Task) -> dict[str, Any]:
    """What the call would have answered, for an ended task: its result, or its error raised
    (a cancelled task's is an internal error saying so)."""
    if task.status == Status.COMPLETED:
        return dict(task.result or {"content": []})
    error: dict[str, Any] = (
        task.error
        if task.status == Status.FAILED and task.error
        else {"code": INTERNAL_ERROR, "message": task.status_message or "The task was cancelled"}
    )
    failure = MCPError(str(error.get("message") or "Internal error"), error.get("data"))
    code = error.get("code")
    failure.code = code if isinstance(code, int) else INTERNAL_ERROR
    raise failure


async def start_or_fail(site: ServedSite, task: Task, backend: str) -> None:
    """:func:`start`; a task that cannot be started is failed (and InternalError raised)."""
    try:
        await start(site, task, backend)
    except Exception as exc:
        # A task no worker will ever run must not answer "working" until its TTL.
        logger.exception("Could not start task %s on the TASKS backend %r", task.pk, backend)
        await sync_to_async(taskstore.finish)(
            task.pk,
            Status.FAILED,
            error={"code": INTERNAL_ERROR, "message": "The task could not be started"},
        )
        raise InternalError(f"The task could not be started: {type(exc).__name__}") from None


#: Tasks this process runs in its event loop (the embedded default), by id: kept referenced
#: (a loop holds its tasks weakly), and woken at once by a tasks/update or tasks/cancel here.
_local: dict[str, Runner] = {}


async def start(site: ServedSite, task: Task, backend: str) -> None:
    """Run ``task``: enqueued on the ``TASKS`` backend ``backend``, or here, in this loop."""
    if not backend:
        runner = Runner(site, task.pk)
        _local[task.pk] = runner
        runner.future = asyncio.get_running_loop().create_task(runner.run())
        return
    job = await import_string(WORKER_TASK).using(backend=backend).aenqueue(site.name, task.pk)
    await sync_to_async(Task.objects.filter(pk=task.pk).update)(backend_task_id=str(job.id)[:100])


def wake(task_id: str) -> None:
    """Have the runner of ``task_id``, if this process runs it, look at its row now (from any
    thread: the admin's actions run in a worker thread, not in the runner's loop)."""
    runner = _local.get(task_id)
    if runner is None or runner.future is None:
        return
    loop = runner.future.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        runner.wake.set()
        return
    with contextlib.suppress(RuntimeError):  # its loop closed: the runner is gone with it
        loop.call_soon_threadsafe(runner.wake.set)


async def announce(task_id: str, user_id: Any) -> None:
    """Tell listen streams (on every process) that the task changed (notifications/tasks), and
    a 2025-11-25 task's session (``notifications/tasks/status``, that form's full Task)."""
    await tell_listeners(site=None, task=task_id, users=[user_id])
    task = await Task.objects.filter(pk=task_id, session__isnull=False).afirst()
    if task is not None and task.session_id is not None:
        await send_to_session(
            task.session_id,
            notification_message("notifications/tasks/status", handshake_wire(task)),
        )


def _sweep() -> list[tuple[str, Any]]:
    try:
        failed = taskstore.sweep()
        return list(Task.objects.filter(pk__in=failed).values_list("pk", "user_id"))
    finally:
        connections.close_all()  # this pool thread's own: nobody else would close them


async def on_sweep(sender: Any, **kwargs: Any) -> None:
    """Receiver of ``signals.sweeping`` (connected by the AppConfig): fail the tasks whose
    process died or whose time ran out, even those nobody polls, and tell their listeners."""
    # Not thread-sensitive: Django 6 runs a signal's async receivers at once in one shared
    # context, where a second thread-sensitive call beside the audit trail's raises asgiref's
    # "would deadlock".
    failed = await sync_to_async(_sweep, thread_sensitive=False)()
    if failed:
        logger.warning(
            "%d tasks were failed: their process stopped or their time ran out", len(failed)
        )
    for task_id, user_id in failed:
        await announce(task_id, user_id)


def on_token_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Receiver of DOT's access token ``post_delete`` (a revocation, a refresh, a cleanup;
    connected by the AppConfig when DOT is installed): once the deletion commits, fail the
    parked tasks of that user and client that no live token allows any more, and tell their
    listeners. Running tasks notice at their next heartbeat; a parked one has none."""
    user_id = getattr(instance, "user_id", None)
    application = (
        getattr(instance, "application", None)
        if getattr(instance, "application_id", None)
        else None
    )
    client_id = str(getattr(application, "client_id", "") or "")
    if user_id is None or not client_id:
        return

    def fail_parked() -> None:
        for task_id in taskstore.fail_unauthorized_parked(user_id, client_id):
            try:
                async_to_sync(announce)(task_id, user_id)
            except (
                RuntimeError
            ):  # called on an event loop's own thread: the listeners see it on their next read
                logger.debug(
                    "Task %s failed on revocation; not announced from this thread", task_id
                )

    # After the commit: a refresh deletes the old token in the transaction that saves the new one.
    transaction.on_commit(fail_parked, using=router.db_for_write(type(instance)))


def connect_revocations() -> None:
    """Connect :func:`on_token_deleted` to DOT's access tokens, when DOT is installed."""
    token_model = access_token_model()
    if token_model is not None:
        post_delete.connect(
            on_token_deleted,
            sender=token_model,
            dispatch_uid="mcp_django.extensions.tasks.runner.on_token_deleted",
        )


# -- the running side ------------------------------------------------------------------------


class TaskEmitter:
    """Where a task's notifications go: progress to its row (``statusMessage``), log messages
    to this process's log; neither is sent to the client (the extension defines none)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self._last = 0.0

    async def send(self, message: dict[str, Any]) -> object:
        method = message.get("method")
        params = message.get("params") or {}
        if method == "notifications/progress":
            now = asyncio.get_running_loop().time()
            value, total = float(params.get("progress", 0)), params.get("total")
            final = total is not None and value >= total
            if final or now - self._last >= 0.5:  # a row write at most twice a second
                self._last = now
                text = params.get("message") or (
                    f"{value:g} of {total:g}" if total is not None else f"{value:g}"
                )
                await sync_to_async(taskstore.progress)(
                    self.runner.task_id, value, total, str(text)
                )
        elif method == "notifications/message":
            logger.info("Task %s: %s", self.runner.task_id, params.get("data"))
        return None

    async def close_connection(self) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        raise AssertionError(
            "a task's questions go through its InputRounds"
        )  # Context asks rounds first


class Runner:
    """Runs one task from its row, in this process, until it ends or is cancelled."""

    def __init__(self, site: ServedSite, task_id: str) -> None:
        self.site = site
        self.task_id = task_id
        self.wake = asyncio.Event()
        self.future: asyncio.Task[None] | None = None
        self.user_id: Any = None
        #: The task's status when this run ended it or saw it ended ("" until then).
        self.status = ""
        #: The row as claimed: what its authorization is checked against at each heartbeat.
        self.claimed: Task | None = None

    async def changed(self) -> None:
        await announce(self.task_id, self.user_id)

    async def run(self) -> None:
        try:
            await self._run()
        except Exception:
            logger.exception("Task %s could not be run", self.task_id)
            await self.end(
                Status.FAILED,
                error={"code": INTERNAL_ERROR, "message": "Internal error while running the task"},
            )
        finally:
            if (
                _local.get(self.task_id) is self
            ):  # not the run that an answer started since it parked
                del _local[self.task_id]

    async def end(
        self,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        if result is not None and "content" in result:
            # Read by the client's model like a plain call's: the same limit, the same notice.
            result = dict(sizing.fit_result(result, mcp_settings.max_result_chars)[0])
        if result is not None:
            try:
                taskstore.measured(
                    result,
                    mcp_settings.task_max_result_bytes,
                    "TASK_MAX_RESULT_BYTES",
                    "The task's result",
                )
            except taskstore.TooLarge as exc:
                # Kept for the task's whole TTL and sent on every tasks/get: never unbounded.
                status, result, error = (
                    Status.FAILED,
                    None,
                    {"code": INTERNAL_ERROR, "message": str(exc)},
                )
        message = error.get("message", "") if error else ""
        if await sync_to_async(taskstore.finish)(
            self.task_id, status, result=result, error=error, message=str(message)
        ):
            self.status = status
            await self.changed()

    async def _run(self) -> None:
        queued = await sync_to_async(Task.objects.live().filter(pk=self.task_id).first)()
        if queued is None:
            return  # cancelled (or gone) before it could start
        self.user_id = queued.user_id
        # The running slot first, so that a task the row calls started holds one.
        slot = await self._running_slot(Caller(queued.owner, queued.user_id))
        if slot is False:
            return
        try:
            task = await sync_to_async(taskstore.claim)(self.task_id, WORKER_NAME)
            if task is None:
                return
            with tracing.TaskSpan(task.pk, task.tool_name, task.trace_context) as span:
                try:
                    await self._claimed(task)
                finally:
                    span.status = self.status
        finally:
            if slot is not None:
                await slot.release()

    async def _claimed(self, task: Task) -> None:
        self.claimed = task
        prepared = await sync_to_async(self._prepare)(task)
        if isinstance(prepared, dict):
            await self.end(Status.FAILED, error=prepared)
            return
        tool, ctx, arguments = prepared
        await self._supervise(tool, ctx, arguments)

    def _prepare(self, task: Task) -> tuple[ToolEntry, Context, dict[str, Any]] | dict[str, Any]:
        """The tool, its Context and its arguments, as the request had them; or the error that
        fails the task (its authorization ended, a tool gone or no longer allowed)."""
        # Before anything of the tool runs: a token revoked while the task was queued must
        # not reach its write.
        if not taskstore.authorized(task):
            return dict(REVOKED)
        payload = taskstore.unseal(task.payload)
        request = HttpRequest()
        request.user = AnonymousUser()
        if task.user_id is not None:
            user = get_user_model()._default_manager.filter(pk=task.user_id).first()
            if user is None:
                return dict(REVOKED)  # deleted since the check
            request.user = user
        if task.scopes is not None:
            request.auth_scopes = frozenset(task.scopes)  # type: ignore[attr-defined]
        tool = self.site.get_tool(task.tool_name)
        if tool is None or gate(tool, request) is not Access.VISIBLE:
            return {"code": -32602, "message": f"Unknown tool: {task.tool_name}"}
        meta = payload.get("meta")
        request_meta = (
            RequestMeta(
                version=meta["version"],
                client_capabilities=meta["capabilities"],
                client_info=meta["client_info"],
                log_level=meta["log_level"],
            )
            if meta
            else None
        )
        # The answers so far: a parked task replays the tool with them (as an input round does).
        rounds = InputRounds(payload.get("answers") or {}, payload.get("notes") or {})
        ctx = Context(
            site=self.site,
            request=request,
            user=request.user,
            session=None,
            request_id=None,
            meta={"progressToken": task.pk},
            emitter=TaskEmitter(self),
            request_meta=request_meta,
            rounds=rounds,
        )
        ctx.task_phase = "task"
        ctx.task_id = task.pk
        return tool, ctx, payload.get("arguments") or {}

    async def _running_slot(self, caller: Caller) -> Any:
        """A running slot (the RUNNING_PER_USER cap counts tasks too), waited for while the
        user's other calls hold them all; False when the task was cancelled meanwhile."""
        while True:
            try:
                return await RunningSlot.acquire(caller, None)
            except QuotaExceededError:
                await sync_to_async(taskstore.progress)(
                    self.task_id, 0, None, "Waiting: the user's other calls use every running slot"
                )
                state = await sync_to_async(taskstore.beat)(self.task_id, touch=True)
                if state not in Task.LIVE:
                    return False
                await asyncio.sleep(mcp_settings.task_poll_interval_ms / 1000)

    async def _still_authorized(self) -> bool:
        """Whether the claimed task's user and token still allow it to run (at each heartbeat)."""
        return self.claimed is None or await sync_to_async(taskstore.authorized)(self.claimed)

    async def _supervise(self, tool: ToolEntry, ctx: Context, arguments: dict[str, Any]) -> None:
        rounds = ctx._rounds
        assert isinstance(rounds, InputRounds)
        work = asyncio.ensure_future(tool.call(arguments, ctx))
        poll = mcp_settings.task_poll_interval_ms / 1000
        heartbeat = mcp_settings.task_heartbeat_seconds
        loop = asyncio.get_running_loop()
        last_beat = loop.time()
        while not work.done():
            self.wake.clear()
            waker = asyncio.ensure_future(self.wake.wait())
            await asyncio.wait({work, waker}, timeout=poll, return_when=asyncio.FIRST_COMPLETED)
            waker.cancel()
            if work.done():
                break
            touch = loop.time() - last_beat >= heartbeat
            state = await sync_to_async(taskstore.beat)(self.task_id, touch=touch)
            if touch:
                last_beat = loop.time()
            if state not in Task.LIVE:
                self.status = state or ""
                work.cancel()  # cancelled (tasks/cancel, the admin) or failed by a sweep
                await asyncio.gather(work, return_exceptions=True)
                return
            if touch and not await self._still_authorized():
                work.cancel()  # its token was revoked or its user deactivated while it ran
                await asyncio.gather(work, return_exceptions=True)
                await self.end(Status.FAILED, error=dict(REVOKED))
                return
        try:
            result = work.result()
        except InputRequired:
            await self.park(rounds)
        except asyncio.CancelledError:
            await self.end(Status.CANCELLED)
        except MCPError as exc:
            await self.end(Status.FAILED, error=_error_object(exc))
        except Exception:
            logger.exception("Task %s (%s) failed", self.task_id, tool.name)
            await self.end(
                Status.FAILED,
                error={"code": INTERNAL_ERROR, "message": f"Internal error running {tool.name!r}"},
            )
        else:
            await self.end(Status.COMPLETED, result=result)

    async def park(self, rounds: InputRounds) -> None:
        """Put the questions the tool asked on the row and end this run: a task waiting for its
        client holds no worker. The answer that completes them runs it again (tasks/update)."""

        def refused(cap: int) -> dict[str, Any]:
            return _error_object(
                QuotaExceededError(
                    f"Too many tasks waiting for input: at most {cap} per user; answer or cancel "
                    "one",
                    limit="WAITING_TASKS_PER_USER",
                )
            )

        parked = await sync_to_async(taskstore.park)(
            self.task_id, rounds.asked, rounds.answers, rounds.notes, refused
        )
        if parked:
            self.status = Status.INPUT_REQUIRED if parked == "parked" else Status.FAILED
            await self.changed()


def _error_object(exc: MCPError) -> dict[str, Any]:
    """The JSON-RPC error object a failed task shows (``error``)."""
    return {
        "code": exc.code,
        "message": exc.message,
        **({"data": exc.data} if exc.data is not None else {}),
    }


# -- tasks/get, tasks/update, tasks/cancel -----------------------------------------------------


async def afind(site: ServedSite, request: Any, user: Any, task_id: Any) -> Task | None:
    """The task ``task_id`` of this user and OAuth client on ``site``, settled; None for any
    other (unknown, someone else's, malformed)."""

    def find() -> Task | None:
        return taskstore.find(
            task_id,
            site_name=site.name,
            user_id=getattr(user, "pk", None),
            client_id=client_id(request),
        )

    return await sync_to_async(find)()


def not_found() -> InvalidParamsError:
    """What any tasks/* method answers for a task that is not the caller's (or not there)."""
    return InvalidParamsError("Failed to retrieve task: Task not found")


async def task_tool(site: ServedSite, request: Any, task_id: Any) -> ToolEntry | None:
    """The tool of the caller's task ``task_id`` (None for a task not theirs, or a tool gone):
    what answering its questions needs the scopes of, as calling it does."""
    task = await afind(site, request, getattr(request, "user", None), task_id)
    return site.get_tool(task.tool_name) if task is not None else None


async def _find(params: dict[str, Any], ctx: Context) -> Task:
    # The extension before the params, and the task before the rest of tasks/update's params:
    # a client without the extension hears -32021 whatever it sent, and an unknown task is
    # "not found" whatever else is wrong.
    if not declares_tasks(ctx):
        raise MissingRequiredClientCapabilityError(
            f"Declare the {TASKS_EXTENSION} extension to use tasks",
            required_capabilities=required_capability(),
        )
    task = await afind(ctx.site, ctx.request, ctx.user, parse_as(TaskParams, params).task_id)
    if task is None:
        raise not_found()
    return task


async def get_task(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return wire(await _find(params, ctx))


async def update_task(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    task = await _find(params, ctx)
    # The engine refused (403, step-up) a token lacking the tool's scopes before this ran
    # (handlers.target); a tool the user may no longer use is not theirs to go on with.
    tool = ctx.site.get_tool(task.tool_name)
    if await agate(tool, ctx.request) is not Access.VISIBLE:
        raise not_found()
    await give_answers(ctx.site, task, parse_as(UpdateTaskParams, params).input_responses)
    return {}


async def give_answers(site: ServedSite, task: Task, answers: dict[str, Any]) -> None:
    """Give a parked task the client's answers (tasks/update, a relayed question, a deadline
    round's retry): kept in its payload, and the last one runs it again where it was made to run
    (it was parked: no process holds it). -32602 past ``TASK_MAX_PAYLOAD_BYTES``."""
    try:
        answered = await sync_to_async(taskstore.answer)(task.pk, answers, well_formed)
    except taskstore.TooLarge as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None
    if answered == "resumed":
        await start_or_fail(site, task, task.backend)
    if answered:
        await announce(task.pk, task.user_id)


async def cancel_task(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    task = await _find(params, ctx)
    if await sync_to_async(taskstore.cancel)(task.pk):
        wake(task.pk)
        await announce(task.pk, task.user_id)
    return {}


#: The extension's methods, in the 2026-07-28 method table of a site that has task tools.
TASK_HANDLERS: Final = {
    "tasks/get": get_task,
    "tasks/update": update_task,
    "tasks/cancel": cancel_task,
}
