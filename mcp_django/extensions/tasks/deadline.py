"""Long work for clients without tasks: ``TASK_DEADLINE_SECONDS``.

Most hosted clients take no tasks and stop a call after a while of their own (Claude after 300
s). With ``TASK_DEADLINE_SECONDS`` set, a task tool called by a client that has no tasks (a
2026-07-28 request without the extension; a session whose client declared no ``tasks``
capability) runs as a task all the same, from the same row, runner and worker, and the call waits
for it up to the deadline:

- if it ends in time, the call answers what the plain call would have (its result, or its
  JSON-RPC error): a fast call looks unchanged;
- its progress is passed on to the call's progress token as the task records it;
- if it asks the client something, a session's client is asked on the call's stream (as
  ``tasks/result`` relays questions), and a 2026-07-28 request is answered with an input-required
  round holding the task's questions: its retry brings the answers to the same task;
- otherwise the call answers a result that names the task and says how to follow it, with the
  generated tools :data:`POLLING_TOOLS` (``task_status``, ``task_result``, ``task_cancel``), which
  a site lists while the setting is on and it has a task tool.

Off by default: a client that cannot poll would otherwise get a task id where it waited for a
result. ``docs/howto/tasks.md`` says when to turn it on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from asgiref.sync import sync_to_async

from ...conf import mcp_settings
from ...models import Task
from ...server.context import Context
from ...server.entries import Access, ToolEntry, agate
from ...server.handler_tools import HandlerTool, tool_error
from ...server.rounds import InputRequired
from . import handshake, runner
from . import store as taskstore

if TYPE_CHECKING:
    from ...server.entries import ServedSite

Status = Task.Status

#: The key of a result's ``_meta`` that names the task it stands for.
RELATED_TASK: Final = runner.RELATED_TASK
#: Where a 2026-07-28 input round keeps the task its questions came from (sealed requestState).
ROUND_TASK: Final = "deadline-task"


def deadline() -> float | None:
    """``TASK_DEADLINE_SECONDS``: None when the option is off."""
    return mcp_settings.task_deadline_seconds


def applies(tool: ToolEntry, ctx: Context, task: dict[str, Any] | None) -> bool:
    """Whether this call of ``tool`` runs under the deadline: the option is on, the tool may run
    as a task, and the client asked for none and has no tasks to ask with. A 2026-07-28 client
    can declare the extension on any request: a ``required`` tool keeps telling it to (-32021)."""
    if deadline() is None or tool.task_support == "forbidden" or task is not None:
        return False
    if ctx.request_meta is not None:
        return tool.task_support == "optional" and not runner.declares_tasks(ctx)
    capabilities = ctx.session.client_capabilities if ctx.session is not None else {}
    return not isinstance(capabilities.get("tasks"), dict)


def _related(task: Task) -> dict[str, Any]:
    return {RELATED_TASK: {"taskId": task.pk}}


def _following(task: Task, tool: ToolEntry | None, text: str) -> dict[str, Any]:
    """A result standing for a task that has not ended: what it is, and how to follow it.

    A tool with an ``outputSchema`` must return conforming ``structuredContent`` with a
    successful result, which a task still running has none of: for such a tool the answer is
    marked ``isError``, its text saying the task goes on (clients skip the schema for errors).
    """
    follow = (
        f'Call task_status with {{"taskId": "{task.pk}"}} to follow it, task_result to get its '
        "result once it is done, or task_cancel to stop it."
    )
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": f"{text} {follow}"}],
        "_meta": _related(task),
    }
    if tool is not None and (tool.definition().get("outputSchema") is not None):
        result["isError"] = True
    return result


async def _settled(task_id: str) -> Task:
    found = await sync_to_async(lambda: taskstore.settle(Task.objects.get(pk=task_id)))()
    return found


async def _pass_progress(task: Task, ctx: Context, last: list[float]) -> None:
    """Send the call's progress token the task's progress, when it moved on."""
    if task.progress is None or ctx.progress_token is None or task.progress <= last[0]:
        return
    last[0] = task.progress
    await ctx.report_progress(task.progress, task.total, task.status_message or None)


def _ask_in_a_round(task: Task, ctx: Context) -> None:
    """Answer a 2026-07-28 request with an input-required round holding the task's questions
    (its retry brings the answers: :func:`call` gives them to the same task)."""
    rounds = ctx._rounds
    if rounds is None:
        return
    rounds.asked.update(task.input_requests)
    rounds.notes[ROUND_TASK] = task.pk
    raise InputRequired(ROUND_TASK)


async def wait(task: Task, ctx: Context, seconds: float, *, rounds: bool = False) -> Task:
    """The task once it ends, or as it is after ``seconds``, its progress passed on; a parked
    task's questions are put to the client when this request can ask it, once each (with
    ``rounds``, a 2026-07-28 request is answered with an input-required round)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    relayed: set[tuple[str, ...]] = set()
    progress = [float("-inf")]
    while True:
        task = await _settled(task.pk)
        await _pass_progress(task, ctx, progress)
        if task.status in Task.TERMINAL:
            return task
        asked = tuple(sorted(task.input_requests))
        if task.status == Status.INPUT_REQUIRED:
            if rounds:
                _ask_in_a_round(task, ctx)
            if not handshake.can_answer(task, ctx) or not asked or asked in relayed:
                return task  # nobody here can answer it
            relayed.add(asked)
            await handshake.relay_questions(task, ctx)
            continue
        left = until - loop.time()
        if left <= 0:
            return task
        await asyncio.sleep(min(left, max(task.poll_interval_ms, 50) / 1000))


def _answer(task: Task, tool: ToolEntry | None, seconds: float) -> dict[str, Any]:
    """What a call (or ``task_result``) answers for the task as :func:`wait` left it."""
    if task.status in Task.TERMINAL:
        return runner.outcome(task)
    if task.status == Status.INPUT_REQUIRED:
        return _following(
            task,
            tool,
            f"Task {task.pk} is waiting for an answer this client cannot give"
            f" ({task.status_message or 'a question to the user'}); it fails if nobody answers"
            f" within {mcp_settings.task_input_timeout:g} s.",
        )
    return _following(
        task,
        tool,
        f"Still running as task {task.pk} after {seconds:g} s"
        + (f" ({task.status_message})." if task.status_message else "."),
    )


async def call(tool: ToolEntry, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Run ``tool`` as a task and answer within the deadline (see the module's docstring)."""
    invalid = await tool.check_arguments(arguments, ctx)
    if invalid is not None:
        return invalid
    rounds = ctx._rounds
    task_id = rounds.notes.get(ROUND_TASK) if rounds is not None else None
    if task_id is None:
        task = await runner.open_task(tool, arguments, ctx, {}, {})
    else:
        # The retry of a round that asked the task's questions: its answers go to that task.
        assert rounds is not None
        found = await runner.afind(ctx.site, ctx.request, ctx.user, task_id)
        if found is None:
            raise runner.not_found()
        task = found
        await runner.give_answers(ctx.site, task, rounds.answers)
    seconds = deadline() or 0.0
    return _answer(await wait(task, ctx, seconds, rounds=True), tool, seconds)


# -- the tools a client without tasks follows its tasks with -------------------------------------


TASK_ID_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "taskId": {
            "type": "string",
            "maxLength": taskstore.MAX_TASK_ID_LENGTH,
            "description": "The task id a call answered with.",
        }
    },
    "required": ["taskId"],
    "additionalProperties": False,
}


class PollingTool(HandlerTool):
    """One of the generated tools that follow a task (``task_status``, ``task_result``,
    ``task_cancel``): the caller's own tasks only, as ``tasks/get`` finds them."""

    def __init__(
        self, name: str, title: str, description: str, annotations: dict[str, bool]
    ) -> None:
        super().__init__(
            name, title, description, TASK_ID_SCHEMA, {**annotations, "openWorldHint": False}
        )

    def is_visible(self, request: Any) -> bool:
        return True  # each task is checked against its own tool's gate

    async def check_arguments(
        self, arguments: dict[str, Any], ctx: Context
    ) -> dict[str, Any] | None:
        task_id = arguments.get("taskId")
        if not isinstance(task_id, str) or set(arguments) != {"taskId"}:
            return tool_error('Invalid arguments: give exactly "taskId", a string.')
        return None

    async def answer(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        task = await runner.afind(ctx.site, ctx.request, ctx.user, arguments["taskId"])
        tool = ctx.site.get_tool(task.tool_name) if task is not None else None
        # A task of someone else's, of a tool this user may no longer use, or unknown: the same.
        if task is None or await agate(tool, ctx.request) is not Access.VISIBLE:
            return tool_error(f"No task {str(arguments['taskId'])[:80]!r} of yours.")
        assert tool is not None  # the gate said VISIBLE
        if self.name == "task_status":
            return await self._task_status(task, tool, ctx)
        if self.name == "task_result":
            return await self._task_result(task, tool, ctx)
        return await self._task_cancel(task, tool, ctx)

    async def _task_status(self, task: Task, tool: ToolEntry, ctx: Context) -> dict[str, Any]:
        shown = runner.handshake_wire(task)
        if task.progress is not None:
            shown["progress"] = task.progress
            if task.total is not None:
                shown["total"] = task.total
        words = f"Task {task.pk} ({task.tool_name}) is {shown['status']}"
        if shown.get("statusMessage"):
            words += f": {shown['statusMessage']}"
        return {"content": [{"type": "text", "text": words + "."}], "structuredContent": shown}

    async def _task_result(self, task: Task, tool: ToolEntry, ctx: Context) -> dict[str, Any]:
        seconds = deadline() or 0.0
        ended = await wait(task, ctx, seconds)
        if ended.status == Status.CANCELLED:
            return tool_error(f"Task {task.pk} was cancelled: it has no result.")
        if ended.status == Status.FAILED:
            error = ended.error or {}
            return tool_error(f"Task {task.pk} failed: {error.get('message', 'internal error')}")
        return _answer(ended, tool, seconds)

    async def _task_cancel(self, task: Task, tool: ToolEntry, ctx: Context) -> dict[str, Any]:
        if not await sync_to_async(taskstore.cancel)(task.pk):
            status = runner.handshake_status(await _settled(task.pk))
            return tool_error(f"Task {task.pk} had already ended ({status}).")
        runner.wake(task.pk)
        await runner.announce(task.pk, task.user_id)
        return {"content": [{"type": "text", "text": f"Task {task.pk} was cancelled."}]}


#: The tools a site lists while TASK_DEADLINE_SECONDS is set and it has a task tool.
POLLING_TOOLS: Final[tuple[PollingTool, ...]] = (
    PollingTool(
        "task_status",
        "Task status",
        "How a task that a call started is doing: its status, message and progress.",
        {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
    ),
    PollingTool(
        "task_result",
        "Task result",
        "The result of a task that a call started, waiting a while for it if it still runs.",
        {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
    ),
    PollingTool(
        "task_cancel",
        "Cancel a task",
        "Stop a task that a call started (what it already changed stays changed).",
        {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
    ),
)


def polling_tools(tools: Sequence[ToolEntry]) -> tuple[PollingTool, ...]:
    """The polling tools a site with ``tools`` serves: none unless the option is on and one of
    them may run as a task."""
    if deadline() is None or not any(t.task_support != "forbidden" for t in tools):
        return ()
    return POLLING_TOOLS


#: The polling tools by name.
POLLING_NAMES: Final = {tool.name: tool for tool in POLLING_TOOLS}


def polling_tool(site: ServedSite, name: str) -> PollingTool | None:
    """The polling tool ``name`` when ``site`` serves it (:func:`polling_tools`)."""
    tool = POLLING_NAMES.get(name)
    return tool if tool is not None and polling_tools(site.get_tools()) else None
