"""Admin screens for sessions and their event logs: read-only, with a terminate action; the
audit trail of tool calls, read-only for everyone, with a CSV export; and durable tasks,
read-only, with a cancel action."""

from __future__ import annotations

import csv
import json
import unicodedata
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from .conf import mcp_settings
from .extensions.tasks import runner as taskrun
from .extensions.tasks import store as taskstore
from .models import (
    Elicitation,
    Event,
    RunningRequest,
    ServerRequest,
    Session,
    SessionState,
    Task,
    ToolCall,
    UserSecret,
    UserState,
)
from .registry.sites import all_sites
from .registry.sites import site as default_site
from .signals import session_closed
from .stores import announce_session_changed
from .transport.layers import get_layer, session_group

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
    _TabularInline = admin.TabularInline
else:

    class _Subscriptable:
        """``Base[Model]`` as a base class: django-stubs makes the admin classes generic in their
        model, Django's own are not subscriptable, so at run time this is ``Base`` itself."""

        def __init__(self, base: type) -> None:
            self.base = base

        def __getitem__(self, params: object) -> type:
            return self.base

    _ModelAdmin = _Subscriptable(admin.ModelAdmin)
    _TabularInline = _Subscriptable(admin.TabularInline)


def _site_named(name: str) -> Any:
    """Return the MCP site a session belongs to (the default site when none is named so)."""
    if default_site.name == name:
        return default_site._wrapped  # the site itself, not its lazy proxy (set by .name above)
    return next((s for s in list(all_sites) if s.name == name), None)


def server_label(site_name: str) -> str:
    """What the admin shows for a site: the server's name (``SERVER_NAME``), which the people
    reading the admin know, and the site's own name only where there are several sites."""
    name = str(mcp_settings.server_name)
    return name if site_name == default_site.name else f"{name} ({site_name})"


class ServerMixin:
    @admin.display(description=_("MCP server"), ordering="site_name")
    def server(self, obj: Any) -> str:
        return server_label(obj.site_name)


class ServerFilter(admin.SimpleListFilter):
    """Rows by the server they belong to, named as :func:`server_label` names it; offered only
    when the rows belong to more than one site."""

    title = _("MCP server")
    parameter_name = "server"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        names = sorted(set(model_admin.get_queryset(request).values_list("site_name", flat=True)))
        return [(name, server_label(name)) for name in names] if len(names) > 1 else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(site_name=self.value()) if self.value() else queryset


class StateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("active", _("Active")), ("expired", _("Expired")), ("terminated", _("Terminated"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> QuerySet[Session]:
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(terminated_at__isnull=True, expires_at__gt=now)
        if self.value() == "expired":
            return queryset.filter(terminated_at__isnull=True, expires_at__lte=now)
        if self.value() == "terminated":
            return queryset.filter(terminated_at__isnull=False)
        return queryset


class ReadOnlyMixin:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class EventInline(ReadOnlyMixin, _TabularInline[Event, Session]):
    model = Event
    fields = ["stream", "seq", "created_at", "payload"]
    readonly_fields = fields  # type: ignore[assignment]  # one list of plain names; the stubs type fields wider
    extra = 0
    can_delete = False
    ordering = ["created_at", "seq"]
    verbose_name_plural = _("event log (latest 200)")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Event]:
        # A long-lived session can have thousands of events; the page shows the latest ones.
        qs = super().get_queryset(request)
        latest = list(qs.order_by("-created_at", "-seq").values_list("pk", flat=True)[:200])
        return qs.filter(pk__in=latest)


class SessionStateInline(ReadOnlyMixin, _TabularInline[SessionState, Session]):
    """The session's ``ctx.session_state`` (cleared with the "Clear session state" action)."""

    model = SessionState
    fields = ["key", "value", "updated_at"]
    readonly_fields = fields  # type: ignore[assignment]  # one list of plain names; the stubs type fields wider
    extra = 0
    can_delete = False
    verbose_name_plural = _("session state")


@admin.register(Session)
class SessionAdmin(ServerMixin, ReadOnlyMixin, _ModelAdmin[Session]):
    list_display = [
        "short_id",
        "user",
        "client_name",
        "client_version",
        "protocol_version",
        "transport",
        "created_at",
        "last_active_at",
        "state_badge",
    ]
    list_filter = [
        StateFilter,
        ServerFilter,
        "protocol_version",
        "transport",
        "client_name",
        "created_at",
    ]
    search_fields = ["id", "client_name", "user__username", "user__email"]
    date_hierarchy = "created_at"
    list_select_related = ["user"]
    readonly_fields = [
        "id",
        "server",
        "user",
        "protocol_version",
        "transport",
        "client_name",
        "client_version",
        "client_info",
        "client_capabilities",
        "log_level",
        "initialized",
        "created_at",
        "last_active_at",
        "expires_at",
        "terminated_at",
        "user_state_link",
        "tool_calls",
    ]
    exclude = ["site_name"]  # shown as "server"
    inlines = [SessionStateInline, EventInline]
    actions = ["terminate_sessions", "clear_session_state", "clear_user_state"]

    @admin.display(description=_("user state"))
    def user_state_link(self, obj: Session) -> str:
        if obj.user_id is None:
            return "-"
        count = UserState.objects.filter(user_id=obj.user_id, site_name=obj.site_name).count()
        url = reverse("admin:mcp_django_userstate_changelist") + f"?user__id__exact={obj.user_id}"
        return format_html('<a href="{}">{} key(s) kept for this user</a>', url, count)

    @admin.display(description=_("tool calls"))
    def tool_calls(self, obj: Session) -> str:
        return session_tool_calls(obj.pk)

    @admin.display(description=_("session"), ordering="id")
    def short_id(self, obj: Session) -> str:
        return f"{obj.id[:10]}…"

    @admin.display(description=_("state"))
    def state_badge(self, obj: Session) -> str:
        colours = {"active": "#2e7d32", "expired": "#8d6e63", "terminated": "#c62828"}
        return format_html('<b style="color:{}">{}</b>', colours[obj.state], obj.state)

    @admin.action(description=_("Terminate selected sessions"), permissions=["terminate"])
    def terminate_sessions(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        sessions = list(queryset.filter(terminated_at__isnull=True))
        ids = [session.pk for session in sessions]
        now = timezone.now()
        Session.objects.filter(pk__in=ids).update(terminated_at=now)
        layer = get_layer()
        for session in sessions:
            session.terminated_at = now
            # Open streams of the session close wherever they are held, and no process keeps
            # serving it from its cache.
            async_to_sync(layer.group_send)(session_group(session.pk), {"type": "mcp.terminate"})
            async_to_sync(announce_session_changed)(session.pk)
            # signals.py promises session_closed for sessions ended in the admin, as for DELETE.
            site = _site_named(session.site_name)
            sender = type(site) if site is not None else Session
            session_closed.send(sender=sender, site=site, session=session, reason="terminated")
        self.message_user(
            request,
            ngettext("%d session terminated.", "%d sessions terminated.", len(ids)) % len(ids),
            messages.SUCCESS,
        )

    @admin.action(
        description=_("Clear session state of selected sessions"), permissions=["clear_state"]
    )
    def clear_session_state(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        deleted, _ = SessionState.objects.filter(session__in=queryset).delete()
        self.message_user(
            request,
            ngettext("%d entry cleared.", "%d entries cleared.", deleted) % deleted,
            messages.SUCCESS,
        )

    @admin.action(
        description=_("Clear user state of the selected sessions' users"),
        permissions=["clear_state"],
    )
    def clear_user_state(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        pairs = set(queryset.exclude(user=None).values_list("user_id", "site_name"))
        deleted = 0
        for user_id, site_name in pairs:
            deleted += UserState.objects.filter(user_id=user_id, site_name=site_name).delete()[0]
        self.message_user(
            request,
            ngettext("%d entry cleared.", "%d entries cleared.", deleted) % deleted,
            messages.SUCCESS,
        )

    def has_clear_state_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_django.delete_sessionstate") and request.user.has_perm(
            "mcp_django.delete_userstate"
        )

    def has_terminate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_django.delete_session")


@admin.register(Event)
class EventAdmin(ReadOnlyMixin, _ModelAdmin[Event]):
    list_display = ["event_id", "session", "created_at", "closes_stream", "short_payload"]
    list_filter = ["created_at", "closes_stream"]
    search_fields = ["session__id", "stream", "payload"]
    list_select_related = ["session"]
    readonly_fields = ["session", "stream", "seq", "payload", "closes_stream", "created_at"]

    @admin.display(description=_("payload"))
    def short_payload(self, obj: Event) -> str:
        return obj.payload if len(obj.payload) <= 120 else obj.payload[:120] + "…"


@admin.register(ServerRequest)
class ServerRequestAdmin(ReadOnlyMixin, _ModelAdmin[ServerRequest]):
    list_display = ["request_id", "method", "session", "state", "created_at", "answered_at"]
    list_filter = ["state", "method", "created_at"]
    search_fields = ["session__id", "request_id", "method"]
    list_select_related = ["session"]
    readonly_fields = [
        "session",
        "request_id",
        "method",
        "params",
        "channel_name",
        "state",
        "response",
        "created_at",
        "answered_at",
    ]


@admin.register(RunningRequest)
class RunningRequestAdmin(ReadOnlyMixin, _ModelAdmin[RunningRequest]):
    """Client requests being answered now, and which process holds each (a lapsed lease means
    the process died; the stream is closed with an error on the next resume or start-up)."""

    list_display = ["request_id", "session", "owner", "created_at", "lease_until", "lease_live"]
    list_filter = ["owner", "created_at"]
    search_fields = ["session__id", "request_id", "owner"]
    list_select_related = ["session"]
    readonly_fields = ["session", "stream", "request_id", "owner", "created_at", "lease_until"]

    @admin.display(description=_("lease live"), boolean=True)
    def lease_live(self, obj: RunningRequest) -> bool:
        return obj.lease_until > timezone.now()


@admin.register(Elicitation)
class ElicitationAdmin(ReadOnlyMixin, _ModelAdmin[Elicitation]):
    """URL elicitations: who was asked what, and how it ended. Nothing entered on the pages is
    here."""

    list_display = [
        "id_short",
        "user",
        "view_name",
        "state_now",
        "created_at",
        "expires_at",
        "completed_at",
    ]
    list_filter = ["state", "view_name", "created_at"]
    search_fields = ["id", "user__username", "message"]
    list_select_related = ["user"]
    readonly_fields = [
        "id",
        "user",
        "session",
        "request_id",
        "mode",
        "message",
        "view_name",
        "params",
        "state",
        "created_at",
        "expires_at",
        "completed_at",
    ]

    @admin.display(description=_("elicitation"))
    def id_short(self, obj: Elicitation) -> str:
        return f"{obj.id[:10]}…"

    @admin.display(description=_("state"))
    def state_now(self, obj: Elicitation) -> str:
        return obj.current_state


@admin.register(UserSecret)
class UserSecretAdmin(ReadOnlyMixin, _ModelAdmin[UserSecret]):
    """Which services a user connected. The secret itself is never shown (not even encrypted);
    deleting the row is how a user's secret is revoked."""

    list_display = ["service", "user", "created_at", "updated_at"]
    list_filter = ["service"]
    search_fields = ["service", "user__username"]
    fields = ["user", "service", "created_at", "updated_at"]
    readonly_fields = fields  # type: ignore[assignment]  # one list of plain names; the stubs type fields wider


@admin.register(UserState)
class UserStateAdmin(ServerMixin, ReadOnlyMixin, _ModelAdmin[UserState]):
    """``ctx.user_state``: what tools keep for each user, across sessions; delete rows to clear."""

    list_display = ["key", "user", "server", "updated_at"]
    list_filter = [ServerFilter]
    search_fields = ["key", "user__username"]
    fields = ["user", "server", "key", "value", "updated_at"]
    readonly_fields = fields  # type: ignore[assignment]  # one list of plain names; the stubs type fields wider


# -- the audit trail --------------------------------------------------------------------------

#: Tool calls shown on a session's page; the link leads to all of them.
SESSION_TOOL_CALLS = 20

#: The CSV export's columns: header, and how each row gives it.
CSV_COLUMNS: list[tuple[str, Any]] = [
    ("when", lambda c: c.started_at.isoformat()),
    ("server", lambda c: c.site_name),
    ("user", lambda c: c.username),
    ("oauth client", lambda c: c.client_id),
    ("session", lambda c: c.session_id),
    ("transport", lambda c: c.transport),
    ("protocol revision", lambda c: c.protocol_version),
    ("request id", lambda c: c.request_id),
    ("tool", lambda c: c.tool_name),
    (
        "arguments",
        lambda c: (
            json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)
            if c.arguments is not None
            else ""
        ),
    ),
    ("outcome", lambda c: c.outcome),
    ("error code", lambda c: "" if c.error_code is None else str(c.error_code)),
    ("error", lambda c: c.error),
    ("duration ms", lambda c: f"{c.duration_ms:.3f}"),
    ("trace id", lambda c: c.trace_id),
]
#: Rows read per query while exporting (keyset pages: no server-side cursor, no OFFSET).
CSV_PAGE = 2000


#: What makes a spreadsheet read a cell as a formula (OWASP, CSV injection), "|" (DDE) too.
FORMULA_TRIGGERS = frozenset("=+-@|")


def _csv_cell(value: str) -> str:
    """``value`` as data, never a spreadsheet formula (CSV injection): a cell led by a tab or a
    carriage return, or whose first visible character is a formula trigger once normalised
    (" =1+1", "\\n=1+1", a full-width equals sign), gets a leading single quote, as OWASP
    advises."""
    if value[:1] in ("\t", "\r"):
        return "'" + value
    # Spreadsheets skip leading blanks and read full-width signs as ASCII ones; so does this.
    for raw in value:
        char = unicodedata.normalize("NFKC", raw)[:1]
        if not char or char.isspace() or unicodedata.category(char) in ("Cc", "Cf"):
            continue
        return "'" + value if char in FORMULA_TRIGGERS else value
    return value


class _Line:
    """A file-like object whose ``write`` returns the line: csv.writer without a buffer."""

    def write(self, value: str) -> str:
        return value


def _csv_lines(calls: list[ToolCall]) -> str:
    writer = csv.writer(_Line())
    return "".join(
        writer.writerow([_csv_cell(column(call)) for _, column in CSV_COLUMNS]) for call in calls
    )


def _csv_page(queryset: QuerySet[ToolCall], after: int | None) -> list[ToolCall]:
    page = queryset.order_by("pk")
    return list(page.filter(pk__gt=after)[:CSV_PAGE] if after is not None else page[:CSV_PAGE])


def session_tool_calls(session_id: str) -> str:
    """The latest calls of a session, as a small table, with a link to all of them."""
    calls = list(
        ToolCall.objects.filter(session_id=session_id).order_by("-started_at")[:SESSION_TOOL_CALLS]
    )
    if not calls:
        return "-"
    url = (
        reverse("admin:mcp_django_toolcall_changelist")
        + "?"
        + urlencode({"session_id": session_id})
    )
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td></tr>",
        (
            (
                timezone.localtime(c.started_at).strftime("%Y-%m-%d %H:%M:%S"),
                c.tool_name,
                c.get_outcome_display(),
                f"{c.duration_ms:.0f}",
            )
            for c in calls
        ),
    )
    count = ToolCall.objects.filter(session_id=session_id).count()
    return format_html(
        "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>{}</tbody></table>"
        '<p><a href="{}">{}</a></p>',
        _("when"),
        _("tool"),
        _("outcome"),
        _("duration"),
        rows,
        url,
        ngettext(
            "%d call of this session in the audit trail",
            "All %d calls of this session in the audit trail",
            count,
        )
        % count,
    )


class ToolCallServerFilter(ServerFilter):
    """:class:`ServerFilter`, asking the database for the distinct names (the trail is large)."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        names = list(
            model_admin.get_queryset(request)
            .order_by("site_name")
            .values_list("site_name", flat=True)
            .distinct()
        )
        return [(name, server_label(name)) for name in names] if len(names) > 1 else []


@admin.register(ToolCall)
class ToolCallAdmin(ServerMixin, _ModelAdmin[ToolCall]):
    """The audit trail: every ``tools/call``, as it was recorded. Nobody may add, change or delete
    a row here, superusers included (``mcp_clearsessions`` applies AUDIT_RETENTION_DAYS); staff
    with the view permission see every row, and may export the selected ones as CSV."""

    list_display = [
        "started_at",
        "tool_name",
        "who",
        "outcome_badge",
        "transport",
        "protocol_version",
        "duration",
        "session_link",
    ]
    list_filter = [
        "outcome",
        "tool_name",
        ("username", admin.AllValuesFieldListFilter),
        "transport",
        "result_cut",
        "started_at",
        ToolCallServerFilter,
    ]
    search_fields = ["tool_name", "username", "^session_id", "^client_id", "=trace_id"]
    date_hierarchy = "started_at"
    # Counting a large trail on every page costs more than the page: "Show all" counts on demand.
    show_full_result_count = False
    actions = ["export_csv"]
    fields = [
        "started_at",
        "server",
        "user",
        "username",
        "client_id",
        "session_id",
        "transport",
        "protocol_version",
        "request_id",
        "tool_name",
        "arguments",
        "outcome",
        "error_code",
        "error",
        "duration_ms",
        "trace_id",
        "task_link",
        "result_cut",
        "lease_until",
    ]
    readonly_fields = fields  # type: ignore[assignment]  # one list of plain names; the stubs type fields wider

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("user"), ordering="username")
    def who(self, obj: ToolCall) -> str:
        return obj.username or "-"

    @admin.display(description=_("outcome"), ordering="outcome")
    def outcome_badge(self, obj: ToolCall) -> str:
        colours = {
            "ok": "#2e7d32",
            "denied": "#c62828",
            "protocol_error": "#c62828",
            "tool_error": "#ef6c00",
            "timed_out": "#ef6c00",
            "interrupted": "#c62828",
            "running": "#1565c0",
        }
        return format_html(
            '<b style="color:{}">{}</b>',
            colours.get(obj.outcome, "#616161"),
            obj.get_outcome_display(),
        )

    @admin.display(description=_("duration"), ordering="duration_ms")
    def duration(self, obj: ToolCall) -> str:
        return f"{obj.duration_ms:.0f} ms"

    @admin.display(description=_("session"), ordering="session_id")
    def session_link(self, obj: ToolCall) -> str:
        if not obj.session_id:
            return "-"

        # The session may be gone (the trail outlives it): the link filters the trail by it.
        url = (
            reverse("admin:mcp_django_toolcall_changelist")
            + "?"
            + urlencode({"session_id": obj.session_id})
        )
        return format_html('<a href="{}">{}…</a>', url, obj.session_id[:10])

    @admin.display(description=_("task"))
    def task_link(self, obj: ToolCall) -> str:
        """The durable task the call was answered with (2026-07-28 tasks extension)."""
        if not obj.task_id:
            return "-"
        if not Task.objects.filter(pk=obj.task_id).exists():
            return format_html("{} ({})", obj.task_id, _("deleted"))
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:mcp_django_task_change", args=[quote(obj.task_id)]),
            obj.task_id,
        )

    @admin.action(description=_("Export selected tool calls as CSV"), permissions=["view"])
    def export_csv(
        self, request: HttpRequest, queryset: QuerySet[ToolCall]
    ) -> StreamingHttpResponse:
        header = _csv_lines_header()
        if isinstance(request, ASGIRequest):
            content: Any = _acsv(queryset, header)
        else:
            content = _csv(queryset, header)
        response = StreamingHttpResponse(content, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="tool-calls-{timezone.now():%Y%m%d-%H%M%S}.csv"'
        )
        return response


def _csv_lines_header() -> str:
    return str(csv.writer(_Line()).writerow([name for name, _ in CSV_COLUMNS]))


def _csv(queryset: QuerySet[ToolCall], header: str) -> Iterator[str]:
    """The export, page by page, for a WSGI server."""
    yield header
    after = None
    while page := _csv_page(queryset, after):
        yield _csv_lines(page)
        after = page[-1].pk


async def _acsv(queryset: QuerySet[ToolCall], header: str) -> AsyncIterator[str]:
    """The export, page by page, for an ASGI server (which would read a sync iterator whole)."""
    yield header
    after = None
    while page := await sync_to_async(_csv_page)(queryset, after):
        yield _csv_lines(page)
        after = page[-1].pk


# -- durable tasks -----------------------------------------------------------------------------


@admin.register(Task)
class TaskAdmin(ServerMixin, ReadOnlyMixin, _ModelAdmin[Task]):
    """Durable tasks (2026-07-28 tasks extension): made by the protocol, never by hand, so
    read-only; the cancel action stops a live one on whichever process runs it."""

    list_display = [
        "short_id",
        "status_badge",
        "who",
        "client",
        "tool_name",
        "progress_shown",
        "created_at",
        "updated_at",
        "expires_at",
    ]
    list_filter = ["status", "tool_name", ServerFilter, "backend", "created_at"]
    search_fields = ["=id", "tool_name", "user__username"]
    date_hierarchy = "created_at"
    list_select_related = ["user"]
    actions = ["cancel_tasks"]
    fields = [
        "id",
        "server",
        "user",
        "client_id",
        "session_link",
        "tool_name",
        "arguments",
        "status",
        "status_message",
        "progress_shown",
        "result_summary",
        "result_is_error",
        "error",
        "input_requests",
        "worker",
        "heartbeat_at",
        "backend",
        "backend_task_id",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
        "expires_at",
        "tool_calls",
    ]
    readonly_fields = fields  # type: ignore[assignment]  # one list of plain names; the stubs type fields wider

    @admin.display(description=_("task"), ordering="id")
    def short_id(self, obj: Task) -> str:
        return f"{obj.id[:10]}…"

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, obj: Task) -> str:
        colours = {
            "working": "#1565c0",
            "input_required": "#ef6c00",
            "completed": "#2e7d32",
            "failed": "#c62828",
            "cancelled": "#616161",
        }
        return format_html(
            '<b style="color:{}">{}</b>',
            colours.get(obj.status, "#616161"),
            obj.get_status_display(),
        )

    @admin.display(description=_("user"), ordering="user__username")
    def who(self, obj: Task) -> str:
        return str(obj.user) if obj.user is not None else "-"

    @admin.display(description=_("OAuth client"), ordering="client_id")
    def client(self, obj: Task) -> str:
        return obj.client_id or "-"

    @admin.display(description=_("progress"))
    def progress_shown(self, obj: Task) -> str:
        if obj.progress is None:
            return "-"
        if obj.total:
            return f"{obj.progress:g} of {obj.total:g} ({obj.progress / obj.total:.0%})"
        return f"{obj.progress:g}"

    @admin.display(description=_("result"))
    def result_summary(self, obj: Task) -> str:
        """The first text of the result: what the tool said, without its structured content."""
        content = obj.result.get("content") if isinstance(obj.result, dict) else None
        texts = (
            [
                item.get("text")
                for item in content
                if isinstance(item, dict) and item.get("type") == "text"
            ]
            if isinstance(content, list)
            else []
        )
        text = next((t for t in texts if isinstance(t, str)), None)
        if text is None:
            return "-"
        return text if len(text) <= 500 else text[:500] + "…"

    @admin.display(description=_("tool error"), boolean=True)
    def result_is_error(self, obj: Task) -> bool | None:
        return bool(obj.result.get("isError")) if isinstance(obj.result, dict) else None

    @admin.display(description=_("session"))
    def session_link(self, obj: Task) -> str:
        if obj.session_id is None:
            return "-"
        return format_html(
            '<a href="{}">{}…</a>',
            reverse("admin:mcp_django_session_change", args=[quote(obj.session_id)]),
            obj.session_id[:10],
        )

    @admin.display(description=_("tool calls"))
    def tool_calls(self, obj: Task) -> str:
        count = ToolCall.objects.filter(task_id=obj.pk).count()
        url = reverse("admin:mcp_django_toolcall_changelist") + "?" + urlencode({"task_id": obj.pk})
        return format_html(
            '<a href="{}">{}</a>',
            url,
            ngettext("%d call in the audit trail", "%d calls in the audit trail", count) % count,
        )

    @admin.action(description=_("Cancel selected tasks"), permissions=["cancel"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        rows = list(queryset.values_list("pk", "user_id"))
        cancelled = 0
        for task_id, user_id in rows:
            # The row is the signal: the process running the task sees it at its next poll.
            if not taskstore.cancel(task_id):
                continue
            cancelled += 1
            taskrun.wake(task_id)  # at once, when this process runs it
            async_to_sync(taskrun.announce)(task_id, user_id)
        text = ngettext("%d task cancelled", "%d tasks cancelled", cancelled) % cancelled
        ended = len(rows) - cancelled
        if ended:
            text += "; " + ngettext("%d had already ended", "%d had already ended", ended) % ended
        self.message_user(request, text + ".", messages.SUCCESS if cancelled else messages.WARNING)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_django.change_task")
