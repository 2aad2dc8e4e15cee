"""Tools that reach beyond the library: URL-mode elicitation, per-user secrets, third-party OAuth
and per-user state (autodiscovered by mcp_django, like admin.py).

- ``book_reviews`` needs the user's API key for a (fictional) reviews service. The first time,
  ``ctx.require_secret`` sends the user to a page of this site to enter it; the key is stored
  encrypted for that user and never passes through the MCP client.
- ``clear_reading_history`` is destructive: it asks for confirmation on a page of this site
  (``ctx.elicit_url`` + ``ctx.wait_for_elicitation``) and acts only when the user confirmed.
- ``remember_reading_goal`` / ``reading_goal`` keep a goal in ``ctx.user_state``, which outlives
  sessions (hosted clients often open a new session for every call).
- ``sync_reading_list`` reads the user's list from Bookshelf, another site with its own OAuth
  server (``CONNECT_PROVIDERS["bookshelf"]``, set from MCP_CONNECT_PROVIDER_URL). The user
  connects once through ``ctx.require_connection``; the tokens stay on this server.

Each needs a signed-in user (``MCP_AUTH=oauth`` or ``django``): the pages are bound to the user
who triggered them.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import date
from typing import Annotated, Any

from django.conf import settings
from pydantic import BaseModel, Field

from example_site.library.models import Book, Loan, today
from mcp_django import Context, ToolError, site
from mcp_django.conf import mcp_settings
from mcp_django.models import UserSecret

from . import services

logger = logging.getLogger(__name__)

ISBN = Annotated[str, Field(description="The book's ISBN-13 (13 digits).", pattern=r"^\d{13}$")]
WRITE = ["library:write"]
GOAL_KEY = "reading_goal"
BOOKSHELF = "bookshelf"


def signed_in(ctx: Context) -> Any:
    user = ctx.user
    if user is None or not user.is_authenticated:
        raise ToolError(
            "Sign in first: this tool keeps things for you, so it needs to know who you are."
        )
    return user


# -- a secret for another service ---------------------------------------------------------------


class BookReviews(BaseModel):
    isbn: str
    title: str | None = Field(
        description="The book's title, when it is in this library's catalogue."
    )
    reviews: int = Field(description="How many reviews the reviews service has.")
    average_rating: float = Field(description="Their average rating, 1 to 5.")
    source: str


@site.tool(title="Book reviews", annotations={"readOnlyHint": True, "openWorldHint": True})
async def book_reviews(ctx: Context, isbn: ISBN) -> BookReviews:
    """Reviews of a book from the reviews service, with your own API key for it.

    The first time, you are sent to a page of this library to enter the key; it is stored
    encrypted for you and reused in later sessions. A real tool would call the service with the
    key here; this demo computes a stable answer from a hash of the key instead, and never
    returns or logs the key.
    """
    signed_in(ctx)
    key = await ctx.require_secret(
        "reviews", "Connect the reviews service: enter your API key.", label="Book reviews"
    )
    reviews = services.simulated_reviews(key, isbn)
    title = await Book.objects.filter(isbn=isbn).values_list("title", flat=True).afirst()
    logger.info("Fetched reviews of %s for user %s", isbn, ctx.user.pk)
    return BookReviews(
        isbn=isbn,
        title=title,
        reviews=reviews.count,
        average_rating=reviews.average_rating,
        source="reviews service (simulated)",
    )


# -- a destructive action, confirmed on a page ----------------------------------------------------


class HistoryCleared(BaseModel):
    outcome: str = Field(description="cleared, nothing to clear, or kept (with the reason).")
    deleted: int = Field(description="Returned loans deleted from your history.")
    kept_open_loans: int = Field(description="Loans still out, which are never deleted.")


@site.tool(
    title="Clear my reading history",
    scopes=WRITE,
    annotations={
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    },
)
async def clear_reading_history(ctx: Context) -> HistoryCleared:
    """Delete the record of the books you have returned, after you confirm on a page.

    Open loans are kept. Nothing is deleted unless you press Confirm on the page.
    """
    user = signed_in(ctx)
    history = Loan.objects.filter(member__user_id=user.pk, returned_on__isnull=False)
    ids = [pk async for pk in history.values_list("pk", flat=True)]
    open_loans = await Loan.objects.filter(
        member__user_id=user.pk, returned_on__isnull=True
    ).acount()
    if not ids:
        return HistoryCleared(outcome="nothing to clear", deleted=0, kept_open_loans=open_loans)
    elicitation = await ctx.elicit_url(
        "Delete your reading history? This cannot be undone.",
        view="mcp_django:elicit-confirm",
        params={
            "summary": f"{len(ids)} returned loan(s) will be deleted from your history. Your {open_loans} open loan(s) stay."
        },
    )
    if elicitation.action != "accept":
        return HistoryCleared(
            outcome=f"kept (you chose {elicitation.action})", deleted=0, kept_open_loans=open_loans
        )
    state = await ctx.wait_for_elicitation(elicitation)
    if state != "completed":
        return HistoryCleared(outcome=f"kept ({state})", deleted=0, kept_open_loans=open_loans)
    # Only the loans the user was shown, and only if they are still returned ones.
    deleted, _ = await Loan.objects.filter(
        pk__in=ids, member__user_id=user.pk, returned_on__isnull=False
    ).adelete()
    return HistoryCleared(outcome="cleared", deleted=deleted, kept_open_loans=open_loans)


# -- per-user state that outlives sessions ----------------------------------------------------------


class ReadingGoal(BaseModel):
    books_per_month: int
    note: str
    set_on: date


class GoalProgress(BaseModel):
    goal: ReadingGoal | None = Field(description="Your goal, or null if you have not set one.")
    borrowed_this_month: int
    on_track: bool | None = Field(
        description="Whether you borrowed as many books as the goal this month (null without a goal)."
    )


@site.tool(
    title="Remember my reading goal",
    annotations={"readOnlyHint": False, "idempotentHint": True, "openWorldHint": False},
)
async def remember_reading_goal(
    ctx: Context,
    books_per_month: Annotated[
        int, Field(ge=1, le=100, description="How many books you mean to read each month.")
    ],
    note: Annotated[str, Field(max_length=500, description="Anything to remember with it.")] = "",
) -> ReadingGoal:
    """Remember your reading goal. It is kept for you, in every later conversation."""
    signed_in(ctx)
    goal = ReadingGoal(books_per_month=books_per_month, note=note, set_on=today())
    await ctx.user_state.set(GOAL_KEY, goal.model_dump(mode="json"))
    return goal


@site.tool(title="My reading goal", annotations={"readOnlyHint": True, "openWorldHint": False})
async def reading_goal(ctx: Context) -> GoalProgress:
    """Your reading goal (set with remember_reading_goal) and how this month is going."""
    user = signed_in(ctx)
    stored = await ctx.user_state.get(GOAL_KEY)
    goal = ReadingGoal.model_validate(stored) if stored else None
    month_start = today().replace(day=1)
    borrowed = await Loan.objects.filter(
        member__user_id=user.pk, borrowed_on__gte=month_start
    ).acount()
    return GoalProgress(
        goal=goal,
        borrowed_this_month=borrowed,
        on_track=None if goal is None else borrowed >= goal.books_per_month,
    )


# -- a third-party OAuth connection ---------------------------------------------------------------


class ReadingListItem(BaseModel):
    isbn: str
    title: str
    in_catalogue: bool
    available: int | None = Field(
        description="Copies on this library's shelf now (null when not in the catalogue)."
    )


class ReadingList(BaseModel):
    account: str = Field(description="Your account name on Bookshelf.")
    items: list[ReadingListItem]


@site.tool(
    title="Sync my Bookshelf reading list",
    annotations={"readOnlyHint": True, "openWorldHint": True},
)
async def sync_reading_list(ctx: Context) -> ReadingList:
    """Read your reading list from Bookshelf and check which books this library has.

    The first time, you are sent to connect your Bookshelf account (you sign in there, not
    here); the library keeps the Bookshelf token for you and never shows it to your assistant.
    """
    user = signed_in(ctx)
    api_url = getattr(settings, "BOOKSHELF_API_URL", None)
    if BOOKSHELF not in (mcp_settings.get("CONNECT_PROVIDERS") or {}) or not api_url:
        raise ToolError(
            "This library has no Bookshelf connection configured (set MCP_CONNECT_PROVIDER_URL)."
        )
    tokens = await ctx.require_connection(
        BOOKSHELF, "Connect your Bookshelf account so the library can read your reading list."
    )
    try:
        data = await asyncio.to_thread(services.fetch_reading_list, api_url, tokens["access_token"])
    except services.BookshelfError as exc:
        if exc.status == 401:
            # Expired or revoked: forget it, so that the next call connects again.
            await UserSecret.objects.filter(
                user_id=user.pk, service=f"connect:{BOOKSHELF}"
            ).adelete()
            raise ToolError(
                "Bookshelf no longer accepts the connection; call the tool again to reconnect."
            ) from None
        raise ToolError(str(exc)) from None
    wanted = [
        item
        for item in data["items"]
        if isinstance(item, dict) and isinstance(item.get("isbn"), str)
    ]
    books = {
        b.isbn: b
        async for b in Book.objects.with_availability().filter(isbn__in=[i["isbn"] for i in wanted])
    }
    items = [
        ReadingListItem(
            isbn=item["isbn"],
            title=str(item.get("title", "")),
            in_catalogue=item["isbn"] in books,
            available=books[item["isbn"]].available if item["isbn"] in books else None,  # type: ignore[attr-defined]
        )
        for item in wanted
    ]
    return ReadingList(account=str(data.get("user", "")), items=items)
