"""The ASGI servers the end-to-end tests and the conformance runner serve the example site with.

``MCP_TEST_SERVERS`` (comma-separated: ``daphne``, ``uvicorn``, ``granian``) chooses them for the
whole run; the e2e session fixtures and tests/conformance/test_conformance.py run once per
server. Unset, a developer's machine uses Daphne (what ``make run`` serves with) and CI
(``CI=true``) Daphne and uvicorn: each server adds three to five minutes to the run, and with
Granian too a clean-clone .ci/run went past its 29-minute limit once the matrix cell, the
browser tests and the docs build joined it. ``MCP_TEST_SERVERS=daphne,uvicorn,granian`` runs all.

Standard library only: tests/conformance/run_conformance.py imports it as a script.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

SERVERS = ("daphne", "uvicorn", "granian")
DEFAULT_SERVERS = ("daphne",)
CI_SERVERS = ("daphne", "uvicorn")

#: How long a server may wait for open connections (SSE streams never end by themselves) when
#: it is stopped, before it drops them. Daphne drops them at once.
GRACEFUL_SECONDS = 5

APPLICATION = "example_site.asgi:application"
#: The example site's WSGI application, which gunicorn serves (the endpoint's plain view).
WSGI_APPLICATION = "example_site.wsgi:application"

#: The WSGI servers (not in SERVERS: tests ask for them by name): gunicorn's sync worker, its
#: gthread worker (threads of one process), and ``manage.py runserver`` without daphne, which
#: serves the settings' WSGI_APPLICATION whatever ``application`` says.
WSGI_SERVERS = ("gunicorn", "gunicorn-gthread", "runserver")
#: Threads of the gthread worker: enough for a client's requests that overlap.
GTHREAD_THREADS = 4
#: What tells the example site to leave daphne out of INSTALLED_APPS, so that ``runserver``
#: serves WSGI (example_site/settings.py).
RUNSERVER_WSGI_ENV = {"DJANGO_RUNSERVER": "wsgi"}


def free_port() -> int:
    """A loopback port free right now (for a server that must know its own URL before it
    starts, so cannot take port 0 and report back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def servers_under_test() -> list[str]:
    """The servers named by MCP_TEST_SERVERS, else the default of this machine (CI or not)."""
    value = os.environ.get("MCP_TEST_SERVERS", "").strip()
    if not value:
        return list(CI_SERVERS if os.environ.get("CI") == "true" else DEFAULT_SERVERS)
    names = list(dict.fromkeys(name.strip().lower() for name in value.split(",") if name.strip()))
    unknown = [name for name in names if name not in SERVERS]
    if unknown:
        raise ValueError(
            f"MCP_TEST_SERVERS: unknown server(s) {', '.join(unknown)}; choose from {', '.join(SERVERS)}"
        )
    return names


def server_command(
    server: str, port: int, application: str = APPLICATION, options: Sequence[str] = ()
) -> list[str]:
    """The command line serving ``application`` on 127.0.0.1:``port`` (one process, one worker);
    ``options`` go to the server (uvicorn's ``--root-path /app``)."""
    if server == "daphne":
        arguments = ["daphne", "-b", "127.0.0.1", "-p", str(port)]
    elif server == "uvicorn":
        # uvicorn waits for open responses on SIGTERM: an SSE stream would hold it forever.
        arguments = [
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--timeout-graceful-shutdown",
            str(GRACEFUL_SECONDS),
        ]
    elif server == "granian":
        # granian's main process supervises one worker process, which runs the application.
        arguments = [
            "granian",
            "--interface",
            "asgi",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers-kill-timeout",
            str(GRACEFUL_SECONDS),
        ]
    elif server in ("gunicorn", "gunicorn-gthread"):
        # A WSGI server (not one of SERVERS): one worker process, sync or with threads.
        arguments = [
            "gunicorn",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--graceful-timeout",
            str(GRACEFUL_SECONDS),
        ]
        if server == "gunicorn-gthread":
            arguments += ["--worker-class", "gthread", "--threads", str(GTHREAD_THREADS)]
    elif server == "runserver":
        # Django's development server, one process (no autoreloader); WSGI once the environment
        # carries RUNSERVER_WSGI_ENV (with daphne installed it would serve ASGI instead).
        return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    else:
        raise ValueError(
            f"unknown server {server!r}; choose from {', '.join(SERVERS + WSGI_SERVERS)}"
        )
    return [sys.executable, "-m", *arguments, *options, application]


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux; empty elsewhere or once it has exited)."""
    try:
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]
    except (OSError, ValueError):
        return []


def application_pid(server: str, pid: int) -> int:
    """The process that runs the application: granian's worker, else the server process itself."""
    if server == "granian":
        workers = children(pid)
        if workers:
            return workers[0]
    return pid


def start(
    server: str,
    port: int,
    env: dict[str, str],
    log_path: Path,
    cwd: Path,
    application: str = APPLICATION,
    options: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``server`` in a process group of its own (so that ``stop`` reaches its workers too),
    its output appended to ``log_path``."""
    if server == "runserver":
        env = {**env, **RUNSERVER_WSGI_ENV}
    with log_path.open("ab") as log:
        return subprocess.Popen(
            server_command(server, port, application, options),
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes], timeout: float = GRACEFUL_SECONDS + 10) -> None:
    """Stop a server started by ``start``: SIGTERM, then SIGKILL, each wait bounded; then kill
    whatever is left in its process group (granian's worker, if its main process had to be killed)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # empty group: all have exited
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def db_worker(
    env: dict[str, str], log_path: Path, cwd: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """django-tasks-db's worker (``manage.py db_worker`` in ``cwd``) on the database ``env``
    names, its output appended to ``log_path``, until the block ends."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "db_worker", "--no-reload"],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        # db_worker's first SIGTERM waits for the task in hand; the second stops it.
        stop(process, timeout=10)
