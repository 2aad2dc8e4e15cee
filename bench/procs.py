"""What the bench reads from /proc: CPU and memory of a server's whole process tree, and how
busy the machine is. Linux only."""

from __future__ import annotations

import contextlib
import os
import resource
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Processes whose CPU is the scale-out case's services, counted apart from "other".
SERVICE_NAMES = ("postgres", "redis-server")


def raise_nofile(want: int = 65536) -> int:
    """Raise the open-file limit (inherited by the servers started after): 10,000 idle streams
    need 10,000 sockets on each side. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            return want
        except (ValueError, OSError):
            pass
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    # [comm, then stat fields 3 (state) onwards]: stat field N is at index N - 2.
    return [comm, *text.rsplit(")", 1)[1].split()]


def all_processes() -> dict[int, list[str]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def tree(roots: list[int], procs: dict[int, list[str]] | None = None) -> list[int]:
    """The roots and all their live descendants (granian runs its worker as a child process)."""
    procs = all_processes() if procs is None else procs
    children: dict[int, list[int]] = {}
    for pid, st in procs.items():
        children.setdefault(int(st[2]), []).append(pid)
    out, todo = [], [r for r in roots if r in procs]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def cpu_of(st: list[str]) -> float:
    # utime, stime, cutime, cstime (stat fields 14-17): threads included, and the children the
    # process has reaped, so a worker that exits inside a burst still counts.
    return sum(int(x) for x in st[12:16]) / CLK_TCK


def tree_cpu(roots: list[int]) -> dict[int, float]:
    procs = all_processes()
    return {pid: cpu_of(procs[pid]) for pid in tree(roots, procs)}


def service_cpu() -> dict[int, float]:
    return {pid: cpu_of(st) for pid, st in all_processes().items() if st[0] in SERVICE_NAMES}


def affinity(pid: int) -> set[int]:
    """The CPUs the process (its main thread) may run on; empty if it is gone."""
    try:
        return os.sched_getaffinity(pid)
    except OSError:
        return set()


def status_bytes(pid: int, key: str) -> int:
    """A kB field of /proc/PID/status, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def tree_rss(roots: list[int]) -> int:
    total = 0
    for pid in tree(roots):
        with contextlib.suppress(OSError, KeyError):
            total += status_bytes(pid, "VmRSS")
    return total


def tree_threads(roots: list[int]) -> int:
    total = 0
    for pid in tree(roots):
        with contextlib.suppress(OSError):
            total += len(os.listdir(f"/proc/{pid}/task"))
    return total


def machine_busy_seconds() -> float:
    """CPU-seconds spent busy by the whole machine (all cores) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / CLK_TCK


def _delta(before: dict[int, float], after: dict[int, float]) -> float:
    # A process that appeared inside the window counts from zero; one that left is in its
    # parent's cutime once reaped.
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


class CpuMeter:
    """Splits the machine's CPU use during a burst into the servers (whole process trees), the
    load generator (this process and its reaped children: wrk), the services (PostgreSQL and
    Redis, when asked) and everything else; "other" above a fraction of a core means someone
    else was using the machine."""

    def __init__(self, roots: list[int], services: bool = False) -> None:
        self.roots = roots
        self.services = services

    def __enter__(self) -> CpuMeter:
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_seconds()
        self.srv0 = tree_cpu(self.roots)
        self.svc0 = service_cpu() if self.services else {}
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.kids0 = ru.ru_utime + ru.ru_stime
        self.self0 = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self.t0
        server = _delta(self.srv0, tree_cpu(self.roots))
        services = _delta(self.svc0, service_cpu()) if self.services else 0.0
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        # wrk is the only child reaped inside the window; servers are reaped after they stop.
        loadgen = ru.ru_utime + ru.ru_stime - self.kids0 + time.process_time() - self.self0
        busy = machine_busy_seconds() - self.busy0
        self.wall = wall
        self.server_seconds = server
        self.service_seconds = services
        self.result = {
            "server_cores": round(server / wall, 2),
            "loadgen_cores": round(loadgen / wall, 2),
            "other_cores": round(max(busy - server - loadgen - services, 0.0) / wall, 2),
        }
        if self.services:
            self.result["service_cores"] = round(services / wall, 2)


def wait_for_quiet(budget: dict, threshold: float = 0.25, max_wait: float = 30.0) -> float:
    """Wait (bounded per burst and per run) until the machine is idle enough to measure."""
    waited = 0.0
    limit = min(max_wait, budget["left"])
    while waited < limit:
        b0, t0 = machine_busy_seconds(), time.monotonic()
        time.sleep(1.0)
        dt_ = time.monotonic() - t0
        waited += dt_
        if (machine_busy_seconds() - b0) / dt_ < threshold:
            break
    budget["left"] = max(budget["left"] - waited, 0.0)
    return round(waited, 1)
