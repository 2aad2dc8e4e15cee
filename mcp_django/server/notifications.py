"""Announce changes to connected clients from any code: a view, a signal handler, a management
command or a task queue worker, with or without an open MCP connection.

This is the bus side: list changes, per-user list changes and the coalescer. What a change of
a registered model means for a site's subscribers is decided above, in ``changes``.

Each announcement is stored on the session's GET stream and sent over the channel layer, so it
reaches the stream wherever it is held, or waits for the client to resume. 2026-07-28 clients
have no session: their ``subscriptions/listen`` streams, on any process, hear every change on
one channel-layer group (:data:`LISTEN_GROUP`) and keep what their filter and user allow.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Hashable
from typing import Any, Protocol

from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connections, transaction
from django.utils import timezone

from ..models import Session
from ..protocol.jsonrpc import notification_message
from ..protocol.lifecycle import LIST_KINDS
from ..stores import live_session_ids
from ..transport.layers import get_layer
from ..transport.streams import send_to_session


class NamedSite(Protocol):
    """What the bus needs of a site: its name, under which its sessions and listeners are
    filed. An ``MCPSite`` is one; the bus sits below the registry and never imports it."""

    @property
    def name(self) -> str: ...


logger = logging.getLogger(__name__)

#: Every subscriptions/listen stream of every process is in this group.
LISTEN_GROUP = "mcp.listen"


async def tell_listeners(
    *,
    site: str | None,
    kind: str | None = None,
    uri: str | None = None,
    task: str | None = None,
    users: list[Any] | None = None,
) -> None:
    """Tell 2026-07-28 listen streams that ``site``'s (every site's when None) ``kind`` list
    changed (for ``users`` only, when given), that resource ``uri`` was updated, or that
    ``task`` changed."""
    event = {
        "type": "mcp.listen",
        "site": site,
        "kind": kind,
        "uri": uri,
        "task": task,
        "users": None if users is None else [str(u) for u in users],
    }
    await get_layer().group_send(LISTEN_GROUP, event)


async def anotify_list_changed(site: NamedSite, kind: str) -> int:
    """Send ``notifications/<kind>/list_changed`` to every live session of ``site``."""
    if kind not in LIST_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LIST_KINDS)}, not {kind!r}")
    session_ids = await sync_to_async(live_session_ids)(site.name)
    for session_id in session_ids:
        await send_to_session(
            session_id, notification_message(f"notifications/{kind}/list_changed")
        )
    await tell_listeners(site=site.name, kind=kind)
    return len(session_ids)


async def list_changed(site: NamedSite, kind: str, created_before: Any = None) -> int:
    """:func:`anotify_list_changed`, skipping sessions started after a delayed change (they
    listed after it)."""
    sessions = Session.objects.filter(site_name=site.name).live()
    if created_before is not None:
        sessions = sessions.filter(created_at__lte=created_before)
    session_ids = [pk async for pk in sessions.values_list("pk", flat=True)]
    for session_id in session_ids:
        await send_to_session(
            session_id, notification_message(f"notifications/{kind}/list_changed")
        )
    await tell_listeners(site=site.name, kind=kind)
    return len(session_ids)


list_changed.takes_created_before = True  # type: ignore[attr-defined]


def notify_list_changed(site: NamedSite, kind: str) -> int:
    """Synchronous twin of :func:`anotify_list_changed`."""
    return async_to_sync(anotify_list_changed)(site, kind)


def announce_soon(coroutine_function: Any, *args: Any) -> None:
    """Run an announcement from sync or async code without blocking the caller.

    From an event loop it becomes a task; from sync code it runs after the current transaction
    commits (so nobody hears of a change that was rolled back). The same announcement (same
    function and arguments) is sent at most once per :data:`WINDOW`; see :class:`Coalescer`.
    """
    if coroutine_function is anotify_list_changed:
        coroutine_function = (
            list_changed  # the same, and it skips sessions newer than a delayed change
        )
    try:
        key: Hashable = (coroutine_function, args)
        hash(key)
    except TypeError:
        key = object()  # unhashable arguments: not merged, still counted against the cap
    schedule(key, coroutine_function, args)


#: Seconds during which one announcement (per site and kind, or per site and URI) is not repeated.
WINDOW = 0.5
#: Announcements a process holds, waiting or running; beyond it they are dropped with a log line.
MAX_PENDING = 1000


def _before_executors_stop(function: Any) -> None:
    """Run ``function`` when the interpreter starts shutting down, before concurrent.futures
    refuses new work (which asgiref's async_to_sync needs). ``atexit`` runs too late for that;
    threading's own hook is what concurrent.futures itself uses."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - every supported Python has it
        atexit.register(function)
    else:
        register(function)


def _threads_can_start() -> bool:
    try:
        probe = threading.Thread(target=int, daemon=True)
        probe.start()
    except RuntimeError:
        return False
    probe.join()
    return True


class _Pending:
    __slots__ = ("args", "changed_at", "due", "function", "items", "loop")

    def __init__(
        self,
        function: Any,
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop | None,
        due: float,
    ) -> None:
        self.function = function
        self.args = args
        self.items: set[Any] | None = None  # merged arguments (URIs, user ids), passed last
        self.loop = loop
        self.due = due
        self.changed_at = _wall_clock()  # of the latest change merged in

    def is_dead(self) -> bool:
        return self.loop is not None and self.loop.is_closed()


class Coalescer:
    """Per-process announcement coalescer: a storm of changes (a bulk import, an admin action
    over 1000 rows, a loop of saves) costs a bounded number of announcements and of memory.

    The first announcement of a key goes out at once; repeats within ``WINDOW`` seconds are
    merged into one that goes out when the window ends (batches of items, such as URIs, are
    unioned). Keys waiting, keys remembered and tasks running are each capped at
    ``MAX_PENDING``; what does not fit is dropped and logged once per window.
    Announcements from an event loop run on that loop; from sync code without one (a
    management command, a worker) in the calling thread, or for late ones in a timer thread.
    When a loop ends (its tasks cancelled by asyncio.run, asgiref's async_to_sync, a server's
    shutdown) what still waits for it is sent from the timer thread too, not lost.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Hashable, _Pending] = {}
        self._sent: dict[Hashable, float] = {}  # key -> when it last went out
        self._running = 0
        self._timers: dict[Any, Any] = {}  # loop (or None for the timer thread) -> its flush handle
        # Loops whose flush was cancelled: they are being ended, nothing more is started on them.
        self._ended: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self._dropped = 0
        self._dropped_logged_at = -math.inf  # monotonic() may be under WINDOW just after boot
        self._exit_hooked = False

    def submit(
        self,
        key: Hashable,
        function: Any,
        args: tuple[Any, ...],
        item: Any = None,
        *,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        now = time.monotonic()
        with self._lock:
            handed_over = loop is not None and loop in self._ended
            if handed_over:
                loop = None  # a task started on it now would not be run: the timer thread sends it
            entry = self._pending.get(key)
            if entry is not None and not entry.is_dead():
                entry.changed_at = _wall_clock()
                if item is not None and entry.items is not None:
                    if len(entry.items) < MAX_PENDING:
                        entry.items.add(item)
                    else:
                        self._drop(now)
                return  # merged into the one already waiting
            self._forget_old(now)
            last = self._sent.get(key)
            run_now = (
                (last is None or now - last >= WINDOW)
                and self._running < MAX_PENDING
                and len(self._sent) < MAX_PENDING
                and not handed_over
            )
            if not run_now and len(self._pending) >= MAX_PENDING:
                self._drop(now)
                return
            if run_now:
                self._sent[key] = now
                self._running += 1
            else:
                opens = now if handed_over and last is None else (last or now) + WINDOW
                entry = _Pending(function, args, loop, max(now, opens))
                entry.items = {item} if item is not None else None
                self._pending[key] = entry
                self._arm(loop, entry.due - now)
        if run_now:
            self._start(function, args + ((frozenset((item,)),) if item is not None else ()), loop)

    def _forget_old(self, now: float) -> None:
        if len(self._sent) >= MAX_PENDING // 2:
            self._sent = {k: t for k, t in self._sent.items() if now - t < WINDOW}
        self._hand_over([e for e in self._pending.values() if e.is_dead()], now)

    def _hand_over(self, entries: list[_Pending], now: float) -> None:
        """Send these announcements, waiting for a loop that is ending or gone (a finished test,
        a closed server, an async_to_sync call that returned), from the timer thread (lock held).
        """
        for entry in entries:
            entry.loop = None
        if entries:
            self._arm(None, max(0.0, min(entry.due for entry in entries) - now))

    def _drop(self, now: float) -> None:
        self._dropped += 1
        if now - self._dropped_logged_at >= WINDOW:
            self._dropped_logged_at = now
            logger.warning(
                "Too many change announcements at once: dropped %d (at most %d are held).",
                self._dropped,
                MAX_PENDING,
            )
            self._dropped = 0

    def _arm(self, loop: asyncio.AbstractEventLoop | None, delay: float) -> None:
        """Make sure a flush runs for ``loop`` (lock held)."""
        handle = self._timers.get(loop)
        if handle is not None and not (loop is not None and loop.is_closed()):
            return
        if loop is None:
            timer = threading.Timer(delay, self._flush, args=(None,))
            timer.daemon = True  # the exit hook below sends what it still holds
            self._timers[None] = timer
            if not self._exit_hooked:
                self._exit_hooked = True
                _before_executors_stop(self._flush_at_exit)
            timer.start()
        else:
            # A task, not a call_later handle: whoever ends the loop cancels its tasks first, this
            # one with them, and then keeps it running a while (async generators, the executor's
            # threads). A callback firing then would start tasks nobody runs to their end.
            self._timers[loop] = contextvars.Context().run(
                loop.create_task, self._flush_later(loop, delay)
            )

    async def _flush_later(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            now = time.monotonic()
            with self._lock:
                if self._timers.get(loop) is asyncio.current_task():
                    del self._timers[loop]
                self._ended.add(loop)
                self._hand_over([e for e in self._pending.values() if e.loop is loop], now)
            raise
        self._flush(loop)

    def _flush_at_exit(self) -> None:
        """Send what sync code left waiting (a management command's last saves) now, while
        asgiref can still run coroutines: a timer firing during shutdown could not."""
        with self._lock:
            timer = self._timers.pop(None, None)
            for entry in self._pending.values():
                if entry.loop is None:
                    entry.due = 0.0
        if timer is not None:
            timer.cancel()
        if not _threads_can_start():
            # Python 3.12.0-3.12.1 refuse new threads once shutdown has begun, and asgiref
            # needs one to run a coroutine: say what is lost instead of a traceback.
            with self._lock:
                lost = [key for key, entry in self._pending.items() if entry.loop is None]
                for key in lost:
                    del self._pending[key]
            if lost:
                logger.warning(
                    "%d change notification(s) were not sent: this Python cannot start threads at "
                    "exit. "
                    "Call mcp_django.server.notifications.coalescer.flush_now() before the program "
                    "ends.",
                    len(lost),
                )
            return
        self._flush(None)

    def _flush(self, loop: asyncio.AbstractEventLoop | None) -> None:
        now = time.monotonic()
        due: list[_Pending] = []
        with self._lock:
            self._timers.pop(loop, None)
            self._timers = {k: h for k, h in self._timers.items() if k is None or not k.is_closed()}
            later = None
            for key, entry in list(self._pending.items()):
                if entry.loop is not loop:
                    continue
                if entry.due <= now + 0.001:
                    del self._pending[key]
                    self._sent[key] = now
                    self._running += 1
                    due.append(entry)
                else:
                    later = entry.due if later is None else min(later, entry.due)
            if later is not None:
                self._arm(loop, later - now)
        try:
            self._run_due(due, loop)
        finally:
            if loop is None:
                # This timer thread's own connections, opened by the announcements.
                connections.close_all()

    def _run_due(self, due: list[_Pending], loop: asyncio.AbstractEventLoop | None) -> None:
        for entry in due:
            args = entry.args + ((frozenset(entry.items),) if entry.items is not None else ())
            kwargs = (
                {"created_before": entry.changed_at}
                if getattr(entry.function, "takes_created_before", False)
                else {}
            )
            self._start(entry.function, args, loop, kwargs)

    def _start(
        self,
        function: Any,
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop | None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        kwargs = kwargs or {}
        if loop is None:
            try:
                async_to_sync(_logged)(function, *args, **kwargs)
            finally:
                self._finished()
            return
        # A fresh context: the caller's may be inside sync_to_async (asgiref's deadlock guard),
        # and an announcement outlives the request that caused it.
        task = contextvars.Context().run(loop.create_task, _logged(function, *args, **kwargs))
        _background.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: Any) -> None:
        _background.discard(task)
        self._finished()

    def _finished(self) -> None:
        with self._lock:
            self._running -= 1

    def flush_now(self) -> None:
        """Send now what waits outside any event loop (the end of a management command, a test)."""
        with self._lock:
            timer = self._timers.get(None)
            if timer is not None:
                timer.cancel()
            for entry in self._pending.values():
                if entry.loop is None:
                    entry.due = 0.0
        self._flush(None)

    def discard(self) -> None:
        """Forget every announcement waiting, and when each key last went out (tests: what one
        test changed must not be announced while the next runs, on its layer and database)."""
        with self._lock:
            timer = self._timers.pop(None, None)
            self._pending.clear()
            self._sent.clear()
        if timer is not None:
            timer.cancel()

    def pending_count(self) -> int:
        with self._lock:
            return len(self._pending)


coalescer = Coalescer()
_background: set[Any] = set()


def _wall_clock() -> Any:
    return timezone.now()


async def _logged(coroutine_function: Any, *args: Any, **kwargs: Any) -> None:
    # An announcement must never break the change (or the request) that caused it.
    try:
        await coroutine_function(*args, **kwargs)
    except Exception:
        logger.exception("Could not announce a change to connected clients")


def schedule(key: Hashable, function: Any, args: tuple[Any, ...], item: Any = None) -> None:
    """Hand an announcement to the coalescer: now from an event loop, after commit from sync
    code."""
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        coalescer.submit(key, function, args, item, loop=loop)
        return

    def run() -> None:
        # In a thread of an async server (a sync view), run on the server's loop as before.
        main = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
        if (
            main is not None
            and getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid()
            and main.is_running()
        ):
            main.call_soon_threadsafe(
                lambda: coalescer.submit(key, function, args, item, loop=main),
                context=contextvars.Context(),
            )
        else:
            coalescer.submit(key, function, args, item, loop=None)

    transaction.on_commit(run, robust=True)


async def anotify_user_lists_changed(user_ids: list[Any], created_before: Any = None) -> int:
    """Tell the live sessions of these users, on every site, that what they may use changed
    (only those started by ``created_before``, when given)."""
    queryset = Session.objects.filter(user_id__in=user_ids).live()
    if created_before is not None:
        queryset = queryset.filter(created_at__lte=created_before)
    sessions = [s async for s in queryset.values_list("pk", flat=True)]
    for session_id in sessions:
        for kind in LIST_KINDS:
            await send_to_session(
                session_id, notification_message(f"notifications/{kind}/list_changed")
            )
    for kind in LIST_KINDS:
        await tell_listeners(site=None, kind=kind, users=user_ids)
    return len(sessions)


def permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, model: Any, pk_set: Any, **kwargs: Any
) -> None:
    """m2m_changed on user permissions, user groups and group permissions: the tools, resources
    and prompts those users may see changed, so their sessions hear list_changed."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    User = get_user_model()
    if isinstance(instance, User):
        user_ids = [instance.pk]
    elif isinstance(instance, Group):
        user_ids = list(instance.user_set.values_list("pk", flat=True))
    elif model is Group and pk_set:
        user_ids = list(
            User.objects.filter(groups__in=pk_set).values_list("pk", flat=True).distinct()
        )
    elif model is User and pk_set:
        user_ids = list(pk_set)
    else:
        return
    if user_ids:
        # One item per change (a group's users together), so the cap counts changes, not users.
        schedule(("user lists",), _announce_user_lists, (), item=frozenset(user_ids))


async def _announce_user_lists(
    changes: frozenset[frozenset[Any]], created_before: Any = None
) -> int:
    user_ids = set().union(*changes)
    return await anotify_user_lists_changed(list(user_ids), created_before=created_before)


_announce_user_lists.takes_created_before = True  # type: ignore[attr-defined]
