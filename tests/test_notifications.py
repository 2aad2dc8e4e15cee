"""Change announcements: mcp_django's own rows never announce, storms are coalesced and bounded."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib import admin
from django.utils import timezone

from mcp_django.models import Event, Session
from mcp_django.registry import changes
from mcp_django.registry.sites import MCPSite
from mcp_django.server import notifications
from mcp_django.server.notifications import Coalescer
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
