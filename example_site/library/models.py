"""A small lending library: authors write books, members borrow copies of them."""

from __future__ import annotations

from datetime import date, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

LOAN_DAYS = 21


def today() -> date:
    """Today in the site's time zone (a plain ``date.today()`` would use the server's)."""
    return timezone.localdate()


def default_due_on() -> date:
    return today() + timedelta(days=LOAN_DAYS)


class Genre(models.TextChoices):
    """A book's genre."""

    FICTION = "fiction", _("Fiction")
    SCIENCE_FICTION = "science-fiction", _("Science fiction")
    FANTASY = "fantasy", _("Fantasy")
    MYSTERY = "mystery", _("Mystery")
    HISTORY = "history", _("History")
    SCIENCE = "science", _("Science")
    BIOGRAPHY = "biography", _("Biography")
    POETRY = "poetry", _("Poetry")
    CHILDREN = "children", _("Children")


class Author(models.Model):
    name = models.CharField(_("name"), max_length=200, unique=True)
    born = models.PositiveSmallIntegerField(_("year of birth"), null=True, blank=True)
    country = models.CharField(_("country"), max_length=100, blank=True)
    bio = models.TextField(_("biography"), blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("author")
        verbose_name_plural = _("authors")

    def __str__(self) -> str:
        return self.name


class BookQuerySet(models.QuerySet["Book"]):
    def with_availability(self) -> BookQuerySet:
        """Annotate ``on_loan`` (open loans) and ``available`` (copies on the shelf)."""
        # A subquery, not Count() over a join: no GROUP BY, so Meta.ordering still applies and
        # the annotation composes with any other filter or annotation.
        open_loans = (
            Loan.objects.filter(book=OuterRef("pk"), returned_on__isnull=True)
            .order_by()
            .values("book")
            .annotate(count=Count("pk"))
            .values("count")
        )
        return self.annotate(on_loan=Coalesce(Subquery(open_loans), 0)).annotate(
            available=F("copies") - F("on_loan")
        )

    def search(self, query: str) -> BookQuerySet:
        """Match the words of ``query`` against title, author, ISBN and summary (all must match)."""
        qs = self
        for word in query.split():
            qs = qs.filter(
                Q(title__icontains=word)
                | Q(author__name__icontains=word)
                | Q(isbn__startswith=word)
                | Q(summary__icontains=word)
            )
        return qs


class Book(models.Model):
    title = models.CharField(_("title"), max_length=300)
    author = models.ForeignKey(
        Author, on_delete=models.PROTECT, related_name="books", verbose_name=_("author")
    )
    isbn = models.CharField(
        _("ISBN"), max_length=13, unique=True, help_text=_("ISBN-13, digits only.")
    )
    published = models.PositiveSmallIntegerField(_("year published"))
    genre = models.CharField(_("genre"), max_length=20, choices=Genre.choices, db_index=True)
    summary = models.TextField(_("summary"), blank=True)
    copies = models.PositiveSmallIntegerField(_("copies owned"), default=1)

    objects = BookQuerySet.as_manager()

    class Meta:
        ordering = ["title"]
        verbose_name = _("book")
        verbose_name_plural = _("books")

    def __str__(self) -> str:
        return f"{self.title} ({self.author})" if self.author_id else self.title


class Member(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="library_member",
        verbose_name=_("user"),
    )
    joined_on = models.DateField(_("joined on"), default=today)
    max_loans = models.PositiveSmallIntegerField(_("maximum open loans"), default=5)

    class Meta:
        ordering = ["user__username"]
        verbose_name = _("member")
        verbose_name_plural = _("members")

    def __str__(self) -> str:
        return self.user.get_full_name() or self.user.get_username()


class LoanQuerySet(models.QuerySet["Loan"]):
    def open(self) -> LoanQuerySet:
        return self.filter(returned_on__isnull=True)

    def overdue(self) -> LoanQuerySet:
        return self.open().filter(due_on__lt=today())


class Loan(models.Model):
    book = models.ForeignKey(
        Book, on_delete=models.PROTECT, related_name="loans", verbose_name=_("book")
    )
    member = models.ForeignKey(
        Member, on_delete=models.PROTECT, related_name="loans", verbose_name=_("member")
    )
    borrowed_on = models.DateField(_("borrowed on"), default=today)
    due_on = models.DateField(_("due on"), default=default_due_on)
    returned_on = models.DateField(_("returned on"), null=True, blank=True)

    objects = LoanQuerySet.as_manager()

    class Meta:
        ordering = ["-borrowed_on", "-pk"]
        verbose_name = _("loan")
        verbose_name_plural = _("loans")
        indexes = [models.Index(fields=["book", "returned_on"]), models.Index(fields=["due_on"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(due_on__gte=F("borrowed_on")), name="library_loan_due_after_borrowed"
            ),
            models.CheckConstraint(
                condition=Q(returned_on__isnull=True) | Q(returned_on__gte=F("borrowed_on")),
                name="library_loan_returned_after_borrowed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.book.title} → {self.member}"

    @property
    def is_open(self) -> bool:
        return self.returned_on is None

    @property
    def is_overdue(self) -> bool:
        return self.returned_on is None and self.due_on < today()
