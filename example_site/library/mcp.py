"""The library's MCP tools, resources and prompts (autodiscovered by mcp_django, like admin.py).

Sync functions run in Django's thread pool, so they use the ORM directly. Async ones (those
that talk back through ``ctx`` while they work) use the async ORM, or ``sync_to_async`` around
a ``services`` function when they need a transaction.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from pydantic import BaseModel, Field

from mcp_django import UI, Context, EmbeddedResource, Message, ModelMCP, ToolError, ToolResult, site
from mcp_django.exceptions import ResourceNotFoundError

from . import services
from .models import Author, Book, Genre, Loan, Member, today

ISBN = Annotated[str, Field(description="The book's ISBN-13 (13 digits).", pattern=r"^\d{13}$")]
Level = Literal["casual", "enthusiast", "scholar"]
LEVELS: tuple[str, ...] = ("casual", "enthusiast", "scholar")
# OAuth (MCP_AUTH=oauth): every request needs library:read (REQUIRED_SCOPES in settings.py);
# what changes loans or the catalogue needs library:write too, and a token without it gets a
# 403 step-up challenge naming it.
WRITE = ["library:write"]


# -- what the tools return (each becomes the tool's outputSchema) -----------------------------


class BookOut(BaseModel):
    isbn: str
    title: str
    author: str
    published: int
    genre: str
    copies: int
    available: int = Field(description="Copies on the shelf right now.")
    uri: str = Field(description="The library://books/{isbn} resource with the full record.")


class SearchResults(BaseModel):
    query: str
    genre: str | None
    total: int = Field(
        description="How many books matched (more than returned when over the limit)."
    )
    books: list[BookOut]


class Availability(BaseModel):
    isbn: str
    title: str
    copies: int
    on_loan: int
    available: int
    next_due_on: date | None = Field(
        description="The earliest due date of the copies on loan, if any."
    )


class LoanOut(BaseModel):
    loan_id: int
    isbn: str
    title: str
    member: str
    borrowed_on: date
    due_on: date
    returned_on: date | None
    overdue: bool


class MemberLoans(BaseModel):
    member: str
    max_loans: int
    loans: list[LoanOut]


def book_uri(isbn: str) -> str:
    return f"library://books/{isbn}"


def book_out(book: Book) -> BookOut:
    """``book`` needs ``author`` loaded and the ``with_availability()`` annotations."""
    return BookOut(
        isbn=book.isbn,
        title=book.title,
        author=book.author.name,
        published=book.published,
        genre=book.genre,
        copies=book.copies,
        available=book.available,
        uri=book_uri(book.isbn),  # type: ignore[attr-defined]
    )


def loan_out(loan: Loan) -> LoanOut:
    """``loan`` needs ``book`` and ``member__user`` loaded."""
    return LoanOut(
        loan_id=loan.pk,
        isbn=loan.book.isbn,
        title=loan.book.title,
        member=loan.member.user.get_username(),
        borrowed_on=loan.borrowed_on,
        due_on=loan.due_on,
        returned_on=loan.returned_on,
        overdue=loan.is_overdue,
    )


def may_act_for(user: Any, username: str) -> None:
    """Members act for themselves; staff for anyone. Without authentication (an AnonymousUser), anyone."""
    if not user.is_authenticated or user.is_staff:
        return
    if user.get_username() != username:
        raise ToolError(
            f"You are signed in as {user.get_username()!r} and can only manage your own loans."
        )


# -- tools ------------------------------------------------------------------------------------


@site.tool(title="Search the catalogue", annotations={"readOnlyHint": True, "openWorldHint": False})
def search_books(
    # Bounded: every word is one more filter with a join, and SQLite refuses a LIKE pattern
    # past 50,000 bytes (a client's long query was a logged OperationalError, not a clear error).
    query: Annotated[
        str,
        Field(
            max_length=200,
            description="Words to find in the title, author, summary or ISBN; empty lists everything.",
        ),
    ] = "",
    genre: Annotated[Genre | None, Field(description="Only books of this genre.")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="At most this many books.")] = 10,
) -> SearchResults:
    """Search the library catalogue by words and genre, with how many copies are on the shelf."""
    books = Book.objects.select_related("author").search(query).with_availability()
    if genre is not None:
        books = books.filter(genre=genre)
    return SearchResults(
        query=query,
        genre=genre.value if genre else None,
        total=books.count(),
        books=[book_out(b) for b in books[:limit]],
    )


#: An MCP App (docs/howto/apps.md): hosts that support the extension show the availability with
#: a Borrow button, which calls borrow_book through the host, as the same user.
AVAILABILITY_APP = UI("library/availability.html", title="Book availability", prefers_border=True)


@site.tool(
    title="Check availability",
    annotations={"readOnlyHint": True, "openWorldHint": False},
    ui=AVAILABILITY_APP,
)
def book_availability(isbn: ISBN) -> Availability:
    """Tell how many copies of a book are on the shelf, and when the next one is due back."""
    book = Book.objects.with_availability().filter(isbn=isbn).first()
    if book is None:
        raise ToolError(f"No book with ISBN {isbn} in the catalogue.")
    next_due = book.loans.open().order_by("due_on").values_list("due_on", flat=True).first()
    return Availability(
        isbn=book.isbn,
        title=book.title,
        copies=book.copies,
        on_loan=book.on_loan,  # type: ignore[attr-defined]
        available=book.available,
        next_due_on=next_due,  # type: ignore[attr-defined]
    )


@site.tool(title="A member's loans", annotations={"readOnlyHint": True, "openWorldHint": False})
def member_loans(
    ctx: Context,
    member_username: str,
    include_returned: Annotated[bool, Field(description="Also list past loans.")] = False,
) -> MemberLoans:
    """List a member's loans (open ones by default), with their ids for return_book and renew_loan."""
    may_act_for(ctx.user, member_username)  # who borrowed what is private
    member = Member.objects.select_related("user").filter(user__username=member_username).first()
    if member is None:
        raise ToolError(f"No library member with username {member_username!r}.")
    loans = member.loans.select_related("book", "member__user")
    if not include_returned:
        loans = loans.open()
    return MemberLoans(
        member=member_username, max_loans=member.max_loans, loans=[loan_out(loan) for loan in loans]
    )


@site.tool(
    title="Borrow a book",
    scopes=WRITE,
    annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
)
async def borrow_book(ctx: Context, isbn: ISBN, member_username: str) -> LoanOut:
    """Lend a copy of a book to a member, for three weeks."""
    may_act_for(ctx.user, member_username)
    await ctx.log.info(f"Lending {isbn} to {member_username}", logger="library")
    try:
        # The availability check and the insert need one transaction: sync code (see services).
        loan = await sync_to_async(services.borrow)(isbn, member_username)
    except services.LoanError as exc:
        await ctx.log.warning(str(exc), logger="library")
        raise ToolError(str(exc)) from None
    await ctx.log.info(f"Loan {loan.pk} is due on {loan.due_on.isoformat()}", logger="library")
    return loan_out(loan)


async def _get_loan(ctx: Context, loan_id: int) -> Loan:
    """The loan, if this user may act on it. A missing loan and someone else's get the same
    answer, so loan ids cannot be probed."""
    loan = await Loan.objects.select_related("book", "member__user").filter(pk=loan_id).afirst()
    try:
        if loan is None:
            raise ToolError
        may_act_for(ctx.user, loan.member.user.get_username())
    except ToolError:
        raise ToolError(f"No loan with id {loan_id} that you may manage.") from None
    return loan


@site.tool(
    title="Return a book",
    scopes=WRITE,
    annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
)
async def return_book(ctx: Context, loan_id: int) -> LoanOut:
    """Record that the book of a loan came back today."""
    loan = await _get_loan(ctx, loan_id)
    returned_on = today()
    # Conditional update: of two simultaneous returns, one wins and the other is told.
    if not await Loan.objects.filter(pk=loan.pk, returned_on__isnull=True).aupdate(
        returned_on=returned_on
    ):
        raise ToolError(f"Loan {loan_id} was already returned.")
    loan.returned_on = returned_on
    await ctx.log.info(f"{loan.book.title!r} is back on the shelf", logger="library")
    return loan_out(loan)


@site.tool(
    title="Renew a loan",
    scopes=WRITE,
    annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
)
async def renew_loan(
    ctx: Context,
    loan_id: int,
    days: Annotated[int, Field(ge=1, le=28, description="Days to add to the due date.")] = 14,
) -> LoanOut:
    """Extend a loan's due date (loans end at most 90 days after borrowing)."""
    await ctx.report_progress(0, 3, "Looking up the loan")
    loan = await _get_loan(ctx, loan_id)
    await ctx.report_progress(1, 3, "Checking the renewal rules")
    try:
        due_on = services.renewed_due_on(loan, days)
    except services.LoanError as exc:
        raise ToolError(str(exc)) from None
    await ctx.report_progress(2, 3, "Saving the new due date")
    if not await Loan.objects.filter(pk=loan.pk, returned_on__isnull=True).aupdate(due_on=due_on):
        raise ToolError(f"Loan {loan_id} was returned meanwhile; there is nothing to renew.")
    old_due_on, loan.due_on = loan.due_on, due_on
    await ctx.report_progress(3, 3, "Renewed")
    await ctx.log.info(
        f"Loan {loan_id} renewed: due {old_due_on.isoformat()} → {due_on.isoformat()}",
        logger="library",
    )
    return loan_out(loan)


# -- a long task: the catalogue export ----------------------------------------------------------

#: Books read per query: the export walks the catalogue in batches, never all of it at once.
EXPORT_BATCH = 10
#: The most books one export holds: the result travels in one message (and, as a task, in a row).
EXPORT_LIMIT = 2000
EXPORT_FIELDS = ("isbn", "title", "author", "published", "genre", "copies", "available")


class ExportFormat(BaseModel):
    format: Literal["csv", "json"] = Field(
        "csv", description="csv (one row per book) or json (a list of objects)."
    )


def export_rows(books: list[Book]) -> list[dict[str, Any]]:
    """``books`` need ``author`` loaded and the ``with_availability()`` annotations."""
    return [
        {
            "isbn": b.isbn,
            "title": b.title,
            "author": b.author.name,
            "published": b.published,
            "genre": b.genre,
            "copies": b.copies,
            "available": b.available,  # type: ignore[attr-defined]
        }
        for b in books
    ]


def render_export(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, ensure_ascii=False, indent=1)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


@site.tool(
    title="Export the catalogue",
    task="optional",
    annotations={"readOnlyHint": True, "openWorldHint": False},
)
async def export_catalogue(
    ctx: Context,
    genre: Annotated[
        Genre | None, Field(description="Only books of this genre; all by default.")
    ] = None,
) -> ToolResult:
    """Export the catalogue (or one genre) as CSV or JSON, asking which; long, so it runs as a
    durable task for clients that take tasks (docs/howto/tasks.md)."""
    books = Book.objects.select_related("author").with_availability().order_by("pk")
    if genre is not None:
        books = books.filter(genre=genre)
    matching = await books.acount()
    total = min(matching, EXPORT_LIMIT)
    if not total:
        return ToolResult(
            ["No books to export."], structured={"exported": 0, "matching": 0, "format": None}
        )
    await ctx.report_progress(0, total, f"{matching} books to export")
    # In a session this is an elicitation on the call's stream; in a task, an input request
    # (status input_required) that the client answers with tasks/update.
    answer = await ctx.elicit(
        f"Export {total} books: in which format?", ExportFormat, key="export_format"
    )
    if answer.action != "accept":
        return ToolResult(
            ["Export cancelled: nothing was exported."],
            structured={"exported": 0, "matching": matching, "format": None},
        )
    fmt = answer.data.format if isinstance(answer.data, ExportFormat) else "csv"
    rows: list[dict[str, Any]] = []
    last_pk = 0
    # Keyset pagination (pk > last): each batch is one short query, whatever the table's size.
    while len(rows) < total:
        batch = [
            book
            async for book in books.filter(pk__gt=last_pk)[: min(EXPORT_BATCH, total - len(rows))]
        ]
        if not batch:
            break  # books deleted meanwhile
        rows += export_rows(batch)
        last_pk = batch[-1].pk
        await ctx.report_progress(len(rows), total, f"Exported {len(rows)} of {total} books")
    name = f"catalogue{'-' + genre.value if genre else ''}.{fmt}"
    counts = {
        "exported": len(rows),
        "matching": matching,
        "truncated": matching > len(rows),
        "format": fmt,
        "genres": dict(sorted(Counter(row["genre"] for row in rows).items())),
        "available_copies": sum(max(row["available"], 0) for row in rows),
    }
    return ToolResult(
        [
            f"Exported {len(rows)} of {matching} books as {fmt.upper()} ({name}).",
            EmbeddedResource(
                f"library://exports/{name}",
                text=render_export(rows, fmt),
                mime_type="text/csv" if fmt == "csv" else "application/json",
            ),
        ],
        structured=counts,
    )


# -- resources --------------------------------------------------------------------------------


def complete_isbn(value: str) -> list[str]:
    """ISBNs starting with what was typed so far."""
    return list(
        Book.objects.filter(isbn__startswith=value)
        .order_by("isbn")
        .values_list("isbn", flat=True)[:20]
    )


@site.resource(
    "library://books/{isbn}",
    name="book",
    title="A book",
    mime_type="application/json",
    complete={"isbn": complete_isbn},
)
def book(isbn: str) -> dict[str, Any]:
    """The full catalogue record of a book, with its author and current availability."""
    found = Book.objects.select_related("author").with_availability().filter(isbn=isbn).first()
    if found is None:
        raise ResourceNotFoundError(book_uri(isbn))
    author: Author = found.author
    return {
        **book_out(found).model_dump(mode="json"),
        "summary": found.summary,
        "author": {
            "name": author.name,
            "born": author.born,
            "country": author.country,
            "bio": author.bio,
        },
    }


def loans_for(user: Any) -> QuerySet[Loan]:
    """The loans ``user`` may see, as :func:`may_act_for` decides for the tools: members their
    own, staff (and anyone, on a site without authentication) everyone's."""
    loans = Loan.objects.select_related("book", "member__user")
    return loans if not user.is_authenticated or user.is_staff else loans.filter(member__user=user)


def complete_loan_id(value: str, ctx: Context) -> list[str]:
    """Ids of the loans this user may see, starting with what was typed. A completer is a read
    path like any other: unfiltered, it would reveal other members' loans."""
    loans = loans_for(ctx.user).filter(pk__startswith=value) if value else loans_for(ctx.user)
    return [str(pk) for pk in loans.order_by("pk").values_list("pk", flat=True)[:20]]


@site.resource(
    "library://loans/{loan_id}",
    name="loan",
    title="A loan",
    mime_type="application/json",
    complete={"loan_id": complete_loan_id},
)
def loan(ctx: Context, loan_id: int) -> dict[str, Any]:
    """One of your loans (staff: anyone's). Someone else's answers as a missing one: not found."""
    return loan_out(loans_for(ctx.user).get(pk=loan_id)).model_dump(
        mode="json"
    )  # Loan.DoesNotExist: -32002


# -- skills -------------------------------------------------------------------------------------

# The folders under mcp_skills/ are served as skills by themselves (find-a-book is). Lending
# changes things, so that skill is registered again here with the scope its tools need: listed
# to every reader, readable by tokens that may also lend (the same gate as borrow_book's).
site.skill(Path(__file__).resolve().parent / "mcp_skills" / "lend-and-renew", scopes=WRITE)


@site.resource(
    "library://catalogue/stats",
    name="catalogue-stats",
    title="Catalogue statistics",
    mime_type="application/json",
)
def catalogue_stats() -> dict[str, Any]:
    """Counts of books, copies, members and loans, and books per genre."""
    labels = dict(Genre.choices)
    per_genre = Book.objects.values("genre").annotate(books=Count("pk")).order_by("genre")
    loans = Loan.objects.aggregate(
        open=Count("pk", filter=Q(returned_on__isnull=True)),
        overdue=Count("pk", filter=Q(returned_on__isnull=True, due_on__lt=today())),
        total=Count("pk"),
    )
    return {
        "authors": Author.objects.count(),
        "books": Book.objects.count(),
        "copies": sum(Book.objects.values_list("copies", flat=True)),
        "members": Member.objects.count(),
        "loans": loans,
        "genres": {
            row["genre"]: {
                "label": str(labels.get(row["genre"], row["genre"])),
                "books": row["books"],
            }
            for row in per_genre
        },
    }


# -- a model exposed as it is ---------------------------------------------------------------


@site.register(Author)
class AuthorMCP(ModelMCP):
    """Authors as ``django://library/author/{pk}`` resources, plus search and get tools."""

    fields = ["name", "born", "country", "bio"]
    search_fields = ["name", "country"]
    ordering = ["name", "-born", "born"]
    filter_fields = ["country"]
    tools = ["search", "get"]
    description = "An author of books in the catalogue, by primary key."

    def has_view_permission(self, request: HttpRequest, obj: Author | None = None) -> bool:
        # The catalogue is public, like the library's website: reading needs no Django permission.
        # Changing authors stays with staff, in the admin.
        return True


@site.register(Book)
class BookMCP(ModelMCP):
    """Books as resources, with generated tools that follow Django's permissions: anyone may
    search and read the catalogue; librarians (add_book / change_book) may create and edit."""

    fields = ["title", "author", "isbn", "published", "genre", "summary", "copies"]
    search_fields = ["title", "author__name", "isbn"]
    ordering = ["title", "-published", "published"]
    filter_fields = ["genre", "author"]
    list_select_related = ["author"]  # str(book) names its author: no query per row
    tools = ["search", "get", "create", "update"]
    write_scopes = WRITE
    description = "A book of the catalogue, by primary key."

    def has_view_permission(self, request: HttpRequest, obj: Book | None = None) -> bool:
        return True  # the catalogue is public


# Loans and members are the admin's business: expose them as the admin sees them, with the
# ModelAdmin's querysets, permissions and actions (mark returned, renew, add a copy). Book has
# its own BookMCP: action_rows="model_mcp" keeps add_copy to the books BookMCP shows the user too.
site.register_admin(
    admin.site, models=[Loan, Member, Book], write_scopes=tuple(WRITE), action_rows="model_mcp"
)

# ChatGPT's connectors and deep research call only ``search`` and ``fetch``: serve them, over
# the models above, each row as its own tools let the user read it (docs/howto/chatgpt.md).
site.search_fetch = True
# Most hosts never read resources on their own, and none calls the skills methods: the library's
# books, authors and skills reach them as tools too (list_resources, read_resource, list_skills).
site.resource_tools = True


# -- prompts ----------------------------------------------------------------------------------


def complete_interest(value: str) -> list[str]:
    """Genres whose name or label starts with what was typed."""
    typed = value.lower()
    return [
        g.value
        for g in Genre
        if g.value.startswith(typed) or str(g.label).lower().startswith(typed)
    ]


def complete_level(value: str) -> list[str]:
    return [level for level in LEVELS if level.startswith(value.lower())]


@site.prompt(
    title="Recommend books", complete={"interest": complete_interest, "level": complete_level}
)
def recommend_books(
    interest: Annotated[str, Field(description="A genre (e.g. mystery) or any topic.")],
    level: Annotated[Level, Field(description="casual, enthusiast or scholar.")] = "casual",
) -> list[Message]:
    """Ask for three recommendations from the books this library has, for a reader's interest."""
    books = Book.objects.select_related("author").with_availability()
    genre = next((g for g in Genre if interest.lower() in (g.value, str(g.label).lower())), None)
    candidates = list(books.filter(genre=genre) if genre else books.search(interest))[:12]
    if candidates:
        shelf = "\n".join(
            f"- {b.title} by {b.author.name} ({b.published}), ISBN {b.isbn}, "
            f"{'available' if b.available > 0 else 'all copies on loan'}: {b.summary}"  # type: ignore[attr-defined]
            for b in candidates
        )
    else:
        shelf = "(nothing in the catalogue matches; say so, and suggest the closest genres we have)"
    return [
        Message(
            f"I am a {level} reader interested in {interest}. From the library's books below, recommend three, "
            f"say in one sentence each why they suit a {level} reader, and prefer books that are available.\n\n{shelf}"
        )
    ]
