"""Every field type Django ships, and the user model, as generated tools anyone may use (the
server runs without authentication): what the official client must accept. And function tools
whose results are not one plain model (lists, optionals, unions, a recursive model, a
dataclass, a TypedDict): the client validates each result against its outputSchema."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from mcp_django import ModelMCP, site
from tests.result_shapes import Author, Book, Loan, Magazine, Node, Shelf
from tests.testapp.models import Specimen

TOOLS = ["search", "get", "create", "update", "delete"]


class OpenMCP(ModelMCP):
    tools = TOOLS

    def _has_perm(self, request: Any, action: str) -> bool:
        return True


@site.register(Specimen)
class SpecimenMCP(OpenMCP):
    filter_fields = ["price", "owner"]


@site.register(get_user_model())
class UserMCP(OpenMCP):
    fields = ["username", "first_name", "last_name", "email", "is_active"]


DUNE = Book(title="Dune", author=Author(name="Herbert"))


@site.tool
def shapes_books(books: list[Book]) -> list[Book]:
    """The books given, as they came: a list of models in, a list of models out."""
    return books


@site.tool
def shapes_maybe_book(present: bool) -> Book | None:
    """A book, or none."""
    return DUNE if present else None


@site.tool
def shapes_book_or_magazine(magazine: bool) -> Book | Magazine:
    """A book or a magazine."""
    return Magazine(issue=7) if magazine else DUNE


@site.tool
def shapes_book() -> Book:
    """A book, whose author is a model too."""
    return DUNE


@site.tool
def shapes_tree(depth: int) -> Node:
    """A tree of the given depth: a model whose children are the same model."""
    tree = Node(name="leaf")
    for level in range(depth):
        tree = Node(name=f"level {level}", children=[tree])
    return tree


@site.tool
def shapes_forest(tree: Node | None = None) -> list[Node]:
    """The tree given, in a list (an empty one without)."""
    return [tree] if tree is not None else []


@site.tool
def shapes_shelf(label: str) -> Shelf:
    """A shelf (a dataclass) holding one book."""
    return Shelf(label=label, books=[DUNE])


@site.tool
def shapes_loans(days: int) -> list[Loan]:
    """Loans (a TypedDict) of one book."""
    return [{"book": DUNE, "days": days}]


@site.tool
def shapes_loan(days: int) -> Loan:
    """A loan (a TypedDict) of one book."""
    return {"book": DUNE, "days": days}


User = get_user_model()


@site.tool
def model_rows_users(prefix: str) -> list[User]:  # type: ignore[valid-type]
    """Users whose name starts with ``prefix``: model rows, read through UserMCP."""
    return list(User.objects.filter(username__startswith=prefix).order_by("pk"))


@site.tool
def model_rows_user(username: str) -> User:  # type: ignore[valid-type]
    """One user: a model row, read through UserMCP."""
    return User.objects.get(username=username)
