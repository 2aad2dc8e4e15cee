"""The idle-stream case: memory per idle session holding a GET stream, and how long a stream
takes to open as more are open.

One client process holds every stream (asyncio, one connection per session); 10,000 sockets per
side fit the raised fd limit. The streams are opened in one ramp per server: counts in between
the timed windows open 16 at a time; inside a timed window (e.g. streams 100-199 and
9,900-9,999) they open one at a time and each is timed, so the two medians compare the same
thing at two different numbers of open streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

from bench import client as mcp_client
from bench import procs
from bench.servers import HOST, Server

BULK_CONCURRENCY = 16


class Ramp:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.held: list[tuple[mcp_client.Connection, asyncio.Task]] = []
        self.failures: list[str] = []

    async def _drain(self, conn: mcp_client.Connection) -> None:
        # Keep reading so keep-alive pings never back up; returns when the server closes.
        assert conn.reader is not None
        with contextlib.suppress(Exception):
            while await conn.reader.read(65536):
                pass

    async def open_one(self) -> tuple[float, float] | None:
        """Open a session and its GET stream; (seconds for the session, seconds for the GET)."""
        conn = mcp_client.Connection(HOST, self.server.port)
        try:
            t0 = time.perf_counter()
            s = await asyncio.wait_for(
                mcp_client.open_session(HOST, self.server.port, conn=conn), 30
            )
            t1 = time.perf_counter()
            head = await asyncio.wait_for(
                conn.open_stream(s.path, s.headers("text/event-stream")), 30
            )
            t2 = time.perf_counter()
            ctype = (head.header("content-type") or "").split(";")[0]
            if head.status != 200 or ctype != "text/event-stream":
                raise mcp_client.HTTPError(f"GET stream: HTTP {head.status} {ctype}")
            self.held.append((conn, asyncio.create_task(self._drain(conn))))
            return t1 - t0, t2 - t1
        except Exception as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")
            await conn.close()
            return None

    async def open_bulk(self, count: int, deadline: float) -> None:
        sem = asyncio.Semaphore(BULK_CONCURRENCY)

        async def one() -> None:
            async with sem:
                if time.monotonic() > deadline:
                    self.failures.append("deadline passed")
                    return
                await self.open_one()

        await asyncio.gather(*(one() for _ in range(count)))

    async def open_timed(
        self, count: int, deadline: float, companion: Ramp | None = None
    ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """Open ``count`` streams one at a time, each one timed; with a ``companion`` (another
        server of the same kind holding few streams), one there after each, timed too."""
        times, beside = [], []
        for _ in range(count):
            if time.monotonic() > deadline:
                self.failures.append("deadline passed")
                break
            t = await self.open_one()
            if t is not None:
                times.append(t)
            if companion is not None and (c := await companion.open_one()) is not None:
                beside.append(c)
        return times, beside

    def closed_early(self) -> int:
        return sum(1 for _, task in self.held if task.done())

    async def close(self) -> None:
        for conn, task in self.held:
            task.cancel()
            if conn.writer is not None:
                conn.writer.close()
        self.held = []
        await asyncio.sleep(0.5)


def open_growth(early: dict, late: dict) -> dict:
    """How much slower a stream opens with the ``late`` window's count open than with the
    ``early`` one's: against the companion's opens made at the same moments when the late
    window has them (``raw_*``: late / early on the one server, drift included)."""
    out: dict = {}
    for key, field_name in (("growth", "open_median_ms"), ("get_growth", "get_median_ms")):
        out[f"raw_{key}"] = round(late[field_name] / early[field_name], 2)
        beside = late.get(f"companion_{field_name}")
        out[key] = round(late[field_name] / beside, 2) if beside else out[f"raw_{key}"]
    return out


def _median_ms(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1000, 3) if values else None


def idle_streams_case(server: Server, counts: tuple[int, ...], windows: tuple[tuple[int, int], ...], settle: float, budget: float,
                      wait_for_quiet=None, companion: Server | None = None) -> dict:  # fmt: skip
    """Ramp to max(counts) idle streams; RSS growth per stream at each count, and the median
    open time of the streams in each timed window [start, end) (after `wait_for_quiet()`, a
    blocking call that waits, bounded, for other processes to leave the CPU alone).

    With a ``companion`` (a second server of the same kind), it holds as many streams as the
    first window starts at, and every timed open is followed by one there: the two medians of a
    window are then measured at the same moments. The windows are a minute or more apart, and
    this machine's speed drifts by more than the growth being judged in that time (one commit
    gave growths of 0.66 and 1.84 in two runs); the companion's opens take that drift out."""

    async def go() -> dict:
        ramp = Ramp(server)
        beside = Ramp(companion) if companion is not None else None
        deadline = time.monotonic() + budget
        if beside is not None:
            await beside.open_bulk(windows[0][0] if windows else 0, deadline)
        # Warm-up: code paths, caches and lazy imports touched once are not per-session cost.
        await ramp.open_bulk(20, deadline)
        await ramp.close()
        ramp.failures.clear()
        await asyncio.sleep(1.0)
        rss0 = procs.tree_rss([server.pid])
        out: dict = {"memory": {}, "windows": []}
        stops = sorted({*counts, *(a for a, _ in windows), *(b for _, b in windows)})
        opened_at = time.monotonic()
        try:
            for stop in stops:
                n = len(ramp.held)
                window = next((w for w in windows if w[0] <= n < w[1]), None)
                if window is not None:
                    waited = await asyncio.to_thread(wait_for_quiet) if wait_for_quiet else 0.0
                    times, companion_times = await ramp.open_timed(stop - n, deadline, beside)
                    out["windows"].append({
                        "from": window[0], "to": window[1], "timed": len(times), "waited_for_quiet_s": waited,
                        "open_median_ms": _median_ms([a + b for a, b in times]),
                        "session_median_ms": _median_ms([a for a, _ in times]),
                        "get_median_ms": _median_ms([b for _, b in times]),
                        **({
                            "companion_streams": len(beside.held),
                            "companion_open_median_ms": _median_ms([a + b for a, b in companion_times]),
                            "companion_get_median_ms": _median_ms([b for _, b in companion_times]),
                        } if beside is not None else {}),
                    })  # fmt: skip
                elif stop > n:
                    await ramp.open_bulk(stop - n, deadline)
                if ramp.failures:
                    break
                if stop in counts:
                    samples = []
                    for _ in range(3):
                        await asyncio.sleep(settle / 3)
                        samples.append(procs.tree_rss([server.pid]))
                    held = len(ramp.held)
                    out["memory"][stop] = {
                        "count": stop,
                        "opened": held,
                        "open_seconds_total": round(time.monotonic() - opened_at, 1),
                        "rss_before_mb": round(rss0 / 2**20, 1),
                        "rss_after_mb": round(samples[-1] / 2**20, 1),
                        "rss_samples_mb": [round(s / 2**20, 1) for s in samples],
                        "server_threads": procs.tree_threads([server.pid]),
                        "kb_per_session": round((samples[-1] - rss0) / max(held, 1) / 1024, 1),
                    }
            closed = ramp.closed_early()
            out["failed"] = len(ramp.failures)
            out["closed_early"] = closed
            if ramp.failures or closed:
                out["error"] = (
                    f"{len(ramp.failures)} sessions failed to open, {closed} streams closed early "
                    f"(with {len(ramp.held)} open); first failure: {ramp.failures[0] if ramp.failures else '-'}"
                )
            return out
        finally:
            await ramp.close()
            if beside is not None:
                await beside.close()

    return asyncio.run(asyncio.wait_for(go(), budget + 120))
