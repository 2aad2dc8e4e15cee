"""URL-mode elicitation pages, encrypted per-user secrets, and per-user / per-session state."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from mcp_django.crypto import decrypt
from mcp_django.models import Elicitation, SessionState, UserSecret, UserState
from mcp_django.protocol.errors import URL_ELICITATION_REQUIRED
from mcp_django.testing import MCPTestClient
from tests.conftest import make_user, mcp_settings_fixture
from tests.testapp.models import Note

SETTINGS = {"AUTHENTICATION": "django", "SERVER_NAME": "mcp-django-tests"}
URL_CAPABLE = {"elicitation": {"form": {}, "url": {}}}
SECRET = "sk-weather-0123456789-very-secret"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]
django_authentication = mcp_settings_fixture(**SETTINGS)


def _user(username: str) -> User:
    return make_user(username, "*")


async def _mcp(
    user: User, capabilities: dict[str, Any] | None = None, **kwargs: Any
) -> MCPTestClient:
    client = MCPTestClient(**kwargs)
    await client.force_login(user)
    await client.initialize(capabilities=URL_CAPABLE if capabilities is None else capabilities)
    return client


def _browser(user: User | None) -> Client:
    browser = Client(enforce_csrf_checks=True)
    if user is not None:
        browser.force_login(user)
    return browser


def _submit(browser: Client, url: str, data: dict[str, str]) -> Any:
    """Open the page, then post its form with the CSRF token, as a person would."""
    path = urlsplit(url).path
    page = browser.get(path)
    assert page.status_code == 200, page.status_code
    token = page.context["csrf_token"]
    return browser.post(path, {**data, "csrfmiddlewaretoken": str(token)})


def _browser_answers(user: User, data: dict[str, str], seen: dict[str, Any]):
    """A client handler for elicitation/create that agrees, then has the 'browser' finish the page."""

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        seen["params"] = params

        async def act() -> None:
            seen["response"] = await sync_to_async(
                lambda: _submit(_browser(user), params["url"], data)
            )()

        seen["task"] = asyncio.get_running_loop().create_task(act())
        return {"action": "accept"}

    return handler


async def test_secret_page_stores_it_encrypted_and_the_tool_uses_it_without_leaking_it() -> None:
    user = await sync_to_async(_user)("alice")
    client = await _mcp(user)
    seen: dict[str, Any] = {}
    client.request_handlers["elicitation/create"] = _browser_answers(user, {"secret": SECRET}, seen)
    async with await client.open_stream() as stream:
        await stream.next_event()  # priming
        result = await client.call_tool("weather", {"city": "Oslo"})
        complete = await stream.next_message(timeout=5)
    await seen["task"]
    assert result["content"][0]["text"] == f"Sunny in Oslo (key of {len(SECRET)} characters used)"
    params = seen["params"]
    assert (
        params["mode"] == "url"
        and params["elicitationId"]
        and "/mcp/elicitations/" in params["url"]
    )
    assert complete == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": params["elicitationId"]},
    }
    # Stored encrypted, never on the wire.
    row = await UserSecret.objects.aget(user=user, service="weather")
    assert SECRET not in row.ciphertext and decrypt(row.ciphertext) == SECRET
    wire = b"".join(e.data.encode() for e in client.last_events) + (
        client.last_response.body if client.last_response else b""
    )
    assert SECRET.encode() not in wire
    assert SECRET not in str(params)


async def test_secret_is_reused_by_a_new_session_without_asking_again() -> None:
    user = await sync_to_async(_user)("alice")
    first = await _mcp(user)
    seen: dict[str, Any] = {}
    first.request_handlers["elicitation/create"] = _browser_answers(user, {"secret": SECRET}, seen)
    await first.call_tool("weather", {"city": "Oslo"})
    await seen["task"]
    second = await _mcp(user)  # a hosted client opening a new session for every call
    result = await second.call_tool("weather", {"city": "Bergen"})
    assert second.last_server_requests == []
    assert "Sunny in Bergen" in result["content"][0]["text"]


async def test_client_without_url_mode_gets_32042_with_the_elicitation() -> None:
    user = await sync_to_async(_user)("alice")
    client = await _mcp(user, capabilities={"elicitation": {}})  # form mode only
    response = await client.request(
        "tools/call", {"name": "weather", "arguments": {"city": "Oslo"}}
    )
    error = response["error"]
    assert error["code"] == URL_ELICITATION_REQUIRED
    (elicitation,) = error["data"]["elicitations"]
    assert (
        elicitation["mode"] == "url"
        and elicitation["elicitationId"]
        and elicitation["url"].startswith("http://testserver/mcp/elicitations/")
    )
    assert elicitation["message"]


async def test_confirm_page_lets_the_destructive_tool_proceed() -> None:
    user = await sync_to_async(_user)("alice")
    await Note.objects.acreate(owner=user, title="a")
    client = await _mcp(user)
    seen: dict[str, Any] = {}
    client.request_handlers["elicitation/create"] = _browser_answers(user, {"accept": "1"}, seen)
    result = await client.call_tool("purge_notes")
    await seen["task"]
    assert result["content"][0]["text"] == "Deleted 1 notes."


async def test_declining_on_the_page_keeps_everything() -> None:
    user = await sync_to_async(_user)("alice")
    await Note.objects.acreate(owner=user, title="a")
    client = await _mcp(user)
    seen: dict[str, Any] = {}
    client.request_handlers["elicitation/create"] = _browser_answers(user, {"decline": "1"}, seen)
    result = await client.call_tool("purge_notes")
    await seen["task"]
    assert result["content"][0]["text"] == "Kept (declined)."
    assert await Note.objects.acount() == 1


def _pending(user: User, **overrides: Any) -> Elicitation:
    from mcp_django.elicitation import services

    elicitation = services.create(
        user_id=user.pk,
        session_id=None,
        request_id=1,
        message="m",
        view_name="mcp_django:elicit-secret",
        params={"service": "s"},
    )
    if overrides:
        Elicitation.objects.filter(pk=elicitation.pk).update(**overrides)
    return elicitation


def _path(elicitation: Elicitation) -> str:
    return f"/mcp/elicitations/{elicitation.pk}/secret/"


def test_page_of_another_user_an_unknown_id_a_used_one_and_an_expired_one_all_give_404() -> None:
    alice, bob = _user("alice"), _user("bob")
    used = _pending(alice, state=Elicitation.State.COMPLETED)
    expired = _pending(alice, expires_at=timezone.now() - timedelta(seconds=1))
    fresh = _pending(alice)
    assert _browser(alice).get(_path(fresh)).status_code == 200
    for browser, path in [
        (_browser(bob), _path(fresh)),
        (_browser(alice), "/mcp/elicitations/unknown-id-123456/secret/"),
        (_browser(alice), _path(used)),
        (_browser(alice), _path(expired)),
    ]:
        assert browser.get(path).status_code == 404


def test_page_requires_login_and_is_not_pre_authenticated() -> None:
    elicitation = _pending(_user("alice"))
    response = _browser(None).get(_path(elicitation))
    assert response.status_code == 302 and "/login" in response["Location"]


def test_page_refuses_a_post_without_csrf_token() -> None:
    alice = _user("alice")
    elicitation = _pending(alice)
    assert _browser(alice).post(_path(elicitation), {"secret": "x"}).status_code == 403
    assert not UserSecret.objects.exists()


def test_page_works_once_then_404() -> None:
    alice = _user("alice")
    elicitation = _pending(alice)
    browser = _browser(alice)
    assert (
        _submit(browser, f"http://testserver{_path(elicitation)}", {"secret": "one"}).status_code
        == 200
    )
    assert browser.get(_path(elicitation)).status_code == 404
    assert Elicitation.objects.get(pk=elicitation.pk).state == Elicitation.State.COMPLETED


def test_admin_never_shows_the_secret() -> None:
    from mcp_django.elicitation.services import store_secret

    admin_user = User.objects.create_superuser("root", password="pw")
    store_secret(admin_user, "weather", SECRET)
    browser = Client()
    browser.force_login(admin_user)
    secret = UserSecret.objects.get()
    for url in [
        "/admin/mcp_django/usersecret/",
        f"/admin/mcp_django/usersecret/{secret.pk}/change/",
    ]:
        page = browser.get(url)
        assert page.status_code == 200
        assert (
            SECRET.encode() not in page.content and secret.ciphertext.encode() not in page.content
        )


async def test_user_state_outlives_the_session_and_session_state_does_not() -> None:
    user = await sync_to_async(_user)("alice")
    first = await _mcp(user)
    kept = await first.call_tool("remember", {"key": "city", "value": "Oslo"})
    assert kept["structuredContent"] == {"user": {"city": "Oslo"}, "session": {"city": "Oslo"}}
    second = await _mcp(user)
    recalled = await second.call_tool("recall", {"key": "city"})
    assert recalled["structuredContent"] == {"user": "Oslo", "session": None}
    await first.delete()
    assert await UserState.objects.acount() == 1


async def test_state_values_are_size_limited() -> None:
    user = await sync_to_async(_user)("alice")
    client = await _mcp(user)
    with override_settings(MCP_DJANGO={**SETTINGS, "STATE_MAX_VALUE_BYTES": 16}):
        result = await client.call_tool("remember", {"key": "big", "value": "x" * 100})
    assert result["isError"] is True
    assert await SessionState.objects.acount() == 0


def test_admin_clears_session_and_user_state_from_the_sessions_page() -> None:
    from mcp_django.models import Session

    root = User.objects.create_superuser("root", password="pw")
    now = timezone.now()
    session = Session.objects.create(
        user=root, protocol_version="2025-11-25", expires_at=now + timedelta(hours=1)
    )
    SessionState.objects.create(session=session, key="k", value=1)
    UserState.objects.create(user=root, key="k", value=2)
    browser = Client()
    browser.force_login(root)
    # The admin escapes "_" in primary keys; a random session id sometimes holds "_2F" and the like.
    page = browser.get(reverse("admin:mcp_django_session_change", args=[quote(session.pk)]))
    assert page.status_code == 200 and b"key(s) kept for this user" in page.content
    for action in ("clear_session_state", "clear_user_state"):
        response = browser.post(
            "/admin/mcp_django/session/", {"action": action, "_selected_action": [session.pk]}
        )
        assert response.status_code == 302
    assert not SessionState.objects.exists() and not UserState.objects.exists()


BOOKS = {
    "authorize_url": "https://books.example/authorize",
    "token_url": "https://books.example/token",
    "client_id": "cid",
    "scopes": ["read"],
}


def test_connect_page_redirects_to_the_provider_with_pkce_and_this_sites_callback() -> None:
    # Regression: the callback URL was reversed as "<site.name>:connect-callback", which does
    # not exist when the URLs are included as include("mcp_django.urls") (namespace mcp_django).
    from urllib.parse import parse_qs

    from django.conf import settings

    from mcp_django.elicitation import services

    alice = _user("alice")
    elicitation = services.create(
        user_id=alice.pk,
        session_id=None,
        request_id=1,
        message="m",
        view_name="mcp_django:elicit-connect",
        params={"provider": "books"},
    )
    with override_settings(
        MCP_DJANGO={**settings.MCP_DJANGO, "CONNECT_PROVIDERS": {"books": BOOKS}}
    ):
        response = _browser(alice).get(f"/mcp/elicitations/{elicitation.pk}/connect/")
        assert (
            _browser(_user("bob")).get(f"/mcp/elicitations/{elicitation.pk}/connect/").status_code
            == 404
        )
    assert response.status_code == 302 and response["Location"].startswith(
        "https://books.example/authorize?"
    )
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["redirect_uri"] == ["http://testserver/mcp/connect/callback/"]
    assert (
        query["client_id"] == ["cid"]
        and query["scope"] == ["read"]
        and query["code_challenge_method"] == ["S256"]
    )
    assert len(query["state"][0]) >= 32 and len(query["code_challenge"][0]) == 43


async def test_a_url_the_client_declined_to_open_is_not_announced_as_complete() -> None:
    user = await sync_to_async(_user)("alice")
    client = await _mcp(user)
    client.request_handlers["elicitation/create"] = lambda params: {"action": "decline"}
    async with await client.open_stream() as stream:
        await stream.next_event()  # priming
        result = await client.call_tool("purge_notes")
        assert result["content"][0]["text"] == "Kept: the user did not open the page."
        with pytest.raises(TimeoutError):
            await stream.next_message(timeout=1)


async def test_an_unknown_action_from_the_client_is_the_tools_error_not_a_crash() -> None:
    user = await sync_to_async(_user)("alice")
    await Note.objects.acreate(owner=user, title="a")
    client = await _mcp(user)
    client.request_handlers["elicitation/create"] = lambda params: {"action": "shrug" * 100}
    result = await client.call_tool("purge_notes")
    assert result["isError"]
    text = result["content"][0]["text"]
    assert "unknown action" in text and len(text) < 200  # the client's value is cut short
    assert await Note.objects.acount() == 1
