"""The example site's MCP App in a real browser host, in Chromium.

apps_host.html is a minimal web host of the MCP Apps extension, written for this test: it reads
``book_availability``'s ``_meta.ui.resourceUri`` and the ``ui://`` resource from the server,
renders the View through a sandbox proxy on another origin (apps_sandbox.html, served with the
CSP the resource's ``_meta.ui.csp`` asks for) in an inner iframe sandboxed without
``allow-same-origin``, and speaks the host side of the postMessage protocol: ``ui/initialize``,
``ui/notifications/initialized``, ``tool-input``, ``tool-result``, and the app's own
``tools/call`` forwarded to the server. Its MCP requests go to its own backend (``POST /mcp``
here), which relays them to the site with the Django session of the signed-in user, as a web
host's backend holds its user's connection to an MCP server.

The person then types a member and presses Borrow in the app: the app's ``tools/call
borrow_book`` reaches the server as that user (the loan and the audit row say so), and the app
shows the loan and the shelf as it is now.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from selenium.common.exceptions import TimeoutException

from tests.e2e.conftest import ExampleServer, manage
from tests.polling import until_sync

from .conftest import By, find, page_text, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

HERE = Path(__file__).parent
PRINCESS = "9780001300026"  # The Princess and the Goblin: 2 copies, none on loan (demo data)
MEMBER = "mary"  # one of conftest.USERS, a library member no other test uses
#: The request headers a Streamable HTTP client sends that the relay passes on (and back: the session id).
RELAYED = (
    "accept",
    "content-type",
    "mcp-protocol-version",
    "mcp-session-id",
    "mcp-method",
    "mcp-name",
    "last-event-id",
)


def csp_header(csp: dict[str, Any]) -> str:
    """The View's Content-Security-Policy from ``_meta.ui.csp``, as the apps spec builds it
    ("CSP Construction from Metadata"): nothing from any origin the server did not declare."""

    def listed(key: str) -> str:
        return " ".join(
            str(origin)
            for origin in csp.get(key) or []
            if isinstance(origin, str) and ";" not in origin
        )

    resources, connect = listed("resourceDomains"), listed("connectDomains")
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'self' 'unsafe-inline' {resources}".strip(),
            f"style-src 'self' 'unsafe-inline' {resources}".strip(),
            f"connect-src 'self' {connect}".strip(),
            f"img-src 'self' data: {resources}".strip(),
            f"font-src 'self' {resources}".strip(),
            f"media-src 'self' data: {resources}".strip(),
            f"frame-src {listed('frameDomains') or chr(39) + 'none' + chr(39)}",
            "object-src 'none'",
            f"base-uri {listed('baseUriDomains') or chr(39) + 'self' + chr(39)}",
        ]
    )


@contextmanager
def serve_host(site: ExampleServer, cookies: dict[str, str]) -> Iterator[tuple[str, str]]:
    """The host page on 127.0.0.1 and its sandbox proxy on localhost (another origin, the same
    server), and ``POST /mcp`` relayed to the site with ``cookies``: ``(host URL, sandbox URL)``."""
    host_page = (HERE / "apps_host.html").read_bytes()
    sandbox_page = (HERE / "apps_sandbox.html").read_bytes()
    relay = httpx.Client(cookies=cookies, timeout=10)
    # A cross-origin check on the site would refuse the relay's requests with another Origin: it sends none.

    class Host(BaseHTTPRequestHandler):
        def send_page(self, page: bytes, headers: dict[str, str]) -> None:
            self.send_response(200)
            for name, value in {
                "Content-Type": "text/html; charset=utf-8",
                "Cache-Control": "no-store",
                **headers,
            }.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/sandbox.html":
                csp = json.loads(parse_qs(url.query).get("csp", ["{}"])[0])
                self.send_page(
                    sandbox_page,
                    {"Content-Security-Policy": csp_header(csp if isinstance(csp, dict) else {})},
                )
            elif url.path == "/host.html":
                self.send_page(host_page, {})
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            if self.path != "/mcp":
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {name: self.headers[name] for name in RELAYED if self.headers.get(name)}
            answer = relay.post(site.mcp_url, content=body, headers=headers)
            self.send_response(answer.status_code)
            for name in ("content-type", "mcp-session-id"):
                if name in answer.headers:
                    self.send_header(name, answer.headers[name])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Host)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        yield f"http://127.0.0.1:{port}/host.html", f"http://localhost:{port}/sandbox.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        relay.close()


def shown(browser: Any, css: str, failure: str) -> Any:
    try:
        return find(browser, css)
    except TimeoutException:
        browser.switch_to.default_content()
        pytest.fail(f"{failure}; the host shows:\n{page_text(browser)}", pytrace=False)


def enter_app(browser: Any) -> None:
    """Switch into the View: the host's iframe (the sandbox proxy), then its inner iframe."""
    browser.switch_to.default_content()
    browser.switch_to.frame(shown(browser, "iframe#frame", "the host rendered no app"))
    browser.switch_to.frame(shown(browser, "iframe#view", "the sandbox proxy rendered no view"))


ROW_SCRIPT = """
import json
from example_site.library.models import Loan
from mcp_django.models import ToolCall
loans = [(l.book.isbn, l.returned_on is None) for l in Loan.objects.filter(member__user__username={member!r})]
calls = [(c.tool_name, c.outcome, c.arguments) for c in ToolCall.objects.filter(user__username={member!r}).order_by("pk")]
print(json.dumps({{"loans": loans, "calls": calls}}))
"""
RETURN_SCRIPT = """
from example_site.library.models import Loan, today
Loan.objects.filter(member__user__username={member!r}, returned_on__isnull=True).update(returned_on=today())
"""


def rows(site: ExampleServer) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(
        manage(site.env, "shell", "-v0", "-c", ROW_SCRIPT.format(member=MEMBER))
        .strip()
        .splitlines()[-1]
    )
    return answer


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_the_availability_app_renders_the_result_and_borrows_through_the_host_as_the_user(
    site: ExampleServer, browser: Any, screenshot: Any, era: str
) -> None:
    assert not [isbn for isbn, open_ in rows(site)["loans"] if open_], (
        "the member starts with no open loan"
    )
    try:
        with serve_host(site, site.login(MEMBER)) as (host_url, sandbox_url):
            query = urlencode(
                {
                    "tool": "book_availability",
                    "args": json.dumps({"isbn": PRINCESS}),
                    "sandbox": sandbox_url,
                    "era": era,
                }
            )
            browser.get(f"{host_url}?{query}")

            # The View rendered the tool's result, which the host sent after the app initialized.
            enter_app(browser)
            app = shown(
                browser, "#app[data-state=shown]", "the app did not render the tool's result"
            )
            assert browser.find_element(By.ID, "title").text == "The Princess and the Goblin"
            assert app.get_attribute("data-available") == "2"
            assert browser.find_element(By.ID, "available").text == "2"

            # The person borrows from within the app: its tools/call goes through the host.
            browser.find_element(By.ID, "member").send_keys(MEMBER)
            browser.find_element(By.ID, "borrow-button").click()
            wait_until(
                browser,
                lambda d: d.find_element(By.ID, "app").get_attribute("data-available") == "1",
                "the app did not refresh",
            )
            message = browser.find_element(By.ID, "message").text
            assert message.startswith(f"Lent to {MEMBER}: loan "), message
            assert browser.find_element(By.ID, "borrow-button").is_enabled()  # one copy left
            screenshot("mcp-app.png")  # the host page with the app in it (make screenshots: docs)

            # The View reaches the server only through the host: the CSP of the sandbox (nothing
            # declared in connectDomains) refuses a direct fetch, even to the site itself.
            refused = browser.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "document.addEventListener('securitypolicyviolation', (e) => done(e.effectiveDirective));"
                "fetch(arguments[0], {method: 'POST'}).catch(() => {});",
                site.mcp_url,
            )
            assert refused == "connect-src"

            browser.switch_to.default_content()
            log = browser.find_element(By.ID, "log").text.splitlines()
            assert not browser.find_element(By.ID, "error").text
            # The protocol in its order: the handshake first, then what the host pushed, then the app's calls.
            assert log[:4] == [
                "app ui/initialize library-availability 2026-01-26",
                "app initialized",
                "host tool-input sent",
                "host tool-result sent",
            ]
            assert (
                f'app tools/call borrow_book {{"isbn":"{PRINCESS}","member_username":"{MEMBER}"}}'
                in log
            )
            assert "server answered borrow_book" in log

        # The call reached the server as the signed-in user: the loan is theirs, and so is the audit
        # row (written in batches, AUDIT_FLUSH_INTERVAL: looked for until it is there).
        borrowed = ["borrow_book", "ok", {"isbn": PRINCESS, "member_username": MEMBER}]
        found = until_sync(
            lambda: (lambda r: r if borrowed in r["calls"] else None)(rows(site)),
            interval=0.2,
            failure="no audit row for the app's call",
        )
        assert [PRINCESS, True] in found["loans"]
    finally:
        manage(site.env, "shell", "-v0", "-c", RETURN_SCRIPT.format(member=MEMBER))
