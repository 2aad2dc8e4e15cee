"""``python -m tests.multihost [--only 1,2] [--cleanup] [--lease SECONDS]``: see the package docstring.

Exit status: 0 when every scenario run passed with nothing lost or duplicated (or when skipped:
not root outside CI), 1 otherwise. The last line printed is the summary line of issue 28.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from types import FrameType

from .scenarios import SCENARIOS, Run, Tally
from .topology import Cluster, cleanup

#: The whole run, start to end; a run past it is stopped and cleaned up (SIGALRM).
RUN_TIMEOUT = int(os.environ.get("MULTIHOST_TIMEOUT", "600"))
#: Where the hosts' logs are copied when a run ends (the run's own directory is removed).
LOGS = Path(os.environ.get("MULTIHOST_LOGS", "/tmp/multihost-logs"))


class Stopped(KeyboardInterrupt):
    """A signal (Ctrl-C, SIGTERM, the run's own alarm) stops the run; cleanup still runs."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def summary(tally: Tally, hosts: int = 2) -> str:
    def ratio(kind: str) -> str:
        return f"{tally.cpu[kind]:.2f}x" if kind in tally.cpu else "not measured"

    return (
        f"multihost: {hosts} app hosts, {tally.calls} calls, {tally.resumed} streams resumed across hosts, "
        f"{tally.lost} lost, {tally.duplicated} duplicated; CPU per call vs one SQLite process: JSON {ratio('json')}, SSE {ratio('sse')}"
    )


async def run_scenarios(run: Run, only: list[str], outcomes: dict[str, str]) -> None:
    """Run the scenarios named in ``only`` in order, writing how each went into ``outcomes``."""
    cluster = run.cluster
    for key, (title, scenario) in SCENARIOS.items():
        if key not in only:
            outcomes[key] = "not run"
            continue
        if scenario is None:
            outcomes[key] = "NOT IMPLEMENTED"
            print(f"scenario {key}: {title}: not implemented", flush=True)
            continue
        print(f"scenario {key}: {title}", flush=True)
        outcomes[key] = "INTERRUPTED"
        started = time.monotonic()
        try:
            await run.ensure_apps()
            await scenario(run)
        except Exception as exc:
            outcomes[key] = f"FAILED ({type(exc).__name__}: {str(exc)[:300]})"
            traceback.print_exc()
            # The next scenario starts from healthy hosts, whatever this one left behind.
            for app in cluster.apps:
                await asyncio.to_thread(app.stop)
            if cluster.data.postgres is None or cluster.data.postgres.poll() is not None:
                await asyncio.to_thread(cluster.data.start_postgres)
        else:
            outcomes[key] = "passed"
        print(f"scenario {key}: {outcomes[key]} in {time.monotonic() - started:.0f}s", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.multihost", description=__doc__)
    parser.add_argument(
        "--cleanup",
        action="store_true",
        help="remove what an earlier run left (namespaces, links, directories), then exit",
    )
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help="scenarios to run, e.g. 1,2 (default: all)"
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=None,
        help="MCP_REQUEST_LEASE_SECONDS on the app hosts (default: the setting's own, 10 s, so a streamed call that died with its host ends within about 13 s)",
    )
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() == "true":
            print(
                "multihost: must run as root (it makes network namespaces); CI=true, so this is a failure",
                file=sys.stderr,
            )
            return 1
        print(
            "multihost: skipped: it makes network namespaces, so it needs root. Run: sudo make multihost"
        )
        return 0
    if args.cleanup:
        cleanup()
        return 0
    only = [key.strip() for key in args.only.split(",") if key.strip()]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, _stop)
    signal.alarm(RUN_TIMEOUT)
    cleanup()  # an earlier run that could not clean up after itself
    started = time.monotonic()
    cluster = Cluster(lease_seconds=args.lease)
    run = Run(cluster)
    outcomes: dict[str, str] = {}
    failed = False
    try:
        cluster.start()
        print(
            f"multihost: hosts up in {time.monotonic() - started:.0f}s (logs: {LOGS})", flush=True
        )
        asyncio.run(run_scenarios(run, only, outcomes))
    except (Exception, Stopped) as exc:
        failed = True
        print(f"multihost: stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if not isinstance(exc, Stopped):
            traceback.print_exc()
    finally:
        signal.alarm(0)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # the cleanup itself is bounded
        cluster.stop(keep_logs=LOGS)
    for key, outcome in outcomes.items():
        print(f"multihost: scenario {key} ({SCENARIOS[key][0]}): {outcome}")
    print(f"multihost: {time.monotonic() - started:.0f}s in all")
    tally = run.tally
    failed = (
        failed
        or tally.lost > 0
        or tally.duplicated > 0
        or any(o.startswith(("FAILED", "INTERRUPTED", "NOT")) for o in outcomes.values())
    )
    print(summary(tally))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
