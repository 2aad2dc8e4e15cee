"""The admin screens for sessions, events and server requests."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from mcp_django.models import Event, RunningRequest, ServerRequest, Session
from mcp_django.signals import session_closed
from mcp_django.stores import SessionStore
from mcp_django.testing import MCPTestClient

CHANGELIST = "admin:mcp_django_session_changelist"


def make_session(client_name: str = "probe", **fields) -> Session:
    session = SessionStore().create(
        site_name="mcp",
        user_id=None,
        protocol_version="2025-11-25",
        client_info={"name": client_name, "version": "1"},
        capabilities={},
    )
    if fields:
        Session.objects.filter(pk=session.pk).update(**fields)
        session.refresh_from_db()
    return session


@pytest.mark.django_db
def test_session_changelist_renders_for_a_superuser(admin_client):
    session = make_session("claude-desktop")
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    content = response.content.decode()
    assert "claude-desktop" in content
    assert session.pk[:10] in content


@pytest.mark.django_db
def test_session_changelist_search_finds_by_client_name(admin_client):
    make_session("alpha-client")
    make_session("beta-client")
    response = admin_client.get(reverse(CHANGELIST), {"q": "alpha"})
    assert response.status_code == 200
    assert list(response.context["cl"].queryset.values_list("client_name", flat=True)) == [
        "alpha-client"
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["active", "expired", "terminated"])
def test_session_changelist_filters_by_state(admin_client, state):
    make_session("live")
    make_session("old", expires_at=timezone.now() - timedelta(hours=1))
    make_session("ended", terminated_at=timezone.now())
    response = admin_client.get(reverse(CHANGELIST), {"state": state})
    assert response.status_code == 200
    sessions = list(response.context["cl"].queryset)
    assert [s.state for s in sessions] == [state]


@pytest.mark.django_db
def test_session_changelist_filters_by_protocol_version(admin_client):
    make_session("new")
    make_session("old", protocol_version="2025-03-26")
    response = admin_client.get(reverse(CHANGELIST), {"protocol_version": "2025-03-26"})
    assert [s.client_name for s in response.context["cl"].queryset] == ["old"]


@pytest.mark.django_db
def test_session_change_page_shows_the_event_log(admin_client):
    session = make_session()
    Event.objects.create(
        session=session,
        stream="get",
        seq=1,
        payload='{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
    )
    response = admin_client.get(
        reverse("admin:mcp_django_session_change", args=[quote(session.pk)])
    )
    assert response.status_code == 200
    content = response.content.decode()
    assert "notifications/tools/list_changed" in content
    assert "event log" in content.lower()


@pytest.mark.django_db
def test_the_admin_names_the_server_not_the_site(admin_client):
    session = make_session()
    content = admin_client.get(
        reverse("admin:mcp_django_session_change", args=[quote(session.pk)])
    ).content.decode()
    assert (
        "MCP server" in content and "mcp-django-tests" in content
    )  # SERVER_NAME of tests/settings.py
    assert "MCP site" not in content
    other = make_session(site_name="staff")
    content = admin_client.get(
        reverse("admin:mcp_django_session_change", args=[quote(other.pk)])
    ).content.decode()
    assert "mcp-django-tests (staff)" in content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changelist", ["admin:mcp_django_session_changelist", "admin:mcp_django_userstate_changelist"]
)
def test_changelists_filter_by_server_name_not_site_name(admin_client, changelist):
    from mcp_django.models import UserState

    admin = get_user_model().objects.get(username="admin")
    alone = admin_client.get(reverse(changelist)).content.decode()
    assert "MCP site" not in alone and "By MCP server" not in alone  # one server: nothing to choose
    for site_name in ("mcp", "staff"):
        make_session(site_name=site_name)
        UserState.objects.create(user=admin, site_name=site_name, key="goal", value=1)
    content = admin_client.get(reverse(changelist)).content.decode()
    assert "By MCP server" in content and "MCP site" not in content
    assert "mcp-django-tests (staff)" in content
    filtered = admin_client.get(reverse(changelist), {"server": "staff"})
    assert filtered.status_code == 200
    assert len(filtered.context["cl"].result_list) == 1
    assert filtered.context["cl"].result_list[0].site_name == "staff"


@pytest.mark.django_db
def test_sessions_cannot_be_added_or_edited(admin_client):
    session = make_session()
    assert admin_client.get(reverse("admin:mcp_django_session_add")).status_code == 403
    response = admin_client.post(
        reverse("admin:mcp_django_session_change", args=[quote(session.pk)]),
        {"client_name": "changed"},
    )
    assert response.status_code == 403
    session.refresh_from_db()
    assert session.client_name == "probe"


@pytest.mark.django_db
def test_event_and_server_request_changelists_render(admin_client):
    session = make_session()
    Event.objects.create(session=session, stream="get", seq=1, payload="{}")
    ServerRequest.objects.create(
        session=session, request_id="srv-1", method="roots/list", channel_name="c"
    )
    assert admin_client.get(reverse("admin:mcp_django_event_changelist")).status_code == 200
    assert (
        admin_client.get(reverse("admin:mcp_django_event_changelist"), {"q": "get"}).status_code
        == 200
    )
    response = admin_client.get(
        reverse("admin:mcp_django_serverrequest_changelist"), {"state": "pending"}
    )
    assert response.status_code == 200
    assert "roots/list" in response.content.decode()


@pytest.mark.django_db
def test_running_requests_are_listed_read_only_with_their_lease(admin_client):
    session = make_session()
    now = timezone.now()
    RunningRequest.objects.create(
        session=session,
        stream="s1",
        request_id='"live-1"',
        owner="proc-a",
        lease_until=now + timedelta(minutes=1),
    )
    RunningRequest.objects.create(
        session=session,
        stream="s2",
        request_id='"dead-1"',
        owner="proc-b",
        lease_until=now - timedelta(minutes=1),
    )
    response = admin_client.get(reverse("admin:mcp_django_runningrequest_changelist"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "live-1" in page and "dead-1" in page and "proc-a" in page
    assert 'alt="True"' in page and 'alt="False"' in page  # one lease live, one lapsed
    assert admin_client.get(reverse("admin:mcp_django_runningrequest_add")).status_code == 403


@pytest.mark.django_db
def test_terminate_action_needs_the_delete_permission(client):
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(
        Permission.objects.get(content_type__app_label="mcp_django", codename="view_session")
    )
    client.force_login(staff)
    session = make_session()
    response = client.post(
        reverse(CHANGELIST), {"action": "terminate_sessions", "_selected_action": [session.pk]}
    )
    assert response.status_code == 200  # the action is not offered: the changelist re-renders
    session.refresh_from_db()
    assert session.terminated_at is None


@pytest.mark.django_db(transaction=True)
async def test_terminate_action_ends_the_session_for_the_client():
    superuser = await get_user_model().objects.acreate_superuser("root", "root@example.com", "pw")
    browser = AsyncClient()
    await browser.aforce_login(superuser)
    mcp = MCPTestClient()
    await mcp.initialize()
    closed: list[dict] = []

    def on_closed(sender, **kwargs):
        closed.append(kwargs)

    session_closed.connect(on_closed)
    try:
        async with await mcp.open_stream() as stream:
            await stream.next_event()
            response = await browser.post(
                reverse(CHANGELIST),
                {"action": "terminate_sessions", "_selected_action": [mcp.session_id]},
            )
            assert response.status_code == 302
            await stream.read_until_closed()
            assert stream.closed
    finally:
        session_closed.disconnect(on_closed)
    session = await Session.objects.aget(pk=mcp.session_id)
    assert session.state == "terminated"
    assert (await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})).status == 404
    assert [(c["session"].pk, c["reason"]) for c in closed] == [(mcp.session_id, "terminated")]
