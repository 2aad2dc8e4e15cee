"""The helpdesk over MCP, wired as docs/howto/tools.md and the tutorial say: the whole admin, plus
function tools, a resource template and a prompt whose completers know the user."""

import uuid

from django.contrib import admin
from pydantic import BaseModel

from mcp_django import Context, Message, site

from .models import Team, Ticket, visible_tickets

site.register_admin(admin.site)


class TicketSummary(BaseModel):
    id: uuid.UUID
    subject: str
    status: str
    priority: str
    customer: str


class QueueStats(BaseModel):
    team: str | None
    open: int
    pending: int
    resolved: int


class Identity(BaseModel):
    authenticated: bool
    username: str


@site.tool(permission="desk.view_ticket", annotations={"readOnlyHint": True})
def open_tickets(ctx: Context, priority: Ticket.Priority | None = None) -> list[TicketSummary]:
    """List the open tickets of your team, most urgent first."""
    tickets = visible_tickets(ctx.user).filter(status=Ticket.Status.OPEN).select_related("customer")
    if priority is not None:
        tickets = tickets.filter(priority=priority)
    return [
        TicketSummary(
            id=t.pk,
            subject=t.subject,
            status=t.status,
            priority=t.priority,
            customer=t.customer.name,
        )
        for t in tickets.order_by("subject")
    ]


@site.tool(permission="desk.view_ticket", annotations={"readOnlyHint": True})
def queue_stats(ctx: Context) -> QueueStats:
    """Count your team's tickets by status."""
    tickets = visible_tickets(ctx.user)
    team = getattr(ctx.user, "team", None)
    return QueueStats(
        team=team.name if team is not None else None,
        open=tickets.filter(status=Ticket.Status.OPEN).count(),
        pending=tickets.filter(status=Ticket.Status.PENDING).count(),
        resolved=tickets.filter(status=Ticket.Status.RESOLVED).count(),
    )


@site.tool(annotations={"readOnlyHint": True})
def whoami(ctx: Context) -> Identity:
    """Say who is calling."""
    user = ctx.user
    return Identity(authenticated=user.is_authenticated, username=user.get_username())


def complete_team(value: str, ctx: Context) -> list[str]:
    if not ctx.user.is_authenticated:
        return []
    teams = Team.objects.filter(name__istartswith=value)
    if not ctx.user.is_superuser:
        teams = teams.filter(agents__pk=ctx.user.pk)  # an agent's own team only
    return list(teams.order_by("name").values_list("name", flat=True))


@site.resource(
    "helpdesk://queues/{team}", mime_type="application/json", complete={"team": complete_team}
)
def queue(team: str, ctx: Context) -> dict[str, object]:
    """The open tickets of a team's queue (those you may see)."""
    tickets = visible_tickets(ctx.user).filter(team__name=team, status=Ticket.Status.OPEN)
    return {"team": team, "tickets": sorted(tickets.values_list("subject", flat=True))}


def complete_ticket(value: str, ctx: Context) -> list[str]:
    tickets = visible_tickets(ctx.user).filter(subject__istartswith=value)
    return sorted(tickets.values_list("subject", flat=True))


@site.prompt(complete={"ticket": complete_ticket})
def draft_reply(ticket: str, tone: str = "friendly") -> list[Message]:
    """Draft a reply to a customer's ticket."""
    return [Message(f"Write a {tone} reply to the customer who opened the ticket {ticket!r}.")]
