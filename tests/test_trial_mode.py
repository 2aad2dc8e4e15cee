"""Trial mode (AUTHENTICATION = "none"): model entries open to anonymous callers as the README shows."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient
from mcp_django.transport.consumers import MCPConsumer
from tests.testapp.models import Tag
from tests.trial_mcp import TrialTagMCP

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer"),
]


async def _tool_names_and_search(model_mcp: type | None) -> tuple[list[str], dict]:
    trial = MCPSite(name="trial")
    trial.register(Tag, model_mcp) if model_mcp else trial.register(Tag)

    @trial.tool
    def ping() -> str:
        """A function tool, open to everyone, so that the site always serves tools/list."""
        return "pong"

    client = MCPTestClient(MCPConsumer.as_asgi(site=trial))
    await client.initialize()
    names = [tool["name"] for tool in (await client.call("tools/list"))["tools"]]
    search = [name for name in names if name.endswith("search")]
    answer = await client.call_tool(search[0], {}) if search else {}
    return names, answer


async def test_a_model_mcp_that_admits_anonymous_viewers_is_listed_and_answers_in_trial_mode():
    await sync_to_async(Tag.objects.create)(slug="open-sesame")

    names, answer = await _tool_names_and_search(TrialTagMCP)

    assert any(name.endswith("search") for name in names)
    assert "open-sesame" in str(answer)


async def test_a_plain_model_mcp_is_hidden_from_anonymous_callers_in_trial_mode():
    names, _ = await _tool_names_and_search(None)

    assert names == ["ping"]
