"""Function tools' schemas keep every ``$ref`` resolvable from the schema's root, whatever the
annotation: a result that is not an object is wrapped as ``{"result": value}``, and pydantic's
``$defs`` must then sit beside ``properties``, not under ``properties.result``, or the official
Python client refuses every call (``PointerToNowhere: '/$defs/Book' does not exist``).

Each schema is checked as the official client checks it: the 2020-12 metaschema, then the
result's actual ``structuredContent`` (or a call's arguments) validated against it with an
empty ``referencing`` registry, so a ``$ref`` that leads nowhere fails."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

import pytest
from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field, create_model
from referencing import Registry

from mcp_django.registry.functions import FunctionTool
from tests.result_shapes import Author, Book, Loan, Magazine, Node, Shelf
from tests.test_schemas import assert_valid_for_clients

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool


# Two models named Item, from two modules: pydantic names their definitions apart.
ItemA = create_model("Item", __module__="shop.a", sku=(str, ...))
ItemB = create_model("Item", __module__="shop.b", code=(int, ...))

BOOK = Book(title="Dune", author=Author(name="Herbert"))
BOOK_JSON = {"title": "Dune", "author": {"name": "Herbert"}}
TREE = Node(name="root", children=[Node(name="leaf")])
TREE_JSON = {"name": "root", "children": [{"name": "leaf", "children": []}]}
SHELF = Shelf(label="SF", books=[BOOK])
SHELF_JSON = {"label": "SF", "books": [BOOK_JSON]}
LOAN: Loan = {"book": BOOK, "days": 14}
LOAN_JSON = {"book": BOOK_JSON, "days": 14}
Pet = Annotated[Cat | Dog, Field(discriminator="kind")]

# (annotation, value the tool returns, the structuredContent it answers)
RESULTS = {
    "list of models": (list[Book], [BOOK], {"result": [BOOK_JSON]}),
    "optional model, present": (Book | None, BOOK, {"result": BOOK_JSON}),
    "optional model, absent": (Book | None, None, {"result": None}),
    "union of two models": (Book | Magazine, Magazine(issue=3), {"result": {"issue": 3}}),
    "union of two models, first": (Book | Magazine, BOOK, {"result": BOOK_JSON}),
    "nested model": (Book, BOOK, BOOK_JSON),
    "list of optional models": (list[Book | None], [None, BOOK], {"result": [None, BOOK_JSON]}),
    "dataclass": (Shelf, SHELF, SHELF_JSON),
    "list of dataclasses": (list[Shelf], [SHELF], {"result": [SHELF_JSON]}),
    "TypedDict": (Loan, LOAN, LOAN_JSON),
    "list of TypedDicts": (list[Loan], [LOAN], {"result": [LOAN_JSON]}),
    "dict of models": (dict[str, Book], {"dune": BOOK}, {"dune": BOOK_JSON}),
    "tuple": (tuple[Book, int], (BOOK, 2), {"result": [BOOK_JSON, 2]}),
    "Literal": (Literal["on loan", "on shelf"], "on loan", {"result": "on loan"}),
    "recursive model": (Node, TREE, TREE_JSON),
    "list of recursive models": (list[Node], [TREE], {"result": [TREE_JSON]}),
    "optional recursive model": (Node | None, TREE, {"result": TREE_JSON}),
    "same class name from two modules": (
        list[ItemA | ItemB],
        [ItemA(sku="x"), ItemB(code=1)],
        {"result": [{"sku": "x"}, {"code": 1}]},
    ),
    "generic container": (
        Page[Book],
        Page[Book](items=[BOOK], total=1),
        {"items": [BOOK_JSON], "total": 1},
    ),
    "list of generic containers": (
        list[Page[Book]],
        [Page[Book](items=[BOOK], total=1)],
        {"result": [{"items": [BOOK_JSON], "total": 1}]},
    ),
    "discriminated union": (
        list[Pet],
        [Cat(lives=9), Dog(good=True)],
        {"result": [{"kind": "cat", "lives": 9}, {"kind": "dog", "good": True}]},
    ),
}

# (annotation of the one parameter, argument a client sends)
ARGUMENTS = {
    "list of models": (list[Book], [BOOK_JSON]),
    "optional recursive model": (Node | None, TREE_JSON),
    "union of two models": (Book | Magazine, {"issue": 3}),
    "dict of models": (dict[str, Book], {"dune": BOOK_JSON}),
    "dataclass": (Shelf, SHELF_JSON),
    "TypedDict": (Loan, LOAN_JSON),
    "tuple": (tuple[Book, int], [BOOK_JSON, 2]),
    "generic container": (list[Page[Book]], [{"items": [BOOK_JSON], "total": 1}]),
    "same class name from two modules": (tuple[ItemA, ItemB], [{"sku": "x"}, {"code": 1}]),
    "discriminated union": (list[Pet], [{"kind": "dog", "good": False}]),
    "Literal": (Literal["on loan", "on shelf"], "on shelf"),
}


def client_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The validator the official Python client builds for an outputSchema."""
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=Registry())


def returning(annotation: Any) -> FunctionTool:
    def tool() -> None:
        """A tool that returns its annotation's value."""

    tool.__annotations__ = {"return": annotation}
    return FunctionTool(tool, name="shape")


def taking(annotation: Any) -> FunctionTool:
    def tool(value: Any) -> None:
        """A tool that takes one argument."""

    tool.__annotations__ = {"value": annotation, "return": None}
    return FunctionTool(tool, name="shape")


@pytest.mark.parametrize(("annotation", "value", "expected"), RESULTS.values(), ids=RESULTS.keys())
def test_structured_content_validates_against_the_output_schema(
    annotation: Any, value: Any, expected: dict[str, Any]
) -> None:
    tool = returning(annotation)
    schema = tool.definition()["outputSchema"]
    assert schema["type"] == "object"  # MCP's Tool.outputSchema: an object schema
    assert_valid_for_clients(schema)  # every $ref resolves, even those this value does not reach
    result = tool.to_result(value)
    assert result["structuredContent"] == expected
    client_validator(schema).validate(result["structuredContent"])


@pytest.mark.parametrize(("annotation", "argument"), ARGUMENTS.values(), ids=ARGUMENTS.keys())
def test_arguments_validate_against_the_input_schema(annotation: Any, argument: Any) -> None:
    tool = taking(annotation)
    schema = tool.definition()["inputSchema"]
    assert_valid_for_clients(schema)
    client_validator(schema).validate({"value": argument})
    tool.signature.validate({"value": argument})  # and the server takes what the schema allows


def test_a_wrapped_result_keeps_its_definitions_at_the_root() -> None:
    schema = returning(list[Book]).output_schema
    assert schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Book"}}},
        "required": ["result"],
        "$defs": {
            "Author": {
                "type": "object",
                "title": "Author",
                "properties": {"name": {"title": "Name", "type": "string"}},
                "required": ["name"],
            },
            "Book": {
                "type": "object",
                "title": "Book",
                "properties": {
                    "title": {"title": "Title", "type": "string"},
                    "author": {"$ref": "#/$defs/Author"},
                },
                "required": ["title", "author"],
            },
        },
    }


def test_a_recursive_model_is_an_object_result_like_any_other_model() -> None:
    # pydantic describes it as {"$ref": "#/$defs/Node", "$defs": ...}: not wrapped all the same.
    tool = returning(Node)
    assert not tool.wrap_output
    assert tool.output_schema["properties"]["children"] == {
        "default": [],
        "items": {"$ref": "#/$defs/Node"},
        "title": "Children",
        "type": "array",
    }
    assert "$ref" not in tool.output_schema and "title" not in tool.output_schema


def test_an_explicit_input_schema_whose_ref_leads_nowhere_is_refused_at_registration() -> None:
    schema = {
        "type": "object",
        "properties": {
            "book": {"$ref": "#/$defs/Book"},
            "shelf": {"$ref": "https://example.com/shelf.json"},
        },
    }
    with pytest.raises(
        ImproperlyConfigured, match=r"'lend'.*#/\$defs/Book, https://example.com/shelf.json"
    ):
        FunctionTool(lambda book, shelf: None, name="lend", input_schema=schema)


def test_an_explicit_input_schema_whose_refs_resolve_is_kept() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "author": {
                "$anchor": "writer",
                "type": "object",
                "properties": {"name": {"type": "string"}},
            }
        },
        "properties": {
            "author": {"$ref": "#/$defs/author"},
            "coauthor": {"$ref": "#writer"},
            # Inside a subschema with its own $id, "#/$defs/..." is that subschema's.
            "book": {
                "$id": "https://example.com/book",
                "$defs": {"isbn": {"type": "string"}},
                "properties": {"isbn": {"$ref": "#/$defs/isbn"}},
            },
        },
    }
    tool = FunctionTool(lambda author, coauthor, book: None, name="lend", input_schema=schema)
    assert tool.definition()["inputSchema"] == schema
