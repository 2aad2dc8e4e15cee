"""Sessions and the SSE event log, in the project's database.

Every SSE event is a row before it is written to a socket, so a stream can be replayed after a
disconnect, on any process, and read in the admin.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def new_session_id() -> str:
    """Return a fresh session id: 256 random bits, URL-safe (visible ASCII, as the spec asks)."""
    return secrets.token_urlsafe(32)


class SessionQuerySet(models.QuerySet["Session"]):
    def live(self) -> SessionQuerySet:
        """Sessions a client may still use: not terminated, not expired."""
        return self.filter(terminated_at__isnull=True, expires_at__gt=timezone.now())


class Session(models.Model):
    """One MCP session: created by ``initialize``, ended by DELETE, expiry or the admin."""

    id = models.CharField(
        _("session id"), primary_key=True, max_length=64, default=new_session_id, editable=False
    )
    site_name = models.CharField(_("MCP site"), max_length=100, default="mcp")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mcp_sessions",
        help_text=_("Empty only when the server runs without authentication."),
    )
    protocol_version = models.CharField(_("protocol version"), max_length=20)
    #: How the client reaches the server: Streamable HTTP, or a stdio pipe (manage.py mcp_stdio).
    transport = models.CharField(
        _("transport"),
        max_length=20,
        default="streamable-http",
        choices=[
            ("streamable-http", _("Streamable HTTP")),
            ("stdio", _("stdio")),
            ("sse", _("HTTP+SSE (2024-11-05)")),
        ],
    )
    client_name = models.CharField(_("client name"), max_length=200, blank=True)
    client_version = models.CharField(_("client version"), max_length=100, blank=True)
    client_info = models.JSONField(_("client info"), default=dict, blank=True)
    client_capabilities = models.JSONField(_("client capabilities"), default=dict, blank=True)
    log_level = models.CharField(_("log level"), max_length=20, blank=True)
    #: Counted by QUOTAS["SESSIONS_PER_ADDRESS"]; kept for anonymous sessions only.
    client_address = models.CharField(
        _("client address"),
        max_length=64,
        blank=True,
        default="",
        db_index=True,
        help_text=_("The client's address, for sessions without a user (authentication off)."),
    )
    initialized = models.BooleanField(_("initialized"), default=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    last_active_at = models.DateTimeField(_("last active"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires"), db_index=True)
    terminated_at = models.DateTimeField(_("terminated"), null=True, blank=True, db_index=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        verbose_name = _("MCP session")
        verbose_name_plural = _("MCP sessions")
        ordering = ["-last_active_at"]

    def __str__(self) -> str:
        return f"{self.client_name or 'client'} {self.id[:8]}…"

    @property
    def state(self) -> str:
        if self.terminated_at is not None:
            return "terminated"
        if self.expires_at <= timezone.now():
            return "expired"
        return "active"

    def is_live(self) -> bool:
        return self.state == "active"

    @staticmethod
    def expiry_from(now: datetime, ttl_seconds: int) -> datetime:
        return now + timedelta(seconds=ttl_seconds)


class Event(models.Model):
    """One SSE event on one stream of a session; its SSE id is ``<stream>:<seq>``."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="events", verbose_name=_("session")
    )
    stream = models.CharField(_("stream"), max_length=64)
    seq = models.PositiveIntegerField(_("sequence"))
    # The exact JSON text sent, so replay writes the same bytes without re-serialising.
    payload = models.TextField(_("payload"))
    # The last event of a POST stream (its final response): replay ends the connection after it.
    closes_stream = models.BooleanField(_("closes stream"), default=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now, db_index=True)

    class Meta:
        verbose_name = _("MCP event")
        verbose_name_plural = _("MCP events")
        ordering = ["session", "stream", "seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "stream", "seq"], name="mcp_django_event_unique_seq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.stream}:{self.seq}"

    @property
    def event_id(self) -> str:
        return f"{self.stream}:{self.seq}"


class ServerRequest(models.Model):
    """A request the server sent to the client (sampling, elicitation, roots, ping), awaiting
    its answer. The answer may arrive on any process: the row says which channel waits for it."""

    class State(models.TextChoices):
        PENDING = "pending", _("pending")
        ANSWERED = "answered", _("answered")
        CANCELLED = "cancelled", _("cancelled (timed out)")
        EXPIRED = "expired", _("expired (nobody waits any more)")

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="server_requests", verbose_name=_("session")
    )
    request_id = models.CharField(_("request id"), max_length=64)
    method = models.CharField(_("method"), max_length=100)
    params = models.JSONField(_("params"), default=dict, blank=True)
    channel_name = models.CharField(_("waiting channel"), max_length=200)
    state = models.CharField(
        _("state"), max_length=20, choices=State.choices, default=State.PENDING
    )
    response = models.JSONField(_("response"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    answered_at = models.DateTimeField(_("answered"), null=True, blank=True)

    class Meta:
        verbose_name = _("server-to-client request")
        verbose_name_plural = _("server-to-client requests")
        constraints = [
            models.UniqueConstraint(
                fields=["session", "request_id"], name="mcp_django_server_request_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.request_id}"


class RunningRequest(models.Model):
    """A client request being answered over SSE, and the process answering it.

    The process renews ``lease_until`` while it lives; a row whose lease lapsed belongs to a
    process that died with the request, so its stream is ended with an error (see
    ``stores.RunningRequestStore.close_orphans``) instead of waiting forever.
    """

    session = models.ForeignKey(
        Session,
        on_delete=models.CASCADE,
        related_name="running_requests",
        verbose_name=_("session"),
    )
    stream = models.CharField(_("stream"), max_length=64)
    #: The request id as JSON text: id 1 and id "1" are different requests.
    request_id = models.CharField(_("request id"), max_length=600)
    owner = models.CharField(_("owning process"), max_length=64)
    lease_until = models.DateTimeField(_("lease until"), db_index=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    #: For a ``tools/call`` the buffered audit trail has no row of yet: the row to write,
    #: "interrupted", should the process die with it (``audit.trail.on_request_orphaned``).
    tool_call = models.JSONField(
        _("audit record"), null=True, blank=True, encoder=DjangoJSONEncoder
    )

    class Meta:
        verbose_name = _("running request")
        verbose_name_plural = _("running requests")
        constraints = [
            models.UniqueConstraint(
                fields=["session", "request_id"], name="mcp_django_running_request_unique"
            )
        ]
        indexes = [models.Index(fields=["session", "stream"], name="mcp_django_running_stream")]

    def __str__(self) -> str:
        return f"{self.request_id} on {self.stream}"


class Subscription(models.Model):
    """A session's ``resources/subscribe`` to one URI."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="subscriptions", verbose_name=_("session")
    )
    uri = models.CharField(_("URI"), max_length=2000)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("resource subscription")
        verbose_name_plural = _("resource subscriptions")
        constraints = [
            models.UniqueConstraint(
                fields=["session", "uri"], name="mcp_django_subscription_unique"
            )
        ]
        indexes = [models.Index(fields=["uri"], name="mcp_django_subscription_uri")]

    def __str__(self) -> str:
        return self.uri


def new_elicitation_id() -> str:
    """An unguessable elicitation id (it appears in a URL, so it carries no personal data)."""
    return secrets.token_urlsafe(24)


class Elicitation(models.Model):
    """A URL-mode elicitation: a page on this site that one user must open and finish.

    Bound to the user (and session) that triggered it: only that user, logged in, can use the
    page, and only once, before it expires.
    """

    class State(models.TextChoices):
        PENDING = "pending", _("pending")
        COMPLETED = "completed", _("completed")
        DECLINED = "declined", _("declined")
        CANCELLED = "cancelled", _("cancelled")
        EXPIRED = "expired", _("expired")

    id = models.CharField(
        _("elicitation id"),
        primary_key=True,
        max_length=64,
        default=new_elicitation_id,
        editable=False,
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mcp_elicitations",
    )
    session = models.ForeignKey(
        Session,
        verbose_name=_("session"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="elicitations",
    )
    request_id = models.CharField(_("request id"), max_length=200, blank=True)
    mode = models.CharField(_("mode"), max_length=10, default="url")
    message = models.TextField(_("message"))
    #: The URL name of the page (e.g. "mcp_django:elicit-secret").
    view_name = models.CharField(_("target view"), max_length=200)
    #: What the page needs to know (never secrets): e.g. {"service": "weather"}.
    params = models.JSONField(_("parameters"), default=dict, blank=True)
    state = models.CharField(
        _("state"), max_length=20, choices=State.choices, default=State.PENDING, db_index=True
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires"))
    completed_at = models.DateTimeField(_("completed"), null=True, blank=True)

    class Meta:
        verbose_name = _("URL elicitation")
        verbose_name_plural = _("URL elicitations")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.view_name} for {self.user or 'anonymous'} ({self.current_state})"

    @property
    def current_state(self) -> str:
        if self.state == self.State.PENDING and self.expires_at <= timezone.now():
            return self.State.EXPIRED
        return self.state


class UserSecret(models.Model):
    """A secret a user entered on one of our pages (an API key for another service), encrypted
    at rest. Never shown in the admin, never sent to an MCP client; tools read it through
    ``ctx.get_secret(service)``."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="mcp_secrets",
    )
    service = models.CharField(_("service"), max_length=100)
    ciphertext = models.TextField(_("ciphertext"), editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("user secret")
        verbose_name_plural = _("user secrets")
        constraints = [
            models.UniqueConstraint(fields=["user", "service"], name="mcp_django_secret_unique")
        ]

    def __str__(self) -> str:
        return f"{self.service} secret of {self.user}"


class UserState(models.Model):
    """``ctx.user_state``: what tools remember for a user on one MCP site, across sessions."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="mcp_state",
    )
    site_name = models.CharField(_("MCP site"), max_length=100, default="mcp")
    key = models.CharField(_("key"), max_length=200)
    value = models.JSONField(_("value"))
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("user state")
        verbose_name_plural = _("user state")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "site_name", "key"], name="mcp_django_user_state_unique"
            )
        ]

    def __str__(self) -> str:
        return self.key


class SessionState(models.Model):
    """``ctx.session_state``: what tools remember for one session; it dies with the session."""

    session = models.ForeignKey(
        Session, verbose_name=_("session"), on_delete=models.CASCADE, related_name="state_entries"
    )
    key = models.CharField(_("key"), max_length=200)
    value = models.JSONField(_("value"))
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)

    class Meta:
        verbose_name = _("session state")
        verbose_name_plural = _("session state")
        constraints = [
            models.UniqueConstraint(
                fields=["session", "key"], name="mcp_django_session_state_unique"
            )
        ]

    def __str__(self) -> str:
        return self.key


class ToolCall(models.Model):
    """One ``tools/call``, as the audit trail records it (see :mod:`mcp_django.ops.audit`).

    The trail outlives what it describes: the session is kept as its id (sessions are deleted by
    ``mcp_clearsessions`` long before the trail is), the user as a nullable link with a snapshot
    of the username. Arguments are stored redacted and bounded; nothing a user typed into a URL
    elicitation page ever reaches a row.
    """

    class Outcome(models.TextChoices):
        OK = "ok", _("ok")
        TOOL_ERROR = "tool_error", _("tool error")
        PROTOCOL_ERROR = "protocol_error", _("protocol error")
        DENIED = "denied", _("denied")
        CANCELLED = "cancelled", _("cancelled")
        TIMED_OUT = "timed_out", _("timed out")
        #: 2026-07-28: the tool stopped to ask the client something; the client retries the call.
        INPUT_REQUIRED = "input_required", _("input required")
        #: AUDIT_DURABLE: written as the call starts, and updated with its outcome before it is
        #: answered.
        RUNNING = "running", _("running")
        #: AUDIT_DURABLE: the process died while the call ran (its lease lapsed; see
        #: audit.trail.close_interrupted).
        INTERRUPTED = "interrupted", _("interrupted")
        #: 2026-07-28 tasks extension: the call was answered with a task (``task_id``), which runs
        #: on.
        TASK = "task", _("handed to a task")

    started_at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    site_name = models.CharField(_("MCP site"), max_length=100, default="mcp")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="mcp_tool_calls",
    )
    #: The username when the call was made (kept when the user is renamed or deleted).
    username = models.CharField(_("username"), max_length=150, blank=True)
    #: The OAuth client the token was issued to, when the call came with a token.
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True)
    session_id = models.CharField(_("session id"), max_length=64, blank=True, db_index=True)
    transport = models.CharField(
        _("transport"),
        max_length=20,
        choices=[
            ("streamable-http", _("Streamable HTTP")),
            ("stdio", _("stdio")),
            ("sse", _("HTTP+SSE (2024-11-05)")),
        ],
    )
    protocol_version = models.CharField(_("protocol revision"), max_length=20, blank=True)
    #: The JSON-RPC id, as JSON text (id 1 and id "1" differ).
    request_id = models.CharField(_("request id"), max_length=300, blank=True)
    tool_name = models.CharField(_("tool"), max_length=200)
    arguments = models.JSONField(_("arguments"), null=True, blank=True)
    outcome = models.CharField(_("outcome"), max_length=20, choices=Outcome.choices)
    #: The JSON-RPC error code of a protocol error (or of a refusal answered with one).
    error_code = models.IntegerField(_("error code"), null=True, blank=True)
    error = models.CharField(_("error"), max_length=500, blank=True)
    duration_ms = models.FloatField(_("duration (ms)"), default=0.0)
    trace_id = models.CharField(_("trace id"), max_length=32, blank=True)
    #: While "running": the process renews it while it lives; once lapsed, the call is interrupted.
    lease_until = models.DateTimeField(_("lease until"), null=True, blank=True)
    #: The task the call was answered with (outcome "task"): its row tells how the work ended.
    task_id = models.CharField(_("task id"), max_length=64, blank=True, db_index=True)
    #: The result was over MAX_RESULT_CHARS and was answered cut, with a notice.
    result_cut = models.BooleanField(_("result cut"), default=False)

    class Meta:
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["tool_name", "started_at"], name="mcp_django_toolcall_tool"),
            models.Index(fields=["outcome", "started_at"], name="mcp_django_toolcall_outcome"),
            models.Index(fields=["username", "started_at"], name="mcp_django_toolcall_username"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.outcome})"


def new_task_id() -> str:
    """An unguessable task id: it is the bearer of the task's state (tasks extension, "Task ID
    unguessability"), so 192 random bits, URL-safe."""
    return secrets.token_urlsafe(24)


class TaskQuerySet(models.QuerySet["Task"]):
    def live(self) -> TaskQuerySet:
        """Tasks not yet finished: working or waiting for the client's input."""
        return self.filter(status__in=Task.LIVE)


class Task(models.Model):
    """A ``tools/call`` run as a durable task (the ``io.modelcontextprotocol/tasks`` extension).

    The row is the task: the client polls it (``tasks/get``), answers its questions
    (``tasks/update``) and cancels it (``tasks/cancel``) through any web process, while the
    process running it (a worker of the project's ``TASKS`` backend, or the web process that
    made it) keeps its heartbeat, progress and outcome here. The arguments are kept encrypted
    (``payload``) while it is live; ``arguments`` holds them as the audit trail shows them,
    redacted. A task waiting for input is parked: no process holds it until it is answered.
    """

    class Status(models.TextChoices):
        WORKING = "working", _("working")
        INPUT_REQUIRED = "input_required", _("input required")
        COMPLETED = "completed", _("completed")
        FAILED = "failed", _("failed")
        CANCELLED = "cancelled", _("cancelled")

    LIVE = (Status.WORKING, Status.INPUT_REQUIRED)
    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    id = models.CharField(
        _("task id"), primary_key=True, max_length=64, default=new_task_id, editable=False
    )
    site_name = models.CharField(_("MCP site"), max_length=100, default="mcp")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mcp_tasks",
    )
    #: Who it counts against (quotas.Caller.key: "user:<pk>", or an anonymous caller's address).
    owner = models.CharField(_("owner"), max_length=200, db_index=True)
    #: The OAuth client the creating token was issued to; only that client's tokens reach the task.
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True)
    #: The scopes of the creating token, a list (None: the call came without OAuth).
    scopes = models.JSONField(_("token scopes"), null=True, blank=True)
    session = models.ForeignKey(
        Session,
        verbose_name=_("session"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
    )
    tool_name = models.CharField(_("tool"), max_length=200)
    #: The arguments as the audit trail stores them: redacted and bounded, for people to read.
    arguments = models.JSONField(_("arguments"), null=True, blank=True)
    #: What the run needs, encrypted (taskstore.seal, at most TASK_MAX_PAYLOAD_BYTES): the
    #: arguments, the client's answers so far and its _meta; "" once the task has ended.
    payload = models.TextField(_("payload"), editable=False)
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.WORKING, db_index=True
    )
    status_message = models.TextField(_("status message"), blank=True)
    progress = models.FloatField(_("progress"), null=True, blank=True)
    total = models.FloatField(_("total"), null=True, blank=True)
    #: Questions to the client not answered yet, by key (``inputRequests``).
    input_requests = models.JSONField(_("input requests"), default=dict, blank=True)
    #: No longer written: the answers go into the payload, encrypted (kept for old rows).
    input_responses = models.JSONField(_("input responses"), default=dict, blank=True)
    #: Every key ever asked: a key is never reused, and answers to other keys are ignored.
    asked_keys = models.JSONField(_("keys asked"), default=list, blank=True)
    #: The final ``CallToolResult`` (completed) or JSON-RPC error object (failed).
    result = models.JSONField(_("result"), null=True, blank=True)
    error = models.JSONField(_("error"), null=True, blank=True)
    ttl_ms = models.PositiveBigIntegerField(_("TTL (ms)"), null=True, blank=True)
    poll_interval_ms = models.PositiveIntegerField(_("poll interval (ms)"), default=1000)
    #: Which TASKS backend runs it ("" : the web process that made it).
    backend = models.CharField(_("backend"), max_length=100, blank=True)
    #: The id of its job in that backend (django.tasks' TaskResult id), to find it in the worker's
    #: admin.
    backend_task_id = models.CharField(_("backend job id"), max_length=100, blank=True)
    #: The process running it (host:pid), once started.
    worker = models.CharField(_("worker"), max_length=200, blank=True)
    cancel_requested = models.BooleanField(_("cancel requested"), default=False)
    #: The W3C trace context of the request that made it (traceparent, tracestate), so the
    #: run's span in the worker links to the call's trace (mcp_django.ops.tracing).
    trace_context = models.JSONField(_("trace context"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    #: Renewed by the running process every TASK_HEARTBEAT_SECONDS; a live task whose heartbeat
    #: is older than TASK_HEARTBEAT_TIMEOUT died with its process and is failed.
    heartbeat_at = models.DateTimeField(_("heartbeat"), null=True, blank=True, db_index=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "status"], name="mcp_django_task_user_status")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    @property
    def is_live(self) -> bool:
        return self.status in self.LIVE


class UsedAssertion(models.Model):
    """An ID-JAG assertion that has bought an access token, kept until it expires so it cannot
    buy another (the MCP Enterprise-Managed Authorization profile requires replay detection).

    A table rather than the cache: the refusal must hold across processes whatever cache the
    project runs (a per-process one would let each process accept the assertion once), and an
    entry must not be evicted before the assertion expires. The row is written in the same
    transaction as the token, so a refused or failed exchange leaves none."""

    #: SHA-256 of the issuer and the ``jti``: fixed size whatever the issuer sends, and no claim
    #: of the assertion in clear.
    key = models.CharField(_("key"), primary_key=True, max_length=64)
    expires_at = models.DateTimeField(_("expires at"), db_index=True)

    class Meta:
        verbose_name = _("used assertion")
        verbose_name_plural = _("used assertions")

    def __str__(self) -> str:
        return self.key
