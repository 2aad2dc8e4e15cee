"""The helpdesk a second team built as new users (tests/helpdesk), driven by the official SDK
client the way they drove it: both eras on Streamable HTTP, the 2024-11-05 HTTP+SSE transport
and stdio, as four users and anonymously. What each user may see and do comes from the admin
(``register_admin``: ``get_queryset``, permissions, ``AdminSite.has_permission``) and from the
function entries' own checks of ``ctx.user``; result schemas are validated by the client.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import PromptReference, ResourceTemplateReference, TextContent

from tests.helpdesk import seed

from .conftest import (
    LOGIN_SCRIPT,
    ROOT,
    ExampleServer,
    connect_as,
    copy_database,
    manage,
    run_server,
    server_env,
    tool_names,
)

pytestmark = pytest.mark.e2e

ERAS = ["legacy", "2026-07-28"]
APPLICATION = "tests.helpdesk.asgi:application"
INVALID_PARAMS = -32602

#: Everything the admin bridge makes of the helpdesk's admin, for a user allowed all of it.
ADMIN_TOOLS = {
    f"desk_{model}_{tool}"
    for model in ("ticket", "customer", "comment", "note", "tag", "team")
    for tool in ("search", "get")
}
TICKET_ACTIONS = {"desk_ticket_mark_resolved", "desk_ticket_escalate", "desk_ticket_summarize"}
FUNCTION_TOOLS = {"open_tickets", "queue_stats", "whoami"}


@dataclass(frozen=True)
class HelpdeskServer(ExampleServer):
    """The helpdesk served, with a Django session made for each of the seeded users up front."""

    sessions: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def login(self, username: str) -> dict[str, str]:
        return {"sessionid": self.sessions[username]}


@dataclass(frozen=True)
class HelpdeskDatabase:
    path: Path
    sessions: dict[str, str]

    def env(self, path: Path | None = None, auth: str = "django") -> dict[str, str]:
        return {
            **server_env(path or self.path, auth=auth),
            "DJANGO_SETTINGS_MODULE": "tests.helpdesk.settings",
        }


@pytest.fixture(scope="module")
def helpdesk_database(tmp_path_factory: pytest.TempPathFactory) -> HelpdeskDatabase:
    """Migrated and seeded once; each server and each stdio test works on a copy."""
    path = tmp_path_factory.mktemp("e2e-helpdesk") / "helpdesk.sqlite3"
    database = HelpdeskDatabase(path, {})
    manage(database.env(), "migrate", "--noinput", "-v0")
    script = "from tests.helpdesk.seed import seed; seed()\n" + "".join(
        LOGIN_SCRIPT.format(username=u) for u in seed.USERNAMES
    )
    keys = manage(database.env(), "shell", "-v0", "-c", script).split()
    return HelpdeskDatabase(path, dict(zip(seed.USERNAMES, keys, strict=True)))


@pytest.fixture(scope="module")
def helpdesk_server(
    asgi_server: str, helpdesk_database: HelpdeskDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HelpdeskServer]:
    workdir = tmp_path_factory.mktemp(f"e2e-helpdesk-{asgi_server}")
    env = helpdesk_database.env(copy_database(helpdesk_database.path, workdir / "helpdesk.sqlite3"))
    with run_server(
        env, workdir / f"{asgi_server}.log", server=asgi_server, application=APPLICATION
    ) as server:
        values = {f.name: getattr(server, f.name) for f in fields(server)}
        yield HelpdeskServer(**values, sessions=helpdesk_database.sessions)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def resource_uris(client: Client) -> set[str]:
    uris: set[str] = set()
    cursor = None
    while True:
        page = await client.list_resources(cursor=cursor)
        uris |= {str(r.uri) for r in page.resources}
        cursor = page.next_cursor
        if cursor is None:
            return uris


async def outcome(call: Awaitable[Any]) -> Any:
    """The call's result, or the MCPError (or the client's RuntimeError for a result its schema
    refuses) it raised: asserted on once the client is closed, so a failure reads as itself
    rather than as the client's task group ending."""
    try:
        return await call
    except (MCPError, RuntimeError) as exc:
        return exc


def ticket_uri(pk: Any) -> str:
    return f"django://desk/ticket/{pk}"


# -- who sees what -----------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_each_user_is_offered_the_tools_the_admin_gives_them(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    offered = {}
    for username in (seed.AGENT, seed.VIEWER, seed.NOBODY):
        async with connect_as(helpdesk_server, username, mode=era) as client:
            offered[username] = await tool_names(client)
            version = client.protocol_version
    assert version == ("2025-11-25" if era == "legacy" else era)
    assert (
        offered[seed.AGENT] == ADMIN_TOOLS | TICKET_ACTIONS | FUNCTION_TOOLS
    )  # no user model, no delete_selected
    assert offered[seed.VIEWER] == {
        "desk_ticket_search",
        "desk_ticket_get",
        "desk_customer_search",
        "desk_customer_get",
        "desk_comment_search",
        "desk_comment_get",
        "desk_ticket_summarize",
        "open_tickets",
        "queue_stats",
        "whoami",
    }
    assert offered[seed.NOBODY] == {"whoami"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_user_outside_the_admin_sees_none_of_its_entries(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    """``rep`` holds view_customer but is not staff: the admin refuses them
    (``AdminSite.has_permission``), so must every entry the bridge made of it."""
    async with connect_as(helpdesk_server, seed.REP, mode=era) as client:
        names = await tool_names(client)
        uris = await resource_uris(client)
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        searched = await outcome(client.call_tool("desk_customer_search", {"query": "Acme"}))
        read = await outcome(client.read_resource(f"django://desk/customer/{seed.ACME}"))
    assert names == {"whoami"}
    assert not [uri for uri in uris if uri.startswith("django://")]
    assert not [template for template in templates if template.startswith("django://")]
    assert isinstance(searched, MCPError) and "Unknown tool" in str(searched)
    assert isinstance(read, MCPError) and read.code in (INVALID_PARAMS, -32002)


@pytest.mark.parametrize("era", ERAS)
async def test_an_agent_sees_only_the_tickets_of_their_team(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    async with connect_as(helpdesk_server, seed.AGENT, mode=era) as client:
        found = await client.call_tool("desk_ticket_search", {})
        other_team = await client.call_tool("desk_ticket_get", {"pk": str(seed.INVOICE_MISSING)})
        own = await client.call_tool("desk_ticket_get", {"pk": str(seed.PRINTER_ON_FIRE)})
        uris = await resource_uris(client)
        read = await client.read_resource(ticket_uri(seed.PRINTER_ON_FIRE))
        unseen = await outcome(client.read_resource(ticket_uri(seed.INVOICE_MISSING)))
        completed = await client.complete(
            ResourceTemplateReference(uri="django://desk/ticket/{pk}"), {"name": "pk", "value": ""}
        )
        beta_queue = await client.read_resource("helpdesk://queues/Beta")
        comments = await client.call_tool("desk_comment_search", {})
    assert not found.is_error, text_of(found)
    assert {item["subject"] for item in found.structured_content["items"]} == seed.ALPHA_SUBJECTS
    assert other_team.is_error and isinstance(unseen, MCPError)
    assert not own.is_error, text_of(own)
    printer = own.structured_content
    assert (printer["subject"], printer["status"], printer["customer"]) == (
        "Printer on fire",
        "open",
        str(seed.ACME),
    )
    assert (printer["metadata"], printer["attachment"]) == (
        {"floor": 3, "model": "LJ-4"},
        None,
    )  # JSONField, empty FileField
    ticket_uris = {uri for uri in uris if uri.startswith("django://desk/ticket/")}
    assert ticket_uris == {
        ticket_uri(pk)
        for pk in (seed.PRINTER_ON_FIRE, seed.SLOW_VPN, seed.PASSWORD_RESET, seed.BROKEN_CHAIR)
    }
    assert json.loads(read.contents[0].text)["id"] == str(seed.PRINTER_ON_FIRE)  # type: ignore[union-attr]
    assert set(completed.completion.values) == {
        str(pk)
        for pk in (seed.PRINTER_ON_FIRE, seed.SLOW_VPN, seed.PASSWORD_RESET, seed.BROKEN_CHAIR)
    }
    assert json.loads(beta_queue.contents[0].text) == {"team": "Beta", "tickets": []}  # type: ignore[union-attr]
    assert [item["body"] for item in comments.structured_content["items"]] == [
        "Extinguisher on its way."
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_completers_suggest_only_what_the_user_may_see(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    suggested = {}
    for username in (seed.AGENT, seed.VIEWER):
        async with connect_as(helpdesk_server, username, mode=era) as client:
            teams = await outcome(
                client.complete(
                    ResourceTemplateReference(uri="helpdesk://queues/{team}"),
                    {"name": "team", "value": ""},
                )
            )
            tickets = await outcome(
                client.complete(
                    PromptReference(name="draft_reply"), {"name": "ticket", "value": ""}
                )
            )
        assert not isinstance(teams, MCPError) and not isinstance(tickets, MCPError), (
            teams,
            tickets,
        )
        suggested[username] = (teams.completion.values, set(tickets.completion.values))
    assert suggested[seed.AGENT] == (["Alpha"], seed.ALPHA_SUBJECTS)
    assert suggested[seed.VIEWER] == (["Beta"], seed.BETA_SUBJECTS)


# -- function tools: results the client validates -------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_returning_a_model_passes_the_clients_validation(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    async with connect_as(helpdesk_server, seed.AGENT, mode=era) as client:
        stats = await client.call_tool("queue_stats", {})
        me = await client.call_tool("whoami", {})
    assert not stats.is_error, text_of(stats)
    counts = stats.structured_content
    assert (counts["team"], counts["pending"], counts["open"] + counts["resolved"]) == (
        "Alpha",
        1,
        3,
    )  # the chair may be resolved
    assert me.structured_content == {"authenticated": True, "username": "agent"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_returning_a_list_of_models_passes_the_clients_validation(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    async with connect_as(helpdesk_server, seed.AGENT, mode=era) as client:
        urgent = await outcome(client.call_tool("open_tickets", {"priority": "urgent"}))
    assert not isinstance(urgent, Exception), urgent
    assert not urgent.is_error, text_of(urgent)
    printer = {
        "id": str(seed.PRINTER_ON_FIRE),
        "subject": "Printer on fire",
        "status": "open",
        "priority": "urgent",
        "customer": "Acme",
    }
    assert printer in urgent.structured_content["result"]
    # Slow VPN, once the HTTP+SSE test has escalated it; never another team's ticket.
    assert {item["subject"] for item in urgent.structured_content["result"]} <= {
        "Printer on fire",
        "Slow VPN",
    }


# -- admin actions on UUID keys ---------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_admin_actions_run_on_uuid_keys_of_rows_the_user_may_see(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    async with connect_as(helpdesk_server, seed.AGENT, mode=era) as client:
        resolved = await client.call_tool(
            "desk_ticket_mark_resolved", {"pks": [str(seed.BROKEN_CHAIR)]}
        )
        chair = await client.call_tool("desk_ticket_get", {"pk": str(seed.BROKEN_CHAIR)})
        other_team = await client.call_tool(
            "desk_ticket_escalate", {"pks": [str(seed.INVOICE_MISSING)]}
        )
    async with connect_as(helpdesk_server, seed.VIEWER, mode=era) as client:
        summary = await client.call_tool(
            "desk_ticket_summarize", {"pks": [str(seed.INVOICE_MISSING), str(seed.PRINTER_ON_FIRE)]}
        )
        refused = await outcome(
            client.call_tool("desk_ticket_mark_resolved", {"pks": [str(seed.INVOICE_MISSING)]})
        )
    assert resolved.structured_content == {"affected": 1, "messages": ["Resolved 1 ticket(s)."]}
    assert chair.structured_content["status"] == "resolved"
    assert other_team.is_error and "None of those objects exist" in text_of(other_team)
    assert summary.structured_content == {
        "affected": 1,
        "messages": ["1 ticket(s): Invoice missing"],
    }  # not Alpha's printer
    assert isinstance(refused, MCPError) and "Unknown tool" in str(refused)


@pytest.mark.parametrize("era", ERAS)
async def test_a_malformed_uuid_is_an_invalid_argument_that_names_it(
    helpdesk_server: HelpdeskServer, era: str
) -> None:
    answers: dict[str, Any] = {}
    async with connect_as(helpdesk_server, seed.AGENT, mode=era) as client:
        for name, arguments in (
            ("desk_ticket_get", {"pk": "not-a-uuid"}),
            ("desk_ticket_mark_resolved", {"pks": ["not-a-uuid"]}),
        ):
            answers[name] = await outcome(client.call_tool(name, arguments))
    for name, answer in answers.items():
        if isinstance(answer, MCPError):
            assert answer.code == INVALID_PARAMS, (name, answer.error)
            answers[name] = answer.error.message + json.dumps(answer.error.data)
        else:
            assert answer.is_error, (name, answer)
            answers[name] = text_of(answer)
    assert "not-a-uuid" in answers["desk_ticket_mark_resolved"], answers
    assert "Internal error" not in "".join(answers.values())


# -- the other transports, and nobody signed in --------------------------------------------------


async def use_as_agent(client: Client) -> dict[str, Any]:
    """What an agent does on every transport (asserted by ``assert_the_agents_answers``)."""
    return {
        "names": await tool_names(client),
        "found": await client.call_tool("desk_ticket_search", {"query": "o"}),
        "escalated": await client.call_tool("desk_ticket_escalate", {"pks": [str(seed.SLOW_VPN)]}),
        "stats": await client.call_tool("queue_stats", {}),
        "read": await client.read_resource(ticket_uri(seed.SLOW_VPN)),
        "prompt": await client.get_prompt("draft_reply", {"ticket": "Slow VPN"}),
        # Last: the list[Model] result, which the client validates against its outputSchema.
        "urgent": await outcome(client.call_tool("open_tickets", {"priority": "urgent"})),
    }


def assert_the_agents_answers(answers: dict[str, Any]) -> None:
    """The same answers as on Streamable HTTP."""
    assert answers["names"] == ADMIN_TOOLS | TICKET_ACTIONS | FUNCTION_TOOLS
    assert {
        item["subject"] for item in answers["found"].structured_content["items"]
    } <= seed.ALPHA_SUBJECTS
    assert answers["escalated"].structured_content == {
        "affected": 1,
        "messages": ["Escalated 1 ticket(s)."],
    }
    assert answers["stats"].structured_content["team"] == "Alpha"
    assert json.loads(answers["read"].contents[0].text)["priority"] == "urgent"
    assert "Slow VPN" in answers["prompt"].messages[0].content.text
    urgent = answers["urgent"]
    assert not isinstance(urgent, Exception), urgent
    assert {item["subject"] for item in urgent.structured_content["result"]} == {
        "Printer on fire",
        "Slow VPN",
    }


async def test_an_http_sse_client_uses_the_helpdesk_as_an_agent(
    helpdesk_server: HelpdeskServer,
) -> None:
    cookie = {"Cookie": f"sessionid={helpdesk_server.sessions[seed.AGENT]}"}
    async with Client(
        sse_client(f"{helpdesk_server.mcp_url}/sse", headers=cookie),
        mode="legacy",
        read_timeout_seconds=20,
    ) as client:
        answers = await use_as_agent(client)
    assert_the_agents_answers(answers)


def test_anonymous_http_requests_are_asked_to_sign_in(helpdesk_server: HelpdeskServer) -> None:
    accept = {"Accept": "application/json, text/event-stream"}
    listed = httpx.post(
        helpdesk_server.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers=accept,
        timeout=10,
    )
    stream = httpx.get(
        f"{helpdesk_server.mcp_url}/sse", headers={"Accept": "text/event-stream"}, timeout=10
    )
    assert (listed.status_code, stream.status_code) == (401, 401)


def stdio(database: HelpdeskDatabase, tmp_path: Path, *args: str, auth: str = "django") -> Any:
    env = database.env(copy_database(database.path, tmp_path / "helpdesk.sqlite3"), auth=auth)
    parameters = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_stdio", *args], env=env, cwd=str(ROOT)
    )
    return stdio_client(parameters)


@pytest.mark.parametrize("era", ERAS)
async def test_a_stdio_client_uses_the_helpdesk_as_the_named_agent(
    helpdesk_database: HelpdeskDatabase, tmp_path: Path, era: str
) -> None:
    async with Client(
        stdio(helpdesk_database, tmp_path, "--user", seed.AGENT), mode=era, read_timeout_seconds=20
    ) as client:
        version = client.protocol_version
        answers = await use_as_agent(client)
    assert version == ("2025-11-25" if era == "legacy" else era)
    assert_the_agents_answers(answers)


async def test_an_anonymous_stdio_client_is_djangos_anonymous_user(
    helpdesk_database: HelpdeskDatabase, tmp_path: Path
) -> None:
    async with Client(
        stdio(helpdesk_database, tmp_path, auth="none"), read_timeout_seconds=20
    ) as client:
        names = await tool_names(client)
        me = await outcome(client.call_tool("whoami", {}))
        teams = await outcome(
            client.complete(
                ResourceTemplateReference(uri="helpdesk://queues/{team}"),
                {"name": "team", "value": ""},
            )
        )
    assert names == {"whoami"}
    assert not isinstance(me, MCPError) and not isinstance(teams, MCPError), (me, teams)
    assert not me.is_error, text_of(me)
    assert me.structured_content == {"authenticated": False, "username": ""}
    assert teams.completion.values == []


def test_the_server_logged_no_traceback(helpdesk_server: HelpdeskServer) -> None:
    """Last of the module: nothing any user did above was an unexpected exception on the server."""
    log = helpdesk_server.log()
    assert "Traceback" not in log, [
        line for line in log.splitlines() if re.match(r"[\w.]+(Error|Exception): ", line)
    ]
