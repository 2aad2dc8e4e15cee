from __future__ import annotations

from typing import Any

from django.apps import AppConfig

#: What an interrupted run tells its readers.
INTERRUPTED_REASON = "The server process running it stopped before it finished; run the task again."


def resolve_orphaned_run(sender: Any, session_id: str, request_id: str, **kwargs: Any) -> None:
    """Receiver of ``mcp_django.signals.request_orphaned``: a run whose process died is marked
    interrupted, instead of "running" forever, and its subscribers are told."""
    from django.utils import timezone

    from mcp_django import site

    from .models import TaskRun

    runs = TaskRun.objects.filter(
        session_id=session_id, request_id=request_id, status=TaskRun.Status.RUNNING
    )
    ids = list(runs.values_list("pk", flat=True))
    if not ids:
        return
    runs.update(
        status=TaskRun.Status.INTERRUPTED, reason=INTERRUPTED_REASON, finished_at=timezone.now()
    )
    for pk in ids:
        site.notify_resource_updated(f"live://runs/{pk}")


class LiveConfig(AppConfig):
    name = "example_site.live"
    label = "live"
    verbose_name = "Live session demos"

    def ready(self) -> None:
        from mcp_django.signals import request_orphaned

        request_orphaned.connect(
            resolve_orphaned_run, dispatch_uid="example_site.live.resolve_orphaned_run"
        )
