"""mcp_django as an OAuth resource server: challenges, audience, scopes, metadata, sessions."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_django.checks import check_settings
from mcp_django.testing import MCPTestClient
from tests.conftest import mcp_settings_fixture

RESOURCE = "https://mcp.example.com/mcp"
OAUTH = {
    "AUTHENTICATION": "oauth",
    "SERVER_NAME": "mcp-django-tests",
    "RESOURCE_URL": RESOURCE,
    "SCOPES_SUPPORTED": ["notes:read"],
}
PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]
oauth_settings = mcp_settings_fixture(**OAUTH)


def _token(
    username: str,
    *,
    resource: list[str] | None = None,
    scope: str = "notes:read",
    expires_in: int = 3600,
) -> str:
    user, _ = User.objects.get_or_create(username=username)
    app, _ = Application.objects.get_or_create(
        name="test client",
        defaults={
            "client_type": "public",
            "authorization_grant_type": "authorization-code",
            "redirect_uris": "http://127.0.0.1/cb",
        },
    )
    raw = secrets.token_urlsafe(30)
    AccessToken.objects.create(
        user=user,
        application=app,
        token=raw,
        scope=scope,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=[RESOURCE] if resource is None else resource,
    )
    return raw


token = sync_to_async(_token)


def _bearer(raw: str) -> dict[str, str]:
    return {"authorization": f"Bearer {raw}"}


async def _client(raw: str) -> MCPTestClient:
    client = MCPTestClient(headers=_bearer(raw))
    await client.initialize()
    return client


def _challenge(response: Any) -> str:
    return response.headers.get("www-authenticate", "")


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


async def test_no_token_gets_401_with_metadata_and_scope_but_no_error_code() -> None:
    response = await MCPTestClient().post(PING)
    assert response.status == 401
    # Every scope the resource uses: SCOPES_SUPPORTED and the site's entries' (scoped_write's).
    assert (
        _challenge(response)
        == f'Bearer scope="notes:read notes:write", resource_metadata="{PRM_URL}"'
    )


async def test_garbage_bearer_token_gets_invalid_token() -> None:
    response = await MCPTestClient(headers=_bearer("not-a-token")).post(PING)
    assert response.status == 401
    assert 'error="invalid_token"' in _challenge(response)
    assert f'resource_metadata="{PRM_URL}"' in _challenge(response)


async def test_token_in_the_query_string_is_refused_even_when_valid() -> None:
    raw = await token("alice")
    response = await MCPTestClient(path=f"/mcp/?access_token={raw}").post(PING)
    assert response.status == 400
    assert 'error="invalid_request"' in _challenge(response)


async def test_expired_token_is_refused() -> None:
    raw = await token("alice", expires_in=-10)
    response = await MCPTestClient(headers=_bearer(raw)).post(PING)
    assert response.status == 401 and 'error="invalid_token"' in _challenge(response)


async def test_revoked_token_is_refused() -> None:
    raw = await token("alice")
    await AccessToken.objects.filter(user__username="alice").adelete()  # DOT revokes by deleting
    response = await MCPTestClient(headers=_bearer(raw)).post(PING)
    assert response.status == 401 and 'error="invalid_token"' in _challenge(response)


@pytest.mark.parametrize(
    "resource", [[], ["https://other.example.com/mcp"], ["https://mcp.example.com/mcp/other"]]
)
async def test_token_not_issued_for_this_server_is_refused(resource: list[str]) -> None:
    raw = await token("alice", resource=resource)
    response = await MCPTestClient(headers=_bearer(raw)).post(PING)
    assert response.status == 401
    assert "not issued for this server" in _challenge(response)


async def test_audience_is_compared_with_the_configured_uri_not_the_request() -> None:
    # The test client speaks http://testserver; the configured public URI is https.
    raw = await token("alice", resource=["HTTPS://MCP.EXAMPLE.COM:443/mcp/"])
    client = await _client(raw)
    assert client.session_id is not None


async def test_session_belongs_to_the_tokens_user() -> None:
    alice = await _client(await token("alice"))
    bob_token = await token("bob")
    intruder = MCPTestClient(headers=_bearer(bob_token))
    intruder.session_id = alice.session_id
    response = await intruder.post(PING)
    assert response.status == 404


async def test_tool_needing_a_missing_scope_is_listed_and_answers_403_step_up() -> None:
    client = await _client(await token("alice", scope="notes:read"))
    names = {t["name"] for t in (await client.call("tools/list"))["tools"]}
    assert "scoped_write" in names
    response = await client.post(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "scoped_write", "arguments": {"text": "x"}},
        }
    )
    assert response.status == 403
    assert _challenge(response).startswith('Bearer error="insufficient_scope"')
    assert 'scope="notes:write"' in _challenge(response)
    assert f'resource_metadata="{PRM_URL}"' in _challenge(response)


async def test_tool_with_its_scope_is_listed_and_runs() -> None:
    client = await _client(await token("alice", scope="notes:read notes:write"))
    assert "scoped_write" in {t["name"] for t in (await client.call("tools/list"))["tools"]}
    assert (await client.call_tool("scoped_write", {"text": "x"}))["content"][0][
        "text"
    ] == "wrote x"


async def test_required_scopes_apply_to_every_request() -> None:
    raw = await token("alice", scope="notes:read")
    with override_settings(MCP_DJANGO={**OAUTH, "REQUIRED_SCOPES": ["mcp"]}):
        response = await MCPTestClient(headers=_bearer(raw)).post(PING)
    assert response.status == 403 and 'scope="mcp"' in _challenge(response)


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
async def test_protected_resource_metadata_is_served_at_both_well_known_forms(path: str) -> None:
    response = await MCPTestClient().send("GET", path=path, headers={"accept": "application/json"})
    assert response.status == 200
    assert orjson.loads(response.body) == {
        "resource": RESOURCE,
        "authorization_servers": ["https://mcp.example.com"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["notes:read", "notes:write"],
        "resource_name": "mcp-django-tests",
    }
    assert response.headers["access-control-allow-origin"] == "*"


async def test_metadata_lists_the_scopes_of_the_endpoints_own_site() -> None:
    with override_settings(
        ROOT_URLCONF="tests.urls_scoped_site",
        MCP_DJANGO={**OAUTH, "RESOURCE_URL": "https://mcp.example.com/scoped"},
    ):
        response = await MCPTestClient().send(
            "GET",
            path="/.well-known/oauth-protected-resource/scoped",
            headers={"accept": "application/json"},
        )
    assert response.status == 200, response.body
    assert orjson.loads(response.body)["scopes_supported"] == ["notes:read", "notes:admin"]


async def test_metadata_is_not_served_when_oauth_is_off() -> None:
    with override_settings(MCP_DJANGO={"AUTHENTICATION": "none"}):
        response = await MCPTestClient().send(
            "GET", path="/.well-known/oauth-protected-resource/mcp"
        )
    assert response.status == 404


def test_oauth_without_resource_url_warns_outside_debug() -> None:
    with override_settings(MCP_DJANGO={"AUTHENTICATION": "oauth"}, DEBUG=False):
        assert "mcp_django.W005" in [e.id for e in check_settings()]


def test_resource_url_with_a_fragment_is_an_error() -> None:
    with override_settings(
        MCP_DJANGO={"AUTHENTICATION": "oauth", "RESOURCE_URL": "https://x.example/mcp#frag"}
    ):
        assert "mcp_django.E012" in [e.id for e in check_settings()]


def test_scopes_must_be_a_list_of_words() -> None:
    with override_settings(
        MCP_DJANGO={"AUTHENTICATION": "oauth", "RESOURCE_URL": RESOURCE, "SCOPES_SUPPORTED": "a b"}
    ):
        assert "mcp_django.E013" in [e.id for e in check_settings()]
