"""ChatGPT's ``search`` and ``fetch`` tools: the documented shape, permission and row filters."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from mcp_django.registry.search_fetch import MAX_INPUT
from mcp_django.registry.sites import site
from mcp_django.testing import MCPTestClient
from tests.conftest import make_user, mcp_settings_fixture
from tests.testapp.models import Note

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_channel_layer", "django_authentication"),
]
django_authentication = mcp_settings_fixture(AUTHENTICATION="django", SERVER_NAME="t")

# The shapes OpenAI documents for connectors and deep research, written from the docs.
SEARCH_SCHEMA = {
    "type": "object",
    "required": ["results"],
    "additionalProperties": False,
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "title", "url"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string"},
                    "title": {"type": "string"},
                    "url": {"type": "string"},
                },
            },
        }
    },
}
FETCH_SCHEMA = {
    "type": "object",
    "required": ["id", "title", "text", "url"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "text": {"type": "string"},
        "url": {"type": "string"},
        "metadata": {
            "anyOf": [
                {"type": "object", "additionalProperties": {"type": "string"}},
                {"type": "null"},
            ]
        },
    },
}


@pytest.fixture
def search_fetch_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(site, "search_fetch", True, raising=False)


async def _client_for(user: User) -> MCPTestClient:
    client = MCPTestClient()
    await client.force_login(user)
    await client.initialize()
    return client


def _payload(result: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("isError"), result
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
    payload = json.loads(result["content"][0]["text"])
    jsonschema.validate(payload, schema)
    assert result["structuredContent"] == payload
    return payload


async def test_off_by_default_the_pair_is_not_listed() -> None:
    alice = await sync_to_async(make_user)("alice", "view_note")
    names = {t["name"] for t in (await (await _client_for(alice)).call("tools/list"))["tools"]}
    assert "search" not in names and "fetch" not in names


@pytest.mark.usefixtures("search_fetch_on")
async def test_listed_read_only_with_the_documented_inputs() -> None:
    alice = await sync_to_async(make_user)("alice", "view_note")
    tools = {t["name"]: t for t in (await (await _client_for(alice)).call("tools/list"))["tools"]}
    for name, arg in (("search", "query"), ("fetch", "id")):
        tool = tools[name]
        assert tool["title"] == name.capitalize()
        assert tool["inputSchema"]["required"] == [arg]
        assert tool["annotations"]["readOnlyHint"] is True
        assert tool["annotations"]["destructiveHint"] is False
        assert tool["annotations"]["openWorldHint"] is False


@pytest.mark.usefixtures("search_fetch_on")
async def test_search_and_fetch_follow_the_row_filter() -> None:
    alice = await sync_to_async(make_user)("alice", "view_note")
    bob = await sync_to_async(make_user)("bob", "view_note")
    mine = await Note.objects.acreate(owner=alice, title="apple pie", body="sweet")
    theirs = await Note.objects.acreate(owner=bob, title="apple tart", body="sour")
    client = await _client_for(alice)

    found = _payload(await client.call_tool("search", {"query": "apple"}), SEARCH_SCHEMA)
    ids = [r["id"] for r in found["results"]]
    assert ids == [f"testapp.note:{mine.pk}"]
    # Note has no get_absolute_url and no admin registration here: its resource URI.
    assert found["results"][0]["url"] == f"django://testapp/note/{mine.pk}"
    assert found["results"][0]["title"] == "apple pie"

    doc = _payload(await client.call_tool("fetch", {"id": ids[0]}), FETCH_SCHEMA)
    assert doc["title"] == "apple pie" and "sweet" in doc["text"]
    assert doc["metadata"] == {"model": "testapp.note", "pk": str(mine.pk)}

    hidden = await client.call_tool("fetch", {"id": f"testapp.note:{theirs.pk}"})
    missing = await client.call_tool("fetch", {"id": "testapp.note:999999"})
    assert hidden["isError"] and missing["isError"]
    text = hidden["content"][0]["text"]
    assert text.replace(str(theirs.pk), "X") == missing["content"][0]["text"].replace("999999", "X")


@pytest.mark.usefixtures("search_fetch_on")
async def test_without_view_permission_a_model_gives_nothing() -> None:
    alice = await sync_to_async(make_user)("alice")
    note = await Note.objects.acreate(owner=alice, title="apple", body="")
    client = await _client_for(alice)
    found = _payload(await client.call_tool("search", {"query": "apple"}), SEARCH_SCHEMA)
    assert found == {"results": []}
    result = await client.call_tool("fetch", {"id": f"testapp.note:{note.pk}"})
    assert result["isError"]


@pytest.mark.usefixtures("search_fetch_on")
@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("search", {}),
        ("search", {"query": "x" * (MAX_INPUT + 1)}),
        ("fetch", {}),
        ("fetch", {"id": 3}),
        ("fetch", {"id": "not-an-id"}),
    ],
)
async def test_bad_input_is_a_clear_tool_error(name: str, arguments: dict[str, Any]) -> None:
    alice = await sync_to_async(make_user)("alice", "view_note")
    result = await (await _client_for(alice)).call_tool(name, arguments)
    assert result["isError"] is True
    assert result["content"][0]["text"]


@pytest.mark.usefixtures("search_fetch_on")
async def test_the_url_is_the_rows_absolute_url_when_the_model_has_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Note, "get_absolute_url", lambda self: f"/notes/{self.pk}/", raising=False)
    alice = await sync_to_async(make_user)("alice", "view_note")
    note = await Note.objects.acreate(owner=alice, title="apple", body="")
    client = await _client_for(alice)
    found = _payload(await client.call_tool("search", {"query": "apple"}), SEARCH_SCHEMA)
    assert found["results"][0]["url"] == f"http://testserver/notes/{note.pk}/"
    doc = _payload(await client.call_tool("fetch", {"id": found["results"][0]["id"]}), FETCH_SCHEMA)
    assert doc["url"] == f"http://testserver/notes/{note.pk}/"


class Handbook:
    """A project's own documents, readable by signed-in users only."""

    name = "handbook"
    pages = {"leave": ("Leave policy", "Ask two weeks ahead.")}

    def search(self, request: Any, query: str, limit: int) -> list[dict[str, str]]:
        if not request.user.is_authenticated:
            return []
        return [
            {"id": key, "title": title, "url": f"https://intra.example/{key}"}
            for key, (title, _) in self.pages.items()
            if query.lower() in title.lower()
        ][:limit]

    def fetch(self, request: Any, id: str) -> dict[str, Any] | None:
        if not request.user.is_authenticated or id not in self.pages:
            return None
        title, text = self.pages[id]
        return {"title": title, "text": text, "url": f"https://intra.example/{id}"}


@pytest.mark.usefixtures("search_fetch_on")
async def test_a_providers_documents_are_searched_and_fetched_by_namespaced_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(site, "search_providers", [Handbook()])
    alice = await sync_to_async(make_user)("alice", "view_note")
    client = await _client_for(alice)
    found = _payload(await client.call_tool("search", {"query": "leave"}), SEARCH_SCHEMA)
    assert found["results"] == [
        {"id": "handbook:leave", "title": "Leave policy", "url": "https://intra.example/leave"}
    ]
    doc = _payload(await client.call_tool("fetch", {"id": "handbook:leave"}), FETCH_SCHEMA)
    assert doc["text"] == "Ask two weeks ahead." and doc["metadata"] == {}
    assert (await client.call_tool("fetch", {"id": "handbook:nope"}))["isError"] is True
