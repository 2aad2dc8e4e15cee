"""Real servers for the multi-process tests: daphne processes of the example site, the
database they share, and the services (PostgreSQL, Redis) behind them.

Every wait here is bounded; every process started here is stopped by the fixture that
started it.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.asgi_servers import free_port
from tests.polling import until, until_sync

ROOT = Path(__file__).resolve().parents[2]

POSTGRES_URL = os.environ.get(
    "MCP_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379

HOW_TO_START = (
    "Start them with:\n"
    "  pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n"
    '  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
)

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
COMMAND_TIMEOUT = 120.0

# Variables that would point a server at some other database or layer than the test's own.
_SCRUBBED = (
    "DATABASE_URL",
    "REDIS_URL",
    "SQLITE_PATH",
    "MCP_RESPONSE_MODE",
    "MCP_SSE_MAX_CONNECTION_SECONDS",
    "DJANGO_SETTINGS_MODULE",
    "MCP_RATE_LIMIT",
    "MCP_RATE_LIMIT_PER_CLIENT",
    "MCP_RATE_LIMIT_PER_TOOL",
    "MCP_MAX_SESSIONS_PER_USER",
    "MCP_MAX_SESSIONS_PER_ADDRESS",
    "MCP_MAX_RUNNING_PER_SESSION",
    "MCP_MAX_RUNNING_PER_USER",
    "MCP_DISCONNECT_GRACE_SECONDS",
    "MCP_TASKS_BACKEND",
    "MCP_TASK_HEARTBEAT_SECONDS",
    "MCP_TASK_HEARTBEAT_TIMEOUT",
    "MCP_TASK_POLL_INTERVAL_MS",
)


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(
        DJANGO_SETTINGS_MODULE="example_site.settings",
        MCP_AUTH="none",
        MCP_LOG_LEVEL="INFO",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


# -- services ---------------------------------------------------------------------------------


def services_problem() -> str | None:
    """Say what is wrong with PostgreSQL or Redis, or None when both answer."""
    import psycopg
    import redis

    problems = []
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        problems.append(
            f"PostgreSQL at {POSTGRES_URL} is unreachable ({type(exc).__name__}: {str(exc).strip()[:200]})"
        )
    client = redis.Redis(
        host=REDIS_HOST, port=REDIS_PORT, socket_connect_timeout=3, socket_timeout=3
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        problems.append(
            f"Redis at {REDIS_HOST}:{REDIS_PORT} is unreachable ({type(exc).__name__}: {exc})"
        )
    finally:
        client.close()
    return "; ".join(problems) or None


class PostgresDatabase:
    """A database of its own for one test session, dropped at the end."""

    def __init__(self) -> None:
        self.name = f"mcp_mp_{os.getpid()}_{secrets.token_hex(4)}"
        base, _, _ = POSTGRES_URL.rpartition("/")
        self.url = f"{base}/{self.name}"

    def create(self) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=5, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=5, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class RedisDatabase:
    """A Redis database number that no one else uses, claimed with a marker key and flushed
    at the end (so parallel test sessions and other users of the server are left alone)."""

    MARKER = "mcp_django:multiprocess-tests:owner"

    def __init__(self) -> None:
        self.number: int | None = None
        self.token = f"{os.getpid()}-{secrets.token_hex(8)}"

    @property
    def url(self) -> str:
        return f"redis://{REDIS_HOST}:{REDIS_PORT}/{self.number}"

    def claim(self) -> None:
        import redis

        admin = redis.Redis(
            host=REDIS_HOST, port=REDIS_PORT, socket_connect_timeout=3, socket_timeout=3
        )
        try:
            count = int(admin.config_get("databases").get("databases", 16))
        finally:
            admin.close()
        candidates = list(range(1, count))
        random.shuffle(candidates)
        for number in candidates:
            client = redis.Redis(
                host=REDIS_HOST,
                port=REDIS_PORT,
                db=number,
                socket_connect_timeout=3,
                socket_timeout=3,
            )
            try:
                # Claim only an empty database; the marker is the only key we may find there.
                if client.set(self.MARKER, self.token, nx=True, ex=6 * 3600):
                    if client.dbsize() == 1:
                        self.number = number
                        return
                    client.delete(self.MARKER)
            finally:
                client.close()
        raise RuntimeError(
            f"No empty Redis database among 1..{count - 1} to run the multi-process tests in"
        )

    def release(self) -> None:
        import redis

        if self.number is None:
            return
        client = redis.Redis(
            host=REDIS_HOST,
            port=REDIS_PORT,
            db=self.number,
            socket_connect_timeout=3,
            socket_timeout=3,
        )
        try:
            if client.get(self.MARKER) == self.token.encode():
                client.flushdb()
        finally:
            client.close()
        self.number = None


def require_redis() -> None:
    """Skip the calling test when Redis does not answer (fail instead under CI=true), saying
    how to start it."""
    import pytest

    problem = services_problem()
    if problem is not None and "Redis" in problem:
        message = f"Redis must run on {REDIS_HOST}:{REDIS_PORT}: {problem}. {HOW_TO_START}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


# -- what the servers wrote -----------------------------------------------------------------------


class Inspector:
    """Read-only SQL on the servers' database (PostgreSQL or SQLite), from the test process."""

    def __init__(self, *, postgres_url: str | None = None, sqlite_path: Path | None = None) -> None:
        self.postgres_url = postgres_url
        self.sqlite_path = sqlite_path

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.postgres_url is not None:
            import psycopg

            with psycopg.connect(self.postgres_url, connect_timeout=5, autocommit=True) as conn:
                return list(conn.execute(sql, params).fetchall())
        assert self.sqlite_path is not None
        conn = sqlite3.connect(self.sqlite_path, timeout=20)
        try:
            return list(conn.execute(sql.replace("%s", "?"), params).fetchall())
        finally:
            conn.close()

    async def arows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self.rows, sql, *params)

    async def events(self, session_id: str, stream: str) -> list[tuple[int, str, bool]]:
        """The stored events of one stream: (seq, payload, closes_stream), in order."""
        rows = await self.arows(
            "SELECT seq, payload, closes_stream FROM mcp_django_event WHERE session_id = %s AND stream = %s ORDER BY seq",
            session_id,
            stream,
        )
        return [(int(seq), payload, bool(closes)) for seq, payload, closes in rows]

    async def wait_events(
        self, session_id: str, stream: str, *, at_least: int, timeout: float = 20.0
    ) -> list[tuple[int, str, bool]]:
        """Poll until a stream has at least ``at_least`` stored events (bounded)."""
        events: list[tuple[int, str, bool]] = []

        async def enough() -> list[tuple[int, str, bool]] | None:
            events[:] = await self.events(session_id, stream)
            return list(events) if len(events) >= at_least else None

        return await until(
            enough,
            timeout,
            interval=0.05,
            failure=lambda: f"stream {stream} has {len(events)} events, expected {at_least}",
        )

    async def task_run(self, run_id: int) -> dict[str, Any]:
        rows = await self.arows(
            "SELECT status, steps_done, steps_total, finished_at FROM live_taskrun WHERE id = %s",
            run_id,
        )
        assert rows, f"no TaskRun {run_id}"
        status, done, total, finished = rows[0]
        return {"status": status, "steps_done": done, "steps_total": total, "finished_at": finished}

    async def wait_task_run(
        self, run_id: int, *, until_not: str = "running", timeout: float = 20.0
    ) -> dict[str, Any]:
        """Poll a TaskRun row until its status leaves ``until_not`` (bounded)."""
        run: dict[str, Any] = {}

        async def left() -> dict[str, Any] | None:
            run.update(await self.task_run(run_id))
            return dict(run) if run["status"] != until_not else None

        return await until(
            left,
            timeout,
            interval=0.05,
            failure=lambda: f"TaskRun {run_id} still {until_not!r}: {run}",
        )

    async def task(self, task_id: str) -> dict[str, Any]:
        """A durable task's row (mcp_django.models.Task): who runs it, and how it stands."""
        rows = await self.arows(
            "SELECT status, worker, heartbeat_at, finished_at FROM mcp_django_task WHERE id = %s",
            task_id,
        )
        assert rows, f"no Task {task_id}"
        status, worker, heartbeat, finished = rows[0]
        return {
            "status": status,
            "worker": worker,
            "heartbeat_at": heartbeat,
            "finished_at": finished,
        }

    async def wait_task_started(self, task_id: str, *, timeout: float = 20.0) -> dict[str, Any]:
        """Poll a task's row until a process has claimed it (bounded)."""
        task: dict[str, Any] = {}

        async def claimed() -> dict[str, Any] | None:
            task.update(await self.task(task_id))
            return dict(task) if task["worker"] else None

        return await until(
            claimed,
            timeout,
            interval=0.05,
            failure=lambda: f"Task {task_id} not started by any process: {task}",
        )

    async def server_request_state(self, session_id: str, request_id: str) -> str | None:
        rows = await self.arows(
            "SELECT state FROM mcp_django_serverrequest WHERE session_id = %s AND request_id = %s",
            session_id,
            request_id,
        )
        return rows[0][0] if rows else None


# -- processes ------------------------------------------------------------------------------------


@dataclass
class Server:
    """One daphne process serving the example site on a loopback port."""

    name: str
    env: dict[str, str]
    log_dir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    _log: Any = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def start(self) -> None:
        assert self.proc is None, f"{self.name} is already running"
        self.port = free_port()
        self.starts += 1
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in _reap)
        self._log.write(
            f"\n==== {self.name} start #{self.starts} on port {self.port} ====\n".encode()
        )
        self._log.flush()
        self.proc = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(self.port),
            "example_site.asgi:application",
        ]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until the endpoint answers a session-less ping."""
        proc = self.proc
        assert proc is not None
        ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        with httpx.Client(timeout=2.0) as client:

            def answers() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {proc.returncode} while starting:\n{self.log_tail()}"
                    )
                try:
                    # 401: the application answers, to a ping that signs in as nobody (MCP_AUTH=django).
                    return client.post(self.url, json=ping, headers=headers).status_code in (
                        200,
                        401,
                    )
                except httpx.TransportError:
                    return False

            until_sync(
                answers,
                timeout,
                interval=0.1,
                failure=lambda: f"{self.name} did not answer:\n{self.log_tail()}",
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, as when a machine dies."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._reap()

    def restart(self) -> Server:
        self.stop()
        self.start()
        self.wait_ready()
        return self

    def _reap(self) -> None:
        assert self.proc is not None
        try:
            self.proc.wait(STOP_TIMEOUT)
        finally:
            self.proc = None
            if self._log is not None:
                self._log.close()
                self._log = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_tail(self, since: int = 0, limit: int = 20_000) -> str:
        if not self.log_path.exists():
            return "(no log)"
        data = self.log_path.read_bytes()[since:]
        return data[-limit:].decode("utf-8", "replace")


class Worker(Server):
    """One ``manage.py db_worker`` process (django-tasks-db, MCP_TASKS_BACKEND=database): it runs
    the durable tasks the web processes enqueue. Not reloading: the process is the worker, so
    killing it kills the task it runs."""

    def command(self) -> list[str]:
        return [sys.executable, "manage.py", "db_worker", "--no-reload", "--interval", "0.2"]

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        # Jobs wait in the database until it polls: nothing to wait for but a clean start.
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.proc.returncode} while starting:\n{self.log_tail()}"
            )


@dataclass
class Deployment:
    """The example site as deployed for one family of tests.

    ``p1`` and ``p2`` are two processes sharing PostgreSQL and Redis, or the same single
    process on SQLite with the in-memory channel layer.
    """

    label: str
    env: dict[str, str]
    db: Inspector
    servers: list[Server]
    #: Task workers (db_worker) beside the web processes, started and stopped with them.
    workers: list[Worker] = field(default_factory=list)

    @property
    def p1(self) -> Server:
        return self.servers[0]

    @property
    def p2(self) -> Server:
        return self.servers[-1]

    @property
    def shared_layer(self) -> bool:
        """Whether other processes (management commands) reach the servers' channel layer."""
        return "REDIS_URL" in self.env

    @property
    def multiprocess(self) -> bool:
        return len(self.servers) > 1

    @property
    def processes(self) -> list[Server]:
        return [*self.servers, *self.workers]

    def start(self) -> None:
        for server in self.processes:
            server.start()
        for server in self.processes:
            server.wait_ready()

    def stop(self) -> None:
        for server in self.processes:
            server.stop()

    def ensure_running(self) -> None:
        for server in self.processes:
            if not server.running:
                server.restart()

    def manage(self, *args: str) -> str:
        """Run a management command against the servers' database (and layer), synchronously."""
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    async def amanage(self, *args: str) -> str:
        """Run a management command in a subprocess without blocking the event loop."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "manage.py",
            *args,
            cwd=ROOT,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), COMMAND_TIMEOUT)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{out.decode()}\n{err.decode()}"
            )
        return out.decode()
