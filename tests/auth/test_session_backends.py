"""Session authentication with every kind of backend Django accepts."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.http import HttpRequest
from django.test import override_settings

from mcp_django.auth.base import AuthenticationFailed, DjangoAuthentication

pytestmark = pytest.mark.django_db(transaction=True)

PLAIN = "tests.auth.plain_backends.EmailBackend"
MODEL = "django.contrib.auth.backends.ModelBackend"


def _signed_in_request(user: User, backend: str) -> HttpRequest:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = backend
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    request = HttpRequest()
    request.COOKIES[settings.SESSION_COOKIE_NAME] = session.session_key
    return request


@override_settings(
    AUTHENTICATION_BACKENDS=[PLAIN, MODEL], SESSION_ENGINE="django.contrib.sessions.backends.db"
)
async def test_session_signed_in_through_a_plain_class_backend_authenticates_its_user():
    user = await sync_to_async(User.objects.create_user)(
        "u-8f3a", email="ann@example.com", password="pw"
    )
    request = await sync_to_async(_signed_in_request)(user, PLAIN)

    assert (await DjangoAuthentication().authenticate(request)).pk == user.pk


@override_settings(
    AUTHENTICATION_BACKENDS=[PLAIN, MODEL], SESSION_ENGINE="django.contrib.sessions.backends.db"
)
async def test_session_signed_in_through_model_backend_still_authenticates_its_user():
    user = await sync_to_async(User.objects.create_user)(
        "bob", email="bob@example.com", password="pw"
    )
    request = await sync_to_async(_signed_in_request)(user, MODEL)

    assert (await DjangoAuthentication().authenticate(request)).pk == user.pk


@override_settings(
    AUTHENTICATION_BACKENDS=[MODEL], SESSION_ENGINE="django.contrib.sessions.backends.db"
)
async def test_session_of_a_backend_no_longer_configured_is_refused():
    user = await sync_to_async(User.objects.create_user)(
        "cy", email="cy@example.com", password="pw"
    )
    request = await sync_to_async(_signed_in_request)(user, PLAIN)

    with pytest.raises(AuthenticationFailed):
        await DjangoAuthentication().authenticate(request)


@override_settings(
    AUTHENTICATION_BACKENDS=[PLAIN, MODEL],
    SESSION_ENGINE="django.contrib.sessions.backends.db",
    MCP_DJANGO={"AUTHENTICATION": "django", "SERVER_NAME": "mcp-django-tests"},
)
@pytest.mark.usefixtures("fresh_channel_layer")
async def test_a_client_signed_in_through_a_plain_class_backend_lists_and_calls_tools():
    from mcp_django.testing import MCPTestClient

    user = await sync_to_async(User.objects.create_user)(
        "u-51c2", email="dee@example.com", password="pw"
    )
    client = MCPTestClient()
    await client.force_login(user, backend=PLAIN)

    await client.initialize()
    names = [tool["name"] for tool in (await client.call("tools/list"))["tools"]]

    assert "add" in names
    answer = await client.call_tool("add", {"a": 2, "b": 3})
    assert not answer.get("isError") and "5" in str(answer["content"])


@pytest.mark.urls("tests.urls_signin")
async def test_the_401_names_the_login_page_when_the_urlconf_serves_it():
    request = HttpRequest()  # no session cookie

    with pytest.raises(AuthenticationFailed) as refused:
        await DjangoAuthentication().authenticate(request)

    assert "log in to this site first at /accounts/login/." in refused.value.message


async def test_the_401_names_no_login_page_the_urlconf_does_not_serve():
    request = HttpRequest()  # no session cookie

    with pytest.raises(AuthenticationFailed) as refused:
        await DjangoAuthentication().authenticate(request)

    assert refused.value.message.endswith("log in to this site first.")
