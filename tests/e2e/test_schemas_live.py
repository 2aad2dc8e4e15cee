"""The official client takes every generated schema: it validates each tool result against
the tool's outputSchema (patterns included), so one Python-only pattern made it refuse them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp import Client
from mcp.types import Tool

from tests.test_schemas import assert_valid_for_clients

from .conftest import ExampleServer, manage, run_server, server_env

pytestmark = pytest.mark.e2e

MAKE_USER = "from django.contrib.auth.models import User; User.objects.create_user('José', 'jose@example.com')"


@pytest.fixture(scope="module")
def schemas_server(
    asgi_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleServer]:
    workdir = tmp_path_factory.mktemp("e2e-schemas")
    env = {
        **server_env(workdir / "example.sqlite3", auth="none"),
        "DJANGO_SETTINGS_MODULE": "tests.e2e.settings_schemas",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", MAKE_USER)
    with run_server(env, workdir / f"{asgi_server}.log", server=asgi_server) as server:
        yield server


CHECK_EVERY_SCHEMA = """
import regress
from jsonschema import Draft202012Validator
from mcp_django.registry.sites import all_sites
from tests.test_schemas import assert_valid_for_clients
count = 0
for mcp in list(all_sites):
    for tool in mcp.get_tools():
        definition = tool.definition()
        for key in ("inputSchema", "outputSchema"):
            if key in definition:
                assert_valid_for_clients(definition[key])
                count += 1
print(count)
"""


def test_every_schema_of_the_example_site_is_valid_for_clients(
    schemas_server: ExampleServer,
) -> None:
    # The example site's own settings and registrations, plus every field type (settings_schemas).
    checked = int(
        manage(schemas_server.env, "shell", "-v0", "-c", CHECK_EVERY_SCHEMA)
        .strip()
        .splitlines()[-1]
    )
    assert checked > 60


async def every_tool(client: Client) -> dict[str, Tool]:
    """Every tool, by name, from every page: the client checks each tool's schemas as it lists them."""
    tools: dict[str, Tool] = {}
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.update((tool.name, tool) for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def test_the_client_accepts_every_tool_and_every_result(
    schemas_server: ExampleServer,
) -> None:
    async with Client(schemas_server.mcp_url, read_timeout_seconds=10) as client:
        tools = await every_tool(client)
        assert {"testapp_specimen_create", "auth_user_search"} <= set(tools)
        for tool in tools.values():  # as they came over the wire, for clients that check inputs too
            assert_valid_for_clients(tool.input_schema)
            if tool.output_schema is not None:
                assert_valid_for_clients(tool.output_schema)

        users = await client.call_tool("auth_user_search", {"query": "Jos"})
        assert not users.is_error, users
        assert users.structured_content["items"][0]["username"] == "José"

        created = []
        for price in (3.5, "3.50"):
            result = await client.call_tool(
                "testapp_specimen_create",
                {
                    "char": "x",
                    "price": price,
                    "code": "AB-1234",
                    "ascii_name": "ada.l",
                    "rate": None,
                    "period": "2024-10",
                },
            )
            assert not result.is_error, result
            assert result.structured_content["price"] == "3.50"
            created.append(result.structured_content["id"])

        fetched = await client.call_tool("testapp_specimen_get", {"pk": created[0]})
        assert not fetched.is_error and fetched.structured_content["code"] == "AB-1234"
        found = await client.call_tool("testapp_specimen_search", {"price": "3.50"})
        assert [item["id"] for item in found.structured_content["items"]] == created

        refused = await client.call_tool(
            "testapp_specimen_create", {"char": "x", "price": "0.125", "code": "nope"}
        )
        assert refused.is_error
        text = refused.content[0].text  # type: ignore[union-attr]
        assert "price" in text and "code" in text  # both in one answer
        refused = await client.call_tool("testapp_specimen_create", {"char": "x", "price": "3.555"})
        assert refused.is_error
        assert (
            "price: Ensure that there are no more than 2 decimal places." in refused.content[0].text
        )  # type: ignore[union-attr]

        crafted = await client.call_tool("testapp_specimen_search", {"cursor": "eyJvIjogLTV9"})
        assert crafted.is_error
    assert "Traceback" not in schemas_server.log()


DUNE = {"title": "Dune", "author": {"name": "Herbert"}}
LEAF = {"name": "leaf", "children": []}
# (tool, arguments, structuredContent): tests/e2e/schemas_app/mcp.py
SHAPES = [
    ("shapes_books", {"books": [DUNE, DUNE]}, {"result": [DUNE, DUNE]}),
    ("shapes_maybe_book", {"present": True}, {"result": DUNE}),
    ("shapes_maybe_book", {"present": False}, {"result": None}),
    ("shapes_book_or_magazine", {"magazine": False}, {"result": DUNE}),
    ("shapes_book_or_magazine", {"magazine": True}, {"result": {"issue": 7}}),
    ("shapes_book", {}, DUNE),
    ("shapes_tree", {"depth": 1}, {"name": "level 0", "children": [LEAF]}),
    (
        "shapes_forest",
        {"tree": {"name": "root", "children": [LEAF]}},
        {"result": [{"name": "root", "children": [LEAF]}]},
    ),
    ("shapes_shelf", {"label": "SF"}, {"label": "SF", "books": [DUNE]}),
    ("shapes_loans", {"days": 14}, {"result": [{"book": DUNE, "days": 14}]}),
    ("shapes_loan", {"days": 7}, {"book": DUNE, "days": 7}),
]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_client_accepts_results_wrapped_around_models_in_both_eras(
    schemas_server: ExampleServer, mode: str
) -> None:
    # call_tool validates each result against the tool's outputSchema: a $ref that leads
    # nowhere is a RuntimeError ("PointerToNowhere"), a result that does not match one too.
    async with Client(schemas_server.mcp_url, read_timeout_seconds=10, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        # The client validates only the tools it has listed (it lists just the first page itself).
        tools = {
            name: tool
            for name, tool in (await every_tool(client)).items()
            if name.startswith("shapes_")
        }
        assert len(tools) == len({name for name, _, _ in SHAPES})
        for name, arguments, expected in SHAPES:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result
            assert result.structured_content == expected, name
        # And every $ref resolves, even those these results do not reach.
        for tool in tools.values():
            assert tool.output_schema is not None
            assert_valid_for_clients(tool.output_schema)
            assert_valid_for_clients(tool.input_schema)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_client_validates_model_rows_a_function_tool_returns_against_their_model_mcp_schema(
    schemas_server: ExampleServer, mode: str
) -> None:
    # call_tool validates structuredContent against the listed outputSchema (tests/e2e/schemas_app).
    async with Client(schemas_server.mcp_url, read_timeout_seconds=10, mode=mode) as client:
        tools = await every_tool(client)
        many, one = tools["model_rows_users"].output_schema, tools["model_rows_user"].output_schema
        assert many is not None and many["properties"]["result"]["type"] == "array"
        assert one is not None and one["type"] == "object" and "username" in one["properties"]
        users = await client.call_tool("model_rows_users", {"prefix": "Jos"})
        assert not users.is_error, users
        assert [row["username"] for row in users.structured_content["result"]] == ["José"]
        user = await client.call_tool("model_rows_user", {"username": "José"})
        assert not user.is_error, user
        assert user.structured_content["email"] == "jose@example.com"
        missing = await client.call_tool("model_rows_user", {"username": "nobody"})
        assert missing.is_error
    assert "Traceback" not in schemas_server.log()
