"""Profile one server under tools/call (or session set-up) load with py-spy.

    pip install py-spy   # any environment; the binary is used from PATH or --py-spy
    .venv/bin/python bench/profile.py --server ours --mode json --case tools --seconds 15

Samples only the thread holding the GIL (py-spy --gil), so idle waits do not show. Writes
bench/results/profile-<server>-<mode>-<case>.txt: the functions holding the most samples, both
"self" (leaf) and "total" (anywhere on the stack), plus a raw collapsed-stack file next to it for
flame graphs.
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
    Env,
    new_session,
    run_wrk,
    session_setup_args,
    start_server,
    stop_server,
    tools_call_args,
)


def summarize(collapsed: Path, top: int = 40) -> str:
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        count = int(n)
        frames = stack.split(";")
        samples += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            total_counts[frame] += count
    out = [f"{samples} samples", "", f"top {top} by self time:"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in self_counts.most_common(top)]
    out += ["", f"top {top} by total time (on stack):"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in total_counts.most_common(top)]
    ours = [(f, c) for f, c in total_counts.most_common() if "mcp_django/" in f or "asgiref/sync.py" in f]
    out += ["", f"top {top} mcp_django (and asgiref thread-hop) frames by total time:"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in ours[:top]]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=("ours", "reference"), default="ours")
    ap.add_argument("--mode", choices=("json", "sse"), default="json")
    ap.add_argument("--case", choices=("tools", "setup"), default="tools")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"profile-{args.server}-{args.mode}-{args.case}"
    collapsed = RESULTS / f"{name}.collapsed"
    with tempfile.TemporaryDirectory(prefix="mcp-bench-profile-") as tmp:
        env = Env(tmp=Path(tmp), logs=Path(tmp))
        server = start_server(args.server, args.mode, env)
        try:
            if args.case == "tools":
                token = "bench-" + uuid.uuid4().hex[:8]
                make = tools_call_args(args.concurrency, {args.server: new_session(server)}, token)
            else:
                make = session_setup_args(args.concurrency)
            wrk_args = make(args.server, server)
            run_wrk(["-d", "2s", *wrk_args], timeout=30)  # warm-up
            spy = subprocess.Popen(
                [args.py_spy, "record", "--pid", str(server.pid), "--duration", str(args.seconds),
                 "--rate", "200", "--gil", "--format", "raw", "--output", str(collapsed), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            r = run_wrk(["-d", f"{args.seconds}s", *wrk_args], timeout=args.seconds + 60)
            _, err = spy.communicate(timeout=args.seconds + 60)
            if spy.returncode != 0:
                print(err, file=sys.stderr)
                return 1
        finally:
            stop_server(server)
    report = summarize(collapsed)
    head = f"{args.server} {args.mode} {args.case} c={args.concurrency}: wrk {r}\n\n"
    (RESULTS / f"{name}.txt").write_text(head + report + "\n")
    print(head + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
