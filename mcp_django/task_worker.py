"""The job that runs a durable task in a worker of Django's task framework.

With ``MCP_DJANGO["TASKS_BACKEND"]`` naming an alias of ``TASKS`` (django-tasks-db's
``DatabaseBackend`` run by ``manage.py db_worker``, RQ, Celery...), each task becomes one job of
:data:`run_mcp_task` there. The job runs the task from its row
(``mcp_django.extensions.tasks.runner.Runner``):
the worker needs the project's settings and apps, as any job of that backend does.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync

from .conf import mcp_settings
from .extensions.tasks import runner as taskrun
from .extensions.tasks import store as taskstore
from .models import Task
from .registry.sites import all_sites

try:  # Django 6.0+
    from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, task  # type: ignore[no-redef]


# A plain function (not a coroutine), so that every backend can run it: the task's own event
# loop is made here, for as long as it runs.
@task(backend=mcp_settings.tasks_backend or DEFAULT_TASK_BACKEND_ALIAS)
def run_mcp_task(site_name: str, task_id: str) -> None:
    """Run the task ``task_id`` of the MCP site ``site_name`` to its end."""
    site = next((s for s in all_sites if s.name == site_name), None)
    if site is None:
        taskstore.finish(
            task_id,
            Task.Status.FAILED,
            error={"code": -32603, "message": f"No MCP site named {site_name!r} in the worker"},
        )
        return
    async_to_sync(taskrun.Runner(site, task_id).run)()
