"""The 2025-11-25 form of tasks (SEP-1686, experimental in that revision), for handshake-era
sessions: the clients that speak it (VS Code) use tasks only in this form.

A site with a task tool declares ``capabilities.tasks`` (:func:`capability`) to sessions of that
revision; a ``tools/call`` with ``params.task`` gets that form's ``CreateTaskResult`` from
:func:`~.runner.call`, from the same ``Task`` rows, runner, quotas and revocation as the
2026-07-28 extension. This module answers the form's methods:

- ``tasks/get``: the task (``Task``);
- ``tasks/result``: blocks until the task ends, then returns what the call would have (its
  result with the related-task ``_meta``, or its JSON-RPC error). A task waiting for input has
  its questions relayed to the client on this request's stream, each with the related-task
  ``_meta``, and the answers go on the task as ``tasks/update`` would put them;
- ``tasks/list``: the caller's own tasks, newest first, a page at a time;
- ``tasks/cancel``: cancels a live task (-32602 for an ended one) and returns it.

Every method finds the task as the extension's do (:func:`~.runner.afind`: this site, user and
OAuth client); an anonymous caller's tasks are also bound to the session that made them.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Final

from asgiref.sync import sync_to_async
from django.db.models import Q

from ...conf import mcp_settings
from ...exceptions import ClientRequestError
from ...models import Task
from ...protocol.errors import INTERNAL_ERROR, InternalError, InvalidParamsError
from ...protocol.pagination import decode_cursor, encode_cursor
from ...protocol.params import ListParams, TaskParams, parse_as
from ...server.context import Context
from ...server.entries import Access, agate
from . import runner
from . import store as taskstore

Status = Task.Status


def capability() -> dict[str, Any]:
    """What a site with a task tool declares under ``capabilities.tasks`` in 2025-11-25."""
    return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


async def _find(task_id: Any, ctx: Context) -> Task:
    task = await runner.afind(ctx.site, ctx.request, ctx.user, task_id)
    session_id = ctx.session.pk if ctx.session is not None else None
    if task is None or (task.user_id is None and task.session_id != session_id):
        raise runner.not_found()
    return task


async def get_task(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return runner.handshake_wire(await _find(parse_as(TaskParams, params).task_id, ctx))


# -- tasks/result --------------------------------------------------------------------------


def not_waited_message(task_id: str) -> str:
    """What ``tasks/result`` answered without a stream says of a task that has not ended."""
    return (
        f"Task {task_id} has not ended, and this answer cannot wait for it: it is not streamed "
        "(the endpoint's plain Django view, WSGI or ASGI without mcp_django's router, answers "
        "as JSON when PLAIN_STREAMS answers are open in this process). Poll tasks/get and call "
        "tasks/result once the task has ended."
    )


def _related(task: Task) -> dict[str, Any]:
    return {runner.RELATED_TASK: {"taskId": task.pk}}


def _outcome(task: Task) -> dict[str, Any]:
    """What the call would have answered, with the related-task ``_meta`` on a result."""
    result = runner.outcome(task)
    result["_meta"] = {**(result.get("_meta") or {}), **_related(task)}
    return result


#: The client capability each question a task may ask needs.
QUESTION_CAPABILITIES: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def can_answer(task: Task, ctx: Context) -> bool:
    """Whether this request can put the task's questions to its client: a session's request on
    a stream, from a client that declared what each question needs."""
    declared = ctx.client_capabilities
    return ctx.can_relay() and all(
        isinstance(declared.get(QUESTION_CAPABILITIES.get(str(q.get("method")), "")), dict)
        for q in task.input_requests.values()
    )


async def relay_questions(task: Task, ctx: Context) -> None:
    """Ask the client the parked task's questions on this stream, and give the task its answers
    (the last one runs it again). A question the client refuses fails the task, as it fails a
    plain call's tool."""
    tool = ctx.site.get_tool(task.tool_name)
    # Answering lets the tool go on: only a user who may still use it (as tasks/update checks).
    if await agate(tool, ctx.request) is not Access.VISIBLE:
        raise runner.not_found()
    questions = dict(task.input_requests)
    answers: dict[str, Any] = {}
    try:
        if not can_answer(task, ctx):
            # Never sent to a client that did not declare it can answer (nor without a stream).
            methods = sorted({str(q.get("method")) for q in questions.values()})
            raise ClientRequestError(
                f"The client cannot answer the task's questions ({', '.join(methods)}): it did "
                "not declare the capability they need"
            )
        for key, question in questions.items():
            method, params = str(question.get("method")), dict(question.get("params") or {})
            params["_meta"] = {**(params.get("_meta") or {}), **_related(task)}
            response = await ctx.relay(method, params)
            if "error" in response:
                raise ClientRequestError(
                    f"The client refused {method}: {response['error'].get('message', 'error')}"
                )
            answers[key] = response.get("result")
    except ClientRequestError as exc:
        if await sync_to_async(taskstore.finish)(
            task.pk,
            Status.FAILED,
            error={"code": INTERNAL_ERROR, "message": str(exc)},
            message=str(exc),
        ):
            await runner.announce(task.pk, task.user_id)
        return
    await runner.give_answers(ctx.site, task, answers)


async def task_result(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Block until the task ends (its questions relayed meanwhile); what its call would answer.

    The row is read again every poll interval: whichever process runs the task, its end is
    seen within that, and every read checks again that the task is still the caller's.

    Answered without a stream (only the plain view does, when ``PLAIN_STREAMS`` are all open),
    it does not wait: a live task's result is an error saying to poll ``tasks/get``, since
    waiting would hold a server thread for as long as the task runs.
    """
    task_id = parse_as(TaskParams, params).task_id
    relayed: set[tuple[str, ...]] = set()
    while True:
        task = await _find(task_id, ctx)
        if task.status in Task.TERMINAL:
            return _outcome(task)
        if not ctx.can_relay():
            raise InternalError(not_waited_message(task.pk))
        asked = tuple(sorted(task.input_requests))
        if task.status == Status.INPUT_REQUIRED and asked and asked not in relayed:
            relayed.add(asked)  # asked once per call: a client that will not answer is not re-asked
            await relay_questions(task, ctx)
            continue
        await asyncio.sleep(max(task.poll_interval_ms, 50) / 1000)


# -- tasks/list ----------------------------------------------------------------------------


def _page(
    site_name: str, request: Any, user_id: Any, session_id: str | None, cursor: str | None
) -> dict[str, Any]:
    # The client id in here: reading the token's application may query (sync only).
    client_id = runner.client_id(request)
    tasks = Task.objects.filter(site_name=site_name, user_id=user_id, client_id=client_id)
    if user_id is None:
        tasks = tasks.filter(session_id=session_id)
    if cursor is not None:
        position = decode_cursor(cursor)
        created, last = position.get("c"), position.get("k")
        try:
            moment = datetime.fromisoformat(created) if isinstance(created, str) else None
        except ValueError:
            moment = None
        if moment is None or not isinstance(last, str):
            raise InvalidParamsError("Invalid params: invalid cursor")
        tasks = tasks.filter(Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=last))
    size = mcp_settings.page_size
    rows = list(tasks.order_by("-created_at", "-pk")[: size + 1])
    page: dict[str, Any] = {
        "tasks": [runner.handshake_wire(taskstore.settle(t)) for t in rows[:size]]
    }
    if len(rows) > size:
        last_row = rows[size - 1]
        page["nextCursor"] = encode_cursor({"c": last_row.created_at.isoformat(), "k": last_row.pk})
    return page


async def list_tasks(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    cursor = parse_as(ListParams, params).cursor
    return await sync_to_async(_page)(
        ctx.site.name,
        ctx.request,
        getattr(ctx.user, "pk", None),
        ctx.session.pk if ctx.session is not None else None,
        cursor,
    )


# -- tasks/cancel --------------------------------------------------------------------------


def _ended(task: Task) -> InvalidParamsError:
    return InvalidParamsError(
        f"Cannot cancel task: already in terminal status {runner.handshake_status(task)!r}"
    )


async def cancel_task(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    task = await _find(parse_as(TaskParams, params).task_id, ctx)
    if task.status in Task.TERMINAL:
        raise _ended(task)
    if not await sync_to_async(taskstore.cancel)(task.pk):
        task = await _find(task.pk, ctx)  # it ended meanwhile
        raise _ended(task)
    runner.wake(task.pk)
    await runner.announce(task.pk, task.user_id)
    return runner.handshake_wire(await _find(task.pk, ctx))


#: The form's methods, in the method table of a 2025-11-25 session of a site with task tools.
HANDSHAKE_TASK_HANDLERS: Final = {
    "tasks/get": get_task,
    "tasks/result": task_result,
    "tasks/list": list_tasks,
    "tasks/cancel": cancel_task,
}
