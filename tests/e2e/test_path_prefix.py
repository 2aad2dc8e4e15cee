"""The example site mounted under /app by uvicorn's ``--root-path /app``, with OAuth: a client
that follows the discovery chain from the 401 reaches a document or an endpoint at every step.

There is no reverse proxy here, so each public URL is sent to uvicorn directly at the path the
proxy of docs/howto/deploy.md ("Under a path prefix") would forward it to: ``/app/...`` with
the prefix stripped (uvicorn puts it back as root_path), and the two well-known documents at
the host's root (``/.well-known/oauth-protected-resource/app/...``,
``/.well-known/oauth-authorization-server/app``) unchanged. The public origin is uvicorn's own
address, so only the path changes on the way.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from tests import asgi_servers

from .conftest import copy_database, run_server, server_env

pytestmark = pytest.mark.e2e

MOUNT = "/app"
PING = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def through_proxy(origin: str, url: str) -> str:
    """The URL at which uvicorn gets ``url`` from the documented proxy."""
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == origin, f"{url} is not on the public origin"
    path = parts.path
    if not path.startswith("/.well-known/"):
        assert path.startswith(MOUNT + "/"), f"the proxy sends nothing else to Django: {url}"
        path = path[len(MOUNT) :]
    return f"{origin}{path}" + (f"?{parts.query}" if parts.query else "")


def resource_metadata(challenge: str) -> str:
    return challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]


def rfc8414_url(issuer: str) -> str:
    """RFC 8414 section 3: the well-known prefix between the issuer's host and its path."""
    parts = urlsplit(issuer)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}"


def test_the_discovery_chain_answers_under_uvicorn_root_path(
    demo_database: Path, tmp_path: Path
) -> None:
    port = asgi_servers.free_port()
    origin = f"http://127.0.0.1:{port}"
    env = {
        **server_env(copy_database(demo_database, tmp_path / "example.sqlite3"), auth="oauth"),
        "MCP_RESOURCE_URL": f"{origin}{MOUNT}/mcp",
    }
    with (
        run_server(
            env,
            tmp_path / "uvicorn.log",
            port=port,
            server="uvicorn",
            options=["--root-path", MOUNT],
        ),
        httpx.Client(timeout=5) as http,
    ):
        endpoint = env["MCP_RESOURCE_URL"]
        unauthorized = http.post(through_proxy(origin, endpoint), json=PING, headers=ACCEPT)
        metadata_url = resource_metadata(unauthorized.headers["www-authenticate"])
        protected = http.get(through_proxy(origin, metadata_url))
        [issuer] = protected.json()["authorization_servers"]
        server = http.get(through_proxy(origin, rfc8414_url(issuer)))
        endpoints = {k: v for k, v in server.json().items() if k.endswith("_endpoint")}
        answers = {k: http.get(through_proxy(origin, url)) for k, url in endpoints.items()}
        login = answers["authorization_endpoint"].headers.get("location", "")
        login_page = http.get(
            through_proxy(origin, urljoin(endpoints["authorization_endpoint"], login))
        )

    assert unauthorized.status_code == 401
    assert metadata_url == f"{origin}/.well-known/oauth-protected-resource{MOUNT}/mcp"
    assert protected.status_code == 200 and protected.json()["resource"] == endpoint
    assert server.status_code == 200 and server.json()["issuer"] == issuer == f"{origin}{MOUNT}"
    assert {"authorization_endpoint", "token_endpoint", "registration_endpoint"} <= set(endpoints)
    for name, url in endpoints.items():
        assert url.startswith(f"{origin}{MOUNT}/"), (name, url)
        # A bare GET may be refused (405) or sent to log in (302), but the endpoint is there.
        assert answers[name].status_code not in (404, 500), (name, answers[name].status_code)
    # The authorization endpoint sends an anonymous user to the login page, under the prefix.
    assert answers["authorization_endpoint"].status_code == 302
    assert urlsplit(login).path.startswith(f"{MOUNT}/accounts/login/")
    assert login_page.status_code == 200
