"""What the live-session demos leave behind: one row per long-running tool call."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class TaskRun(models.Model):
    """One run of a long tool (``long_task``): how far it got and how it ended.

    The row is written by whichever process runs the tool, so it shows in the admin, and to
    any other process, whether the run finished, failed or was cancelled by the client. When
    that process dies, the sweep of its requests marks the run "interrupted" (see apps.py).
    """

    class Status(models.TextChoices):
        RUNNING = "running", _("running")
        DONE = "done", _("done")
        CANCELLED = "cancelled", _("cancelled")
        FAILED = "failed", _("failed")
        #: The process running it died (its lease lapsed): set by the sweep, see apps.py.
        INTERRUPTED = "interrupted", _("interrupted")

    tool = models.CharField(_("tool"), max_length=128)
    session_id = models.CharField(_("MCP session"), max_length=64, blank=True, db_index=True)
    # The JSON-RPC id as JSON text, so 1 and "1" stay apart.
    request_id = models.CharField(_("request id"), max_length=200, blank=True)
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.RUNNING
    )
    steps_done = models.PositiveIntegerField(_("steps done"), default=0)
    steps_total = models.PositiveIntegerField(_("steps in all"), default=0)
    started_at = models.DateTimeField(_("started"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    #: Why it ended other than "done" (an interrupted run says what stopped it).
    reason = models.CharField(_("reason"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("task run")
        verbose_name_plural = _("task runs")
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.tool} #{self.pk} ({self.status})"

    @property
    def uri(self) -> str:
        return f"live://runs/{self.pk}"
