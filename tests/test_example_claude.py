"""What Claude needs from the example site's authorization server, in process: its own settings
(example_site/settings.py) on its own URLconf.

Claude identifies itself by a client ID metadata document only when the RFC 8414 metadata says
``client_id_metadata_document_supported`` and lists ``none`` among the token endpoint's auth
methods; django-oauth-toolkit says both from the site's OAUTH2_PROVIDER settings (CIMD_ENABLED,
OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED), and mcp_django.W007 warns when they are not set.
The consent page says, in the site's words, what each scope allows. The flow itself, live:
tests/e2e/test_claude_flow.py.
"""

from __future__ import annotations

import html
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from oauth2_provider.models import Application

from mcp_django.checks import check_settings
from tests.e2e.test_oauth import pkce

SETTINGS = Path(__file__).resolve().parent.parent / "example_site" / "settings.py"
RESOURCE = "http://127.0.0.1:8000/mcp"
REDIRECT_URI = "http://127.0.0.1:33418/callback"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The example site's settings as deployed (MCP_AUTH unset: OAuth)."""
    monkeypatch.delenv("MCP_AUTH", raising=False)
    monkeypatch.delenv("OAUTH_CIMD_ALLOW_LOOPBACK", raising=False)
    return runpy.run_path(str(SETTINGS))


@pytest.fixture
def site(example: dict[str, Any]) -> Iterator[Client]:
    """A test client on the example site's URLconf, templates and OAuth settings."""
    with override_settings(
        ROOT_URLCONF="example_site.urls",
        ALLOWED_HOSTS=["testserver", "127.0.0.1"],
        TEMPLATES=example["TEMPLATES"],
        STATIC_URL=example["STATIC_URL"],
        OAUTH2_PROVIDER=example["OAUTH2_PROVIDER"],
        MCP_DJANGO=example["MCP_DJANGO"],
        LOGIN_URL=example.get("LOGIN_URL", "/accounts/login/"),
    ):
        yield Client()


def test_authorization_server_metadata_offers_metadata_documents_to_public_clients(
    site: Client,
) -> None:
    response = site.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    metadata = response.json()
    assert metadata["client_id_metadata_document_supported"] is True
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert set(metadata["scopes_supported"]) == {"library:read", "library:write"}
    # No OIDC discovery document: the RFC 8414 one is the only one Claude can read.
    assert site.get("/.well-known/openid-configuration").status_code == 404


def test_the_example_settings_raise_no_hosted_client_warning(example: dict[str, Any]) -> None:
    with override_settings(
        OAUTH2_PROVIDER=example["OAUTH2_PROVIDER"], MCP_DJANGO=example["MCP_DJANGO"]
    ):
        assert "mcp_django.W007" not in [e.id for e in check_settings()]


@pytest.mark.parametrize(
    "provider",
    [
        {},  # DOT's defaults: no CIMD, secrets only
        {"CIMD_ENABLED": True},  # documents, but no public clients
        {"OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none"]},  # public clients, no documents
    ],
)
def test_oauth_without_documents_for_public_clients_warns(provider: dict[str, Any]) -> None:
    with override_settings(
        OAUTH2_PROVIDER=provider,
        MCP_DJANGO={"AUTHENTICATION": "oauth", "RESOURCE_URL": RESOURCE},
    ):
        warnings = [e for e in check_settings() if e.id == "mcp_django.W007"]
    assert len(warnings) == 1
    assert "CIMD_ENABLED" in warnings[0].hint and '"none"' in warnings[0].hint


def test_no_hosted_client_warning_for_another_authorization_server() -> None:
    # The metadata clients read is the other server's: this site's DOT settings do not say it.
    with override_settings(
        OAUTH2_PROVIDER={},
        MCP_DJANGO={
            "AUTHENTICATION": "oauth",
            "RESOURCE_URL": RESOURCE,
            "AUTHORIZATION_SERVERS": ["https://login.example.com"],
        },
    ):
        assert "mcp_django.W007" not in [e.id for e in check_settings()]


@pytest.mark.django_db
def test_the_consent_page_says_what_each_requested_scope_allows(
    site: Client, example: dict[str, Any]
) -> None:
    sentences = example["OAUTH2_PROVIDER"]["SCOPES"]
    application = Application.objects.create(
        name="Claude",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
        client_secret="",
    )
    site.force_login(User.objects.create_user("librarian", password="librarian"))
    _verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "library:read library:write",
        "resource": RESOURCE,
    }
    response = site.get(f"/o/authorize/?{urlencode(query)}")
    assert response.status_code == 200, response.content[:2000]
    page = html.unescape(response.content.decode())
    assert 'id="consent"' in page
    for scope in ("library:read", "library:write"):
        assert sentences[scope] in page, scope
    # The list under "It will be allowed to" holds those sentences, not the scopes' identifiers.
    listed = page.split('<ul class="scopes">', 1)[1].split("</ul>", 1)[0]
    assert listed == "".join(f"<li>{sentences[s]}</li>" for s in ("library:read", "library:write"))
