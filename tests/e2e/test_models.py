"""Django data over MCP against the live example site, as two users with different permissions.

``librarian`` is staff with the catalogue and desk permissions; ``reader`` is a member with no
permissions at all. Each sees and changes exactly what Django allows them, and a row they may
not see answers like a row that does not exist.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import MCPError

from .conftest import ExampleServer, connect_as, tool_names

pytestmark = pytest.mark.e2e


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_each_user_lists_only_the_tools_their_permissions_allow(
    example_server_django_auth: ExampleServer, mode: str
) -> None:
    async with connect_as(example_server_django_auth, "librarian", mode) as client:
        librarian = await tool_names(client)
    async with connect_as(example_server_django_auth, "reader", mode) as client:
        reader = await tool_names(client)
    assert {
        "library_book_search",
        "library_book_get",
        "library_book_create",
        "library_book_update",
    } <= librarian
    assert {
        "library_loan_renew_two_weeks",
        "library_loan_mark_returned",
        "library_book_add_copy",
    } <= librarian
    assert {"library_book_search", "library_book_get"} <= reader
    assert not reader & {
        "library_book_create",
        "library_book_update",
        "library_loan_renew_two_weeks",
        "library_loan_search",
    }


async def test_books_are_listed_read_and_searched_as_resources(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "reader") as client:
        listed = await client.list_resources()
        books = [r for r in listed.resources if str(r.uri).startswith("django://library/book/")]
        assert books, "the catalogue is public: books are listed"
        read = await client.read_resource(str(books[0].uri))
        found = await client.call_tool("library_book_search", {"query": "Time Machine", "limit": 5})
    assert json.loads(read.contents[0].text)["title"]
    assert found.structured_content is not None
    assert [b["title"] for b in found.structured_content["items"]] == ["The Time Machine"]


async def test_librarian_creates_a_book_after_a_validation_error_then_updates_it(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "librarian") as client:
        author = (
            await client.call_tool("library_author_search", {"query": "Wells"})
        ).structured_content["items"][0]
        bad = await client.call_tool(
            "library_book_create",
            {
                "title": "Kipps",
                "author": author["id"],
                "isbn": "12",
                "published": 1905,
                "genre": "poetry?",
            },
        )
        good = await client.call_tool(
            "library_book_create",
            {
                "title": "Kipps",
                "author": author["id"],
                "isbn": "9780000099991",
                "published": 1905,
                "genre": "fiction",
                "copies": 1,
            },
        )
        assert good.structured_content is not None, text_of(good)
        updated = await client.call_tool(
            "library_book_update", {"pk": good.structured_content["id"], "copies": 3}
        )
    assert bad.is_error
    assert "genre" in text_of(bad)
    assert not good.is_error
    assert updated.structured_content["copies"] == 3


async def test_admin_action_runs_with_the_admin_permissions(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "librarian") as client:
        loans = await client.call_tool("library_loan_search", {"limit": 50})
        open_loan = next(
            item for item in loans.structured_content["items"] if item["returned_on"] is None
        )
        renewed = await client.call_tool("library_loan_renew_two_weeks", {"pks": [open_loan["id"]]})
    assert not renewed.is_error, text_of(renewed)
    assert renewed.structured_content["affected"] == 1


async def test_reader_is_refused_writes_and_admin_actions(
    example_server_django_auth: ExampleServer,
) -> None:
    async with connect_as(example_server_django_auth, "reader") as client:
        with pytest.raises(MCPError) as create:
            await client.call_tool("library_book_create", {"title": "x"})
        with pytest.raises(MCPError) as action:
            await client.call_tool("library_loan_renew_two_weeks", {"pks": [1]})
    assert "Unknown tool" in str(create.value)
    assert "Unknown tool" in str(action.value)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_forbidden_row_is_indistinguishable_from_a_missing_one(
    example_server_django_auth: ExampleServer, mode: str
) -> None:
    async with connect_as(example_server_django_auth, "librarian") as client:
        loans = await client.call_tool("library_loan_search", {"limit": 1})
        loan_id = loans.structured_content["items"][0]["id"]
    errors = []
    async with connect_as(example_server_django_auth, "reader", mode) as client:
        for pk in (loan_id, 987654):
            with pytest.raises(MCPError) as exc:
                await client.read_resource(f"django://library/loan/{pk}")
            errors.append((exc.value.error.code, str(exc.value).replace(str(pk), "<pk>")))
    assert errors[0] == errors[1]
    assert errors[0][0] == (
        -32602 if mode == "2026-07-28" else -32002
    )  # -32002 is retired in 2026-07-28
