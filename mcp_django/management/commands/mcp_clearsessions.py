"""Remove expired and terminated MCP sessions, and events past their retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.db.models import Q
from django.utils import timezone

from mcp_django.conf import mcp_settings
from mcp_django.extensions.tasks import store as taskstore
from mcp_django.models import Elicitation, Event, ServerRequest, Session, ToolCall
from mcp_django.stores import RunningRequestStore, ServerRequestStore, get_event_store


class Command(BaseCommand):
    help = (
        "Delete MCP sessions that ended (expired or terminated) more than SESSION_RETENTION "
        "seconds "
        "ago, "
        "with their events, and events older than EVENT_RETENTION seconds; end the streams of "
        "requests whose process "
        "died, expire and prune server-to-client requests older than SERVER_REQUEST_TTL, and "
        "delete "
        "URL elicitations "
        "that expired more than SESSION_RETENTION seconds ago or whose session is deleted, and "
        "tool "
        "calls of the "
        "audit trail older than AUDIT_RETENTION_DAYS; fail durable tasks whose process died (no "
        "heartbeat for "
        "TASK_HEARTBEAT_TIMEOUT) and delete those whose TTL ran out. "
        "Run it from cron, like clearsessions."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be deleted, delete nothing."
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        now = timezone.now()
        cutoff = now - timedelta(seconds=int(mcp_settings.session_retention))
        ended = Session.objects.filter(
            Q(terminated_at__lt=cutoff) | Q(terminated_at__isnull=True, expires_at__lt=cutoff)
        )
        event_cutoff = now - timedelta(seconds=int(mcp_settings.event_retention))
        # Past their expiry every elicitation is over, whatever its state, and is kept
        # SESSION_RETENTION for the admin; one whose session goes goes with it, as its events do,
        # since nothing can wait for its answer any more (deleting the session would only unlink
        # it).
        old_elicitations = Elicitation.objects.filter(
            Q(expires_at__lt=cutoff) | Q(session__in=ended)
        )
        # The audit trail keeps its own time: it outlives the sessions it names.
        days = mcp_settings.audit_retention_days
        old_calls = (
            ToolCall.objects.filter(started_at__lt=now - timedelta(days=days))
            if days is not None
            else ToolCall.objects.none()
        )
        if dry_run:
            old_events = Event.objects.filter(Q(session__in=ended) | Q(created_at__lt=event_cutoff))
            self.stdout.write(
                f"Would delete {ended.count()} sessions, "
                f"{old_events.count()} events and "
                f"{old_elicitations.count()} elicitations."
            )
            self.stdout.write(f"Would delete {old_calls.count()} tool calls of the audit trail.")
            self.stdout.write(
                f"Would fail {taskstore.stale().count()} stale tasks and delete "
                f"{taskstore.expired().count()} expired tasks."
            )
            return
        elicitations, _ = old_elicitations.delete()
        sessions = ended.count()
        _, per_model = ended.delete()
        events = per_model.get("mcp_django.Event", 0) + get_event_store().clear_expired(
            event_cutoff
        )
        orphans = len(RunningRequestStore().close_orphans())
        ttl = mcp_settings.server_request_ttl
        expired = ServerRequestStore().expire_stale(ttl)
        # Answered, cancelled and expired rows only tell the admin what happened: keep them one TTL.
        pruned, _ = (
            ServerRequest.objects.exclude(state=ServerRequest.State.PENDING)
            .filter(created_at__lt=now - timedelta(seconds=ttl))
            .delete()
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Deleted {sessions} sessions, {events} events and {elicitations} elicitations; "
                f"ended {orphans} orphaned "
                f"requests; expired {expired} and pruned {pruned} server requests."
            )
        )
        calls, _ = old_calls.delete()
        kept = (
            f"older than {days} days" if days is not None else "none: AUDIT_RETENTION_DAYS is None"
        )
        self.stdout.write(
            self.style.SUCCESS(f"Deleted {calls} tool calls of the audit trail ({kept}).")
        )
        # Failed first, so that a task whose time ran out while it ran ends before it goes.
        failed = len(taskstore.sweep())
        tasks = taskstore.prune()
        self.stdout.write(
            self.style.SUCCESS(f"Failed {failed} stale tasks; deleted {tasks} expired tasks.")
        )
