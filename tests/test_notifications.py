"""Change announcements: mcp_django's own rows never announce, storms are coalesced and bounded."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from typing import Any

import pytest
from django.contrib import admin
from django.utils import timezone

from mcp_django.models import Event, Session
from mcp_django.registry import changes
from mcp_django.registry.sites import MCPSite
from mcp_django.server import notifications
from mcp_django.server.notifications import Coalescer
from tests.polling import until_sync
from tests.testapp.models import Note


class _Recorder:
    """Stands in for the coalescer: records what would have been announced."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def submit(
        self, key: Any, function: Any, args: tuple[Any, ...], item: Any = None, *, loop: Any
    ) -> None:
        self.calls.append((key, function, args, item))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    recorder = _Recorder()
    monkeypatch.setattr(notifications, "coalescer", recorder)
    return recorder


@pytest.mark.django_db(transaction=True)
def test_register_admin_over_the_default_admin_site_writes_sessions_and_events_without_announcing(
    recorder: _Recorder,
) -> None:
    # admin.site registers mcp_django's Session and Event (mcp_django/admin.py): the loop.
    assert Session in admin.site._registry and Event in admin.site._registry
    mcp_site = MCPSite(name="storm")
    mcp_site.register_admin(admin.site)
    mcp_site.serving = True
    session = Session.objects.create(
        site_name="storm",
        protocol_version="2025-11-25",
        expires_at=timezone.now() + timezone.timedelta(hours=1),
    )
    for seq in range(1, 21):
        Event.objects.create(session=session, stream="get", seq=seq, payload="{}")
    session.save()
    assert recorder.calls == []
    assert Event.objects.filter(session=session).count() == 20


@pytest.mark.django_db(transaction=True)
def test_model_changes_ignore_mcp_django_rows_even_when_a_registry_holds_them(
    recorder: _Recorder,
) -> None:
    mcp_site = MCPSite(name="forced")
    mcp_site._registry[Event] = object()  # as if a bug had registered it
    session = Session.objects.create(protocol_version="2025-11-25", expires_at=timezone.now())
    event = Event.objects.create(session=session, stream="get", seq=1, payload="{}")
    changes.ModelChanges(mcp_site)(Event, instance=event, created=True)
    assert recorder.calls == []


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_saves_from_sync_code_makes_a_bounded_number_of_announcements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.contrib.auth.models import User

    from mcp_django.registry.sites import site as default_site

    calls: list[
        tuple[str, Any]
    ] = []  # of the default site (sites built by other tests may live on)

    async def fake_updated(site: Any, uris: frozenset[str]) -> int:
        if site is default_site._wrapped:
            calls.append(("updated", uris))
        return 0

    async def fake_list_changed(site: Any, kind: str, created_before: Any = None) -> int:
        if site is default_site._wrapped:
            calls.append(("list_changed", kind))
        return 0

    fresh = Coalescer()
    monkeypatch.setattr(notifications, "coalescer", fresh)
    monkeypatch.setattr(changes, "_announce_updated", fake_updated)
    monkeypatch.setattr(changes, "list_changed", fake_list_changed)
    monkeypatch.setattr(notifications, "WINDOW", 600.0)  # the whole burst falls in one window
    owner = User.objects.create_user("bulk")
    notes = [
        Note.objects.create(owner=owner, title=f"n{i}") for i in range(300)
    ]  # a bulk import, autocommit
    for note in notes:
        note.title += "!"
        note.save()
    waiting = [e for e in fresh._pending.values() if e.args and e.args[0] is default_site._wrapped]
    assert len(waiting) == 2  # one batch of URIs, one list_changed
    fresh.flush_now()  # the window's end
    assert fresh.pending_count() == 0
    updated = [uris for kind, uris in calls if kind == "updated"]
    assert len(updated) == 2 and [kind for kind, _ in calls].count("list_changed") == 2
    assert set().union(*updated) == {f"django://testapp/note/{n.pk}" for n in notes}


def test_announcements_waiting_in_a_process_are_capped_and_the_excess_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[Any] = []

    async def announce(value: Any) -> None:
        ran.append(value)

    monkeypatch.setattr(notifications, "MAX_PENDING", 5)
    monkeypatch.setattr(notifications, "WINDOW", 600.0)  # nothing goes out late during the test
    fresh = Coalescer()
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_django.server.notifications"):
            for round_ in range(3):
                for value in range(10):
                    fresh.submit(("key", value), announce, (value,), loop=None)
        assert fresh.pending_count() == 5
        assert len(ran) <= 5  # the first of each key, while the remembered keys fit
        assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1
    finally:
        timer = fresh._timers.get(None)
        if timer is not None:
            timer.cancel()


def test_items_merged_into_one_waiting_announcement_are_capped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[Any] = []

    async def announce(uris: frozenset[str]) -> None:
        ran.append(uris)

    monkeypatch.setattr(notifications, "MAX_PENDING", 50)
    monkeypatch.setattr(notifications, "WINDOW", 600.0)
    fresh = Coalescer()
    try:
        for n in range(500):
            fresh.submit(("updated", "site"), announce, (), item=f"u{n}", loop=None)
        assert len(ran) == 1 and fresh.pending_count() == 1
        assert len(fresh._pending[("updated", "site")].items or ()) == 50
    finally:
        timer = fresh._timers.get(None)
        if timer is not None:
            timer.cancel()


async def test_repeats_from_an_event_loop_are_merged_into_one_late_announcement() -> None:
    import asyncio

    done = asyncio.Event()
    ran: list[Any] = []

    async def announce(kind: str) -> None:
        ran.append(kind)
        if len(ran) == 2:
            done.set()

    fresh = Coalescer()
    loop = asyncio.get_running_loop()
    for _ in range(100):
        fresh.submit(("list", "tools"), announce, ("tools",), loop=loop)
    await asyncio.wait_for(done.wait(), timeout=10)
    assert ran == ["tools", "tools"] and fresh.pending_count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_group_permission_change_reaches_all_its_users_in_one_announcement(
    recorder: _Recorder,
) -> None:
    from django.contrib.auth.models import Group, Permission, User

    group = Group.objects.create(name="editors")
    users = [User.objects.create_user(f"member{n}") for n in range(30)]
    group.user_set.add(*users)
    recorder.calls.clear()
    group.permissions.add(Permission.objects.get(codename="add_note"))
    assert [(key, item) for key, _function, _args, item in recorder.calls] == [
        (("user lists",), frozenset(u.pk for u in users))
    ]


def test_at_exit_waiting_announcements_are_sent_or_named_as_lost(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Python 3.12.0-3.12.1 refuse to start threads once shutdown has begun (asgiref needs one):
    # the exit hook then logs what it drops instead of a traceback and never-awaited coroutines.
    sent: list[str] = []

    async def announce(name: str) -> None:
        sent.append(name)

    for threads_start, expected in ((True, ["a"]), (False, [])):
        fresh = Coalescer()
        monkeypatch.setattr(notifications, "WINDOW", 600.0)
        monkeypatch.setattr(
            notifications, "_threads_can_start", lambda allowed=threads_start: allowed
        )
        fresh.submit("k", announce, ("first",), loop=None)  # sent at once: the window opens
        fresh.submit("k", announce, ("a",), loop=None)  # waits for the window's end
        assert fresh.pending_count() == 1 and sent == ["first"]
        sent.clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mcp_django.server.notifications"):
            fresh._flush_at_exit()
        assert sent == expected and fresh.pending_count() == 0
        assert ("1 change notification(s) were not sent" in caplog.text) is not threads_start
        sent.clear()


def test_a_late_announcement_due_while_its_loop_shuts_down_is_sent_and_leaves_no_task_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # asyncio.run (asgiref's async_to_sync, a server's or a test's loop likewise) cancels the
    # loop's tasks, then keeps it running while it waits for its executor's threads. A flush due
    # then started tasks nobody would cancel or run to their end: they stayed pending in
    # _background until the interpreter's exit ("Task was destroyed but it is pending!"), each
    # counted as running for ever, and what they were to send was lost.
    started = threading.Event()
    release: concurrent.futures.Future[None] = concurrent.futures.Future()
    sent: list[str] = []
    senders: list[threading.Thread] = []

    async def first(name: str) -> None:
        sent.append(name)

    async def late(name: str) -> None:
        senders.append(threading.current_thread())
        started.set()
        await asyncio.wrap_future(release)  # still running when the loop is closed
        sent.append(name)

    monkeypatch.setattr(notifications, "WINDOW", 0.05)  # the loop is shutting down by then
    fresh = Coalescer()
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loops.append(loop)
        fresh.submit("k", first, ("first",), loop=loop)  # at once: the window opens
        fresh.submit("k", late, ("late",), loop=loop)  # waits for the window's end
        # The shutdown waits for this thread, which waits for the late announcement to start.
        loop.run_in_executor(None, started.wait, 10)

    asyncio.run(main())
    (loop,) = loops
    try:
        assert [t for t in notifications._background if t.get_loop() is loop] == []
    finally:
        release.set_result(None)
    (sender,) = senders
    assert sender is not threading.current_thread()  # the timer thread sent it
    # Sent once released; the thread that ran it may stay (Python 3.10's executor threads do).
    until_sync(lambda: sent[-1:] == ["late"] and fresh._running == 0)
    assert fresh.pending_count() == 0


def test_what_waits_for_a_loop_closed_without_ending_its_tasks_is_sent_not_dropped() -> None:
    sent: list[str] = []

    async def announce(name: str) -> None:
        sent.append(name)

    fresh = Coalescer()
    loop = asyncio.new_event_loop()
    loop.close()  # as if run_until_complete then close(), its tasks neither cancelled nor awaited
    fresh._pending["k"] = notifications._Pending(announce, ("late",), loop, time.monotonic() + 600)
    fresh.submit("other", announce, ("now",), loop=None)  # the coalescer notices the loop is gone
    fresh.flush_now()  # the end of its window
    assert sent == ["now", "late"] and fresh.pending_count() == 0
