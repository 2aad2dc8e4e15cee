"""The ``myapp/mcp.py`` of docs/howto/tools.md (once the README's), typed as a tool author would
type it: ``mypy --strict`` with django-stubs must find no error here (tests/test_typing.py)."""

from __future__ import annotations

from typing import Annotated, Any

from django.db.models import QuerySet
from django.http import HttpRequest
from pydantic import BaseModel, Field

from mcp_django import (
    Context,
    Icon,
    Message,
    ModelMCP,
    ResourceNotFoundError,
    ToolAnnotations,
    ToolError,
    register,
    site,
)

from .models import Book, Loan


class Availability(BaseModel):  # the return annotation becomes the tool's outputSchema
    isbn: str
    available: int


@site.tool(annotations={"readOnlyHint": True})
def book_availability(isbn: Annotated[str, Field(pattern=r"^\d{13}$")]) -> Availability:
    """Tell how many copies of a book are on the shelf."""
    book = Book.objects.filter(isbn=isbn).first()
    if book is None:
        raise ToolError(f"No book with ISBN {isbn}.")
    return Availability(isbn=isbn, available=book.copies)


@site.tool()
async def renew_loan(ctx: Context, loan_id: int, days: int = 14) -> str:
    """Extend a loan."""
    await ctx.report_progress(0, 2, "Looking up the loan")
    loan = await Loan.objects.aget(pk=loan_id)
    await ctx.log.info(f"Renewing loan {loan.pk} for {ctx.user}")
    await ctx.report_progress(2, 2, "Renewed")
    return "ok"


class Confirmation(BaseModel):
    confirm: bool


@site.tool
async def return_book(ctx: Context, loan_id: int) -> str:
    """Return a book, once the user confirms."""
    answer = await ctx.elicit("Return this book?", Confirmation)
    if answer.action != "accept":
        return "kept"
    await Loan.objects.filter(pk=loan_id).adelete()
    return "returned"


def loans_of(user: Any) -> QuerySet[Loan]:
    return Loan.objects.all() if user.is_staff else Loan.objects.filter(member__user_id=user.pk)


def complete_loan_id(typed: str, ctx: Context) -> list[str]:
    return [
        str(pk)
        for pk in loans_of(ctx.user).filter(pk__startswith=typed).values_list("pk", flat=True)[:20]
    ]


@site.resource(
    "library://loans/{loan_id}",
    mime_type="application/json",
    complete={"loan_id": complete_loan_id},
)
def loan(ctx: Context, loan_id: int) -> dict[str, Any]:
    """One of your loans (an RFC 6570 template: its variables are the arguments)."""
    found = loans_of(ctx.user).filter(pk=loan_id).first()
    if found is None:
        raise ResourceNotFoundError(f"library://loans/{loan_id}")
    return {"book": found.book.title, "due_on": found.due_on}


@site.resource("library://catalogue/stats")
def stats() -> dict[str, int]:
    """A resource with a fixed URI."""
    return {"books": Book.objects.count()}


@site.prompt(
    complete={"interest": lambda typed: [g for g in ("fantasy", "history") if g.startswith(typed)]}
)
def recommend_books(interest: str, level: str = "casual") -> list[Message]:
    """Ask for book recommendations."""
    return [Message(f"I am a {level} reader interested in {interest}. What should I read?")]


@site.prompt
def suggest(topic: str) -> str:
    """A prompt registered without parentheses."""
    return f"Suggest a book about {topic}."


@site.register(Book)
class BookMCP(ModelMCP):
    fields = ["title", "isbn"]
    search_fields = ["title"]
    tools = ["search", "get", "update"]


@register(Loan)  # generic over its model: get_queryset() and self.model know it is Loan
class LoanMCP(ModelMCP[Loan]):
    fields = ["book", "due_on"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Loan]:
        return super().get_queryset(request).select_related("book")


@site.tool(
    annotations={"readOnlyHint": True, "openWorldHint": False},
    icons=[{"src": "https://example.com/book.png", "sizes": ["48x48"]}],
)
def shelf_count() -> int:
    """How many books the library holds."""
    return Book.objects.count()


READ_ONLY: ToolAnnotations = {"readOnlyHint": True}
BOOK_ICON: Icon = {"src": "data:image/png;base64,iVBORw0KGgo=", "theme": "light"}


@site.tool(
    name="count_loans", annotations=READ_ONLY, icons=[BOOK_ICON], permission="library.view_loan"
)
def count_loans() -> int:
    """How many loans are open."""
    return Loan.objects.count()


# A decorated function keeps its signature and its return type.
availability: Availability = book_availability("9780000000000")
stats_now: dict[str, int] = stats()
prompt_text: str = suggest("rivers")
shelf: int = shelf_count()
