"""The example site's CORS for browser-based OAuth clients, in process: its own settings
(example_site/settings.py, read with MCP_ALLOWED_ORIGINS set) on its own URLconf.

The token, registration and revocation endpoints answer the configured origins only; the
authorization server's metadata answers any origin; /o/authorize/ (a navigation) none.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corsheaders.signals import check_request_enabled
from django.test import Client, override_settings

from example_site.accounts.cors import metadata_is_public

INSPECTOR = "http://localhost:6274"
STRANGER = "http://evil.example"
#: What these tests take from the example site's settings.
TAKEN = (
    *(
        "MIDDLEWARE",
        "STATIC_URL",
        "OAUTH2_PROVIDER",
        "OAUTH_ISSUER",
        "OAUTH_DCR_RATE_LIMIT",
        "MCP_RESOURCE_URL",
    ),
    *("CORS_URLS_REGEX", "CORS_ALLOWED_ORIGINS", "CORS_ALLOW_ALL_ORIGINS"),
)
SETTINGS = Path(__file__).resolve().parent.parent / "example_site" / "settings.py"


def example_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    """A test client on the example site's URLconf, middleware, CORS and OAuth settings."""
    ns = example_settings(monkeypatch, MCP_ALLOWED_ORIGINS=INSPECTOR)
    overrides = {name: ns[name] for name in TAKEN}
    # The example site connects it in AccountsConfig.ready(), an app these settings leave out.
    check_request_enabled.connect(metadata_is_public, dispatch_uid="test-example-cors")
    try:
        with override_settings(
            ROOT_URLCONF="example_site.urls", ALLOWED_HOSTS=["testserver"], **overrides
        ):
            yield Client()
    finally:
        check_request_enabled.disconnect(dispatch_uid="test-example-cors")


def preflight(site: Client, path: str, origin: str) -> Any:
    return site.options(
        path,
        headers={
            "origin": origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, authorization",
        },
    )


def test_example_settings_read_the_allowed_origins_and_token_lifetime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = example_settings(
        monkeypatch,
        MCP_ALLOWED_ORIGINS=f"{INSPECTOR}, https://app.example",
        MCP_ACCESS_TOKEN_SECONDS="120",
    )
    assert ns["MCP_DJANGO"]["ALLOWED_ORIGINS"] == [INSPECTOR, "https://app.example"]
    assert ns["CORS_ALLOWED_ORIGINS"] == [INSPECTOR, "https://app.example"]
    assert ns["CORS_ALLOW_ALL_ORIGINS"] is False
    assert ns["OAUTH2_PROVIDER"]["ACCESS_TOKEN_EXPIRE_SECONDS"] == 120


def test_example_settings_allow_no_other_origin_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_ALLOWED_ORIGINS", raising=False)
    monkeypatch.delenv("MCP_ACCESS_TOKEN_SECONDS", raising=False)
    ns = runpy.run_path(str(SETTINGS))
    assert ns["MCP_DJANGO"]["ALLOWED_ORIGINS"] == []
    assert ns["CORS_ALLOWED_ORIGINS"] == []
    assert ns["CORS_ALLOW_ALL_ORIGINS"] is False
    assert ns["OAUTH2_PROVIDER"]["ACCESS_TOKEN_EXPIRE_SECONDS"] == 3600


def test_a_star_allows_every_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    ns = example_settings(monkeypatch, MCP_ALLOWED_ORIGINS="*")
    assert ns["MCP_DJANGO"]["ALLOWED_ORIGINS"] == ["*"]
    assert ns["CORS_ALLOW_ALL_ORIGINS"] is True


@pytest.mark.parametrize("path", ["/o/token/", "/o/register/", "/o/revoke_token/"])
def test_oauth_endpoint_preflight_from_an_allowed_origin_is_answered(
    site: Client, path: str
) -> None:
    response = preflight(site, path, INSPECTOR)
    assert response.status_code == 200
    assert response["access-control-allow-origin"] == INSPECTOR
    assert "POST" in response["access-control-allow-methods"]
    allowed = {h.strip() for h in response["access-control-allow-headers"].split(",")}
    assert {"content-type", "authorization"} <= allowed
    assert "origin" in response["vary"].lower()


@pytest.mark.parametrize("path", ["/o/token/", "/o/register/", "/o/revoke_token/"])
def test_oauth_endpoint_preflight_from_another_origin_gets_no_cors_headers(
    site: Client, path: str
) -> None:
    response = preflight(site, path, STRANGER)
    assert "access-control-allow-origin" not in response


@pytest.mark.django_db
def test_token_error_carries_cors_headers_for_an_allowed_origin_only(site: Client) -> None:
    data = {
        "grant_type": "authorization_code",
        "code": "nope",
        "client_id": "nobody",
        "redirect_uri": "http://127.0.0.1/cb",
    }
    allowed = site.post("/o/token/", data, headers={"origin": INSPECTOR})
    other = site.post("/o/token/", data, headers={"origin": STRANGER})
    assert (
        allowed.status_code == other.status_code == 401
    )  # invalid_client: read by the browser client
    assert allowed["access-control-allow-origin"] == INSPECTOR
    assert "access-control-allow-origin" not in other


@pytest.mark.django_db
def test_registration_carries_cors_headers_for_an_allowed_origin_only(site: Client) -> None:
    body = {
        "client_name": "Browser client",
        "redirect_uris": [f"{INSPECTOR}/oauth/callback"],
        "token_endpoint_auth_method": "none",
    }
    allowed = site.post(
        "/o/register/", body, content_type="application/json", headers={"origin": INSPECTOR}
    )
    other = site.post(
        "/o/register/", body, content_type="application/json", headers={"origin": STRANGER}
    )
    assert allowed.status_code == other.status_code == 201, allowed.content
    assert allowed["access-control-allow-origin"] == INSPECTOR
    assert "access-control-allow-origin" not in other


@pytest.mark.parametrize("origin", [INSPECTOR, STRANGER])
def test_authorization_server_metadata_answers_any_origin(site: Client, origin: str) -> None:
    options = site.options(
        "/.well-known/oauth-authorization-server",
        headers={
            "origin": origin,
            "access-control-request-method": "GET",
            "access-control-request-headers": "mcp-protocol-version",
        },
    )
    response = site.get("/.well-known/oauth-authorization-server", headers={"origin": origin})
    assert options.status_code == 200
    assert options["access-control-allow-origin"] == origin
    assert "GET" in options["access-control-allow-methods"]
    assert response.status_code == 200
    assert response["access-control-allow-origin"] == origin
    assert response.json()["token_endpoint"].endswith("/o/token/")


def test_authorization_endpoint_is_not_cors(site: Client) -> None:
    response = site.get("/o/authorize/", headers={"origin": INSPECTOR})
    assert "access-control-allow-origin" not in response
