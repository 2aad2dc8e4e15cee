"""Benchmark mcp_django's example site against a reference server on the official Python SDK.

    .venv/bin/python bench/run.py            # full run, about 22-25 minutes
    .venv/bin/python bench/run.py --quick    # quick run, about 5 minutes
    .venv/bin/python bench/run.py --smoke --cases tools   # the code paths only, about a minute

Ours runs under Daphne, uvicorn and Granian; the reference is the SDK's MCPServer under uvicorn.
The tools/call case also runs ours-uvicorn with the audit trail and quotas off (what the
operations layer costs) and each server's floor, a bare ASGI app under uvicorn and under Daphne.
The modern case is a 2026-07-28 (stateless) tools/call against the same, ours-daphne with the
operations layer off, the Django peer, django-mcpz under gunicorn (issue 45), and ours as a plain
view under gunicorn's sync and gthread workers (issue 46) with the sync worker's opsoff twin and
floor (Django with ours's settings and one echoing view), each server pinned to one core and wrk
to the other.
Each server is a single-process subprocess on a free 127.0.0.1 port, driven from outside over
loopback: wrk for throughput and latency, a lean asyncio client (bench/client.py) for functional
checks and for holding idle GET streams. Every throughput figure also comes per second of server
CPU (read from /proc for the server's whole process tree), so a saturated load generator cannot
hide the server's cost. Results go to bench/results/<ts>.json; a full run also rewrites the
generated part of docs/performance.md (bench/report.py renders it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import client as mcp_client  # noqa: E402 (after the sys.path line above)
from bench import procs, report, streams  # noqa: E402
from bench.servers import (  # noqa: E402
    BENCH,
    FLOORS,
    HOST,
    KINDS,
    LOADGEN_CPU,
    MODERN_KINDS,
    MODERN_ONLY,
    OPS_OFF,
    OURS,
    TOOLS_ONLY,
    Env,
    PostgresDatabase,
    RedisDatabase,
    Server,
    can_pin,
    migrate,
    ours_env,
    pinned,
    services_problem,
    start_server,
    stop_server,
)

RESULTS = BENCH / "results"
MODES = ("json", "sse")
CONCURRENCIES = (1, 8, 32)
CASES = ("tools", "setup", "notify", "memory", "scaleout", "modern")
# Cases whose servers and wrk are pinned (server on CPU 0, wrk on CPU 1) unless --pin/--no-pin.
PINNED_BY_DEFAULT = ("modern",)
# Seconds the whole run may spend waiting for other processes to leave the CPU alone.
QUIET_BUDGET = {"left": 60.0}


@dataclass
class Profile:
    rounds: int  # interleaved bursts per server and case; the least disturbed one is reported
    duration: int  # seconds per tools/call burst
    warmup: int
    setup_duration: int  # seconds per session set-up burst
    notify_duration: int  # seconds per notifications burst
    notify_count: int  # notifications per tools/call of `notify`
    notify_concurrency: tuple[int, ...]
    memory_counts: tuple[int, ...]  # idle sessions with a GET stream, measured on one ramp
    open_windows: tuple[tuple[int, int], ...]  # streams [from, to) opened one at a time and timed
    scaleout_duration: int
    quiet_budget: float
    concurrencies: tuple[int, ...] = CONCURRENCIES  # of tools/call


FULL = Profile(
    rounds=3, duration=5, warmup=1, setup_duration=3, notify_duration=3, notify_count=100, notify_concurrency=(1, 8),
    memory_counts=(1000, 5000, 10000), open_windows=((100, 200), (9900, 10000)), scaleout_duration=5, quiet_budget=60.0,
)  # fmt: skip
QUICK = Profile(
    rounds=1, duration=1, warmup=1, setup_duration=1, notify_duration=1, notify_count=100, notify_concurrency=(8,),
    memory_counts=(200, 1000), open_windows=((100, 200), (900, 1000)), scaleout_duration=1, quiet_budget=20.0,
)  # fmt: skip
# Proves the code paths and the report, measures nothing: a second per burst, no warm-up, no
# waiting for quiet, tools/call at c=1 and 8 only, a few idle streams.
SMOKE = Profile(
    rounds=1, duration=1, warmup=0, setup_duration=1, notify_duration=1, notify_count=10, notify_concurrency=(1,),
    memory_counts=(20, 40), open_windows=((10, 20), (30, 40)), scaleout_duration=1, quiet_budget=0.0, concurrencies=(1, 8),
)  # fmt: skip
PROFILES = {"full": FULL, "quick": QUICK, "smoke": SMOKE}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- wrk


def _parse_wrk(p: subprocess.CompletedProcess) -> dict:
    for line in p.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line[len("BENCH_JSON ") :])
    raise RuntimeError(
        f"wrk gave no result (exit {p.returncode}): {p.stdout[-1000:]} {p.stderr[-1000:]}"
    )


def run_wrk(args: list[str], timeout: float, pin: bool = False) -> dict:
    cmd = pinned(["wrk", *args], LOADGEN_CPU if pin else None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    return _parse_wrk(p)


def run_wrks(arg_lists: list[list[str]], timeout: float, pin: bool = False) -> dict:
    """Run several wrk at once (one per server process of a deployment) and add them up; `pin`
    runs them on LOADGEN_CPU."""
    if len(arg_lists) == 1:
        return run_wrk(arg_lists[0], timeout, pin)
    cpu = LOADGEN_CPU if pin else None
    ps = [
        subprocess.Popen(
            pinned(["wrk", *a], cpu), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for a in arg_lists
    ]
    outs = []
    for p in ps:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        outs.append(_parse_wrk(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    merged: dict = {
        "parts": outs,
        "first_bad": next((o["first_bad"] for o in outs if o["first_bad"]), ""),
    }
    for key in ("ok", "bad", "sessions", "notifications", "requests"):
        if key in outs[0]:
            merged[key] = sum(o[key] for o in outs)
    merged["duration_us"] = max(o["duration_us"] for o in outs)
    merged["errors"] = {k: sum(o["errors"][k] for o in outs) for k in outs[0]["errors"]}
    if "lat_us" in outs[0]:
        n = sum(o["lat_us"].get("n", 0) for o in outs) or 1
        # p50 weighted by count; p90/p99/max the worst part's (an upper bound).
        merged["lat_us"] = {
            "n": n,
            "p50": sum(o["lat_us"]["p50"] * o["lat_us"].get("n", 0) for o in outs) / n,
            **{k: max(o["lat_us"][k] for o in outs) for k in ("p90", "p99", "max")},
        }
    return merged


def wrk_errors(r: dict) -> int:
    return r["bad"] + sum(r["errors"].values())


def wrk_args(conc: int, script: str, url: str, *script_args: str) -> list[str]:
    # One connection per wrk thread: the scripts time each request themselves (see the .lua).
    return [
        "-t",
        str(conc),
        "-c",
        str(conc),
        "--timeout",
        "10s",
        "-s",
        script,
        url,
        *(["--", *script_args] if script_args else []),
    ]


def script(name: str) -> str:
    return str(BENCH / "wrk" / name)


def url(server: Server) -> str:
    return f"http://{HOST}:{server.port}/mcp"


def new_session(server: Server) -> str:
    async def go() -> str:
        s = await mcp_client.open_session(HOST, server.port)
        await s.conn.close()
        return s.session_id

    return asyncio.run(asyncio.wait_for(go(), 30))


def tools_call_args(conc: int, sessions: dict[str, str], token: str):
    def make(kind: str, servers: list[Server]) -> list[list[str]]:
        # Spread c connections over the deployment's processes (one wrk per process).
        per = [
            conc // len(servers) + (1 if i < conc % len(servers) else 0)
            for i in range(len(servers))
        ]
        return [
            wrk_args(c, script("tools_call.lua"), url(s), sessions[kind], token)
            for s, c in zip(servers, per, strict=True)
            if c
        ]

    return make


def modern_call_args(conc: int, token: str):
    def make(kind: str, servers: list[Server]) -> list[list[str]]:
        return [
            wrk_args(
                conc, script("tools_call.lua"), url(servers[0]), mcp_client.MODERN_VERSION, token
            )
        ]

    return make


def session_setup_args(conc: int):
    def make(kind: str, servers: list[Server]) -> list[list[str]]:
        return [wrk_args(conc, script("session_setup.lua"), url(servers[0]))]

    return make


def notify_args(conc: int, sessions: dict[str, str], count: int):
    def make(kind: str, servers: list[Server]) -> list[list[str]]:
        return [wrk_args(conc, script("notify.lua"), url(servers[0]), sessions[kind], str(count))]

    return make


# --------------------------------------------------------------------------- bursts


@dataclass
class Burst:
    wrk: dict
    cpu: dict
    wall: float
    server_seconds: float
    service_seconds: float
    waited: float


def interleaved(
    targets: dict[str, list[Server]],
    make_args,
    prof: Profile,
    duration: int,
    warmup: int,
    services: bool = False,
    pin: bool = False,
) -> dict[str, list | str]:
    """Run wrk against each target (a server, or the processes of one deployment) in turn,
    `prof.rounds` times, alternating the order (`pin`: wrk on LOADGEN_CPU).

    Other load on a shared 2-core machine drifts over minutes; alternating short bursts puts
    every server under the same drift, and the least disturbed burst is reported.
    Returns per target a list of bursts, or the error message that stopped it.
    """
    out: dict[str, list | str] = {kind: [] for kind in targets}

    def burst(kind: str, seconds: int, measure: bool) -> None:
        if isinstance(out[kind], str):
            return
        servers = targets[kind]
        try:
            for s in servers:
                s.check_alive()
            args = make_args(kind, servers)
            if not measure:
                run_wrks([["-d", f"{seconds}s", *a] for a in args], seconds + 30, pin)
                return
            waited = procs.wait_for_quiet(QUIET_BUDGET)
            cpu = procs.CpuMeter([s.pid for s in servers], services=services)
            with cpu:
                r = run_wrks([["-d", f"{seconds}s", *a] for a in args], seconds + 60, pin)
            out[kind].append(
                Burst(r, cpu.result, cpu.wall, cpu.server_seconds, cpu.service_seconds, waited)
            )  # type: ignore[union-attr]
        except Exception as exc:
            out[kind] = f"{type(exc).__name__}: {exc}"

    for kind in targets:
        if warmup:
            burst(kind, warmup, measure=False)
    for i in range(prof.rounds):
        for kind in list(targets) if i % 2 == 0 else list(reversed(targets)):
            burst(kind, duration, measure=True)
    return out


def _rate(b: Burst, key: str) -> float:
    return b.wrk[key] / (b.wrk["duration_us"] / 1e6)


def quietest(bursts: list[Burst], count_key: str) -> Burst:
    """The burst that other processes disturbed least (ties: the faster one).

    On a shared machine a burst can only be slowed down by others, never sped up, so the least
    disturbed burst is the best estimate of what the server does on its own.
    """
    return min(bursts, key=lambda b: (round(b.cpu["other_cores"], 1), -_rate(b, count_key)))


def burst_result(bursts: list[Burst], count_key: str, name: str) -> dict:
    """The figures of the chosen burst: rate, rate per server core-second, CPU per item,
    latency; every burst is kept in the JSON."""
    best = quietest(bursts, count_key)
    errors = sum(wrk_errors(b.wrk) for b in bursts)
    firsts = [b.wrk["first_bad"] or (b.wrk["errors"] if wrk_errors(b.wrk) else "") for b in bursts]

    def per_core(b: Burst) -> float | None:
        return round(b.wrk[count_key] / b.server_seconds, 1) if b.server_seconds > 0 else None

    out = {
        name: sum(b.wrk[count_key] for b in bursts),
        f"{name}_per_s": round(_rate(best, count_key), 1),
        f"{name}_per_core_s": per_core(best),
        f"server_cpu_us_per_{name.rstrip('s')}": round(
            best.server_seconds / max(best.wrk[count_key], 1) * 1e6, 1
        ),
        f"{name}_per_s_rounds": [round(_rate(b, count_key), 1) for b in bursts],
        f"{name}_per_core_s_rounds": [per_core(b) for b in bursts],
    }
    if "n" in best.wrk.get(
        "lat_us", {}
    ):  # raw per-request times (session_setup.lua has only wrk's own)

        def lat(b: Burst, key: str) -> float:
            return round(b.wrk["lat_us"][key] / 1000, 3)

        out.update(
            p50_ms=lat(best, "p50"),
            p90_ms=lat(best, "p90"),
            p99_ms=lat(best, "p99"),
            max_ms=lat(best, "max"),
        )
        out["p99_ms_rounds"] = [lat(b, "p99") for b in bursts]
    if best.service_seconds:
        out[f"service_cpu_us_per_{name.rstrip('s')}"] = round(
            best.service_seconds / max(best.wrk[count_key], 1) * 1e6, 1
        )
    out.update(
        rounds=len(bursts),
        chosen_round=bursts.index(best),
        errors=errors,
        cpu=best.cpu,
        cpu_rounds=[b.cpu for b in bursts],
        waited_for_quiet_s=round(sum(b.waited for b in bursts), 1),
        wrk=[b.wrk for b in bursts],
    )
    if errors:
        out["error"] = (
            f"{errors} bad answers/transport errors; first: {next((f for f in firsts if f), '')}"
        )
    return out


def tools_call_result(conc: int, bursts: list[Burst]) -> dict:
    # "calls_per_s" was "rps" before the per-core figures came; the docs call it calls/s.
    return {"concurrency": conc, **burst_result(bursts, "ok", "calls")}


def session_setup_result(conc: int, bursts: list[Burst]) -> dict:
    return {"concurrency": conc, **burst_result(bursts, "sessions", "sessions")}


def notify_result(conc: int, bursts: list[Burst]) -> dict:
    out = {"concurrency": conc, **burst_result(bursts, "notifications", "notifications")}
    out["calls"] = sum(b.wrk["ok"] for b in bursts)
    return out


# --------------------------------------------------------------------------- orchestration


def record(results: dict, key: str, value: dict) -> dict:
    results[key] = value
    shown = {
        k: v
        for k, v in value.items()
        if k not in ("wrk", "traceback", "rss_samples_mb", "cpu_rounds")
    }
    log(f"  {key}: {json.dumps(shown, default=str)[:400]}")
    return value


def guarded(results: dict, key: str, fn, *args, **kwargs) -> dict:
    """Run one case; a failure is stored as an error with its message and the run goes on."""
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:
        value = {
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-3000:],
        }
    return record(results, key, value)


@contextlib.contextmanager
def with_servers(results: dict, kinds: list[str], mode: str, env: Env, prefix, probe: str = "initialize",
                 pin: bool = False):  # fmt: skip
    """Start one fresh server of each kind; yields those that started, stops them all after."""
    servers: dict[str, Server] = {}
    try:
        for kind in kinds:
            try:
                servers[kind] = start_server(kind, mode, env, probe=probe, pin=pin)
            except Exception as exc:
                results[f"{prefix(kind)}.start"] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"  {prefix(kind)}.start failed: {str(exc)[:300]}")
        yield servers
        for kind, server in servers.items():
            if server.proc.poll() is not None:
                results[f"{prefix(kind)}.exit"] = {
                    "error": f"server died with {server.proc.returncode}:\n{server.log_tail()}"
                }
    finally:
        for server in servers.values():
            stop_server(server)


def interleaved_case(cases: dict, targets: dict[str, list[Server]], name, make_args, prof: Profile, duration: int,
                     warmup: int, result_fn, conc: int, services: bool = False, pin: bool = False) -> None:  # fmt: skip
    per = interleaved(targets, make_args, prof, duration, warmup, services, pin)
    for kind, bursts in per.items():
        key = name(kind)
        record(
            cases, key, {"error": bursts} if isinstance(bursts, str) else result_fn(conc, bursts)
        )


def sessions_for(cases: dict, servers: dict[str, Server], key) -> dict[str, str]:
    sessions = {}
    for kind, server in servers.items():
        try:
            sessions[kind] = new_session(server)
        except Exception as exc:
            record(cases, key(kind), {"error": f"{type(exc).__name__}: {exc}"})
    return sessions


def tools_case(cases: dict, kinds: list[str], prof: Profile, env: Env, pin: bool = False) -> None:
    for mode in MODES:
        log(f"tools/call, {mode} answers: {', '.join(kinds)} interleaved")
        with with_servers(
            cases, kinds, mode, env, lambda k, m=mode: f"{k}.{m}.tools_call", pin=pin
        ) as servers:
            for kind, server in list(servers.items()):
                if kind in FLOORS.values():
                    continue  # not an MCP server: wrk's script checks each of its answers
                check = guarded(
                    cases,
                    f"{kind}.{mode}.check",
                    lambda srv=server: asyncio.run(mcp_client.functional_check(HOST, srv.port)),
                )
                if "error" in check:
                    # The functional check says why; load would only count errors.
                    del servers[kind]
            token = "bench-" + uuid.uuid4().hex[:8]
            for conc in prof.concurrencies:
                name = f"{{}}.{mode}.tools_call.c{conc}".format
                sessions = sessions_for(cases, servers, name)
                live = {k: [s] for k, s in servers.items() if k in sessions}
                interleaved_case(cases, live, name, tools_call_args(conc, sessions, token), prof, prof.duration, prof.warmup,
                                 tools_call_result, conc, pin=pin)  # fmt: skip


def modern_case(cases: dict, kinds: list[str], prof: Profile, env: Env, pin: bool) -> None:
    """2026-07-28 tools/call of echo, JSON answers, no session: each request stands alone."""
    where = ", each server on CPU 0 and wrk on CPU 1" if pin else ""
    log(f"tools/call 2026-07-28, json answers{where}: {', '.join(kinds)} interleaved")
    with with_servers(cases, kinds, "json", env, lambda k: f"{k}.json.modern_call", probe="modern",
                      pin=pin) as servers:  # fmt: skip
        # Which CPUs each server's processes may use, as the kernel says (the gunicorn worker and
        # granian's are children, started after the pin).
        cpus = {
            k: sorted({c for pid in procs.tree([s.pid]) for c in procs.affinity(pid)})
            for k, s in servers.items()
        }
        token = "bench-" + uuid.uuid4().hex[:8]
        for conc in prof.concurrencies:
            name = f"{{}}.json.modern_call.c{conc}".format
            interleaved_case(cases, {k: [s] for k, s in servers.items()}, name, modern_call_args(conc, token), prof,
                             prof.duration, prof.warmup, tools_call_result, conc, pin=pin)  # fmt: skip
            for kind in servers:
                cases[name(kind)].update(pinned=pin, server_cpus=cpus[kind])


def setup_case(cases: dict, kinds: list[str], prof: Profile, env: Env, pin: bool = False) -> None:
    for mode in MODES:
        log(f"session set-up, {mode} answers: {', '.join(kinds)} interleaved")
        with with_servers(
            cases, kinds, mode, env, lambda k, m=mode: f"{k}.{m}.session_setup", pin=pin
        ) as servers:
            for conc in (1, 8):
                name = f"{{}}.{mode}.session_setup.c{conc}".format
                interleaved_case(cases, {k: [s] for k, s in servers.items()}, name, session_setup_args(conc), prof,
                                 prof.setup_duration, min(prof.warmup, 1), session_setup_result, conc, pin=pin)  # fmt: skip


def notify_case(cases: dict, kinds: list[str], prof: Profile, env: Env, pin: bool = False) -> None:
    # SSE answers: the notifications travel on the POST's own stream, and ours persists each
    # one as an Event row before it is sent (the reference keeps nothing).
    log(
        f"notifications on a POST stream ({prof.notify_count} per call): {', '.join(kinds)} interleaved"
    )
    with with_servers(cases, kinds, "sse", env, lambda k: f"{k}.sse.notify", pin=pin) as servers:
        for conc in prof.notify_concurrency:
            name = f"{{}}.sse.notify.c{conc}".format
            sessions = sessions_for(cases, servers, name)
            live = {k: [s] for k, s in servers.items() if k in sessions}
            interleaved_case(cases, live, name, notify_args(conc, sessions, prof.notify_count), prof, prof.notify_duration,
                             prof.warmup, notify_result, conc, pin=pin)  # fmt: skip


def memory_case(cases: dict, kinds: list[str], prof: Profile, env: Env) -> None:
    top = max(prof.memory_counts)
    budget = 150.0 + top * 0.06  # 10,000 streams: 12 minutes at most, per server
    for kind in kinds:
        log(f"idle streams: {kind}, ramp to {top:,}")
        with with_servers(cases, [kind], "json", env, lambda k: f"{k}.idle_streams") as servers:
            if kind not in servers:
                err = cases.get(f"{kind}.idle_streams.start", {}).get(
                    "error", "server did not start"
                )
                for count in prof.memory_counts:
                    record(cases, f"{kind}.memory.n{count}", {"error": err})
                record(cases, f"{kind}.stream_open", {"error": err})
                continue
            settle = 4.0 if top >= 1000 else 2.0
            # A second server of the kind, holding few streams: the stream-open growth compares
            # opens made at the same moments (streams.idle_streams_case).
            try:
                companion: Server | None = start_server(kind, "json", env, tag="companion")
            except Exception as exc:
                companion = None
                log(
                    f"  {kind} companion did not start ({exc}): stream-open growth is late / early on one server"
                )
            try:
                r = guarded(cases, f"{kind}.idle_streams", streams.idle_streams_case, servers[kind], prof.memory_counts,
                            prof.open_windows, settle, budget, lambda: procs.wait_for_quiet(QUIET_BUDGET, max_wait=10),
                            companion)  # fmt: skip
            finally:
                if companion is not None:
                    stop_server(companion)
            for count in prof.memory_counts:
                m = r.get("memory", {}).get(count)
                value = dict(m) if m else {"error": r.get("error") or "not reached"}
                if m and r.get("error"):
                    value["error"] = r["error"]
                record(cases, f"{kind}.memory.n{count}", value)
            windows = r.get("windows", [])
            value = {"windows": windows}
            if len(windows) == 2 and windows[0]["open_median_ms"] and windows[1]["open_median_ms"]:
                value.update(streams.open_growth(*windows))
            else:
                value["error"] = r.get("error") or "the timed windows were not reached"
            record(cases, f"{kind}.stream_open", value)


def scaleout_case(cases: dict, kind: str, prof: Profile, env: Env) -> None:
    """Ours as two processes on PostgreSQL + Redis against one on SQLite + the in-memory layer:
    server CPU per tools/call at c=8 (c=4 on each of the two processes)."""
    problem = services_problem()
    if problem:
        record(cases, "scaleout.services", {"error": problem})
        return
    db, layer = PostgresDatabase(), RedisDatabase()
    try:
        db.create()
        layer.claim()
        migrate(ours_env("json", database_url=db.url, redis_url=layer.url))
        for mode in MODES:
            log(
                f"scale-out, {mode} answers: {kind} x2 on PostgreSQL + Redis vs x1 on SQLite + in-memory, interleaved"
            )
            deployments: dict[str, list[Server]] = {}
            try:
                try:
                    deployments["sqlite-memory"] = [start_server(kind, mode, env)]
                    deployments["postgres-redis"] = []
                    for i in (1, 2):
                        deployments["postgres-redis"].append(
                            start_server(
                                kind,
                                mode,
                                env,
                                database_url=db.url,
                                redis_url=layer.url,
                                tag=f"-pg{i}",
                            )
                        )
                    # One session, made on the first process and used on both: it lives in the database.
                    sessions = {
                        name: new_session(servers[0]) for name, servers in deployments.items()
                    }
                except Exception as exc:
                    record(
                        cases, f"scaleout.{mode}.start", {"error": f"{type(exc).__name__}: {exc}"}
                    )
                    continue
                token = "bench-" + uuid.uuid4().hex[:8]
                name = f"scaleout.{mode}.{{}}".format
                interleaved_case(cases, deployments, name, tools_call_args(8, sessions, token), prof, prof.scaleout_duration,
                                 prof.warmup, tools_call_result, 8, services=True)  # fmt: skip
                for d in deployments:
                    cases[name(d)].update(server=kind, processes=len(deployments[d]))
            finally:
                for servers in deployments.values():
                    for s in servers:
                        stop_server(s)
    except Exception as exc:
        record(
            cases,
            "scaleout.services",
            {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]},
        )
    finally:
        with contextlib.suppress(Exception):
            layer.release()
        with contextlib.suppress(Exception):
            db.drop()


def kinds_for(case: str, servers: list[str], named: bool) -> list[str]:
    """The server kinds a case runs: by default ours-uvicorn-opsoff and the floors serve only
    tools/call (what its targets are judged against); named with --servers, they run in every
    case they can serve (the floors: tools and setup). The modern case runs MODERN_KINDS, and
    MODERN_ONLY (ours-daphne-opsoff, the peer, the gunicorn kinds) run in no other case."""
    if case == "modern":
        return [k for k in servers if k in MODERN_KINDS]
    servers = [k for k in servers if k not in MODERN_ONLY]
    if case == "tools":
        return servers
    if not named:
        return [k for k in servers if k not in TOOLS_ONLY]
    if case == "setup":
        return servers
    return [k for k in servers if k not in FLOORS.values()]


def run_all(args, prof: Profile, env: Env) -> dict:
    cases: dict[str, dict] = {}
    named = args.named_servers
    if "tools" in args.cases:
        tools_case(
            cases, kinds_for("tools", args.servers, named), prof, env, "tools" in args.pinned
        )
    if "modern" in args.cases:
        modern_case(
            cases, kinds_for("modern", args.servers, named), prof, env, "modern" in args.pinned
        )
    if "setup" in args.cases:
        setup_case(
            cases, kinds_for("setup", args.servers, named), prof, env, "setup" in args.pinned
        )
    if "notify" in args.cases:
        notify_case(
            cases, kinds_for("notify", args.servers, named), prof, env, "notify" in args.pinned
        )
    if "memory" in args.cases:
        memory_case(cases, kinds_for("memory", args.servers, named), prof, env)
    if "scaleout" in args.cases:
        scaleout_case(cases, args.scaleout_server, prof, env)
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    size = ap.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="quick run: a second per burst, small stream counts"
    )
    size.add_argument("--smoke", action="store_true", help="prove the code paths and the report only: a second per burst, "
                      "no warm-up, no waiting for quiet, tools/call at c=1 and 8, a few idle streams; the figures mean nothing")  # fmt: skip
    ap.add_argument("--servers", nargs="+", choices=(*KINDS, "ours", *TOOLS_ONLY, *MODERN_ONLY), default=None,
                    help='server kinds to run ("ours" = every ours-*); default all, where ours-uvicorn-opsoff (ours-uvicorn '
                         'with the audit trail and quotas off) and the floors (bench/floor_server.py under uvicorn and '
                         'Daphne) run in the tools and modern cases only; named, they run in every case they can serve (the '
                         'floors: tools, modern and setup); ours-daphne-opsoff, peer (django-mcpz under gunicorn) and '
                         'ours-gunicorn / ours-gthread (our plain view under gunicorn), ours-gunicorn-opsoff and floor-gunicorn '
                         '(Django with our settings and one echoing view, under gunicorn) run in the modern case only')  # fmt: skip
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--pin", dest="pin", action="store_true", default=None,
                    help="pin each server's process tree to CPU 0 and wrk to CPU 1 in every wrk case with one server "
                         "process (tools, modern, setup, notify); default: the modern case only")  # fmt: skip
    ap.add_argument(
        "--no-pin", dest="pin", action="store_false", help="pin nothing, not even the modern case"
    )
    ap.add_argument(
        "--scaleout-server",
        choices=OURS,
        default="ours-uvicorn",
        help="which server the scale-out case runs ours under",
    )
    ap.add_argument(
        "--docs", dest="docs", action="store_true", default=None, help="rewrite docs/performance.md"
    )
    ap.add_argument("--no-docs", dest="docs", action="store_false")
    ap.add_argument(
        "--render",
        metavar="RESULTS_JSON",
        help="run nothing: rewrite docs/performance.md from an earlier run's JSON (with --no-docs: print it)",
    )
    args = ap.parse_args()
    args.named_servers = args.servers is not None
    named = args.servers if args.named_servers else [*KINDS, *TOOLS_ONLY, *MODERN_ONLY]
    # "ours" expanded, in report order; ours-uvicorn-opsoff, the floors and the modern case's
    # own kinds kept.
    args.servers = [
        k
        for k in (*KINDS, *TOOLS_ONLY, *MODERN_ONLY)
        if k in named or ("ours" in named and k in OURS)
    ]
    pinnable = ("tools", "modern", "setup", "notify")
    wanted = pinnable if args.pin else () if args.pin is False else PINNED_BY_DEFAULT
    args.pin_unavailable = can_pin() if wanted else None
    args.pinned = [] if args.pin_unavailable else [c for c in wanted if c in args.cases]
    if args.pin_unavailable and not args.render:
        log(f"not pinning servers and wrk to CPUs: {args.pin_unavailable}")
    if args.render:
        rep = json.loads(Path(args.render).read_text())
        rep["summary"] = report.summarize(rep)  # the targets as they are now
        md = report.render_markdown(rep)
        if args.docs is False:
            print(md)
            return 0
        report.write_doc(md)
        log(f"wrote {report.DOC.relative_to(ROOT)} from {args.render}")
        return 0
    if args.docs is None:
        # Only a full run measures every target: every server of the report, every case.
        args.docs = (
            not (args.quick or args.smoke)
            and set(KINDS) | set(TOOLS_ONLY) | set(MODERN_ONLY) <= set(args.servers)
            and set(args.cases) == set(CASES)
        )
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk", file=sys.stderr)
        return 2
    nofile = procs.raise_nofile()
    profile_name = "quick" if args.quick else "smoke" if args.smoke else "full"
    prof = PROFILES[profile_name]
    QUIET_BUDGET["left"] = prof.quiet_budget
    started = time.monotonic()
    src_start = report.source_state()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as tmp:
        env = Env(tmp=Path(tmp), logs=RESULTS / f"{stamp}-logs")
        env.logs.mkdir(parents=True, exist_ok=True)
        cases = run_all(args, prof, env)

    argv = " ".join(sys.argv[1:])
    rep = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": ".venv/bin/python bench/run.py" + (f" {argv}" if argv else ""),
        "profile_name": profile_name,
        "profile": asdict(prof),
        "servers": args.servers,
        "scaleout_server": args.scaleout_server,
        # Cases whose servers ran on CPU 0 and wrk on CPU 1 (--pin), and why none could, if so.
        "pinned_cases": args.pinned,
        "pin_unavailable": args.pin_unavailable,
        "peer_packages": report.peer_versions(),
        "machine": report.machine_facts(nofile),
        "ours_source_at_start": src_start,
        "ours_source_at_end": report.source_state(),
        "wall_seconds": round(time.monotonic() - started, 1),
        "cases": cases,
        "results_file": f"{stamp}.json",
    }
    rep["summary"] = report.summarize(rep)
    # Kept beside the summary's verdicts for readers of older results (bench/report.py computes it).
    rep["operations_cost"] = report.operations_cost(cases)
    for key, ratio in rep["operations_cost"].items():
        log(
            f"  operations layer, {key}: ours-uvicorn / {OPS_OFF} = {ratio} calls per server core-second (target, JSON: {report.OPERATIONS.text()})"
        )
    out = RESULTS / f"{stamp}.json"
    out.write_text(json.dumps(rep, indent=2, default=str))
    log(f"wrote {out.relative_to(ROOT)} ({rep['wall_seconds']} s)")
    md = report.render_markdown(rep)
    if args.docs:
        report.write_doc(md)
        log(f"wrote {report.DOC.relative_to(ROOT)}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
