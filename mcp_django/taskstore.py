"""The rows of durable tasks (:class:`~mcp_django.models.Task`): made, read, answered,
cancelled, kept alive and finished, each in one statement or one short transaction, so that
the web processes answering the client and the process running the task never overwrite each
other. A finished task stays finished: every write after the start is conditional on the task
being live.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from .conf import mcp_settings
from .models import Task

#: Longest task id looked up; longer ones are unknown without a query.
MAX_TASK_ID_LENGTH = 64

Status = Task.Status


def _now() -> Any:
    return timezone.now()


def create(**fields: Any) -> Task:
    """Write a new task; it exists (tasks/get finds it) when this returns."""
    now = _now()
    ttl_ms = mcp_settings.task_ttl_ms
    fields.setdefault("ttl_ms", ttl_ms)
    fields.setdefault("poll_interval_ms", mcp_settings.task_poll_interval_ms)
    fields.setdefault("expires_at", now + timedelta(milliseconds=ttl_ms) if ttl_ms is not None else None)
    return Task.objects.create(created_at=now, updated_at=now, **fields)


def live_count(owner: str) -> int:
    return Task.objects.live().filter(owner=owner).count()


def find(task_id: Any, *, site_name: str, user_id: Any, client_id: str) -> Task | None:
    """The task ``task_id`` if it belongs to this user and OAuth client ("" without a token),
    settled (see :func:`settle`); None for any other: unknown, foreign and malformed ids look
    the same."""
    if not isinstance(task_id, str) or not 0 < len(task_id) <= MAX_TASK_ID_LENGTH:
        return None
    task = Task.objects.filter(pk=task_id, site_name=site_name).first()
    if task is None or task.user_id != user_id or task.client_id != client_id:
        return None
    return settle(task)


def settle(task: Task) -> Task:
    """Fail a live task whose process stopped beating, or whose time ran out, and return it
    as it now is. Reads do this, so no task answers "working" for ever."""
    if task.status not in Task.LIVE:
        return task
    now = _now()
    seconds = mcp_settings.task_heartbeat_timeout
    if task.heartbeat_at is not None and task.heartbeat_at < now - timedelta(seconds=seconds):
        finish(task.pk, Status.FAILED, error=_internal(f"The process running this task stopped (no heartbeat for {seconds:g} s)"))
    elif task.expires_at is not None and task.expires_at <= now:
        finish(task.pk, Status.FAILED, error=_internal("The task expired before it finished"))
    else:
        return task
    task.refresh_from_db()
    return task


def _internal(message: str) -> dict[str, Any]:
    return {"code": -32603, "message": message}


def stale() -> QuerySet[Task]:
    """The live tasks a sweep fails: their process stopped beating, or their time ran out."""
    now = _now()
    timeout = timedelta(seconds=mcp_settings.task_heartbeat_timeout)
    return Task.objects.live().filter(Q(heartbeat_at__lt=now - timeout) | Q(expires_at__lte=now))


def sweep() -> list[str]:
    """Fail every live task whose process stopped beating or whose time ran out; their ids."""
    return [task.pk for task in stale() if settle(task).status == Status.FAILED]


def expired() -> QuerySet[Task]:
    """The tasks whose time ran out, whatever their status: what :func:`prune` deletes."""
    return Task.objects.filter(expires_at__lte=_now())


def prune() -> int:
    """Delete the tasks whose time ran out (mcp_clearsessions)."""
    sweep()
    deleted, _ = expired().delete()
    return deleted


def _locked(task_id: str, *fields: str) -> Task | None:
    """The task's row, locked for the rest of the transaction; None when it is gone.

    The lock is taken by a write, not by ``select_for_update``: on SQLite a transaction that
    reads and then writes cannot wait for the write lock (when another connection wrote since
    its read, the upgrade fails at once with "database is locked"), while a first write waits
    for it up to the busy timeout. Elsewhere the UPDATE locks the row as SELECT FOR UPDATE does.
    """
    if not Task.objects.filter(pk=task_id).update(cancel_requested=F("cancel_requested")):
        return None
    rows = Task.objects.filter(pk=task_id)
    return (rows.only(*fields) if fields else rows).first()


def answer(task_id: str, responses: dict[str, Any]) -> bool:
    """Keep the client's answers to questions the task has outstanding (others are ignored, as
    the extension says); the task is working again once none is left. Whether any was kept."""
    with transaction.atomic():
        task = _locked(task_id)
        if task is None or task.status not in Task.LIVE:
            return False
        taken = {key: value for key, value in responses.items() if key in task.input_requests}
        if not taken:
            return False
        task.input_responses = {**task.input_responses, **taken}
        task.input_requests = {k: v for k, v in task.input_requests.items() if k not in taken}
        if not task.input_requests:
            task.status = Status.WORKING
        task.updated_at = _now()
        task.save(update_fields=["input_responses", "input_requests", "status", "updated_at"])
        return True


def cancel(task_id: str) -> bool:
    """Cancel a live task; the process running it stops it at its next poll. Whether it was live."""
    now = _now()
    return bool(
        Task.objects.live().filter(pk=task_id).update(
            status=Status.CANCELLED, cancel_requested=True, input_requests={}, status_message="Cancelled by request",
            finished_at=now, updated_at=now,
        )
    )


# -- the running side ----------------------------------------------------------------------


def claim(task_id: str, worker: str) -> Task | None:
    """Mark a live task as started by ``worker`` and return it; None when it is gone or over
    (cancelled before it ran, say)."""
    now = _now()
    if not Task.objects.live().filter(pk=task_id).update(worker=worker[:200], started_at=now, heartbeat_at=now):
        return None
    return Task.objects.get(pk=task_id)


def beat(task_id: str, waiting: set[str], *, touch: bool) -> tuple[str, dict[str, Any]] | None:
    """The task's status and the answers to ``waiting`` questions that arrived (taken off the
    row); with ``touch``, renew its heartbeat. None when the row is gone.

    A poll with nothing to take and no heartbeat due is one read: the row is locked (a write)
    only when it changes."""
    seen = Task.objects.filter(pk=task_id).values_list("status", "input_responses").first()
    if seen is None:
        return None
    if not touch and not waiting & seen[1].keys():
        return seen[0], {}
    with transaction.atomic():
        task = _locked(task_id, "status", "input_responses", "heartbeat_at")
        if task is None:
            return None
        taken = {k: v for k, v in task.input_responses.items() if k in waiting}
        fields = []
        if taken:
            task.input_responses = {k: v for k, v in task.input_responses.items() if k not in taken}
            fields.append("input_responses")
        if touch and task.status in Task.LIVE:
            task.heartbeat_at = _now()
            fields.append("heartbeat_at")
        if fields:
            task.save(update_fields=fields)
        return task.status, taken


def ask(task_id: str, key: str, request: dict[str, Any]) -> bool:
    """Put a question to the client on the task (``inputRequests``); False when it is over."""
    with transaction.atomic():
        task = _locked(task_id)
        if task is None or task.status not in Task.LIVE:
            return False
        task.input_requests = {**task.input_requests, key: request}
        task.asked_keys = [*task.asked_keys, key]
        task.status = Status.INPUT_REQUIRED
        task.updated_at = _now()
        task.save(update_fields=["input_requests", "asked_keys", "status", "updated_at"])
        return True


def progress(task_id: str, value: float, total: float | None, message: str) -> None:
    Task.objects.live().filter(pk=task_id).update(progress=value, total=total, status_message=message[:2000], updated_at=_now())


def finish(task_id: str, status: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None, message: str = "") -> bool:
    """End a live task (completed, failed or cancelled); False when it had ended already. The
    status message stays the last progress message unless ``message`` replaces it."""
    now = _now()
    fields: dict[str, Any] = {"status_message": message[:2000]} if message else {}
    return bool(
        Task.objects.live().filter(pk=task_id).update(
            status=status, result=result, error=error, input_requests={}, finished_at=now, updated_at=now, **fields,
        )
    )
