"""``register_admin(admin.site)`` on the live example site: only users the admin site lets in
see its entries, and a plain bridge of the whole admin site feeds no announcement loop while
clients keep connecting."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from .conftest import ExampleServer, connect_as, manage, run_server, server_env, tool_names

pytestmark = pytest.mark.e2e

# A volunteer who may view loans and members but is not staff: Django's admin turns them away.
DESK_VOLUNTEER = (
    "from django.contrib.auth.models import Permission, User; "
    "user, _ = User.objects.get_or_create(username='volunteer'); "
    "user.is_staff = {staff}; user.save(); "
    "user.user_permissions.set(Permission.objects.filter(codename__in=['view_loan', 'view_member']))"
)
# Loan and Member come from the example's register_admin() alone (Book has its own ModelMCP).
BRIDGED = {"library_loan_search", "library_loan_get", "library_member_search", "library_member_get"}

COUNT_EVENTS = (
    "from mcp_django.models import Event; "
    "print(Event.objects.count(), Event.objects.filter(payload__contains='list_changed').count())"
)


@pytest.fixture(scope="module")
def whole_admin_server(
    asgi_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    workdir = tmp_path_factory.mktemp("e2e-whole-admin")
    env = {
        **server_env(workdir / "example.sqlite3", auth="none"),
        "DJANGO_SETTINGS_MODULE": "tests.e2e.settings_whole_admin",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "load_demo_data")
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as server:
        yield server


async def _list_tools(server: ExampleServer) -> list[str]:
    async with Client(server.mcp_url, read_timeout_seconds=10) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


async def test_two_clients_connect_one_after_the_other_and_the_event_table_stays_small(
    whole_admin_server: ExampleServer,
) -> None:
    first = await asyncio.wait_for(_list_tools(whole_admin_server), timeout=30)
    second = await asyncio.wait_for(_list_tools(whole_admin_server), timeout=30)
    assert first == second and "search_books" in first
    assert not [
        name for name in first if name.startswith(("mcp_django_", "oauth2_provider_", "auth_"))
    ]
    events, announcements = map(
        int, manage(whole_admin_server.env, "shell", "-v0", "-c", COUNT_EVENTS).split()
    )
    assert announcements == 0  # creating a session announced a change of the (exposed) Session list
    assert events <= 4  # at most a priming event or two per session
    log = whole_admin_server.log()
    assert "RecursionError" not in log and "Could not announce" not in log


async def test_the_server_stops_on_sigterm_with_a_client_connected(
    asgi_server: str, tmp_path: Path
) -> None:
    """The announcement loop kept Daphne's reactor busy: it ignored SIGTERM. It must stop, and
    so must uvicorn and granian, which wait for open responses: the legacy client's GET SSE
    stream never ends by itself (their graceful timeout flags in tests/asgi_servers.py)."""
    env = {
        **server_env(tmp_path / "example.sqlite3", auth="none"),
        "DJANGO_SETTINGS_MODULE": "tests.e2e.settings_whole_admin",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "load_demo_data")
    with run_server(env, tmp_path / f"{asgi_server}.log", server=asgi_server) as server:
        async with Client(server.mcp_url, read_timeout_seconds=10, mode="legacy") as client:
            await client.list_tools()
            process = server.process
            assert process is not None
            process.terminate()
            # Bounded so a hang fails the test instead of the run; the sole claim is "it exits".
            returncode = await asyncio.to_thread(process.wait, 20)
    assert returncode is not None
    assert "RecursionError" not in server.log()


async def _what_the_volunteer_gets(
    server: ExampleServer, *, staff: bool
) -> tuple[set[str], set[str], Any]:
    manage(server.env, "shell", "-v0", "-c", DESK_VOLUNTEER.format(staff=staff))
    async with connect_as(server, "volunteer") as client:
        tools = await tool_names(client) & BRIDGED
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        try:
            answer: Any = await client.call_tool("library_loan_search", {"limit": 1})
        except MCPError as exc:
            answer = exc
    return tools, templates, answer


async def test_only_users_the_admin_site_lets_in_get_the_bridge_entries(
    example_server_django_auth: ExampleServer,
) -> None:
    tools, templates, answer = await _what_the_volunteer_gets(
        example_server_django_auth, staff=False
    )
    assert tools == set()
    assert not {"django://library/loan/{pk}", "django://library/member/{pk}"} & templates
    assert isinstance(answer, MCPError) and "Unknown tool: library_loan_search" in str(answer)
    tools, templates, answer = await _what_the_volunteer_gets(
        example_server_django_auth, staff=True
    )
    assert tools == BRIDGED
    assert {"django://library/loan/{pk}", "django://library/member/{pk}"} <= templates
    assert (
        not isinstance(answer, MCPError)
        and not answer.is_error
        and answer.structured_content["items"]
    )


# What the changelist computes per row: each member's open loans (the ModelAdmin's annotation)
# and each loan's overdue flag, read straight from the database to compare with the bridge.
CHANGELIST_COLUMNS = (
    "import json; from example_site.library.models import Loan, Member, today; "
    "print(json.dumps({"
    "'members': {m.user.username: m.loans.filter(returned_on__isnull=True).count() "
    "for m in Member.objects.all()}, "
    "'overdue': {l.pk: l.returned_on is None and l.due_on < today() for l in Loan.objects.all()}}))"
)


async def test_bridged_rows_carry_the_changelists_display_columns(
    example_server_django_auth: ExampleServer,
) -> None:
    """MemberAdmin's ``username`` and ``open_loans`` (over its annotated queryset) and
    LoanAdmin's boolean ``overdue`` are methods in list_display: the rows carry them, and the
    SDK client checks them against the tools' output schemas."""
    import json

    server = example_server_django_auth
    manage(server.env, "shell", "-v0", "-c", DESK_VOLUNTEER.format(staff=True))
    expected = json.loads(manage(server.env, "shell", "-v0", "-c", CHANGELIST_COLUMNS))
    async with connect_as(server, "volunteer") as client:
        # Every page listed first: the SDK validates a result against the schema it listed.
        tools: dict[str, Any] = {}
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools |= {tool.name: tool for tool in page.tools}
            if (cursor := page.next_cursor) is None:
                break
        members = await client.call_tool("library_member_search", {"limit": 50})
        loans = await client.call_tool("library_loan_search", {"limit": 50})
    member_schema = tools["library_member_search"].output_schema["properties"]["items"]["items"][
        "properties"
    ]
    assert member_schema["open_loans"]["title"] == "open loans"
    assert members.structured_content["items"] and loans.structured_content["items"]
    assert all(
        item["open_loans"] == expected["members"][item["username"]]
        for item in members.structured_content["items"]
    )
    # The annotation's counts, not a default: some member has a loan open in the demo data.
    assert any(item["open_loans"] for item in members.structured_content["items"])
    overdue = expected["overdue"]
    assert all(
        loan["overdue"] is overdue[str(loan["id"])] for loan in loans.structured_content["items"]
    )
