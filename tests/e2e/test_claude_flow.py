"""Claude (claude.ai, Desktop, Claude Code) as the example site's OAuth client, step by step.

What Claude's connector does, and so what the site must allow for it:

- it asks for the scopes of the FIRST 401 challenge, once, and never steps up: a later 403
  ``insufficient_scope`` shows the user "reconnect", which asks for the same scopes again;
- it identifies itself by a client ID metadata document (its ``client_id`` is an https URL)
  only when the authorization server metadata says ``client_id_metadata_document_supported``
  and lists ``none`` among ``token_endpoint_auth_methods_supported`` (a public client);
- it declares no sampling and never subscribes to resources.

So the one token got from the first challenge must let the librarian (staff, catalogue and desk
permissions: load_demo_data) call every tool she may use, write tools included, in both protocol
eras, and no answer may be a 403. docs/howto/oauth-hosted-client.md ("Claude") cites this test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from .conftest import ExampleServer, manage, run_oauth_server, tool_names
from .oauth_helpers import Browser, DocumentHost, query_of
from .test_oauth import (
    ACCEPT_BOTH,
    INITIALIZE,
    POEMS,
    READ_SENTENCE,
    REDIRECT_URI,
    WRITE_SENTENCE,
    challenge_params,
    isbn,
    pkce,
    text_of,
)

pytestmark = pytest.mark.e2e

USER = "librarian"
RELATED = "io.modelcontextprotocol/related-task"
CLAUDE_DOCUMENT = "/clients/claude.json"

# Tools that need what Claude never offers: an answer from the client (sampling, elicitation,
# roots), a task-capable client, or a service this site has not configured. Each is called all
# the same and must fail cleanly (a tool error or a JSON-RPC error), never with a 403.
UNAVAILABLE_TO_CLAUDE = {
    "export_catalogue": "asks the user to confirm (elicitation)",
    "confirm_reservation": "asks the user to confirm (elicitation)",
    "confirm_delete": "asks the user to confirm (elicitation)",
    "multi_input": "asks the user questions (elicitation)",
    "test_elicitation": "elicitation",
    "test_elicitation_sep1034_defaults": "elicitation",
    "test_elicitation_sep1330_enums": "elicitation",
    "test_streaming_elicitation": "elicitation",
    "test_sampling": "sampling, which Claude does not offer",
    "test_missing_capability": "sampling, which Claude does not offer",
    "test_input_required_result_elicitation": "elicitation",
    "test_input_required_result_sampling": "sampling, which Claude does not offer",
    "test_input_required_result_list_roots": "roots",
    "test_input_required_result_request_state": "elicitation",
    "test_input_required_result_multiple_inputs": "elicitation",
    "test_input_required_result_multi_round": "elicitation",
    "test_input_required_result_tampered_state": "elicitation",
    "test_tool_with_task": "elicitation, or a task-capable client",
    "book_reviews": "a page opened in the user's browser (URL-mode elicitation)",
    "sync_reading_list": "a Bookshelf connection, not configured on this site",
    "test_error_handling": "fails on purpose (the conformance suite's error tool)",
    "failing_job": "fails on purpose (a job whose data is corrupt), and only as a task in 2026",
    "protocol_error_job": "fails on purpose (a JSON-RPC error)",
}

# Arguments of the tools that need some, valid for their inputSchema.
ARGUMENTS: dict[str, dict[str, Any]] = {
    "search_books": {"query": "wells"},
    "book_availability": {"isbn": POEMS},
    "member_loans": {"member_username": "reader"},
    "export_catalogue": {},
    "countdown": {"n": 2, "interval_ms": 0},
    "long_task": {"seconds": 0.1},
    "confirm_reservation": {"title": "Poems"},
    "announce_list_changed": {"kind": "tools"},
    "announce_resource_updated": {"uri": "library://catalogue/stats"},
    "test_sampling": {"prompt": "Hello"},
    "test_elicitation": {"message": "Your name?"},
    "json_schema_2020_12_tool": {"name": "Ann", "email": "ann@example.com"},
    "test_custom_header": {"region": "eu", "query": "poems"},
    "greet": {"name": "Ann"},
    "slow_compute": {"seconds": 0},
    "confirm_delete": {"filename": "notes.txt"},
    "book_reviews": {"isbn": POEMS},
    "remember_reading_goal": {"books_per_month": 3},
    "library_author_search": {"query": "wells"},
    "library_author_get": {"pk": 1},
    "library_book_search": {"query": "poems"},
    "library_book_get": {"pk": 1},
    "library_member_search": {"query": "reader"},
    "library_member_get": {"pk": 1},
    "library_loan_search": {"query": "poems"},
    "library_loan_get": {"pk": 1},
    # ChatGPT's pair, and the resources and skills as tools (the example site turns both on).
    "search": {"query": "wells"},
    "fetch": {"id": "library.book:1"},
    "read_resource": {"uri": "library://catalogue/stats"},
    "read_skill": {"uri": "skill://find-a-book/SKILL.md"},
}


@pytest.fixture(scope="module")
def claude_server(
    example_server: ExampleServer, document_host: DocumentHost
) -> Iterator[ExampleServer]:
    """The example site as deployed (MCP_AUTH=oauth, its own settings), fetching metadata
    documents from the test's loopback host."""
    # Long work answers within 3 s here (240 s as deployed), then Claude follows it.
    settings = {"MCP_TASK_DEADLINE_SECONDS": "3"}
    with run_oauth_server(example_server, document_host, "claude", settings) as server:
        yield server


async def claude_authorizes(
    server: ExampleServer, documents: DocumentHost
) -> tuple[dict[str, Any], list[str], str]:
    """Claude's discovery and authorization, from the first 401 to the token: the token
    response, the scopes of the first challenge, and the consent page the user saw."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
        first = await http.post("/mcp", json=INITIALIZE, headers=ACCEPT_BOTH)
        assert first.status_code == 401
        challenge = challenge_params(first.headers["www-authenticate"])
        scopes = challenge["scope"].split()

        prm = (await http.get(challenge["resource_metadata"])).json()
        assert prm["resource"] == server.mcp_url
        (issuer,) = prm["authorization_servers"]
        asm = (await http.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
        # The two conditions under which Claude uses a metadata document, and PKCE S256.
        assert asm["client_id_metadata_document_supported"] is True
        assert "none" in asm["token_endpoint_auth_methods_supported"]
        assert "S256" in asm["code_challenge_methods_supported"]
        # The first challenge already names every scope the site has: nothing to step up to.
        assert set(scopes) == set(asm["scopes_supported"]) == set(prm["scopes_supported"])

        client_id = documents.publish(
            CLAUDE_DOCUMENT,
            {
                "client_id": documents.base_url + CLAUDE_DOCUMENT,
                "client_name": "Claude",
                "redirect_uris": [REDIRECT_URI],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
        )
        verifier, code_challenge = pkce()
        authorize = httpx.URL(
            asm["authorization_endpoint"],
            params={
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": REDIRECT_URI,
                "state": "claude",
                "code_challenge": code_challenge,
                "code_challenge_method": "S256",
                "scope": " ".join(scopes),
                "resource": prm["resource"],
            },
        )
        async with Browser(server.base_url, USER) as browser:
            location = await browser.authorize(str(authorize))
        assert len(browser.consent_pages) == 1
        answer = query_of(location)
        assert answer["state"] == "claude" and "code" in answer, location

        token = await http.post(
            asm["token_endpoint"],
            data={
                "grant_type": "authorization_code",
                "code": answer["code"],
                "redirect_uri": REDIRECT_URI,
                "client_id": client_id,  # no secret: a public client
                "code_verifier": verifier,
                "resource": prm["resource"],
            },
        )
        assert token.status_code == 200, token.text
    return token.json(), scopes, browser.consent_pages[0]


Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


async def call_every_tool(client: Client, names: set[str], era: str) -> dict[str, str]:
    """Call each tool in ``names``: write tools in an order where each has something to act on
    (a loan borrowed, a book created), the others with ARGUMENTS. Return how each call ended."""
    outcomes: dict[str, str] = {}

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        assert name in names, f"{USER} may not use {name}"
        try:
            result = await client.call_tool(name, arguments)
        except MCPError as exc:
            outcomes[name] = f"error: {exc}"
            return None
        outcomes[name] = f"tool error: {text_of(result)}" if result.is_error else "ok"
        return result.structured_content

    # The desk: borrow, renew both ways, return; borrow again and mark it returned (admin).
    loan = await call("borrow_book", {"isbn": POEMS, "member_username": "reader"})
    assert loan is not None, outcomes
    await call("renew_loan", {"loan_id": loan["loan_id"], "days": 7})
    await call("library_loan_renew_two_weeks", {"pks": [loan["loan_id"]]})
    await call("return_book", {"loan_id": loan["loan_id"]})
    loan = await call("borrow_book", {"isbn": POEMS, "member_username": "reader"})
    assert loan is not None, outcomes
    await call("library_loan_mark_returned", {"pks": [loan["loan_id"]]})
    # The catalogue: add a book (a fresh ISBN per era), change it, add a copy of it (admin).
    book = await call(
        "library_book_create",
        {
            "title": f"Written by Claude ({era})",
            "author": 1,
            "isbn": isbn("978000099001" if era == "legacy" else "978000099002"),
            "published": 2026,
            "genre": "poetry",
        },
    )
    assert book is not None, outcomes
    await call("library_book_update", {"pk": book["id"], "summary": "A test book."})
    await call("library_book_add_copy", {"pks": [book["id"]]})
    await call("clear_reading_history", {})
    # Long work past TASK_DEADLINE_SECONDS: the call names its task, and Claude, which has no
    # tasks, follows it with the generated tools.
    running = await client.call_tool("slow_compute", {"seconds": 30, "label": "followed"})
    await call("task_status", {"taskId": (running.meta or {})[RELATED]["taskId"]})
    await call("task_cancel", {"taskId": (running.meta or {})[RELATED]["taskId"]})
    awaited = await client.call_tool("slow_compute", {"seconds": 4.5, "label": "awaited"})
    await call("task_result", {"taskId": (awaited.meta or {})[RELATED]["taskId"]})

    for name in sorted(names - outcomes.keys()):
        await call(name, ARGUMENTS.get(name, {}))
    return outcomes


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_claude_gets_every_tool_from_the_first_challenge_without_a_step_up(
    claude_server: ExampleServer, document_host: DocumentHost, era: str
) -> None:
    tokens, challenged, consent_page = await claude_authorizes(claude_server, document_host)
    try:
        assert challenged == ["library:read", "library:write"]
        assert set(tokens["scope"].split()) == set(challenged)
        # The metadata document was fetched, and the consent page says what each scope allows.
        assert CLAUDE_DOCUMENT in document_host.fetched
        assert f"127.0.0.1:{urlsplit(document_host.base_url).port}" in consent_page
        assert READ_SENTENCE in consent_page and WRITE_SENTENCE in consent_page

        statuses: list[tuple[int, str]] = []

        async def record(response: httpx2.Response) -> None:
            statuses.append((response.status_code, response.headers.get("www-authenticate", "")))

        headers = {"Authorization": f"Bearer {tokens['access_token']}"}
        async with httpx2.AsyncClient(
            headers=headers, timeout=30, event_hooks={"response": [record]}
        ) as http:
            # Like Claude: no sampling, elicitation or roots callbacks, so none declared.
            transport = streamable_http_client(claude_server.mcp_url, http_client=http)
            async with Client(transport, read_timeout_seconds=30, mode=era) as client:
                assert client.protocol_version == ("2025-11-25" if era == "legacy" else era)
                names = await tool_names(client)
                outcomes = await call_every_tool(client, names, era)

        unexpected = {
            name: outcome
            for name, outcome in outcomes.items()
            if (outcome == "ok") == (name in UNAVAILABLE_TO_CLAUDE)
        }
        assert not unexpected, unexpected
        # The write tools among them (library:write): every one succeeded with the first token.
        assert {
            "borrow_book",
            "renew_loan",
            "return_book",
            "clear_reading_history",
            "library_book_create",
            "library_book_update",
            "library_book_add_copy",
            "library_loan_mark_returned",
            "library_loan_renew_two_weeks",
        } <= {name for name, outcome in outcomes.items() if outcome == "ok"}
        assert outcomes.keys() == names
        # Never a 403 (no insufficient_scope) nor a 401, never a challenge with this token. (A
        # JSON-RPC error of the stateless era comes as a 400: the tools Claude cannot serve.)
        refused = [(status, challenge) for status, challenge in statuses if status in (401, 403)]
        assert statuses and not refused, refused
        assert not any(challenge for _, challenge in statuses), statuses
    finally:
        # What the test added to the shared demo database goes: its books and its approval
        # (so that the next era's authorization shows the consent page again).
        manage(
            claude_server.env,
            "shell",
            "-v0",
            "-c",
            "from example_site.library.models import Book\n"
            "from oauth2_provider.models import AccessToken, RefreshToken\n"
            "Book.objects.filter(title__startswith='Written by Claude').delete()\n"
            f"mine = dict(user__username={USER!r}, application__client_id__endswith="
            f"{CLAUDE_DOCUMENT!r})\n"
            "RefreshToken.objects.filter(**mine).delete()\n"
            "AccessToken.objects.filter(**mine).delete()\n",
        )


def test_claude_server_logged_no_errors(claude_server: ExampleServer) -> None:
    assert "Traceback" not in claude_server.log()
