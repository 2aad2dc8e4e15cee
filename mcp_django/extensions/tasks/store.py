"""The rows of durable tasks (:class:`~mcp_django.models.Task`): made, read, answered,
cancelled, kept alive and finished, each in one statement or one short transaction, so that
the web processes answering the client and the process running the task never overwrite each
other. A finished task stays finished: every write after the start is conditional on the task
being live.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

import orjson
from django.contrib.auth import get_user_model
from django.db import connections, router, transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from ... import crypto
from ...auth.oauth import holds_live_token
from ...conf import mcp_settings
from ...models import Task

#: Longest task id looked up; longer ones are unknown without a query.
MAX_TASK_ID_LENGTH = 64

Status = Task.Status


def _now() -> Any:
    return timezone.now()


# -- what a task keeps: its payload, bounded -------------------------------------------------


class TooLarge(ValueError):
    """What a task would keep is larger than its setting allows (or is no JSON at all)."""


def measured(value: Any, limit: int, setting: str, what: str) -> bytes:
    """``value`` as JSON, refused with :class:`TooLarge` above ``limit`` bytes (the setting
    ``setting``, named in the message)."""
    try:
        encoded = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:  # orjson stops at 255 levels of nesting
        raise TooLarge(f"{what} cannot be stored as JSON ({exc})") from None
    if len(encoded) > limit:
        raise TooLarge(
            f"{what} would be {len(encoded)} bytes as JSON, more than {setting} ({limit}) allows"
        )
    return encoded


def seal(payload: dict[str, Any]) -> str:
    """The task's payload (arguments, answers so far, the client's _meta), encrypted and
    bounded by ``TASK_MAX_PAYLOAD_BYTES``."""
    return crypto.encrypt(
        measured(
            payload,
            mcp_settings.task_max_payload_bytes,
            "TASK_MAX_PAYLOAD_BYTES",
            "the task's arguments and answers",
        ).decode()
    )


def unseal(text: str) -> dict[str, Any]:
    payload = orjson.loads(crypto.decrypt(text)) if text else {}
    return payload if isinstance(payload, dict) else {}


def create(**fields: Any) -> Task:
    """Write a new task; it exists (tasks/get finds it) when this returns."""
    now = _now()
    ttl_ms = fields.setdefault("ttl_ms", mcp_settings.task_ttl_ms)
    fields.setdefault("poll_interval_ms", mcp_settings.task_poll_interval_ms)
    fields.setdefault(
        "expires_at", now + timedelta(milliseconds=ttl_ms) if ttl_ms is not None else None
    )
    return Task.objects.create(created_at=now, updated_at=now, **fields)


def live_count(owner: str) -> int:
    return Task.objects.live().filter(owner=owner).count()


def create_within_cap(cap: int | None, **fields: Any) -> Task | None:
    """Write a new task unless its owner has ``cap`` live tasks already (None: no cap); None
    when it has. The count and the insert are one transaction that holds a lock per owner, so
    concurrent creates on any process, even on one database, never pass the cap together."""
    if cap is None:
        return create(**fields)
    using = router.db_for_write(Task)
    with transaction.atomic(using=using):
        _lock_owner(using, fields["owner"], fields.get("user_id"))
        if live_count(fields["owner"]) >= cap:
            return None
        return create(**fields)


def _lock_owner(using: str, owner: str, user_id: Any) -> None:
    """Serialize, until the transaction ends, the creates of ``owner``'s tasks."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        # A transaction-scoped advisory lock on the owner: other owners do not wait.
        key = int.from_bytes(
            hashlib.blake2b(f"mcp_django.task:{owner}".encode(), digest_size=8).digest(),
            "big",
            signed=True,
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])
    elif connection.vendor == "sqlite":
        # SQLite locks the whole database for writing. Take that lock before counting, as
        # BEGIN IMMEDIATE would: a write that matches no row takes it (waiting up to the busy
        # timeout), where a read first could not upgrade to it once another create committed.
        Task.objects.using(using).filter(pk="").update(cancel_requested=F("cancel_requested"))
    elif user_id is not None:
        # Elsewhere (MySQL, Oracle): lock the user's row. An anonymous caller's creates are
        # not serialized there, and may pass the cap by the few that race.
        list(
            get_user_model()
            ._default_manager.using(using)
            .select_for_update()
            .filter(pk=user_id)
            .values_list("pk")
        )


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
    waited = mcp_settings.task_input_timeout
    if task.heartbeat_at is not None and task.heartbeat_at < now - timedelta(seconds=seconds):
        finish(
            task.pk,
            Status.FAILED,
            error=_internal(
                f"The process running this task stopped (no heartbeat for {seconds:g} s)"
            ),
        )
    elif task.status == Status.INPUT_REQUIRED and task.updated_at < now - timedelta(seconds=waited):
        # Parked: no process holds it, and the client has not answered for TASK_INPUT_TIMEOUT.
        finish(
            task.pk, Status.FAILED, error=_internal(f"Input timed out: no answer for {waited:g} s")
        )
    elif task.expires_at is not None and task.expires_at <= now:
        finish(task.pk, Status.FAILED, error=_internal("The task expired before it finished"))
    else:
        return task
    task.refresh_from_db()
    return task


#: Why a task whose user or token no longer allows it ends ``failed``.
REVOKED_MESSAGE = "authorization revoked"


def _internal(message: str) -> dict[str, Any]:
    return {"code": -32603, "message": message}


def stale() -> QuerySet[Task]:
    """The live tasks a sweep fails: their process stopped beating, their client did not
    answer in time, or their time ran out."""
    now = _now()
    timeout = timedelta(seconds=mcp_settings.task_heartbeat_timeout)
    waited = timedelta(seconds=mcp_settings.task_input_timeout)
    return Task.objects.live().filter(
        Q(heartbeat_at__lt=now - timeout)
        | Q(status=Status.INPUT_REQUIRED, updated_at__lt=now - waited)
        | Q(expires_at__lte=now)
    )


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


#: What :func:`answer` did: nothing kept, answers kept (questions remain), or the last answer
#: kept (the task is working again and must be run).
Answered = Literal["", "kept", "resumed"]


def answer(
    task_id: str, responses: dict[str, Any], well_formed: Callable[[str, Any], bool]
) -> Answered:
    """Keep the client's answers to questions the parked task has outstanding, in its payload
    (encrypted, with the answers so far); others are ignored, as the extension says, and so are
    answers ``well_formed(method, answer)`` rejects (the question stays open, under its key).
    Once none is left the task is working again: the caller runs it (it replays the tool with
    every answer). Raises :class:`TooLarge` (nothing kept) past ``TASK_MAX_PAYLOAD_BYTES``."""
    with transaction.atomic():
        task = _locked(task_id)
        if task is None or task.status != Status.INPUT_REQUIRED:
            return ""
        asked = task.input_requests
        taken = {
            key: value
            for key, value in responses.items()
            if isinstance(asked.get(key), dict)
            and well_formed(str(asked[key].get("method")), value)
        }
        if not taken:
            return ""
        payload = unseal(task.payload)
        payload["answers"] = {**(payload.get("answers") or {}), **taken}
        task.payload = seal(payload)
        task.input_requests = {k: v for k, v in asked.items() if k not in taken}
        if not task.input_requests:
            task.status = Status.WORKING
        task.updated_at = _now()
        task.save(update_fields=["payload", "input_requests", "status", "updated_at"])
        return "kept" if task.input_requests else "resumed"


def cancel(task_id: str) -> bool:
    """Cancel a live task; the process running it stops it at its next poll. Whether it was live."""
    now = _now()
    return bool(
        Task.objects.live()
        .filter(pk=task_id)
        .update(
            status=Status.CANCELLED,
            cancel_requested=True,
            input_requests={},
            status_message="Cancelled by request",
            finished_at=now,
            updated_at=now,
            payload="",
        )
    )


# -- the running side ----------------------------------------------------------------------


def authorized(task: Task) -> bool:
    """Whether ``task`` may still run: its user is active and, when an OAuth token made it, a
    live token of that user and client still holds the scopes it was made with (a revoked
    token is gone, a refreshed one is replaced). A task made without a client (Django
    session, stdio) is bound to its user alone. One query; the runner asks at its claim and
    at each heartbeat."""
    if task.user_id is None:
        return True  # an anonymous caller: nothing was granted that could be taken back
    if task.client_id:
        return holds_live_token(task.user_id, task.client_id, task.scopes or ())
    user = get_user_model()._default_manager.filter(pk=task.user_id).first()
    return user is not None and user.is_active


def fail_unauthorized_parked(user_id: Any, client_id: str) -> list[str]:
    """Fail the parked tasks of ``user_id`` made through OAuth client ``client_id`` that are no
    longer :func:`authorized` (their token was revoked); their ids. A parked task has no
    heartbeat to notice it, and no answer could come: only a token holding its scopes may send
    one. A refresh replaces the token before this runs, so the tasks it keeps go on."""
    failed = []
    for task in Task.objects.filter(
        user_id=user_id, client_id=client_id, status=Status.INPUT_REQUIRED
    ):
        if not authorized(task) and finish(
            task.pk, Status.FAILED, error=_internal(REVOKED_MESSAGE), message=REVOKED_MESSAGE
        ):
            failed.append(task.pk)
    return failed


def claim(task_id: str, worker: str) -> Task | None:
    """Mark a working task as run by ``worker`` and return it; None when it is gone, over
    (cancelled before it ran, say) or parked waiting for input."""
    now = _now()
    claimed = Task.objects.filter(pk=task_id, status=Status.WORKING).update(
        worker=worker[:200],
        started_at=Coalesce(F("started_at"), Value(now)),
        heartbeat_at=now,
    )
    return Task.objects.get(pk=task_id) if claimed else None


def beat(task_id: str, *, touch: bool) -> str | None:
    """The task's status; with ``touch``, renew its heartbeat. None when the row is gone.

    A poll with no heartbeat due is one read."""
    if touch:
        Task.objects.live().filter(pk=task_id).update(heartbeat_at=_now())
    return Task.objects.filter(pk=task_id).values_list("status", flat=True).first()


#: What :func:`park` did: parked, refused by WAITING_TASKS_PER_USER (the task failed), or
#: nothing (the task had ended meanwhile).
Parked = Literal["parked", "refused", ""]


def park(
    task_id: str,
    asked: dict[str, Any],
    answers: dict[str, Any],
    notes: dict[str, Any],
    error: Callable[[int], dict[str, Any]],
) -> Parked:
    """Put the questions ``asked`` on the working task and park it: no process holds it while
    its client answers (:func:`answer`), its answers so far and ``notes`` sealed in its payload.
    With ``QUOTAS["WAITING_TASKS_PER_USER"]`` tasks of its owner already parked, fail it with
    ``error(cap)`` instead."""
    cap = mcp_settings.quotas.get("WAITING_TASKS_PER_USER")
    with transaction.atomic():
        task = _locked(task_id)
        if task is None or task.status != Status.WORKING:
            return ""
        now = _now()
        if (
            cap is not None
            and Task.objects.filter(owner=task.owner, status=Status.INPUT_REQUIRED).count() >= cap
        ):
            failure = error(cap)
            Task.objects.filter(pk=task_id).update(
                status=Status.FAILED,
                error=failure,
                status_message=str(failure.get("message", ""))[:2000],
                input_requests={},
                payload="",
                finished_at=now,
                updated_at=now,
            )
            return "refused"
        payload = unseal(task.payload)
        payload["answers"], payload["notes"] = answers, notes
        try:
            task.payload = seal(payload)
        except TooLarge as exc:
            # Answers were bounded as they came; only notes are new here.
            Task.objects.filter(pk=task_id).update(
                status=Status.FAILED,
                error=_internal(str(exc)),
                status_message=str(exc)[:2000],
                input_requests={},
                payload="",
                finished_at=now,
                updated_at=now,
            )
            return "refused"
        task.input_requests = asked
        task.asked_keys = [*task.asked_keys, *(key for key in asked if key not in task.asked_keys)]
        task.status = Status.INPUT_REQUIRED
        task.heartbeat_at = None  # no process holds it: nothing to beat
        task.updated_at = now
        task.save(
            update_fields=[
                "payload",
                "input_requests",
                "asked_keys",
                "status",
                "heartbeat_at",
                "updated_at",
            ]
        )
        return "parked"


def progress(task_id: str, value: float, total: float | None, message: str) -> None:
    Task.objects.live().filter(pk=task_id).update(
        progress=value, total=total, status_message=message[:2000], updated_at=_now()
    )


def finish(
    task_id: str,
    status: str,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    message: str = "",
) -> bool:
    """End a live task (completed, failed or cancelled); False when it had ended already. The
    status message stays the last progress message unless ``message`` replaces it. Its payload
    (arguments and answers) goes: nothing runs it any more."""
    now = _now()
    fields: dict[str, Any] = {"status_message": message[:2000]} if message else {}
    return bool(
        Task.objects.live()
        .filter(pk=task_id)
        .update(
            status=status,
            result=result,
            error=error,
            input_requests={},
            payload="",
            finished_at=now,
            updated_at=now,
            **fields,
        )
    )
