from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from .models import Comment, Customer, Note, Tag, Team, Ticket, visible_tickets


@admin.action(description="Mark as resolved", permissions=["change"])
def mark_resolved(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> None:
    count = queryset.update(status=Ticket.Status.RESOLVED)
    modeladmin.message_user(request, f"Resolved {count} ticket(s).", messages.SUCCESS)


@admin.action(description="Escalate to urgent", permissions=["change"])
def escalate(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> None:
    count = queryset.update(priority=Ticket.Priority.URGENT)
    modeladmin.message_user(request, f"Escalated {count} ticket(s).")


@admin.action(description="Summarize", permissions=["view"])
def summarize(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> None:
    subjects = ", ".join(sorted(queryset.values_list("subject", flat=True)))
    modeladmin.message_user(request, f"{queryset.count()} ticket(s): {subjects}")


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    list_display = [
        "subject",
        "customer",
        "team",
        "status",
        "priority",
        "assignee",
        "metadata",
        "attachment",
        "created_at",
    ]
    list_filter = ["status", "priority", "team"]
    search_fields = ["subject", "description", "customer__name"]
    readonly_fields = ["created_at"]
    actions = [mark_resolved, escalate, summarize]

    def get_queryset(self, request: HttpRequest) -> Any:
        # Agents see the tickets of their own team only.
        return super().get_queryset(request) & visible_tickets(request.user)


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ["name", "email"]
    search_fields = ["name", "email"]


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ["ticket", "author", "body", "created_at"]
    search_fields = ["body"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).filter(ticket__in=visible_tickets(request.user))


admin.site.register(Team)
admin.site.register(Tag)
admin.site.register(Note)
