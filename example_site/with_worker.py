"""Run a server command and django-tasks-db's worker side by side, and stop both together.

``make run`` uses it when ``MCP_TASKS_BACKEND=database``: durable tasks then run in the
worker (``manage.py db_worker``), not in Daphne. Usage::

    python -m example_site.with_worker -- daphne -b 127.0.0.1 -p 8000 example_site.asgi:application

Ctrl-C (SIGINT) or SIGTERM stops both; so does either of them exiting on its own, since the
site is not usable without the other. Each stop is bounded: a worker still inside a task that
waits for its client's answer is stopped at once rather than after that task.

Standard library only: it manages processes, the Django work happens in them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
#: Seconds each process has to exit after a signal before the next, harder one.
GRACE_SECONDS = 5.0
WORKER = [sys.executable, "manage.py", "db_worker", "--no-reload"]


class Stop(Exception):
    """A signal asked us to stop."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _wait(processes: list[subprocess.Popen[bytes]], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(p.poll() is not None for p in processes):
            return True
        time.sleep(0.1)
    return all(p.poll() is not None for p in processes)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then (db_worker's "press Ctrl+C again to force") SIGTERM again, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL):
        for process in processes:
            if process.poll() is None:
                process.send_signal(sig)
        if _wait(processes, GRACE_SECONDS):
            return


def main(argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(subprocess.Popen(WORKER, cwd=ROOT))
        processes.append(subprocess.Popen(command, cwd=ROOT))
        while all(p.poll() is None for p in processes):
            time.sleep(0.2)
        ended = next(p for p in processes if p.poll() is not None)
        name = "db_worker" if ended is processes[0] else command[0]
        print(
            f"{os.path.basename(name)} exited with {ended.returncode}: stopping the other",
            file=sys.stderr,
            flush=True,
        )
        return ended.returncode or 1
    except Stop:
        return 0
    finally:
        # Signals now would interrupt the stopping itself: the stopping is bounded anyway.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop(processes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
