"""Start and stop the servers the bench compares, each a subprocess on a free 127.0.0.1 port.

Kinds: ours under three ASGI servers (Daphne, uvicorn, Granian), all serving
bench.oursite.asgi (the example site plus bench.surface), and the reference, the official SDK's
MCPServer under uvicorn (bench/reference_server.py). For the tools/call case, each server's
floor: a bare ASGI app that parses JSON-RPC and answers (bench/floor_server.py), under uvicorn
and under Daphne, what any server's cost starts from on that server. For the 2026-07-28 case,
the peer: django-mcpz, a plain sync Django view, under gunicorn in its own virtualenv
(bench/peer/), and ours served the same way, as a plain view under gunicorn's sync and gthread
workers (bench.oursite.wsgi, issue 46), with the floor of that deployment: Django with ours's
settings and one plain view that echoes (bench/floor_wsgi.py) under gunicorn's sync worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from bench import client as mcp_client
from bench import procs
from tests.multiprocess.servers import RedisDatabase as _ClaimedRedisDatabase

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
HOST = "127.0.0.1"
APP = "bench.oursite.asgi:application"
OURS_SETTINGS = "bench.oursite.settings"
OURS = ("ours-uvicorn", "ours-daphne", "ours-granian")
REFERENCE = "reference"
KINDS = (*OURS, REFERENCE)
# The floor on each server: bench/floor_server.py's bare app under uvicorn ("floor", its name
# before there was a second) and under Daphne. Not MCP servers: they serve the tools and set-up
# cases only, and the report shows them beside the ours-* kind on the same server.
FLOOR = "floor"
FLOOR_DAPHNE = "floor-daphne"
# Ours under uvicorn with the audit trail and every quota off: what the operations layer costs is
# ours-uvicorn against this, in the same run (issue 27).
OPS_OFF = "ours-uvicorn-opsoff"
# Kinds a full run adds to the tools/call case only, in report order: what the targets are
# judged against besides the reference.
TOOLS_ONLY = (OPS_OFF, FLOOR, FLOOR_DAPHNE)
# Ours under Daphne with the audit trail and every quota off, the twin of OPS_OFF on Daphne: the
# modern case judges the operations layer on both servers (issue 45).
OPS_OFF_DAPHNE = "ours-daphne-opsoff"
# The Django peer: django-mcpz 1.2.0, a plain sync view, under gunicorn with one sync worker, in
# its own virtualenv (peer_python), serving bench/peer/'s echo tool. It speaks 2026-07-28 and
# the 2025 revisions statelessly (no session ids), so it serves the modern case only.
PEER = "peer"
PEER_DIR = BENCH / "peer"
PEER_VENV = BENCH / ".venvs" / "peer"
# Ours as a WSGI deployment serves it: the endpoint's plain view, no ASGI router, under gunicorn
# with one worker, sync (as the peer) or gthread. Only what fits one request and one response
# is served there, so they run the 2026-07-28 case only (issue 46).
GUNICORN_SYNC = "ours-gunicorn"
GUNICORN_GTHREAD = "ours-gthread"
WSGI_KINDS = (GUNICORN_SYNC, GUNICORN_GTHREAD)
WSGI_APP = "bench.oursite.wsgi:application"
# gthread's threads per worker: the c=8 load fits without queueing.
GTHREAD_THREADS = 8
# The floor of ours-gunicorn: Django with ours's settings (apps, middleware, database) but one
# route, the endpoint's path, to a plain view that parses the call and echoes it
# (bench/floor_wsgi.py), under gunicorn's sync worker as ours-gunicorn runs: what Django and that
# server take of any Django MCP server's call. ours-gthread has none: gthread keeps connections
# alive and runs a thread pool, so a sync floor would not be its server's cost.
FLOOR_GUNICORN = "floor-gunicorn"
FLOOR_WSGI_APP = "bench.oursite.floor_wsgi:application"
FLOOR_WSGI_SETTINGS = "bench.oursite.floor_settings"
FLOORS = {"ours-uvicorn": FLOOR, "ours-daphne": FLOOR_DAPHNE, GUNICORN_SYNC: FLOOR_GUNICORN}
# ours-gunicorn with the audit trail and every quota off, its operations layer's twin.
OPS_OFF_GUNICORN = "ours-gunicorn-opsoff"
# Each ours-* kind the operations layer is measured on, and its twin with that layer off.
OPS_OFF_TWINS = {
    "ours-uvicorn": OPS_OFF,
    "ours-daphne": OPS_OFF_DAPHNE,
    GUNICORN_SYNC: OPS_OFF_GUNICORN,
}
OPS_OFF_KINDS = tuple(OPS_OFF_TWINS.values())
# The sync worker's kinds: one command line shape (server_command).
GUNICORN_SYNC_KINDS = (GUNICORN_SYNC, OPS_OFF_GUNICORN, FLOOR_GUNICORN)
# Kinds only the 2026-07-28 case runs, in report order.
MODERN_ONLY = (OPS_OFF_DAPHNE, PEER, *WSGI_KINDS, OPS_OFF_GUNICORN, FLOOR_GUNICORN)
# Every kind the 2026-07-28 case runs, in report order.
MODERN_KINDS = (
    "ours-uvicorn",
    "ours-daphne",
    REFERENCE,
    PEER,
    *WSGI_KINDS,
    OPS_OFF,
    OPS_OFF_DAPHNE,
    OPS_OFF_GUNICORN,
    FLOOR,
    FLOOR_DAPHNE,
    FLOOR_GUNICORN,
)
# The kinds that are a script of bench/ under uvicorn.run, not our site.
SCRIPTS = {REFERENCE: "reference_server.py", FLOOR: "floor_server.py"}
FLOOR_APP = "bench.floor_server:application"
# 10,000 idle streams are 10,000 requests in flight: no server may cap them below that.
BACKLOG = 8192
MAX_IN_FLIGHT = 32768
# --pin: each server's process tree on one CPU, wrk on the other.
SERVER_CPU, LOADGEN_CPU = 0, 1
POSTGRES_ADMIN_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379


def server_command(kind: str, port: int, mode: str) -> list[str]:
    py = sys.executable
    if kind in SCRIPTS:
        return [py, str(BENCH / SCRIPTS[kind]), "--port", str(port), f"--{mode}"]
    if kind == PEER:
        # One sync worker under gunicorn's master (the CPU meter sums both); gunicorn writes no
        # access log unless told to. A sync worker closes the connection after each answer: that
        # is how this deployment serves, so wrk reconnects for each call.
        return [str(peer_python()), "-m", "gunicorn", "--chdir", str(PEER_DIR),
                "--bind", f"{HOST}:{port}", "--workers", "1", "--worker-class", "sync",
                "--backlog", str(BACKLOG), "--log-level", "warning",
                "peersite.wsgi:application"]  # fmt: skip
    if kind in WSGI_KINDS or kind in GUNICORN_SYNC_KINDS:
        # The peer's deployment, with our site (or its floor, whose settings come from its
        # environment: server_env): one worker under gunicorn's master, no access log.
        worker = ["--worker-class", "sync"] if kind in GUNICORN_SYNC_KINDS else [
            "--worker-class", "gthread", "--threads", str(GTHREAD_THREADS)]  # fmt: skip
        app = FLOOR_WSGI_APP if kind == FLOOR_GUNICORN else WSGI_APP
        return [py, "-m", "gunicorn", "--bind", f"{HOST}:{port}", "--workers", "1", *worker,
                "--backlog", str(BACKLOG), "--log-level", "warning", app]  # fmt: skip
    if kind in ("ours-daphne", OPS_OFF_DAPHNE, FLOOR_DAPHNE):
        # -v 0: no access log, like the reference; an explicit endpoint so the listen backlog is
        # not Twisted's default of 50. The floor's mode comes from its environment (floor_env).
        app = FLOOR_APP if kind == FLOOR_DAPHNE else APP
        return [
            py,
            "-m",
            "daphne",
            "-v",
            "0",
            "-e",
            f"tcp:port={port}:interface={HOST}:backlog={BACKLOG}",
            app,
        ]
    if kind in ("ours-uvicorn", OPS_OFF):
        # The reference's own server and settings: default loop and HTTP parser (whatever "auto"
        # finds installed, the same for both), access log off.
        return [py, "-m", "uvicorn", "--host", HOST, "--port", str(port), "--no-access-log", "--lifespan", "on",
                "--log-level", "warning", "--backlog", str(BACKLOG), APP]  # fmt: skip
    if kind == "ours-granian":
        # One worker (a child process of granian's supervisor: the CPU meter sums the tree);
        # backpressure caps requests in flight per worker, 1,024 by default.
        return [py, "-m", "granian", "--interface", "asgi", "--host", HOST, "--port", str(port), "--workers", "1",
                "--backlog", str(BACKLOG), "--backpressure", str(MAX_IN_FLIGHT), "--no-ws",
                "--log-level", "warning", "--no-access-log", APP]  # fmt: skip
    raise ValueError(f"unknown server kind {kind!r}")


def peer_packages() -> list[str]:
    """What the peer's virtualenv holds: django-mcpz 1.2.0, gunicorn and our Django's major."""
    major = metadata.version("Django").split(".")[0]
    return ["django-mcpz==1.2.0", "gunicorn", f"Django=={major}.*"]


def peer_python() -> Path:
    """The python of the peer's virtualenv, bench/.venvs/peer/, made (or remade, when the
    packages it should hold changed) on first use; never the project's .venv."""
    python = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / "bench-packages.txt"
    wanted = "\n".join(peer_packages()) + "\n"
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(PEER_VENV)],
        [str(python), "-m", "pip", "install", "--quiet", *peer_packages()],
    ]
    for cmd in steps:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            raise ServerError(f"making the peer's virtualenv timed out: {' '.join(cmd)}") from None
        if p.returncode != 0:
            raise ServerError(
                f"making the peer's virtualenv failed (exit {p.returncode}): {' '.join(cmd)}\n"
                f"{(p.stdout + p.stderr)[-2000:]}"
            )
    marker.write_text(wanted)
    return python


def pinned(cmd: list[str], cpu: int | None) -> list[str]:
    """`cmd` under `taskset -c cpu` (which execs it: same pid, and every process and thread it
    starts inherits the CPU), or as it is for None. Issue 45 measured with the server on one
    core and wrk on the other."""
    if cpu is None:
        return cmd
    return ["taskset", "-c", str(cpu), *cmd]


def can_pin() -> str | None:
    """Why servers and wrk cannot each get a CPU of their own here, or None."""
    if shutil.which("taskset") is None:
        return "taskset is not installed (util-linux)"
    cpus = os.sched_getaffinity(0)
    if not {SERVER_CPU, LOADGEN_CPU} <= cpus:
        return (
            f"CPUs {SERVER_CPU} and {LOADGEN_CPU} are not both available "
            f"(this process may use {sorted(cpus)})"
        )
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class ServerError(Exception):
    pass


@dataclass
class Server:
    kind: str
    mode: str
    port: int
    proc: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise ServerError(
                f"{self.kind} server died with {self.proc.returncode}:\n{self.log_tail()}"
            )


@dataclass
class Env:
    tmp: Path
    logs: Path
    _template: Path | None = field(default=None, repr=False)

    def sqlite_file(self, port: int) -> Path:
        """A fresh migrated SQLite file: migrated once per run, copied for each server, so no
        case sees an earlier case's sessions."""
        if self._template is None:
            template = self.tmp / "template.sqlite3"
            migrate(ours_env(mode="json", db_path=template))
            self._template = template
        path = self.tmp / f"ours-{port}.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self._template) + suffix)
            if src.exists():
                shutil.copyfile(src, str(path) + suffix)
        return path


def ours_env(mode: str, db_path: Path | None = None, database_url: str | None = None, redis_url: str | None = None,
             operations: bool = True, settings: str = OURS_SETTINGS) -> dict[str, str]:  # fmt: skip
    e = dict(os.environ)
    # Only what the case asks for: a DATABASE_URL in the caller's environment must not leak in.
    for key in ("DATABASE_URL", "REDIS_URL", "BENCH_DB_PATH", "BENCH_OPERATIONS"):
        e.pop(key, None)
    e.update(
        DJANGO_SETTINGS_MODULE=settings,
        PYTHONPATH=str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else ""),
        BENCH_RESPONSE_MODE=mode,
        PYTHONUNBUFFERED="1",
    )
    if db_path is not None:
        e["BENCH_DB_PATH"] = str(db_path)
    if database_url:
        e["DATABASE_URL"] = database_url
    if redis_url:
        e["REDIS_URL"] = redis_url
    if not operations:
        e["BENCH_OPERATIONS"] = "off"
    return e


def floor_env(mode: str) -> dict[str, str]:
    """The environment of the floor under Daphne, which imports bench.floor_server:application."""
    e = dict(os.environ, PYTHONUNBUFFERED="1", BENCH_RESPONSE_MODE=mode)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def server_env(kind: str, mode: str, sqlite_file: Callable[[], Path], database_url: str | None = None,
               redis_url: str | None = None) -> dict[str, str]:  # fmt: skip
    """The environment `kind` runs in. Ours and its twins and floor-gunicorn get ours's settings
    on `database_url`, or else on the SQLite file `sqlite_file` makes (only called then: it
    migrates); floor-gunicorn's settings module is ours's with its own URLconf."""
    if kind in SCRIPTS:
        return dict(os.environ, PYTHONUNBUFFERED="1")
    if kind == PEER:
        proc_env = dict(
            os.environ, PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="peersite.settings"
        )
        for key in ("PYTHONPATH", "VIRTUAL_ENV"):
            proc_env.pop(key, None)
        return proc_env
    if kind == FLOOR_DAPHNE:
        return floor_env(mode)
    settings = FLOOR_WSGI_SETTINGS if kind == FLOOR_GUNICORN else OURS_SETTINGS
    operations = kind not in OPS_OFF_KINDS
    if database_url:
        return ours_env(mode, database_url=database_url, redis_url=redis_url, operations=operations,
                        settings=settings)  # fmt: skip
    return ours_env(mode, db_path=sqlite_file(), operations=operations, settings=settings)


def migrate(proc_env: dict[str, str]) -> None:
    cmd = [
        sys.executable,
        "-m",
        "django",
        "migrate",
        "--noinput",
        "--settings=bench.oursite.settings",
    ]
    try:
        p = subprocess.run(
            cmd, cwd=ROOT, env=proc_env, capture_output=True, text=True, timeout=300, check=False
        )
    except subprocess.TimeoutExpired:
        raise ServerError("migrate timed out after 300 s") from None
    if p.returncode != 0:
        raise ServerError(f"migrate failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")


def start_server(
    kind: str,
    mode: str,
    env: Env,
    database_url: str | None = None,
    redis_url: str | None = None,
    tag: str = "",
    probe: str = "initialize",
    pin: bool = False,
) -> Server:
    """Start one server and wait until it answers initialize (`probe="modern"`: a 2026-07-28
    tools/call of echo, which is all the peer answers). Ours runs on a fresh SQLite file with the
    in-memory channel layer, or on `database_url` (already migrated) and `redis_url`. `pin`
    pins the server's whole process tree to CPU 0 (wrk then runs on CPU 1)."""
    port = free_port()
    log_path = env.logs / f"{kind}-{mode}{tag}-{port}.log"
    cmd = pinned(server_command(kind, port, mode), SERVER_CPU if pin else None)
    proc_env = server_env(kind, mode, lambda: env.sqlite_file(port), database_url, redis_url)
    with open(log_path, "wb") as logf:
        # The fd limit is inherited: run.main() raised it before any server starts.
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=proc_env,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(kind, mode, port, proc, log_path)
    t0 = time.monotonic()
    first_answer = None
    last_err = ""
    # Up to 60 s to start listening, but a server that answers wrongly gets only 5 s more.
    while time.monotonic() < t0 + 60 and (
        first_answer is None or time.monotonic() < first_answer + 5
    ):
        if proc.poll() is not None:
            raise ServerError(
                f"{kind} server exited with {proc.returncode} before serving:\n{server.log_tail()}"
            )
        try:
            asyncio.run(asyncio.wait_for(_probe(port, probe), 5))
            return server
        except mcp_client.HTTPError as exc:
            first_answer = first_answer or time.monotonic()
            last_err = f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            last_err = f"{type(exc).__name__}: {exc}"
        time.sleep(0.3)
    stop_server(server)
    raise ServerError(
        f"{kind} server did not serve {probe}; last error: {last_err}\n"
        f"server log:\n{server.log_tail()}"
    )


async def _probe(port: int, probe: str) -> None:
    if probe == "modern":
        await mcp_client.modern_echo(HOST, port, "bench-probe")
        return
    session = await mcp_client.open_session(HOST, port)
    await session.conn.close()


def stop_server(server: Server) -> None:
    if server.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGTERM)
        try:
            server.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(10)
    # A worker may outlive its leader (granian's): end what is left of the server's own session.
    for pid, st in procs.all_processes().items():
        if int(st[4]) == server.proc.pid:  # stat field 6, the session id (start_new_session)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def roots(servers: list[Server]) -> list[int]:
    return [s.pid for s in servers]


def rss(server: Server) -> int:
    return procs.tree_rss([server.pid])


# --------------------------------------------------------------------------- scale-out services


class PostgresDatabase:
    """A throwaway database on the local PostgreSQL, dropped at the end."""

    def __init__(self) -> None:
        self.name = f"mcp_bench_{os.getpid()}_{secrets.token_hex(4)}"
        base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
        self.url = f"{base}/{self.name}"

    def create(self) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=5, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=5, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class RedisDatabase(_ClaimedRedisDatabase):
    """A Redis database number no one else uses: the multi-process tests' claim (so both can run
    at once), under bench's own marker."""

    MARKER = "mcp_django:bench:owner"

    def claim(self) -> None:
        try:
            super().claim()
        except RuntimeError as exc:
            raise ServerError(str(exc)) from None


def services_problem() -> str | None:
    """Why PostgreSQL or Redis cannot be used, or None."""
    for name, port in (("PostgreSQL", 5432), ("Redis", REDIS_PORT)):
        try:
            with socket.create_connection((HOST, port), timeout=2):
                pass
        except OSError as exc:
            return f"{name} is not answering on {HOST}:{port} ({exc})"
    return None
