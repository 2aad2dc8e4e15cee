"""What the OAuth end-to-end tests play besides the MCP client: the user's browser, and the
web host of a client ID metadata document.

- ``Browser`` is an httpx client with a cookie jar: it signs in on the site's login page and
  answers the consent form over plain HTTP, as a person would, and stops at the redirect back
  to the client (nothing listens there; the test reads the code from the ``Location``).
- ``DocumentHost`` serves JSON documents over https on 127.0.0.1, with a certificate from a
  throwaway authority; the server under test trusts that authority through
  ``OAUTH_CIMD_LOOPBACK_CA_FILE`` (see example_site/accounts/cimd.py).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
from mcp.client.auth import AuthorizationCodeResult
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


def query_of(url: str) -> dict[str, str]:
    return {
        key: values[-1]
        for key, values in parse_qs(urlsplit(url).query, keep_blank_values=True).items()
    }


# -- the user's browser ---------------------------------------------------------------------------


class _Forms(HTMLParser):
    """Collects the inputs of each <form>, by form id."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, str]] = {}
        self._current: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._current = self.forms.setdefault(attributes.get("id", ""), {})
        elif tag == "input" and self._current is not None and attributes.get("name"):
            if attributes.get("type") in ("hidden", None, "text", "password"):
                self._current[attributes["name"]] = attributes.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def form_fields(html: str, form_id: str) -> dict[str, str]:
    parser = _Forms()
    parser.feed(html)
    assert form_id in parser.forms, f"no form #{form_id} in:\n{html[:2000]}"
    return parser.forms[form_id]


class Browser:
    """A user's browser on the authorization server. It signs in on the login page when the
    site sends it there (the consent page needs a signed-in user), then comes back."""

    def __init__(self, base_url: str, username: str, password: str | None = None) -> None:
        self.base_url = base_url
        self.username = username
        self.password = password or username  # the demo users' passwords are their names
        self.http = httpx.AsyncClient(base_url=base_url, timeout=20, follow_redirects=False)
        self.consent_pages: list[str] = []
        self.logins = 0

    async def __aenter__(self) -> Browser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def open(self, url: str) -> httpx.Response:
        """GET ``url``, signing in if asked to, and follow redirects that stay on this site;
        return the first page, or the redirect that leaves the site (back to the client)."""
        response = await self.http.get(url)
        while True:
            if response.is_redirect:
                location = urljoin(str(response.url), response.headers["location"])
                if not location.startswith(self.base_url + "/"):
                    return response
                response = await self.http.get(location)
            elif response.status_code == 200 and 'id="login-form"' in response.text:
                fields = form_fields(response.text, "login-form")
                fields.update(username=self.username, password=self.password)
                # The form posts to its own URL, which carries ?next=<the authorization URL>.
                response = await self.http.post(str(response.url), data=fields)
                assert response.is_redirect, (
                    f"login as {self.username} failed:\n{response.text[:2000]}"
                )
                self.logins += 1
            else:
                return response

    async def consent(self, page: httpx.Response, *, allow: bool = True) -> httpx.Response:
        """Answer the consent form shown on ``page``; return the redirect back to the client."""
        assert page.status_code == 200, f"{page.status_code}: {page.text[:2000]}"
        self.consent_pages.append(page.text)
        fields = form_fields(page.text, "consent")
        if allow:
            fields["allow"] = "Allow"
        response = await self.http.post(str(page.url), data=fields)
        assert response.is_redirect, f"{response.status_code}: {response.text[:2000]}"
        return response

    async def authorize(self, url: str, *, allow: bool = True) -> str:
        """Open an authorization URL, approve (or deny) it, and return where the browser is sent."""
        page = await self.open(url)
        if page.is_redirect:  # refused before consent: straight back to the client
            return page.headers["location"]
        return (await self.consent(page, allow=allow)).headers["location"]


@dataclass
class BrowserHandlers:
    """The SDK's redirect and callback handlers, played by a signed-in ``Browser``."""

    browser: Browser
    authorization_urls: list[str] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)

    async def redirect_handler(self, url: str) -> None:
        self.authorization_urls.append(url)
        self.redirects.append(await self.browser.authorize(url))

    async def callback_handler(self) -> AuthorizationCodeResult:
        params = query_of(self.redirects[-1])
        assert "code" in params, f"no code in the redirect: {self.redirects[-1]}"
        return AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )


class MemoryTokenStorage:
    """The SDK's ``TokenStorage`` in memory, readable by the test."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


# -- the web host of client ID metadata documents ----------------------------------------------------


def make_certificate_authority(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = {
        "not_valid_before": now - datetime.timedelta(hours=1),
        "not_valid_after": now + datetime.timedelta(days=1),
    }
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp_django e2e test CA")])
    ca = (
        x509.CertificateBuilder(
            subject_name=ca_name,
            issuer_name=ca_name,
            public_key=ca_key.public_key(),
            serial_number=x509.random_serial_number(),
            **valid,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder(
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]),
            issuer_name=ca_name,
            public_key=key.public_key(),
            serial_number=x509.random_serial_number(),
            **valid,
        )
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class DocumentHost:
    """An https server on 127.0.0.1 serving JSON documents by path, in a background thread
    (the authorization server fetches from it while the test waits on its answer)."""

    def __init__(self, directory: Path) -> None:
        self.ca_file, cert_file, key_file = make_certificate_authority(directory)
        self.documents: dict[str, Any] = {}
        self.fetched: list[str] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.fetched.append(self.path)
                document = host.documents.get(self.path)
                body = json.dumps(document).encode() if document is not None else b"{}"
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.base_url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="cimd-document-host", daemon=True
        )

    def __enter__(self) -> DocumentHost:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def publish(self, path: str, document: dict[str, Any]) -> str:
        """Serve ``document`` at ``path``; return its URL."""
        self.documents[path] = document
        return self.base_url + path
