"""Resources and skills as tools (``resource_tools``): the same answers as the methods they
stand for, through the same gate, for hosts that only call tools; off by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from mcp_django.extensions import skills
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import JSONRPCErrorResponse, MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.transport.conftest import mcp_settings

from .test_skills import write_skill

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = {"list_resources", "list_resource_templates", "read_resource", "list_skills", "read_skill"}


@pytest.fixture(autouse=True)
def _fresh_caches() -> Any:
    skills.clear_caches()
    yield
    skills.clear_caches()


def note_of(n: int) -> Any:
    def note() -> str:
        return f"note {n}"

    return note


def site_with_entries(tmp_path: Path, *, on: bool = True) -> MCPSite:
    site = MCPSite(name="entry-tools")
    site.app_skills = False
    site.resource_tools = on
    for n in range(5):
        site.resource(f"test://note/{n}", name=f"note-{n}", mime_type="text/plain")(note_of(n))

    @site.resource("test://staff", name="staff", permission="auth.view_user")
    def staff() -> str:
        return "staff only"

    @site.resource("test://greeting/{name}", name="greeting")
    def greeting(name: str) -> str:
        return f"hello {name}"

    site.skill(write_skill(tmp_path, "lend", files={"notes/how.md": "How to lend."}))
    return site


async def client_for(site: MCPSite) -> MCPTestClient:
    client = MCPTestClient(MCPConsumer.as_asgi(site=site))
    await client.initialize()
    return client


async def tool(client: MCPTestClient, name: str, **arguments: Any) -> dict[str, Any]:
    return await client.call("tools/call", {"name": name, "arguments": arguments})


async def test_off_by_default_no_entry_tools_are_listed(tmp_path: Path) -> None:
    client = await client_for(site_with_entries(tmp_path, on=False))
    with pytest.raises(JSONRPCErrorResponse) as refused:
        await client.call("tools/list")  # the site has no tools at all: no tools/list
    assert refused.value.response["error"]["code"] == -32601


async def test_the_tools_are_listed_labelled_and_declare_the_tools_capability(
    tmp_path: Path,
) -> None:
    client = MCPTestClient(MCPConsumer.as_asgi(site=site_with_entries(tmp_path)))
    offered = await client.initialize()
    assert "tools" in offered["capabilities"]
    listed = {t["name"]: t for t in (await client.call("tools/list"))["tools"]}
    assert set(listed) == NAMES
    for definition in listed.values():
        assert definition["title"]
        assert definition["annotations"]["readOnlyHint"] is True
        assert definition["annotations"]["destructiveHint"] is False


async def test_listing_through_the_tool_walks_the_same_pages_as_resources_list(
    tmp_path: Path,
) -> None:
    with mcp_settings(PAGE_SIZE=2):
        client = await client_for(site_with_entries(tmp_path))
        by_method, by_tool = [], []
        cursor: str | None = None
        while True:
            page = await client.call("resources/list", {"cursor": cursor} if cursor else {})
            answer = await tool(client, "list_resources", **({"cursor": cursor} if cursor else {}))
            assert answer["structuredContent"] == {k: v for k, v in page.items() if k != "_meta"}
            assert orjson.loads(answer["content"][0]["text"]) == answer["structuredContent"]
            by_method += page["resources"]
            by_tool += answer["structuredContent"]["resources"]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
    assert by_tool == by_method
    uris = [r["uri"] for r in by_tool]
    assert "test://staff" not in uris  # the anonymous caller may not read it: not listed
    assert {f"test://note/{n}" for n in range(5)} <= set(uris)


async def test_reading_through_the_tool_is_gated_as_resources_read(tmp_path: Path) -> None:
    client = await client_for(site_with_entries(tmp_path))
    read = await tool(client, "read_resource", uri="test://note/3")
    assert read["content"] == [
        {
            "type": "resource",
            "resource": {"uri": "test://note/3", "mimeType": "text/plain", "text": "note 3"},
        }
    ]
    templated = await tool(client, "read_resource", uri="test://greeting/ann")
    assert templated["content"][0]["resource"]["text"] == "hello ann"
    hidden = await tool(client, "read_resource", uri="test://staff")
    unknown = await tool(client, "read_resource", uri="test://nothing")
    assert hidden["isError"] and unknown["isError"]
    assert hidden["content"][0]["text"].replace("staff", "X") == unknown["content"][0][
        "text"
    ].replace("nothing", "X")
    assert "staff only" not in orjson.dumps(hidden).decode()
    templates = await tool(client, "list_resource_templates")
    assert [t["uriTemplate"] for t in templates["structuredContent"]["resourceTemplates"]] == [
        "test://greeting/{name}"
    ]


async def test_skills_through_the_tools_carry_the_same_digests(tmp_path: Path) -> None:
    client = await client_for(site_with_entries(tmp_path))
    listed = await client.call("skills/list")
    answer = await tool(client, "list_skills")
    assert answer["structuredContent"]["skills"] == listed["skills"]
    got = await client.call("skills/get", {"uri": "skill://lend/SKILL.md"})
    read = await tool(client, "read_skill", uri="skill://lend/SKILL.md")
    assert read["structuredContent"] == {k: v for k, v in got.items() if k != "_meta"}
    note = await tool(client, "read_resource", uri="skill://lend/notes/how.md")
    assert note["content"][0]["resource"]["text"] == "How to lend."


@pytest.mark.parametrize(
    "arguments",
    [{}, {"uri": 3}, {"uri": "x" * 2001}, {"uri": "test://note/1", "extra": 1}],
)
async def test_bad_arguments_get_a_clear_tool_error(
    tmp_path: Path, arguments: dict[str, Any]
) -> None:
    client = await client_for(site_with_entries(tmp_path))
    answer = await tool(client, "read_resource", **arguments)
    assert answer["isError"] and "Invalid arguments" in answer["content"][0]["text"]
    bad_cursor = await tool(client, "list_resources", cursor="not-a-cursor")
    assert bad_cursor["isError"] and "cursor" in bad_cursor["content"][0]["text"]
