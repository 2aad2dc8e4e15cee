from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, F, Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_django import mcp_action

from . import services
from .models import Author, Book, Loan, Member, today


class BookInline(admin.TabularInline):
    model = Book
    fields = ["title", "isbn", "published", "genre", "copies"]
    extra = 0
    show_change_link = True


@admin.register(Author)
class AuthorAdmin(admin.ModelAdmin):
    list_display = ["name", "born", "country", "book_count"]
    list_filter = ["country"]
    search_fields = ["name"]
    # Explicit: the Count annotation groups rows, and Django drops Meta.ordering from GROUP BY queries.
    ordering = ["name"]
    inlines = [BookInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Author]:
        return super().get_queryset(request).annotate(book_count=Count("books"))

    @admin.display(description=_("books"), ordering="book_count")
    def book_count(self, obj: Author) -> int:
        return obj.book_count  # type: ignore[attr-defined]


class AvailabilityFilter(admin.SimpleListFilter):
    title = _("availability")
    parameter_name = "availability"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("available", _("On the shelf")), ("out", _("All copies on loan"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Book]) -> QuerySet[Book]:
        if self.value() == "available":
            return queryset.filter(available__gt=0)
        if self.value() == "out":
            return queryset.filter(available__lte=0)
        return queryset


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ["title", "author", "genre", "published", "isbn", "copies", "available"]
    list_filter = ["genre", AvailabilityFilter, "author"]
    search_fields = ["title", "isbn", "author__name", "summary"]
    list_select_related = ["author"]
    autocomplete_fields = ["author"]
    list_per_page = 50
    actions = ["add_copy"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Book]:
        return super().get_queryset(request).with_availability()  # type: ignore[attr-defined]

    @admin.display(description=_("available"), ordering="available")
    def available(self, obj: Book) -> int:
        return obj.available  # type: ignore[attr-defined]

    @admin.action(description=_("Add one copy of the selected books"))
    @mcp_action(destructive=False, open_world=False)  # updates rows of this database only
    def add_copy(self, request: HttpRequest, queryset: QuerySet[Book]) -> None:
        # Update by primary key: the annotated queryset cannot be updated directly.
        updated = Book.objects.filter(pk__in=queryset.values("pk")).update(copies=F("copies") + 1)
        self.message_user(
            request,
            ngettext("Added a copy of %d book.", "Added a copy of each of %d books.", updated)
            % updated,
        )


class LoanInline(admin.TabularInline):
    model = Loan
    fields = ["book", "borrowed_on", "due_on", "returned_on"]
    autocomplete_fields = ["book"]
    extra = 0
    show_change_link = True


@admin.register(Member)
class MemberAdmin(admin.ModelAdmin):
    list_display = ["__str__", "username", "joined_on", "open_loans", "max_loans"]
    search_fields = ["user__username", "user__first_name", "user__last_name", "user__email"]
    list_select_related = ["user"]
    autocomplete_fields = ["user"]
    ordering = ["user__username"]  # see AuthorAdmin.ordering
    inlines = [LoanInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Member]:
        return (
            super()
            .get_queryset(request)
            .annotate(open_loans=Count("loans", filter=Q(loans__returned_on__isnull=True)))
        )

    @admin.display(description=_("username"), ordering="user__username")
    def username(self, obj: Member) -> str:
        return obj.user.get_username()

    @admin.display(description=_("open loans"), ordering="open_loans")
    def open_loans(self, obj: Member) -> int:
        return obj.open_loans  # type: ignore[attr-defined]


class LoanStatusFilter(admin.SimpleListFilter):
    title = _("status")
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("open", _("On loan")), ("overdue", _("Overdue")), ("returned", _("Returned"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Loan]) -> QuerySet[Loan]:
        if self.value() == "open":
            return queryset.filter(returned_on__isnull=True)
        if self.value() == "overdue":
            return queryset.filter(returned_on__isnull=True, due_on__lt=today())
        if self.value() == "returned":
            return queryset.filter(returned_on__isnull=False)
        return queryset


@admin.register(Loan)
class LoanAdmin(admin.ModelAdmin):
    list_display = ["book", "member", "borrowed_on", "due_on", "returned_on", "overdue"]
    list_filter = [LoanStatusFilter, "book__genre"]
    search_fields = ["book__title", "book__isbn", "member__user__username"]
    list_select_related = ["book", "member__user"]
    autocomplete_fields = ["book", "member"]
    date_hierarchy = "borrowed_on"
    actions = ["mark_returned", "renew_two_weeks"]

    @admin.display(description=_("overdue"), boolean=True)
    def overdue(self, obj: Loan) -> bool:
        return obj.is_overdue

    @admin.action(description=_("Mark the selected loans as returned today"))
    @mcp_action(destructive=False, open_world=False)  # updates rows of this database only
    def mark_returned(self, request: HttpRequest, queryset: QuerySet[Loan]) -> None:
        count = queryset.filter(returned_on__isnull=True).update(returned_on=today())
        self.message_user(
            request,
            ngettext("%d loan marked returned.", "%d loans marked returned.", count) % count,
        )

    @admin.action(description=_("Renew the selected loans by 14 days"))
    @mcp_action(destructive=False, open_world=False)  # updates rows of this database only
    def renew_two_weeks(self, request: HttpRequest, queryset: QuerySet[Loan]) -> None:
        renewed = 0
        for loan in queryset.select_related("book", "member__user"):
            try:
                services.renew(loan, 14)
            except services.LoanError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            else:
                renewed += 1
        if renewed:
            self.message_user(
                request, ngettext("%d loan renewed.", "%d loans renewed.", renewed) % renewed
            )
