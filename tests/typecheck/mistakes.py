"""Mistakes a tool author can make: mypy must report each line marked ``# error: <code>``, and
nothing else (tests/test_typing.py). Were the public API ``Any``, none would be reported."""

from __future__ import annotations

import mcp_django
from mcp_django import Context, ModelMCP, site
from mcp_django.conf import mcp_settings

from .models import Book, Loan


@site.tool()
async def slow(ctx: Context, steps: int) -> str:
    await ctx.report_progress("half")  # error: arg-type
    await ctx.elicit(42)  # error: call-arg, arg-type
    return "done"


@site.tool
def lend(book_id: int, days: int = 14) -> int:
    return book_id + days


@site.prompt()
def greet(name: str) -> str:
    return f"Hello {name}"


lend("one")  # error: arg-type
lend(1, weeks=2)  # error: call-arg
greeting: int = greet("Ada")  # error: assignment
loaned: str = lend(1)  # error: assignment


async def awaits_the_tool(ctx: Context) -> None:
    steps: int = await slow(ctx, 3)  # error: assignment
    print(steps)


@site.tool(annotations={"readOnlyHint": "yes"})  # error: call-overload, untyped-decorator
def misannotated() -> None: ...


@site.tool(annotations={"readonlyHint": True})  # error: call-overload, untyped-decorator
def misspelt_annotation() -> None: ...


# The expected errors must stay on the line mypy reports them on.
# fmt: off
@site.tool(icons=[{"url": "https://example.com/i.png"}])  # error: typeddict-item, typeddict-unknown-key
def iconless() -> None: ...
# fmt: on


@site.resource("library://count", mime_tipe="text/plain")  # error: call-arg
def count() -> int:
    return 1


class LoanMCP(ModelMCP[Loan]):
    pass


def rows(mcp: LoanMCP, request: object) -> None:
    first: Book | None = mcp.get_queryset(request).first()  # error: arg-type, assignment
    print(first)


other_site = mcp_django.sitee  # error: attr-defined
limit = mcp_settings.max_body_sise  # error: attr-defined
site.register(Book, Loan)  # error: arg-type
