"""Profile one server under tools/call, session set-up or notifications load with py-spy.

    .venv/bin/pip install py-spy   # or anywhere: the binary is used from the venv, PATH or --py-spy
    .venv/bin/python bench/profile.py --server ours-uvicorn --mode json --case tools --seconds 15
    .venv/bin/python bench/profile.py --server ours-uvicorn --mode sse --postgres-redis

Samples only the thread holding the GIL (py-spy --gil), so idle waits do not show, in the
server's process and its children (Granian's worker). --postgres-redis runs ours on a throwaway
PostgreSQL database and Redis channel layer (one process: what the scale-out case adds per call).
Writes bench/results/profile-<server>-<mode>-<case>[-pg].txt: the functions holding the most
samples, both "self" (leaf) and "total" (anywhere on the stack), plus a raw collapsed-stack file
next to it for flame graphs.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import (
    RESULTS,
    new_session,
    notify_args,
    run_wrks,
    session_setup_args,
    tools_call_args,
)
from bench.servers import (
    KINDS,
    OPS_OFF,
    Env,
    PostgresDatabase,
    RedisDatabase,
    migrate,
    ours_env,
    start_server,
    stop_server,
)

# Where a sample's time goes: the innermost frame from one of these places decides (so the ORM
# called by our code counts as the ORM, our code called by Channels as ours). First match wins.
LAYERS = (
    ("audit trail", ("mcp_django/ops/audit/",)),
    ("event store", ("mcp_django/stores/",)),
    ("quotas", ("mcp_django/ops/quotas/",)),
    ("tracing", ("mcp_django/ops/tracing.py",)),
    (
        "channel layer (ours, channels_redis)",
        ("mcp_django/transport/layers.py", "(channels_redis/"),
    ),
    ("our transport (consumer, SSE, checks)", ("mcp_django/transport/",)),
    ("our engine, handlers, tools", ("mcp_django/",)),
    ("redis client", ("(redis/",)),
    ("psycopg", ("(psycopg",)),
    ("thread hop (asgiref, executor)", ("asgiref/sync.py", "concurrent/futures/")),
    ("Django ORM and database backend", ("(django/db/",)),
    ("Django request, auth, settings", ("(django/",)),
    ("Channels consumer", ("(channels/",)),
    (
        "server's HTTP (uvicorn/h11, daphne/twisted, granian)",
        ("(uvicorn/", "(h11/", "(daphne/", "(twisted/", "(granian/", "(httptools/"),
    ),
    ("asyncio event loop", ("(asyncio/", "(selectors.py")),
)


def layer_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for layer, marks in LAYERS:
            if any(mark in frame for mark in marks):
                return layer
    return "other (interpreter, standard library)"


def summarize(collapsed: Path, top: int = 40) -> str:
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    layers: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue  # py-spy writes a sample with no frames as the process name alone
        count = int(n)
        frames = stack.split(";")
        samples += count
        self_counts[frames[-1]] += count
        layers[layer_of(frames[1:])] += count  # frames[0] names the process
        for frame in set(frames):
            total_counts[frame] += count
    out = [f"{samples} samples", "", "by layer (the innermost frame of a known place decides):"]
    out += [f"{c / samples:6.1%}  {layer}" for layer, c in layers.most_common()]
    out += ["", f"top {top} by self time:"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in self_counts.most_common(top)]
    out += ["", f"top {top} by total time (on stack):"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in total_counts.most_common(top)]
    ours = [
        (f, c)
        for f, c in total_counts.most_common()
        if "mcp_django/" in f or "asgiref/sync.py" in f
    ]
    out += ["", f"top {top} mcp_django (and asgiref thread-hop) frames by total time:"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in ours[:top]]
    return "\n".join(out)


def default_py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy") or "py-spy"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=(*KINDS, OPS_OFF), default="ours-uvicorn")
    ap.add_argument("--mode", choices=("json", "sse"), default="json")
    ap.add_argument("--case", choices=("tools", "setup", "notify"), default="tools")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument(
        "--postgres-redis",
        action="store_true",
        help="ours on a throwaway PostgreSQL database + Redis",
    )
    ap.add_argument("--py-spy", default=default_py_spy())
    args = ap.parse_args()
    if args.case == "notify":
        args.mode = "sse"
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"profile-{args.server}-{args.mode}-{args.case}" + ("-pg" if args.postgres_redis else "")
    collapsed = RESULTS / f"{name}.collapsed"
    db, layer = PostgresDatabase(), RedisDatabase()
    with tempfile.TemporaryDirectory(prefix="mcp-bench-profile-") as tmp:
        env = Env(tmp=Path(tmp), logs=Path(tmp))
        urls = {}
        if args.postgres_redis:
            db.create()
            layer.claim()
            urls = {"database_url": db.url, "redis_url": layer.url}
            migrate(ours_env("json", **urls))
        server = None
        try:
            server = start_server(args.server, args.mode, env, **urls)
            if args.case == "tools":
                token = "bench-" + uuid.uuid4().hex[:8]
                make = tools_call_args(args.concurrency, {args.server: new_session(server)}, token)
            elif args.case == "notify":
                make = notify_args(args.concurrency, {args.server: new_session(server)}, 100)
            else:
                make = session_setup_args(args.concurrency)
            wrk_args = make(args.server, [server])
            run_wrks([["-d", "2s", *a] for a in wrk_args], timeout=30)  # warm-up
            spy = subprocess.Popen(
                [args.py_spy, "record", "--pid", str(server.pid), "--subprocesses", "--duration", str(args.seconds),
                 "--rate", "200", "--gil", "--format", "raw", "--output", str(collapsed), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            r = run_wrks(
                [["-d", f"{args.seconds}s", *a] for a in wrk_args], timeout=args.seconds + 60
            )
            _, err = spy.communicate(timeout=args.seconds + 60)
            if spy.returncode != 0:
                print(err, file=sys.stderr)
                return 1
        finally:
            if server is not None:
                stop_server(server)
            if args.postgres_redis:
                layer.release()
                db.drop()
    report = summarize(collapsed)
    shown = {k: v for k, v in r.items() if k != "parts"}
    head = f"{args.server} {args.mode} {args.case} c={args.concurrency}{' postgres+redis' if args.postgres_redis else ''}: wrk {shown}\n\n"
    (RESULTS / f"{name}.txt").write_text(head + report + "\n")
    print(head + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
