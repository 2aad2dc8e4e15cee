"""The lending rules, shared by the admin actions and the MCP tools.

Everything here is synchronous ORM code: async callers wrap it in ``sync_to_async`` (Django's
advice for code that needs a transaction, which the async ORM does not offer yet).
"""

from __future__ import annotations

from datetime import date, timedelta

from django.db import transaction

from .models import LOAN_DAYS, Book, Loan, Member, today

#: A loan may be renewed, but never to more than this many days after it was borrowed.
MAX_LOAN_DAYS = 90


class LoanError(Exception):
    """A lending rule says no (no copies left, loan already returned...); the message says why."""


def borrow(isbn: str, username: str) -> Loan:
    """Lend one copy of the book to the member, or raise ``LoanError``."""
    with transaction.atomic():
        # Lock the book row so that two concurrent borrows cannot take the last copy twice
        # (PostgreSQL; SQLite serializes writers anyway).
        book = Book.objects.select_for_update().filter(isbn=isbn).first()
        if book is None:
            raise LoanError(f"No book with ISBN {isbn} in the catalogue.")
        member = Member.objects.select_related("user").filter(user__username=username).first()
        if member is None:
            raise LoanError(f"No library member with username {username!r}.")
        open_loans = list(member.loans.open().select_related("book"))
        if any(loan.book_id == book.pk for loan in open_loans):
            raise LoanError(f"{member} already has a copy of {book.title!r}.")
        if len(open_loans) >= member.max_loans:
            raise LoanError(
                f"{member} already has {len(open_loans)} books on loan (the limit is {member.max_loans})."
            )
        if any(loan.is_overdue for loan in open_loans):
            raise LoanError(f"{member} has an overdue loan; return it before borrowing more.")
        on_loan = book.loans.open().count()
        if on_loan >= book.copies:
            raise LoanError(
                f"No copies of {book.title!r} are available (all {book.copies} are on loan)."
            )
        start = today()
        loan = Loan.objects.create(
            book=book, member=member, borrowed_on=start, due_on=start + timedelta(days=LOAN_DAYS)
        )
    return loan


def return_loan(loan: Loan, on: date | None = None) -> Loan:
    """Mark the loan returned, or raise ``LoanError`` if it already was."""
    returned_on = on or today()
    # A conditional update, so that returning twice at once records one return.
    if not Loan.objects.filter(pk=loan.pk, returned_on__isnull=True).update(
        returned_on=returned_on
    ):
        raise LoanError(f"Loan {loan.pk} was already returned.")
    loan.returned_on = returned_on
    return loan


def renewed_due_on(loan: Loan, days: int) -> date:
    """The due date after renewing ``loan`` by ``days``, or ``LoanError`` when not allowed."""
    if loan.returned_on is not None:
        raise LoanError(
            f"Loan {loan.pk} was returned on {loan.returned_on.isoformat()}; there is nothing to renew."
        )
    if days < 1:
        raise LoanError("A renewal must add at least one day.")
    # An overdue loan is renewed from today, not from its old due date.
    due_on = max(loan.due_on, today()) + timedelta(days=days)
    limit = loan.borrowed_on + timedelta(days=MAX_LOAN_DAYS)
    if due_on > limit:
        raise LoanError(
            f"Loan {loan.pk} cannot be renewed to {due_on.isoformat()}: "
            f"loans end at most {MAX_LOAN_DAYS} days after borrowing ({limit.isoformat()})."
        )
    return due_on


def renew(loan: Loan, days: int) -> Loan:
    """Extend the loan by ``days``, or raise ``LoanError``."""
    due_on = renewed_due_on(loan, days)
    if not Loan.objects.filter(pk=loan.pk, returned_on__isnull=True).update(due_on=due_on):
        raise LoanError(f"Loan {loan.pk} was returned meanwhile; there is nothing to renew.")
    loan.due_on = due_on
    return loan
