"""Tools that show a live session at work: progress, logs, questions to the user, cancellation
and change announcements (autodiscovered by mcp_django, like admin.py).

Each of them takes a ``Context``, so its answer is an SSE stream that survives a dropped
connection: the client resumes it with ``Last-Event-ID``, on this process or another one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import orjson
from django.utils import timezone
from pydantic import BaseModel, Field

from mcp_django import Context, site
from mcp_django.conf import mcp_settings
from mcp_django.exceptions import ResourceNotFoundError
from mcp_django.registry.functions import FunctionTool

from .models import TaskRun

logger = logging.getLogger(__name__)

#: ``long_task`` works in steps of this many seconds, and reports progress once a second.
STEP_SECONDS = 0.1
STEPS_PER_REPORT = 10

ListKind = Literal["tools", "resources", "prompts"]
F = TypeVar("F", bound=Callable[..., Any])


# -- what the tools return ----------------------------------------------------------------------


class RunOut(BaseModel):
    run: int
    uri: str = Field(
        description="The live://runs/{run} resource; subscribe to it to hear when the run ends."
    )
    status: str
    steps_done: int
    steps_total: int
    reason: str = Field(
        "",
        description="Why the run ended other than done: an interrupted run says what stopped it.",
    )


class ReservationForm(BaseModel):
    """The form the user fills in (form-mode elicitation)."""

    confirm: bool = Field(title="Reserve it", description="Tick to place the reservation.")
    note: str = Field(
        "", title="Note", description="Anything the librarian should know.", max_length=200
    )


class Reservation(BaseModel):
    title: str
    action: Literal["accept", "decline", "cancel"] = Field(
        description="What the user did with the form."
    )
    confirmed: bool
    note: str


class Announcement(BaseModel):
    method: str
    sessions: int = Field(description="How many sessions were told.")


# -- tools ----------------------------------------------------------------------------------------


@site.tool(title="Count down", annotations={"readOnlyHint": True, "openWorldHint": False})
async def countdown(
    ctx: Context,
    n: Annotated[int, Field(ge=1, le=1000, description="Count down from this number.")] = 10,
    interval_ms: Annotated[
        int, Field(ge=0, le=10_000, description="Milliseconds between steps.")
    ] = 200,
) -> str:
    """Count down from n to 1, with a log message and a progress notification at each step."""
    for done, remaining in enumerate(range(n, 0, -1), start=1):
        await ctx.log.info(f"T-{remaining}", logger="countdown")
        await ctx.report_progress(done, n, f"T-{remaining}")
        await asyncio.sleep(interval_ms / 1000)
    return "liftoff"


async def _finish(run: TaskRun, status: str, steps_done: int) -> None:
    run.status, run.steps_done, run.finished_at = status, steps_done, timezone.now()
    await TaskRun.objects.filter(pk=run.pk).aupdate(
        status=status, steps_done=steps_done, finished_at=run.finished_at
    )
    await site.anotify_resource_updated(run.uri)


@site.tool(
    title="A long task",
    annotations={"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
)
async def long_task(
    ctx: Context,
    seconds: Annotated[float, Field(gt=0, le=3600, description="How long the task works.")] = 30,
) -> RunOut:
    """Work for a while in small steps, reporting progress every second, until done or cancelled.

    Each run is a TaskRun row (see the admin, or the live://runs/{run} resource): it ends
    "done"; "cancelled" when the client sends notifications/cancelled, or drops the connection
    and does not resume the stream within DISCONNECT_GRACE_SECONDS; or "interrupted" when the
    server process dies under it.
    """
    steps = max(1, round(seconds / STEP_SECONDS))
    run = await TaskRun.objects.acreate(
        tool="long_task",
        session_id=ctx.session_id or "",
        request_id=orjson.dumps(ctx.request_id).decode(),
        steps_total=steps,
    )
    await ctx.log.info({"run": run.pk, "uri": run.uri, "status": run.status}, logger="live")
    done = 0
    try:
        for step in range(1, steps + 1):
            await asyncio.sleep(STEP_SECONDS)
            done = step
            if step % STEPS_PER_REPORT == 0 or step == steps:
                await TaskRun.objects.filter(pk=run.pk).aupdate(steps_done=step)
                await ctx.report_progress(
                    step, steps, f"{step * STEP_SECONDS:.1f}s of {seconds:g}s"
                )
    except asyncio.CancelledError:
        # Record the end even though this task is being cancelled; then let the cancel through.
        await asyncio.shield(_finish(run, TaskRun.Status.CANCELLED, done))
        logger.info("long_task run %s cancelled after %s of %s steps", run.pk, done, steps)
        raise
    except Exception:
        await _finish(run, TaskRun.Status.FAILED, done)
        raise
    await _finish(run, TaskRun.Status.DONE, done)
    logger.info("long_task run %s done", run.pk)
    return RunOut(run=run.pk, uri=run.uri, status=run.status, steps_done=done, steps_total=steps)


@site.tool(
    title="Confirm a reservation",
    annotations={"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
)
async def confirm_reservation(
    ctx: Context, title: Annotated[str, Field(min_length=1, max_length=200)]
) -> Reservation:
    """Ask the user whether to reserve a book (a form, by elicitation) and report the answer."""
    answer = await ctx.elicit(f"Reserve {title}?", ReservationForm)
    if answer.action == "accept":
        form: ReservationForm = answer.data
        await ctx.log.info(
            f"{title!r}: {'reserved' if form.confirm else 'not reserved'}", logger="live"
        )
        return Reservation(title=title, action="accept", confirmed=form.confirm, note=form.note)
    return Reservation(title=title, action=answer.action, confirmed=False, note="")


class StaffTool(FunctionTool):
    """A tool only staff see and call: for anyone else it is not listed, and calling it answers
    "Unknown tool", like any tool they may not use. The registry asks every entry
    ``has_permission(request)`` for every method, so this is the one place to decide."""

    def has_permission(self, request: Any) -> bool:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return bool(user.is_staff)
        # MCP_AUTH=none (a demo): there are no users to tell apart, as for every other tool.
        return mcp_settings.get("AUTHENTICATION") == "none"


def staff_tool(**options: Any) -> Callable[[F], F]:
    """``@site.tool(...)`` for :class:`StaffTool`."""

    def decorator(func: F) -> F:
        site.register_entry(StaffTool(func, **options))
        return func

    return decorator


@staff_tool(
    title="Announce a list change", annotations={"readOnlyHint": True, "openWorldHint": False}
)
async def announce_list_changed(kind: ListKind) -> Announcement:
    """Tell every live session that the list of tools, resources or prompts changed (staff only).

    The same as ``site.notify_list_changed(kind)`` from any code, or ``manage.py announce_change``.
    """
    sessions = await site.anotify_list_changed(kind)
    return Announcement(method=f"notifications/{kind}/list_changed", sessions=sessions)


@staff_tool(
    title="Announce a resource update", annotations={"readOnlyHint": True, "openWorldHint": False}
)
async def announce_resource_updated(
    uri: Annotated[str, Field(min_length=1, max_length=2000)],
) -> Announcement:
    """Tell the sessions subscribed to a resource URI that the resource changed (staff only)."""
    sessions = await site.anotify_resource_updated(uri)
    return Announcement(method="notifications/resources/updated", sessions=sessions)


# -- resources ------------------------------------------------------------------------------------


@site.resource(
    "live://runs/{run_id}",
    name="task-run",
    title="A run of long_task",
    mime_type="application/json",
)
def task_run(run_id: int) -> dict[str, Any]:
    """A long_task run: its status and progress. Subscribe to hear when it ends."""
    run = TaskRun.objects.filter(pk=run_id).first()
    if run is None:
        raise ResourceNotFoundError(f"live://runs/{run_id}")
    return RunOut(
        run=run.pk,
        uri=run.uri,
        status=run.status,
        steps_done=run.steps_done,
        steps_total=run.steps_total,
        reason=run.reason,
    ).model_dump(mode="json")
