"""A durable task waiting for its client's input holds no worker, with real processes: one
Daphne web process of the example site and one django-tasks-db ``db_worker`` (which runs one job
at a time). Waits are bounded; nothing asserts how long anything took."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tasks_wire import TasksClient

from .servers import Deployment
from .test_tasks_processes import CONFIRM, client, logs, runs_on, sqlite

pytestmark = pytest.mark.multiprocess

__all__ = ["client", "logs"]  # fixtures this module uses


async def test_with_one_worker_a_task_waiting_for_input_lets_the_next_task_run(
    tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    with sqlite("parked", tmp_path, ["web"], workers=1, MCP_TASKS_BACKEND="database") as deployment:
        logs.append(deployment)
        url, worker = deployment.p1.url, deployment.workers[0]
        waiting_id = await client.create(url, "confirm_delete", {"filename": "report.txt"})
        waiting, _ = await client.wait(url, waiting_id, "input_required")

        # The worker's one job slot is free while the first task waits for its client.
        quick_id = await client.create(url, "slow_compute", {"seconds": 0, "label": "meanwhile"})
        quick, _ = await client.wait(url, quick_id, "completed", "failed", "cancelled")
        still = await client.get(url, waiting_id)

        await client.update(url, waiting_id, CONFIRM)
        done, seen = await client.wait(url, waiting_id, "completed", "failed", "cancelled")
        ran_on = (await deployment.db.task(waiting_id))["worker"], runs_on(worker)

    assert list(waiting["inputRequests"]) == ["confirm_delete"]
    assert quick["status"] == "completed" and quick["result"]["content"] == [
        {"type": "text", "text": "Computed meanwhile in 0 s"}
    ]
    assert still["status"] == "input_required"
    assert done["status"] == "completed", (done, seen)
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted report.txt"}]
    assert ran_on[0] == ran_on[1]  # the worker, not the web process
