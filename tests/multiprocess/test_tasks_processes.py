"""Durable tasks (the 2026-07-28 tasks extension) survive what they must, with real processes:
Daphne web processes of the example site and django-tasks-db's ``db_worker``, killed with
SIGKILL where a machine would die.

- each answer mode (JSON, SSE), tasks run in the web process (the embedded default): a question
  answered with tasks/update, a tool error, a protocol error, a cancellation; and the same in
  the 2025-11-25 form a handshake-era session uses (the question relayed on tasks/result);
- worker backend: the task outlives the web process that made it, and a worker that dies fails
  its task (heartbeat) instead of leaving it "working" for ever, in both forms;
- tasks/cancel on one process stops the task running on another;
- PostgreSQL + Redis: created on one web process, answered on another, run by a worker;
- PostgreSQL: concurrent creates on two web processes never pass LIVE_TASKS_PER_USER.

Every deployment here is the test's own (fresh database, own processes), stopped at its end
whatever happens. Waits are bounded; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.polling import until
from tests.tasks_wire import RELATED_TASK, HandshakeTasksClient, TasksClient

from .servers import (
    Deployment,
    Inspector,
    PostgresDatabase,
    RedisDatabase,
    Server,
    Worker,
    base_env,
)

pytestmark = pytest.mark.multiprocess

#: What the worker or web process writes as the name of the process running a task.
HOST = socket.gethostname()

CONFIRM = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}


def runs_on(process: Server) -> str:
    return f"{HOST}:{process.pid}"


@contextmanager
def deployed(
    label: str, log_dir: Path, env: dict[str, str], db: Inspector, web: list[str], workers: int = 0
) -> Iterator[Deployment]:
    """Migrate, start the web processes named ``web`` (and ``workers`` db_workers), and stop
    every one of them at the end, also when the test failed or killed some itself."""
    deployment = Deployment(
        label,
        env,
        db,
        [Server(name, env, log_dir) for name in web],
        [Worker(f"worker-{n}", env, log_dir) for n in range(1, workers + 1)],
    )
    deployment.manage("migrate", "--noinput", "-v", "0")
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


@contextmanager
def sqlite(
    label: str, tmp_path: Path, web: list[str], workers: int = 0, **extra: str
) -> Iterator[Deployment]:
    """A deployment on a fresh SQLite file (the in-memory channel layer in each process)."""
    path = tmp_path / f"{label}.sqlite3"
    env = base_env(SQLITE_PATH=str(path), **extra)
    with deployed(label, tmp_path, env, Inspector(sqlite_path=path), web, workers) as deployment:
        yield deployment


@pytest.fixture
def logs(request: pytest.FixtureRequest) -> Iterator[list[Deployment]]:
    """Deployments the test made: their logs go into the report when it fails (conftest's hook)."""
    made: list[Deployment] = []
    request.node.mcp_logs = lambda: {
        f"{d.label}/{p.name}": p.log_tail() for d in made for p in d.processes
    }
    yield made


@pytest.fixture
async def client(http: httpx.AsyncClient) -> AsyncIterator[TasksClient]:
    yield TasksClient(http)


# -- 1. each answer mode, tasks in the web process ------------------------------------------------


@pytest.fixture(scope="module", params=["json", "sse"])
def embedded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    mode = request.param
    with sqlite(
        f"embedded-{mode}",
        tmp_path_factory.mktemp(f"tasks-{mode}"),
        ["web"],
        MCP_RESPONSE_MODE=mode,
    ) as deployment:
        yield deployment


@pytest.fixture
def single(embedded: Deployment, logs: list[Deployment]) -> Deployment:
    embedded.ensure_running()
    logs.append(embedded)
    return embedded


async def test_a_question_is_answered_with_tasks_update(
    single: Deployment, client: TasksClient
) -> None:
    url = single.p1.url
    task_id = await client.create(url, "confirm_delete", {"filename": "report.txt"})
    asking, seen = await client.wait(url, task_id, "input_required")
    assert set(seen) <= {"working", "input_required"}, seen
    question = asking["inputRequests"]["confirm_delete"]
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "Delete report.txt?"
    assert question["params"]["requestedSchema"]["properties"] == {"confirm": {"type": "boolean"}}
    assert (await single.db.task(task_id))["worker"] == runs_on(single.p1)  # the embedded default

    await client.update(url, task_id, CONFIRM)
    done, seen = await client.wait(url, task_id, "completed", "failed", "cancelled")
    assert set(seen) <= {"working", "completed"}, seen
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted report.txt"}]
    assert not done["result"].get("isError")
    assert "inputRequests" not in done


async def test_a_tool_error_completes_the_task_with_is_error(
    single: Deployment, client: TasksClient
) -> None:
    task_id = await client.create(single.p1.url, "failing_job")
    done, _ = await client.wait(single.p1.url, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed", done
    assert done["result"]["isError"] is True
    assert done["result"]["content"] == [
        {"type": "text", "text": "The job failed: the input data is corrupt"}
    ]


async def test_a_protocol_error_fails_the_task_with_the_error(
    single: Deployment, client: TasksClient
) -> None:
    task_id = await client.create(single.p1.url, "protocol_error_job")
    done, _ = await client.wait(single.p1.url, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "failed", done
    assert done["error"]["code"] == -32603
    assert done["error"]["message"] == "The job could not run: its backing service is down"
    assert "result" not in done


async def test_tasks_cancel_ends_a_running_task_cancelled(
    single: Deployment, client: TasksClient
) -> None:
    url = single.p1.url
    task_id = await client.create(url, "slow_compute", {"seconds": 60, "label": "cancelled"})
    await single.db.wait_task_started(task_id)
    await client.cancel(url, task_id)
    ended, seen = await client.wait(url, task_id, "completed", "failed", "cancelled")
    assert ended["status"] == "cancelled", (ended, seen)
    assert "result" not in ended and "error" not in ended
    # Cancelling an ended task changes nothing (its row stays as it ended).
    await client.cancel(url, task_id)
    assert (await client.get(url, task_id))["status"] == "cancelled"


async def test_the_2025_11_25_form_in_a_session_from_the_same_rows(
    single: Deployment, http: httpx.AsyncClient
) -> None:
    confirm = {"action": "accept", "content": {"confirm": True}}
    client = HandshakeTasksClient(
        http, single.p1.url, answers={"elicitation/create": lambda params: confirm}
    )
    offered = await client.initialize()
    assert offered["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    # A question: the task waits for input, and tasks/result relays it on its stream.
    task_id = await client.create("confirm_delete", {"filename": "report.txt"}, ttl=60_000)
    await client.wait(task_id, "input_required")
    answer = await client.outcome(task_id)
    assert answer["result"]["content"] == [{"type": "text", "text": "Deleted report.txt"}]
    assert answer["result"]["_meta"][RELATED_TASK] == {"taskId": task_id}
    (question,) = client.server_requests
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "Delete report.txt?"
    assert question["params"]["_meta"][RELATED_TASK] == {"taskId": task_id}
    done = await client.get(task_id)
    assert done["status"] == "completed" and done["ttl"] == 60_000
    row = await single.db.task(task_id)
    assert row["worker"] == runs_on(single.p1) and row["status"] == "completed"

    # A tool error: the task is failed in this form, and tasks/result returns the tool's result.
    failing = await client.create("failing_job")
    failed = await client.outcome(failing)
    assert failed["result"]["isError"] is True
    assert (await client.get(failing))["status"] == "failed"

    # A protocol error is what tasks/result answers.
    broken = await client.create("protocol_error_job")
    error = (await client.outcome(broken))["error"]
    assert error == {
        "code": -32603,
        "message": "The job could not run: its backing service is down",
    }

    # Cancelled while it runs; cancelling it again is refused.
    slow = await client.create("slow_compute", {"seconds": 60, "label": "cancelled"})
    await single.db.wait_task_started(slow)
    assert (await client.cancel(slow))["status"] == "cancelled"
    again = await client.send("tasks/cancel", {"taskId": slow})
    assert again["error"]["code"] == -32602

    # The session's tasks, newest first.
    listed = [t["taskId"] for t in (await client.list())["tasks"]]
    assert listed[:4] == [slow, broken, failing, task_id]


# -- 2. the task outlives the web process that made it (worker backend) --------------------------


async def test_a_task_on_the_worker_outlives_the_web_process_that_made_it(
    tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    with sqlite(
        "outlives", tmp_path, ["web-a", "web-b"], workers=1, MCP_TASKS_BACKEND="database"
    ) as deployment:
        logs.append(deployment)
        a, b = deployment.servers
        worker = deployment.workers[0]
        b.stop()  # started later, on the same database, once A is gone

        # Long enough to still run once B is up after A died; the test waits for its end anyway.
        task_id = await client.create(a.url, "slow_compute", {"seconds": 10, "label": "survivor"})
        assert (await deployment.db.wait_task_started(task_id))["worker"] == runs_on(worker)
        a.kill()
        b.start()
        b.wait_ready()

        first = await client.get(b.url, task_id)
        assert first["status"] == "working", first
        done, seen = await client.wait(
            b.url, task_id, "completed", "failed", "cancelled", timeout=30
        )
        assert seen == ["working", "completed"], (seen, done)
        assert done["result"]["content"] == [{"type": "text", "text": "Computed survivor in 10 s"}]
        assert not a.running


# -- 3. a worker that dies fails its task -----------------------------------------------------------

#: A worker backend whose dead worker is noticed within seconds (a heartbeat every 0.5 s).
MORTAL_WORKER = {
    "MCP_TASKS_BACKEND": "database",
    "MCP_TASK_HEARTBEAT_SECONDS": "0.5",
    "MCP_TASK_HEARTBEAT_TIMEOUT": "2",
    "MCP_TASK_POLL_INTERVAL_MS": "200",
}


async def test_a_task_whose_worker_was_killed_ends_failed(
    tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    with sqlite(
        "worker-death",
        tmp_path,
        ["web"],
        workers=1,
        **MORTAL_WORKER,
    ) as deployment:
        logs.append(deployment)
        url, worker = deployment.p1.url, deployment.workers[0]
        task_id = await client.create(url, "slow_compute", {"seconds": 60, "label": "orphan"})
        assert (await deployment.db.wait_task_started(task_id))["worker"] == runs_on(worker)
        worker.kill()

        ended, seen = await client.wait(
            url, task_id, "completed", "failed", "cancelled", timeout=15
        )
        assert ended["status"] == "failed", (ended, seen)
        assert ended["error"]["code"] == -32603
        assert "process running this task stopped" in ended["error"]["message"], ended["error"]
        row = await deployment.db.task(task_id)
        assert row["status"] == "failed" and row["finished_at"] is not None


async def test_a_2025_11_25_task_whose_worker_was_killed_ends_failed(
    tmp_path: Path, http: httpx.AsyncClient, logs: list[Deployment]
) -> None:
    with sqlite(
        "worker-death-2025",
        tmp_path,
        ["web"],
        workers=1,
        **MORTAL_WORKER,
    ) as deployment:
        logs.append(deployment)
        worker = deployment.workers[0]
        client = HandshakeTasksClient(http, deployment.p1.url)
        await client.initialize()
        task_id = await client.create("slow_compute", {"seconds": 60, "label": "orphan"})
        assert (await deployment.db.wait_task_started(task_id))["worker"] == runs_on(worker)
        worker.kill()

        ended, seen = await client.wait(task_id, "completed", "failed", "cancelled", timeout=15)
        assert ended["status"] == "failed", (ended, seen)
        assert "process running this task stopped" in ended["statusMessage"], ended
        error = (await client.outcome(task_id))["error"]
        assert error["code"] == -32603 and "process running this task stopped" in error["message"]


# -- 4. tasks/cancel on one process stops the task running on another -------------------------------


async def test_tasks_cancel_on_another_process_stops_the_work(
    tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    # One running call per caller: while the task runs on A, A refuses the caller's other calls,
    # so A answering again shows its runner stopped (and gave its slot back).
    with sqlite(
        "cancel-elsewhere", tmp_path, ["web-a", "web-b"], MCP_MAX_RUNNING_PER_USER="1"
    ) as deployment:
        logs.append(deployment)
        a, b = deployment.servers
        task_id = await client.create(a.url, "slow_compute", {"seconds": 60, "label": "stopped"})
        assert (await deployment.db.wait_task_started(task_id))["worker"] == runs_on(a)
        status, refused = await client.send(
            a.url, "tools/call", {"name": "greet", "arguments": {"name": "A"}}
        )
        assert status == 429 and refused["error"]["data"]["limit"] == "RUNNING_PER_USER", (
            status,
            refused,
        )

        await client.cancel(b.url, task_id)
        assert (await client.get(b.url, task_id))["status"] == "cancelled"
        greeted = await until_answered(client, a.url)
        assert greeted["content"] == [{"type": "text", "text": "Hello, A!"}]
        assert (await client.get(a.url, task_id))["status"] == "cancelled"
        assert (await deployment.db.task(task_id))["status"] == "cancelled"


async def until_answered(client: TasksClient, url: str) -> dict[str, Any]:
    """Call greet until the running cap lets it through (bounded)."""
    answer: dict[str, Any] = {}

    async def greeted() -> dict[str, Any] | None:
        status, reply = await client.send(
            url, "tools/call", {"name": "greet", "arguments": {"name": "A"}}
        )
        answer.update(reply)
        return dict(reply["result"]) if status == 200 else None

    return await until(
        greeted,
        15,
        interval=0.1,
        failure=lambda: f"A still refuses calls: its runner did not stop; last answer {answer}",
    )


# -- 5. PostgreSQL + Redis: two web processes and a worker -------------------------------------------


async def test_postgres_redis_create_on_one_answer_on_another_read_on_the_first(
    services: None, tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    database, layer = PostgresDatabase(), RedisDatabase()
    database.create()
    try:
        layer.claim()
        env = base_env(DATABASE_URL=database.url, REDIS_URL=layer.url, MCP_TASKS_BACKEND="database")
        with deployed(
            "postgres-redis-tasks",
            tmp_path,
            env,
            Inspector(postgres_url=database.url),
            ["web-a", "web-b"],
            1,
        ) as deployment:
            logs.append(deployment)
            a, b = deployment.servers
            task_id = await client.create(a.url, "confirm_delete", {"filename": "ledger.csv"})
            asking, _ = await client.wait(b.url, task_id, "input_required")
            assert list(asking["inputRequests"]) == ["confirm_delete"]
            assert (await deployment.db.task(task_id))["worker"] == runs_on(deployment.workers[0])

            await client.update(b.url, task_id, CONFIRM)
            done, seen = await client.wait(a.url, task_id, "completed", "failed", "cancelled")
            assert done["status"] == "completed", (done, seen)
            assert done["result"]["content"] == [{"type": "text", "text": "Deleted ledger.csv"}]
    finally:
        layer.release()
        database.drop()


LIVE_CAP, CREATES = 5, 40


async def create_at_once(deployment: Deployment, client: TasksClient) -> None:
    """Fire CREATES task calls at once, split over the deployment's two web processes, and
    check that exactly LIVE_CAP tasks were made (and are live) and every other call refused."""
    a, b = deployment.servers
    # Every call asks a question, so each task it makes stays live (input_required).
    answers = await asyncio.gather(
        *(
            client.send(
                (a if n % 2 else b).url,
                "tools/call",
                {"name": "confirm_delete", "arguments": {"filename": f"f{n}"}},
            )
            for n in range(CREATES)
        )
    )

    made = [answer["result"] for _, answer in answers if "result" in answer]
    refused = [answer["error"] for _, answer in answers if "error" in answer]
    assert len(made) == LIVE_CAP, answers
    assert all(task["resultType"] == "task" for task in made), made
    assert len(refused) == CREATES - LIVE_CAP, refused
    assert all(error["data"]["limit"] == "LIVE_TASKS_PER_USER" for error in refused), refused
    live = await deployment.db.arows(
        "SELECT count(*) FROM mcp_django_task WHERE status IN ('working', 'input_required')"
    )
    assert live[0][0] == LIVE_CAP


async def test_concurrent_creates_on_two_processes_on_postgresql_never_pass_the_live_task_cap(
    services: None, tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    database = PostgresDatabase()
    database.create()
    try:
        env = base_env(DATABASE_URL=database.url, MCP_MAX_LIVE_TASKS_PER_USER=str(LIVE_CAP))
        with deployed(
            "postgres-live-cap",
            tmp_path,
            env,
            Inspector(postgres_url=database.url),
            ["web-a", "web-b"],
        ) as deployment:
            logs.append(deployment)
            await create_at_once(deployment, client)
    finally:
        database.drop()


async def test_concurrent_creates_on_two_processes_on_sqlite_never_pass_the_live_task_cap(
    tmp_path: Path, client: TasksClient, logs: list[Deployment]
) -> None:
    with sqlite(
        "sqlite-live-cap", tmp_path, ["web-a", "web-b"], MCP_MAX_LIVE_TASKS_PER_USER=str(LIVE_CAP)
    ) as deployment:
        logs.append(deployment)
        await create_at_once(deployment, client)
