"""``manage.py mcp_clearsessions``: the clearsessions of MCP sessions and their event logs."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from mcp_django import crypto
from mcp_django.extensions.tasks import store as taskstore
from mcp_django.models import Event, ServerRequest, Session, Subscription, Task
from mcp_django.stores import SessionStore

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
RETENTION = {"AUTHENTICATION": "none", "SESSION_RETENTION": 3600, "EVENT_RETENTION": 600}


def make_session(**fields) -> Session:
    session = SessionStore().create(
        site_name="mcp",
        user_id=None,
        protocol_version="2025-11-25",
        client_info={},
        capabilities={},
    )
    if fields:
        Session.objects.filter(pk=session.pk).update(**fields)
    return session


def add_event(session: Session, seq: int = 1, age: timedelta = timedelta(0)) -> Event:
    return Event.objects.create(
        session=session, stream="get", seq=seq, payload="{}", created_at=timezone.now() - age
    )


def clear(*args: str) -> str:
    out = StringIO()
    with override_settings(MCP_DJANGO=RETENTION):
        call_command("mcp_clearsessions", *args, stdout=out)
    return out.getvalue()


def test_expired_session_past_retention_is_deleted_with_its_events():
    session = make_session(expires_at=timezone.now() - 2 * HOUR)
    add_event(session)
    Subscription.objects.create(session=session, uri="test://hello")
    ServerRequest.objects.create(
        session=session, request_id="srv-1", method="ping", channel_name="c"
    )
    output = clear()
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Event.objects.filter(session_id=session.pk).exists()
    assert not Subscription.objects.exists()
    assert not ServerRequest.objects.exists()
    assert "Deleted 1 sessions, 1 events and 0 elicitations;" in output


def test_terminated_session_past_retention_is_deleted():
    session = make_session(terminated_at=timezone.now() - 2 * HOUR)
    clear()
    assert not Session.objects.filter(pk=session.pk).exists()


def test_recently_terminated_session_is_kept_for_the_admin():
    session = make_session(terminated_at=timezone.now() - timedelta(minutes=5))
    add_event(session)
    clear()
    assert Session.objects.filter(pk=session.pk).exists()
    assert Event.objects.filter(session_id=session.pk).exists()


def test_recently_expired_session_is_kept_for_the_admin():
    session = make_session(expires_at=timezone.now() - timedelta(minutes=5))
    clear()
    assert Session.objects.filter(pk=session.pk).exists()


def test_terminated_session_is_judged_by_termination_not_expiry():
    # Expired long ago but terminated just now: it ended now, so it is kept.
    session = make_session(expires_at=timezone.now() - 2 * HOUR, terminated_at=timezone.now())
    clear()
    assert Session.objects.filter(pk=session.pk).exists()


def test_live_session_and_its_recent_events_are_kept():
    session = make_session()
    add_event(session)
    clear()
    assert Session.objects.filter(pk=session.pk).exists()
    assert Event.objects.filter(session_id=session.pk).count() == 1


def test_events_past_event_retention_are_deleted_even_in_live_sessions():
    session = make_session()
    add_event(session, seq=1, age=HOUR)
    add_event(session, seq=2)
    output = clear()
    assert Session.objects.filter(pk=session.pk).exists()
    assert list(Event.objects.filter(session_id=session.pk).values_list("seq", flat=True)) == [2]
    assert "Deleted 0 sessions, 1 events and 0 elicitations;" in output


def test_dry_run_deletes_nothing_and_reports_counts():
    ended = make_session(expires_at=timezone.now() - 2 * HOUR)
    add_event(ended, seq=1)
    live = make_session()
    add_event(live, seq=1, age=HOUR)
    add_event(live, seq=2)
    output = clear("--dry-run")
    assert Session.objects.count() == 2
    assert Event.objects.count() == 3
    assert "Would delete 1 sessions, 2 events and 0 elicitations." in output


def test_nothing_to_clear_reports_zero():
    assert "Deleted 0 sessions, 0 events and 0 elicitations;" in clear()


def test_elicitations_past_expiry_and_retention_are_deleted_in_any_state():
    from mcp_django.models import Elicitation

    now = timezone.now()
    old = [
        Elicitation.objects.create(
            message="m", view_name="v", state=state, expires_at=now - 2 * HOUR
        )
        for state in (
            Elicitation.State.PENDING,
            Elicitation.State.COMPLETED,
            Elicitation.State.DECLINED,
        )
    ]
    recent = Elicitation.objects.create(
        message="m", view_name="v", expires_at=now - timedelta(minutes=5)
    )
    live = Elicitation.objects.create(message="m", view_name="v", expires_at=now + HOUR)
    assert "0 elicitations" not in clear("--dry-run") and Elicitation.objects.count() == 5
    assert "Deleted 0 sessions, 0 events and 3 elicitations;" in clear()
    assert set(Elicitation.objects.values_list("pk", flat=True)) == {recent.pk, live.pk}
    assert not Elicitation.objects.filter(pk__in=[e.pk for e in old]).exists()


def test_elicitations_go_with_their_session_even_before_they_expire():
    from mcp_django.models import Elicitation

    ended = make_session(expires_at=timezone.now() - 2 * HOUR)
    live = make_session()
    later = timezone.now() + HOUR
    orphaned = Elicitation.objects.create(
        session=ended, message="m", view_name="v", expires_at=later
    )
    kept = Elicitation.objects.create(session=live, message="m", view_name="v", expires_at=later)
    assert "Would delete 1 sessions, 0 events and 1 elicitations." in clear("--dry-run")
    assert "Deleted 1 sessions, 0 events and 1 elicitations;" in clear()
    assert not Elicitation.objects.filter(pk=orphaned.pk).exists()
    assert Elicitation.objects.filter(pk=kept.pk).exists()


def make_task(**fields) -> Task:
    task = taskstore.create(
        site_name="mcp",
        user_id=None,
        owner="anon",
        tool_name="report",
        payload=crypto.encrypt("{}"),
    )
    Task.objects.filter(pk=task.pk).update(**fields)
    return Task.objects.get(pk=task.pk)


def four_tasks() -> dict[str, Task]:
    """A finished task past its TTL, a running one past its TTL, one whose process stopped
    beating, and one beating."""
    now = timezone.now()
    return {
        "expired_done": make_task(status=Task.Status.COMPLETED, expires_at=now - HOUR),
        "expired_live": make_task(heartbeat_at=now, expires_at=now - HOUR),
        "dead": make_task(heartbeat_at=now - HOUR, expires_at=now + HOUR),
        "alive": make_task(heartbeat_at=now, expires_at=now + HOUR),
    }


def test_tasks_whose_process_died_are_failed_and_expired_tasks_deleted():
    tasks = four_tasks()
    assert "Failed 2 stale tasks; deleted 2 expired tasks." in clear()
    assert dict(Task.objects.values_list("pk", "status")) == {
        tasks["dead"].pk: Task.Status.FAILED,
        tasks["alive"].pk: Task.Status.WORKING,
    }


def test_dry_run_counts_stale_and_expired_tasks_and_changes_none():
    tasks = four_tasks()
    assert "Would fail 2 stale tasks and delete 2 expired tasks." in clear("--dry-run")
    assert {pk: t.status for pk, t in Task.objects.in_bulk().items()} == {
        t.pk: t.status for t in tasks.values()
    }


# mcp_stdio --user: projects that sign people in by email give them usernames nobody knows.


def stdio_user(value: str | None, field: str | None = None):
    from mcp_django.management.commands.mcp_stdio import Command

    if field is None:
        return Command().principal_for(value).user
    return Command().principal_for(value, None, field).user


def make_user(username: str, email: str = "", **fields):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=username, email=email, **fields)


def test_mcp_stdio_user_finds_a_user_by_username():
    alice = make_user("alice", "alice@example.com")
    assert stdio_user("alice") == alice


def test_mcp_stdio_user_finds_a_user_by_email_when_no_username_matches():
    alice = make_user("u-8f3a2c", "Alice@Example.com")
    assert stdio_user("alice@example.com") == alice  # addresses match whatever their case


def test_mcp_stdio_user_takes_the_username_before_another_users_email():
    owner = make_user("boss@example.com", "someone@example.com")
    make_user("u-1", "boss@example.com")
    assert stdio_user("boss@example.com") == owner


def test_mcp_stdio_user_refuses_an_email_two_users_share():
    make_user("u-1", "shared@example.com")
    make_user("u-2", "SHARED@example.com")
    with pytest.raises(
        CommandError,
        match=re.escape("More than one user has 'shared@example.com' as username or email"),
    ):
        stdio_user("shared@example.com")


def test_mcp_stdio_user_names_an_unknown_user():
    make_user("alice", "alice@example.com")
    with pytest.raises(CommandError, match=re.escape("No user 'bob@example.com'")):
        stdio_user("bob@example.com")


def test_mcp_stdio_user_field_looks_the_user_up_by_that_field_only():
    make_user("carol", "x@example.com")
    dave = make_user("dave", "y@example.com", last_name="carol")
    assert stdio_user("carol", "last_name") == dave
    with pytest.raises(CommandError, match="No user 'carol': no user has it as email"):
        stdio_user("carol", "email")


def test_mcp_stdio_user_field_refuses_a_value_two_users_share():
    make_user("erin", last_name="Smith")
    make_user("frank", last_name="Smith")
    with pytest.raises(CommandError, match="More than one user has 'Smith' as last_name"):
        stdio_user("Smith", "last_name")


def test_mcp_stdio_user_field_by_primary_key_finds_exactly_that_user():
    grace = make_user("grace")
    assert stdio_user(str(grace.pk), "pk") == grace
    with pytest.raises(CommandError, match="cannot be looked up by 'pk'"):
        stdio_user("grace", "pk")


def test_mcp_stdio_user_field_that_the_user_model_lacks_is_a_clear_error():
    make_user("heidi")
    with pytest.raises(
        CommandError, match=re.escape("--user-field 'nickname' is not a field of auth.User")
    ):
        stdio_user("heidi", "nickname")


def test_mcp_stdio_user_field_without_user_is_refused():
    with pytest.raises(CommandError, match="pass --user too"):
        stdio_user(None, "email")


def test_mcp_stdio_refuses_an_inactive_user_found_by_email():
    make_user("u-9", "ivan@example.com", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        stdio_user("ivan@example.com")
