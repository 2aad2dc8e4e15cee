"""The sign-in step for ``AUTHENTICATION = "django"`` of docs/howto/add-to-project.md (once the
README's) works as written: a user who is not staff signs in on Django's login page, and the
session cookie opens the MCP endpoint."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import Client, override_settings

from mcp_django.testing import MCPTestClient
from tests.conftest import make_user, mcp_settings_fixture

HOWTO = (Path(__file__).resolve().parents[1] / "docs" / "howto" / "add-to-project.md").read_text()
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]
django_authentication = mcp_settings_fixture(
    AUTHENTICATION="django", SERVER_NAME="mcp-django-tests"
)


def test_the_howto_shows_the_lines_this_test_uses() -> None:
    assert 'path("accounts/", include("django.contrib.auth.urls"))' in HOWTO
    assert 'LOGIN_URL = "login"' in HOWTO
    template = (
        (Path(__file__).parent / "testapp/templates/registration/login.html").read_text().strip()
    )
    assert template in HOWTO


@pytest.mark.usefixtures("django_authentication")
@override_settings(ROOT_URLCONF="tests.urls_signin", LOGIN_URL="login", LOGIN_REDIRECT_URL="/mcp/")
async def test_a_member_who_is_not_staff_signs_in_and_uses_mcp() -> None:
    await sync_to_async(make_user)("member", "view_note")  # password "pw", is_staff False

    def sign_in() -> str:
        browser = Client(enforce_csrf_checks=True)
        page = browser.get("/accounts/login/")
        assert page.status_code == 200
        token = re.search(
            r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()
        ).group(1)  # type: ignore[union-attr]
        answer = browser.post(
            "/accounts/login/",
            {"username": "member", "password": "pw", "csrfmiddlewaretoken": token},
        )
        assert answer.status_code == 302, answer.content
        return str(browser.cookies["sessionid"].value)

    cookie = await sync_to_async(sign_in)()
    anonymous = MCPTestClient()
    response = await anonymous.post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert response.status == 401
    client = MCPTestClient(headers={"cookie": f"sessionid={cookie}"})
    await client.initialize()
    tools = await client.call("tools/list")
    assert tools["tools"]
