"""The labels hosted clients require of every tool: a title, explicit readOnlyHint and
destructiveHint, and a name of at most 64 characters from A-Z, a-z, 0-9, '_' and '-'."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group

from mcp_django.registry.labels import explicit_hints, humanized, label_checks
from mcp_django.registry.options import ModelMCP
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer

HOST_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def assert_labelled(tool: dict[str, Any]) -> None:
    assert tool.get("title"), tool["name"]
    hints = tool.get("annotations") or {}
    assert isinstance(hints.get("readOnlyHint"), bool), tool["name"]
    assert isinstance(hints.get("destructiveHint"), bool), tool["name"]
    assert not (hints["readOnlyHint"] and hints["destructiveHint"]), tool["name"]


def test_hints_are_made_explicit_with_the_specs_defaults() -> None:
    assert explicit_hints(None) == {"readOnlyHint": False, "destructiveHint": True}
    assert explicit_hints({"readOnlyHint": True}) == {
        "readOnlyHint": True,
        "destructiveHint": False,
    }
    assert explicit_hints({"destructiveHint": False, "openWorldHint": True}) == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "openWorldHint": True,
    }
    assert humanized("slow_compute") == "Slow compute"
    assert humanized("library.book-search") == "Library book search"


@pytest.mark.django_db(transaction=True)
async def test_every_tool_the_example_site_lists_is_labelled_for_hosted_clients() -> None:
    # The project's own site: the example library's tools and the conformance tools, generated
    # model tools, admin actions and the task tools of TASK_DEADLINE_SECONDS among them.
    client = MCPTestClient()
    await client.initialize()
    tools = (await client.call("tools/list"))["tools"]
    assert len(tools) > 10
    for tool in tools:
        assert_labelled(tool)
        assert HOST_NAME.match(tool["name"]), tool["name"]


@pytest.mark.django_db(transaction=True)
async def test_a_bare_function_tool_is_listed_with_a_title_and_the_cautious_hints() -> None:
    site = MCPSite(name="labels-bare")

    @site.tool()
    def send_report(to: str) -> str:
        return to

    @site.tool(title="Look up", annotations={"readOnlyHint": True})
    def look_up(q: str) -> str:
        return q

    client = MCPTestClient(MCPConsumer.as_asgi(site=site))
    await client.initialize()
    tools = {t["name"]: t for t in (await client.call("tools/list"))["tools"]}
    assert tools["send_report"]["title"] == "Send report"
    assert tools["send_report"]["annotations"] == {"readOnlyHint": False, "destructiveHint": True}
    assert tools["look_up"]["title"] == "Look up"
    assert tools["look_up"]["annotations"] == {"readOnlyHint": True, "destructiveHint": False}


def test_check_names_the_tools_registered_without_labels() -> None:
    site = MCPSite(name="labels-check")

    @site.tool()
    def bare() -> str:
        return ""

    @site.tool(title="Untitled hints")
    def titled() -> str:
        return ""

    @site.tool(title="Read", annotations={"readOnlyHint": True})
    def labelled() -> str:
        return ""

    messages = [m for m in site.check() if m.id == "mcp_django.W131"]
    assert sorted(m.msg.split("'")[1] for m in messages) == ["bare", "titled"]
    bare_message = next(m for m in messages if "'bare'" in m.msg)
    assert "a title and readOnlyHint or destructiveHint" in bare_message.msg
    assert bare_message.hint is not None and 'title="Bare"' in bare_message.hint


def test_check_warns_of_names_hosted_clients_refuse() -> None:
    site = MCPSite(name="labels-names")
    long_name = "x" * 65

    @site.tool(name=long_name, title="Long", annotations={"readOnlyHint": True})
    def long() -> str:
        return ""

    @site.tool(name="with.dot", title="Dotted", annotations={"readOnlyHint": True})
    def dotted() -> str:
        return ""

    refused = {m.msg.split("'")[1]: m for m in label_checks(site.get_tools())}
    assert set(refused) == {long_name, "with.dot"}
    assert all(m.id == "mcp_django.W130" for m in refused.values())
    assert "@site.tool(name=...)" in (refused["with.dot"].hint or "")


def test_a_model_tool_prefix_names_generated_tools_shorter() -> None:
    site = MCPSite(name="labels-prefix")

    class Groups(ModelMCP[Group]):
        tools = ("search", "get", "create", "update", "delete")
        tool_prefix = "groups"

    site.register(Group, Groups)
    names = {t.name for t in site.get_tools()}
    assert names == {f"groups_{a}" for a in ("search", "get", "create", "update", "delete")}
    for tool in site.get_tools():
        assert_labelled(tool.definition())
    search = next(t for t in site.get_tools() if t.name == "groups_search")
    assert search.definition()["title"] == "Search groups"
