"""The result shapes that are not one plain model: nested, recursive, a dataclass, a TypedDict.
Shared by the in-process schema tests (tests/test_result_schemas.py) and the test project the
official client calls (tests/e2e/schemas_app/mcp.py)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic takes typing's only from Python 3.12


class Author(BaseModel):
    name: str


class Book(BaseModel):
    title: str
    author: Author


class Magazine(BaseModel):
    issue: int


class Node(BaseModel):
    name: str
    children: list[Node] = []


@dataclass
class Shelf:
    label: str
    books: list[Book]


class Loan(TypedDict):
    book: Book
    days: int
