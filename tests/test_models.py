"""Sessions and events as rows: states, expiry and event ids."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_django.models import Event, Session, new_session_id

pytestmark = pytest.mark.django_db


def make_session(**fields) -> Session:
    fields.setdefault("expires_at", timezone.now() + timedelta(hours=1))
    return Session.objects.create(protocol_version="2025-11-25", **fields)


def test_new_session_ids_are_random_visible_ascii():
    ids = {new_session_id() for _ in range(50)}
    assert len(ids) == 50
    for value in ids:
        assert len(value) >= 32
        assert all(0x21 <= ord(c) <= 0x7E for c in value)


def test_session_states():
    assert make_session().state == "active"
    assert make_session(expires_at=timezone.now() - timedelta(seconds=1)).state == "expired"
    ended = make_session(terminated_at=timezone.now())
    assert ended.state == "terminated"
    assert not ended.is_live()


def test_live_queryset_leaves_out_expired_and_terminated_sessions():
    live = make_session()
    make_session(expires_at=timezone.now() - timedelta(seconds=1))
    make_session(terminated_at=timezone.now())
    assert list(Session.objects.live()) == [live]


def test_expiry_is_ttl_seconds_after_the_given_time():
    now = timezone.now()
    assert Session.expiry_from(now, 90) == now + timedelta(seconds=90)


def test_event_id_is_stream_and_sequence():
    event = Event.objects.create(session=make_session(), stream="abc", seq=7, payload="{}")
    assert event.event_id == "abc:7" == str(event)


def test_session_str_names_the_client():
    session = make_session(client_name="inspector")
    assert str(session).startswith("inspector ")
    assert session.id[:8] in str(session)
