"""The scenarios of issue 28, each an async function of a :class:`Run` that raises on failure.

Each one talks to the balancer only (the driver never picks a host), records which host answered
every request (HAProxy's ``X-Served-By``), and adds what it saw to the run's tally: calls made,
streams resumed on another host than the one that began them, events lost or duplicated.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, TextContent

from tests.multiprocess.sdk import Inbox, wait_for_standalone_stream
from tests.multiprocess.servers import Inspector
from tests.multiprocess.wire import Ended, RawClient
from tests.polling import until
from tests.tasks_wire import TasksClient

from .topology import AppHost, Cluster

#: Seconds any one expected event, answer or state may take before a scenario fails.
WAIT = 20.0


@dataclass
class Tally:
    calls: int = 0
    resumed: int = 0
    lost: int = 0
    duplicated: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # "json"/"sse" -> ratio
    findings: list[str] = field(default_factory=list)


class Run:
    """What every scenario shares: the cluster, the tally, HTTP clients that count and record."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.tally = Tally()
        self.served: list[tuple[str, str]] = []  # (what, host) of every answer through the balancer
        self.db = Inspector(postgres_url=cluster.data.database_url)

    @property
    def url(self) -> str:
        return self.cluster.balancer.url

    def note(self, text: str) -> None:
        self.tally.findings.append(text)
        print(f"  - {text}", flush=True)

    # httpx (raw requests) and httpx2 (the SDK's) call the same hooks.
    async def _on_request(self, request: Any) -> None:
        if request.method == "POST":
            try:
                body = json.loads(request.content or b"null")
            except (ValueError, RuntimeError):
                return
            for message in body if isinstance(body, list) else [body]:
                if isinstance(message, dict) and message.get("method") == "tools/call":
                    self.tally.calls += 1

    async def _on_response(self, response: Any) -> None:
        request = response.request
        self.served.append((request.method, response.headers.get("x-served-by", "?")))

    def http(self, read: float = 60.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=read),
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
        )

    def http2(self, read: float = 60.0) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            timeout=httpx2.Timeout(30.0, read=read),
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
        )

    def hosts_since(self, mark: int) -> Counter[str]:
        return Counter(host for _, host in self.served[mark:])

    def app(self, name: str) -> AppHost:
        return next(a for a in self.cluster.apps if a.name == name)

    def host_of_pid(self, pid: int) -> AppHost | None:
        return next((a for a in self.cluster.apps if pid in a.host.pids()), None)

    async def ensure_apps(self) -> None:
        """Start again any app host a scenario left dead, and wait until the balancer sees it."""
        for app in self.cluster.apps:
            if not app.running:
                await asyncio.to_thread(app.start)
        await self.wait_balanced()

    async def wait_balanced(self, timeout: float = 30.0) -> None:
        """Wait until consecutive requests through the balancer reach both hosts."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=5.0) as http:
            while time.monotonic() < deadline:
                seen = set()
                for _ in range(4):
                    try:
                        response = await http.get(f"{self.url}/health/")
                        seen.add(response.headers.get("x-served-by"))
                    except httpx.TransportError:
                        pass
                if seen >= {a.name for a in self.cluster.apps}:
                    return
                await asyncio.sleep(0.5)
            health = {}
            for app in self.cluster.apps:
                try:
                    response = await http.get(f"{app.url}/health/")
                    health[app.name] = f"{response.status_code} {response.text[:200]}"
                except httpx.HTTPError as exc:
                    health[app.name] = repr(exc)
        raise AssertionError(
            f"the balancer did not send to every app host within {timeout}s; their health/: {health}"
        )


class Answers:
    """The SDK client's side of elicitation: accept, filling every field."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        content: dict[str, Any] = {}
        for name, schema in params.requested_schema.get("properties", {}).items():
            content[name] = {"boolean": True}.get(schema.get("type"), "Alice")
        return ElicitResult(action="accept", content=content)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


# -- 1. both eras through the balancer ---------------------------------------------------------------


async def both_eras(run: Run) -> None:
    # Handshake era (2025-11-25): one session, its requests spread over both hosts.
    answers = Answers()
    mark = len(run.served)
    async with (
        run.http2() as http,
        mcp.Client(
            streamable_http_client(run.url, http_client=http),
            read_timeout_seconds=30,
            mode="legacy",
            elicitation_callback=answers.elicit,
        ) as client,
    ):
        assert client.protocol_version == "2025-11-25", client.protocol_version
        for n in range(6):
            result = await client.call_tool(
                "greet" if n % 2 else "search_books", {"name": f"n{n}"} if n % 2 else {"query": "a"}
            )
            assert not result.is_error, text_of(result)
        reserved = await client.call_tool("confirm_reservation", {"title": "Dune"})
        assert reserved.structured_content == {
            "title": "Dune",
            "action": "accept",
            "confirmed": True,
            "note": "Alice",
        }, reserved
    hosts = run.hosts_since(mark)
    assert set(hosts) >= {"app1", "app2"}, (
        f"one handshake-era session should be served by both hosts: {hosts}"
    )
    run.note(
        f"handshake era: one session, requests served by {dict(hosts)}; elicitation answered across hosts"
    )

    # 2026-07-28: input-required rounds, each retry a new POST the balancer sends anywhere.
    answers = Answers()
    mark = len(run.served)
    async with (
        run.http2() as http,
        mcp.Client(
            streamable_http_client(run.url, http_client=http),
            read_timeout_seconds=30,
            mode="2026-07-28",
            elicitation_callback=answers.elicit,
        ) as client,
    ):
        assert client.protocol_version == "2026-07-28", client.protocol_version
        for _ in range(3):
            rounds = await client.call_tool("test_input_required_result_multi_round", {})
            assert text_of(rounds) == "Alice likes Alice", text_of(rounds)
    hosts = run.hosts_since(mark)
    assert set(hosts) >= {"app1", "app2"}, f"2026-07-28 rounds should land on both hosts: {hosts}"
    run.note(f"2026-07-28: 3 calls of two requestState rounds each, POSTs served by {dict(hosts)}")

    # subscriptions/listen hears a change made through the other host and by a command on the data host.
    async with (
        run.http2(read=120) as http,
        mcp.Client(
            streamable_http_client(run.url, http_client=http),
            read_timeout_seconds=30,
            mode="2026-07-28",
        ) as client,
        client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription,
    ):
        listen_host = run.served[-1][1]
        for _ in range(6):  # until a trigger lands on the other host than the listener's
            mark = len(run.served)
            await client.call_tool("test_trigger_prompt_change", {})
            await asyncio.wait_for(anext(aiter(subscription)), WAIT)
            if run.served[mark][1] != listen_host:
                break
        else:
            raise AssertionError("no trigger landed on the other host in 6 calls")
        await asyncio.to_thread(run.cluster.manage, "announce_change", "tools")
        event = await asyncio.wait_for(anext(aiter(subscription)), WAIT)
        assert "tool" in repr(event).lower(), event
    run.note(
        f"subscriptions/listen (held by {listen_host}) heard a change made on the other host and announce_change on mh-data"
    )

    # The handshake era's GET stream hears the same.
    async with (
        run.http2(read=120) as http,
        streamable_http_client(run.url, http_client=http) as (read, write),
    ):
        inbox = Inbox()
        async with mcp.ClientSession(
            read, write, message_handler=inbox, read_timeout_seconds=60
        ) as session:
            await session.initialize()
            await wait_for_standalone_stream(session, inbox)
            get_host = next(host for method, host in reversed(run.served) if method == "GET")
            mark_inbox = inbox.mark()
            await asyncio.to_thread(run.cluster.manage, "announce_change", "tools")
            await inbox.wait_for(
                lambda n: isinstance(n, mcp.types.ToolListChangedNotification),
                since=mark_inbox,
                timeout=WAIT,
            )
    run.note(f"handshake-era GET stream (held by {get_host}) heard announce_change run on mh-data")


# -- 2. a whole app host killed ---------------------------------------------------------------------


async def host_killed(run: Run) -> None:
    await streamed_call_survives_kill(run)
    await run.ensure_apps()
    await get_stream_survives_kill(run)
    await run.ensure_apps()
    await task_survives_kill(run)
    await run.ensure_apps()


def check_once(
    name: str, run: Run, stored: list[tuple[int, str, bool]], received: list[Any]
) -> None:
    """Every stored event of a stream reached the client exactly once; count what did not."""
    seqs = [e.seq for e in received if e.data]
    dupes = [s for s, n in Counter(seqs).items() if n > 1]
    missing = [seq for seq, _, _ in stored if seq not in seqs]
    run.tally.duplicated += len(dupes)
    run.tally.lost += len(missing)
    assert not dupes and not missing, (
        f"{name}: duplicated {dupes}, lost {missing} (received {seqs}, stored {[s for s, _, _ in stored]})"
    )


async def streamed_call_survives_kill(run: Run) -> None:
    """A countdown answered on SSE; its host dies; the client resumes on the other host, gets the
    events it missed once each, then an error for the call that died with its host."""
    async with run.http(read=120) as http:
        raw = RawClient(http)
        session = await raw.initialize(run.url)
        stream = await raw.call_stream(
            run.url,
            session,
            "countdown-1",
            "countdown",
            {"n": 60, "interval_ms": 500},
            progress_token="p1",
        )
        victim = run.app(stream.response.headers["x-served-by"])
        events = []
        while len([e for e in events if e.data]) < 4:
            events.append(await stream.next_event())
        # The client's connection drops first (its network blinked); the call runs on and stores
        # its events, which the client has to get from the other host once this one is dead.
        await stream.close()
        last = [e for e in events if e.id][-1]
        await run.db.wait_events(
            session, last.stream, at_least=len([e for e in events if e.id]) + 3
        )
        pids = await asyncio.to_thread(victim.kill)
        killed_at = time.monotonic()
        resumed = await raw.get_stream(run.url, session, last_event_id=last.id)
        other = resumed.response.headers.get("x-served-by")
        assert other != victim.name, f"resumed on {other}, the dead host"
        after = []
        final = None
        try:
            while final is None:
                event = await resumed.next_event(timeout=120)
                after.append(event)
                if (
                    event.data
                    and "method" not in event.json()
                    and event.json().get("id") == "countdown-1"
                ):
                    final = event.json()
        finally:
            await resumed.close()
        error_after = time.monotonic() - killed_at
        run.tally.resumed += 1
        stored = await run.db.events(session, last.stream)
        check_once("streamed call", run, stored, [*events, *after])
        assert "error" in final, final
        # AUDIT_DURABLE: the call's row was written as it started; the sweep marks it interrupted.
        audit: list[Any] = []

        async def marked() -> bool:
            audit[:] = await run.db.arows(
                "SELECT outcome FROM mcp_django_toolcall WHERE session_id = %s AND tool_name = 'countdown'",
                session,
            )
            return audit == [("interrupted",)]

        await until(
            marked, WAIT, interval=0.2, failure=lambda: f"the killed call's ToolCall rows: {audit}"
        )
        run.note(
            f"streamed call: killed {victim.name} ({len(pids)} processes) after {len([e for e in events if e.data])} events; "
            f"resumed on {other}, {len([e for e in after if e.data]) - 1} missed events once each, then error "
            f"{final['error']['code']} \"{final['error']['message']}\" {error_after:.1f}s after the kill; its ToolCall row 'interrupted'"
        )
        if error_after > 15:
            run.note(
                f"FINDING: the error came {error_after:.0f}s after the kill (issue asks for 15 s); see REQUEST_LEASE_SECONDS"
            )
            raise AssertionError(
                f"the streamed call's error came {error_after:.1f}s after the kill, not within 15 s"
            )


async def get_stream_survives_kill(run: Run) -> None:
    """The session's GET stream, held by the host that dies: resumed on the other with
    Last-Event-ID, it gets every announcement exactly once, those made meanwhile included."""
    async with run.http(read=120) as http:
        raw = RawClient(http)
        session = await raw.initialize(run.url)
        stream = await raw.get_stream(run.url, session)
        victim = run.app(stream.response.headers["x-served-by"])
        received = [await stream.next_event()]  # priming: held
        announce = {"name": "announce_list_changed", "arguments": {"kind": "tools"}}
        for _ in range(3):
            await raw.request(run.url, session, "tools/call", announce)
            received.append((await stream.next_message())[0])
        await asyncio.to_thread(victim.kill)
        await stream.close()
        # Announced while no stream is held: stored, delivered on resume.
        for _ in range(3):
            await raw.request(run.url, session, "tools/call", announce)
        await asyncio.to_thread(run.cluster.manage, "announce_change", "tools")
        last = [e for e in received if e.id][-1]
        resumed = await raw.get_stream(run.url, session, last_event_id=last.id)
        other = resumed.response.headers.get("x-served-by")
        assert other != victim.name
        try:
            while len([e for e in resumed.received if e.data]) < 4:
                await resumed.next_message()
            await raw.request(run.url, session, "tools/call", announce)  # and live again
            await resumed.next_message()
        finally:
            await resumed.close()
        run.tally.resumed += 1
        stored = await run.db.events(session, "get")
        check_once("GET stream", run, stored, [*received, *resumed.received])
        run.note(
            f"GET stream: held by {victim.name}, killed; resumed on {other}: {len(stored)} stored events, each received once"
        )


async def task_survives_kill(run: Run) -> None:
    """A durable task (2026-07-28 tasks, db_worker): the host that did not claim it dies
    mid-task; polled through the balancer, it completes; its ToolCall row says so."""
    async with run.http() as http:
        client = TasksClient(http)
        # app1's db_worker paused: the task runs on app2's, and app1, the host that made it, dies.
        victim, runner = run.cluster.apps
        assert victim.tasks is not None
        os.kill(victim.tasks.pid, signal.SIGSTOP)
        for _ in range(4):  # round-robin: the second creation at the latest lands on app1
            mark = len(run.served)
            task_id = await client.create(
                run.url, "slow_compute", {"seconds": 6, "label": "multihost"}
            )
            created_on = run.served[mark][1]
            if created_on == victim.name:
                break
        else:
            raise AssertionError(f"no task creation landed on {victim.name}")
        started = await run.db.wait_task_started(task_id)
        pid = int(started["worker"].rpartition(":")[2])
        assert run.host_of_pid(pid) is runner, (
            f"task {task_id} claimed by pid {pid}, not on {runner.name}"
        )
        await asyncio.to_thread(victim.kill)
        done, seen = await client.wait(
            run.url, task_id, "completed", "failed", "cancelled", timeout=40
        )
        assert done["status"] == "completed", (done, seen)
        assert done["result"]["content"] == [
            {"type": "text", "text": "Computed multihost in 6 s"}
        ], done
        # The audit trail has one row for the call, answered with the task (Outcome.TASK); the
        # task's own row says how it ended.
        rows = await run.db.arows(
            "SELECT outcome, tool_name, error_code FROM mcp_django_toolcall WHERE task_id = %s",
            task_id,
        )
        assert rows == [("task", "slow_compute", None)], f"ToolCall rows of task {task_id}: {rows}"
        row = await run.db.task(task_id)
        assert row["status"] == "completed" and row["finished_at"] is not None, row
        run.note(
            f"task: created on {created_on}, run by {runner.name}'s db_worker; {victim.name} killed mid-task; "
            f"completed (statuses {seen}); one ToolCall row (outcome 'task'), Task row completed"
        )


# -- steady load, for scenarios 3, 4 and 5 ------------------------------------------------------------


@dataclass
class Outcomes:
    """What each call of a :class:`Load` got: ok; a failure the client may retry by the spec's
    rules (the balancer's 502/503/504 before any host took the request; 429; the server's
    "send the request again"); a clear error (a JSON-RPC error or an isError result: the client
    knows the call failed, and why); or anything else, ``failed`` (a bare 500, a connection
    closed without an answer, no answer within the bound)."""

    ok: int = 0
    retryable: Counter[str] = field(default_factory=Counter)
    clear: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    slowest: float = 0.0
    by_host: Counter[str] = field(default_factory=Counter)
    ok_since: dict[str, float] = field(
        default_factory=dict
    )  # host -> monotonic time of its last ok
    failed_at: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, what)
    answers: list[tuple[float, float, str, str]] = field(
        default_factory=list
    )  # (began, took, host, what) of every call

    def slowest_of(self, host: str, since: float, until: float) -> tuple[float, str]:
        """How long ``host`` took to answer its slowest call in flight at some moment between
        ``since`` and ``until``, and what the answer was."""
        during = [
            (took, what)
            for began, took, by, what in self.answers
            if by == host and began <= until and began + took >= since
        ]
        return max(during, default=(0.0, "no call"))

    def not_ok_since(self, since: float) -> Counter[str]:
        return Counter(what for at, what in self.failed_at if at >= since)

    def summary(self) -> str:
        return (
            f"{self.ok} ok, retryable {dict(self.retryable) or 0}, clear errors {dict(self.clear) or 0}, "
            f"failed {dict(self.failed) or 0}, slowest {self.slowest:.1f}s"
        )


RETRYABLE_STATUS = {429, 502, 503, 504}


class Load:
    """Calls through the balancer, ``concurrency`` at a time, in both eras, until stopped (bounded
    in count and time): greet on 2026-07-28 (no session) and search_books on one handshake-era
    session, alternately."""

    def __init__(
        self,
        run: Run,
        *,
        concurrency: int = 3,
        max_calls: int = 3000,
        max_seconds: float = 90.0,
        bound: float = 20.0,
    ) -> None:
        self.run = run
        self.concurrency = concurrency
        self.max_calls = max_calls
        self.max_seconds = max_seconds
        self.bound = bound
        self.outcomes = Outcomes()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._made = 0

    async def __aenter__(self) -> Load:
        self.http = self.run.http(read=self.bound)
        await self.http.__aenter__()
        self.raw = RawClient(self.http)
        self.session = await self.raw.initialize(self.run.url)
        self.tasks_client = TasksClient(self.http)
        self.started = time.monotonic()
        self._tasks = [asyncio.ensure_future(self._worker(n)) for n in range(self.concurrency)]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._stop.set()
        await asyncio.wait_for(
            asyncio.gather(*self._tasks, return_exceptions=True), self.bound + 10
        )
        await self.http.__aexit__(*exc)

    async def _worker(self, n: int) -> None:
        while (
            not self._stop.is_set()
            and self._made < self.max_calls
            and time.monotonic() - self.started < self.max_seconds
        ):
            self._made += 1
            await self._one(self._made)
            await asyncio.sleep(
                0.02
            )  # steady, not flat out: 2 cores serve the hosts and the driver

    async def probe(self, app: AppHost) -> None:
        """One call of each era straight to ``app``, past the balancer (which stops sending it
        anything once its health/ fails), counted like the others."""
        for k in (1, 2):
            self._made += 1
            await self._one(k, app)

    async def _one(self, k: int, app: AppHost | None = None) -> None:
        began = time.monotonic()
        kind = "2026" if k % 2 else "session"
        url = self.run.url if app is None else app.url
        host = "?" if app is None else app.name  # through the balancer: known once answered
        try:
            if kind == "2026":
                body = {"name": "greet", "arguments": {"name": f"k{k}"}}
                from tests.tasks_wire import headers as tasks_headers
                from tests.tasks_wire import message

                request = message("tools/call", body)
                response = await self.http.post(url, json=request, headers=tasks_headers(request))
            else:
                request = {
                    "jsonrpc": "2.0",
                    "id": k,
                    "method": "tools/call",
                    "params": {"name": "search_books", "arguments": {"query": "a"}},
                }
                response = await self.http.post(
                    url, json=request, headers=self.raw.headers(self.session)
                )
            host = response.headers.get("x-served-by", "balancer" if app is None else app.name)
            verdict = self._judge(response, host)
        except httpx.TimeoutException:
            verdict = ("failed", f"{kind}: no answer within {self.bound:.0f}s")
        except httpx.HTTPError as exc:
            verdict = ("failed", f"{kind}: {type(exc).__name__}")
        took = time.monotonic() - began
        self.outcomes.slowest = max(self.outcomes.slowest, took)
        what, detail = verdict
        self.outcomes.answers.append(
            (began, took, host, f"{kind}: {what} {detail if what != 'ok' else ''}".strip())
        )
        if what == "ok":
            self.outcomes.ok += 1
            self.outcomes.by_host[host] += 1
            self.outcomes.ok_since[host] = time.monotonic()
        else:
            getattr(self.outcomes, what)[f"{kind}: {detail}"] += 1
            self.outcomes.failed_at.append((time.monotonic(), f"{kind}: {detail}"))

    @staticmethod
    def _judge(response: httpx.Response, host: str) -> tuple[str, str]:
        text = response.text
        try:
            answer = (
                json.loads(text)
                if response.headers.get("content-type", "").startswith("application/json")
                else None
            )
        except ValueError:
            answer = None
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            datas = [
                line[5:].strip()
                for line in text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
            answer = json.loads(datas[-1]) if datas else None
        if (
            response.status_code == 200
            and isinstance(answer, dict)
            and "result" in answer
            and not answer["result"].get("isError")
        ):
            return "ok", host
        error = answer.get("error") if isinstance(answer, dict) else None
        label = f"HTTP {response.status_code} from {host}" + (
            f" {error.get('code')} {str(error.get('message'))[:80]}" if error else ""
        )
        if (
            isinstance(answer, dict)
            and isinstance(answer.get("result"), dict)
            and answer["result"].get("isError")
        ):
            label += (
                " isError: "
                + " ".join(c.get("text", "") for c in answer["result"].get("content", []))[:100]
            )
        elif not error:
            label += " " + text[:100].replace("\n", " ")
        if response.status_code in RETRYABLE_STATUS and host == "balancer":
            return "retryable", label
        if response.status_code == 429 or (
            error and "send the request again" in str(error.get("message", ""))
        ):
            return "retryable", label
        if error or "isError" in label:
            return "clear", label
        return "failed", label

    async def wait_ok_on_both(self, since: float, timeout: float = 30.0) -> float:
        """Wait until each app host answered a call ok after ``since``; return how long it took."""
        names = {a.name for a in self.run.cluster.apps}
        await until(
            lambda: all(self.outcomes.ok_since.get(n, 0) > since for n in names),
            timeout,
            interval=0.2,
            failure=lambda: (
                f"not every host answered ok again within {timeout}s: {self.outcomes.summary()}"
            ),
        )
        return time.monotonic() - since


async def health_of(app: AppHost) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{app.url}/health/")
        return response.status_code, response.json()


# -- 3. Redis unreachable from one app host -------------------------------------------------------------


OUTAGE_SECONDS = 10.0
#: Seconds the cut-off host may take to answer any call (docs/howto/multihost.md): each Redis
#: step of a request gives up after 2 s (the cache's socket_connect_timeout and socket_timeout,
#: the channel layer's socket_connect_timeout, ProcessChannel.JOIN_TIMEOUT) and the request
#: answers 503 at the first that does; measured 2.0 s. With redis-py's defaults it was 5 s, and
#: 15 s (the channel layer's socket_timeout) before the join had a bound of its own.
OUTAGE_BOUND = 4.0
#: Seconds its health/ may take: each check's own bound (HealthView.timeout, 2 s), and some slack.
HEALTH_BOUND = 3.0


async def timed_health(app: AppHost) -> tuple[int, str, float]:
    began = time.monotonic()
    status, body = await health_of(app)
    return status, body["checks"]["channel_layer"], time.monotonic() - began


async def redis_unreachable(run: Run) -> None:
    cluster = run.cluster
    async with run.http(read=120) as http:
        raw = RawClient(http)
        session = await raw.initialize(run.url)
        stream = await raw.get_stream(run.url, session)
        await stream.next_event()  # priming: held
        victim = run.app(stream.response.headers["x-served-by"])  # the host that holds the stream
        announce = {"name": "announce_list_changed", "arguments": {"kind": "tools"}}
        announced = 0
        async with Load(run, bound=25.0) as load:
            await asyncio.sleep(1)
            victim.host.block(cluster.data.redis_ip)
            blocked_at = time.monotonic()
            health_seen: list[tuple[int, str]] = []
            health_slowest = 0.0

            async def announce_meanwhile() -> None:
                # Through the balancer (the other host, once HAProxy took this one out): stored,
                # these announcements must reach the stream after.
                nonlocal announced
                try:
                    response = await raw.post(
                        run.url,
                        session,
                        {
                            "jsonrpc": "2.0",
                            "id": f"a{announced}",
                            "method": "tools/call",
                            "params": announce,
                        },
                    )
                    if response.status_code == 200:
                        announced += 1
                except httpx.HTTPError:
                    pass

            try:
                while time.monotonic() - blocked_at < OUTAGE_SECONDS:
                    # Its health/, and calls straight to it: HAProxy sends it nothing once health/ fails.
                    (status, layer, took), *_ = await asyncio.gather(
                        timed_health(victim), load.probe(victim), announce_meanwhile()
                    )
                    health_seen.append((status, layer))
                    health_slowest = max(health_slowest, took)
                    await asyncio.sleep(1)
            finally:
                victim.host.unblock(cluster.data.redis_ip)
            restored_at = time.monotonic()
            outage_slowest, slowest_what = load.outcomes.slowest_of(
                victim.name, blocked_at, restored_at
            )
            recovered = await load.wait_ok_on_both(restored_at, timeout=40)
            status, body = await health_of(victim)
        assert (503, "error") in health_seen, (
            f"{victim.name}'s health/ never said the channel layer was down: {health_seen}"
        )
        assert status == 200, f"{victim.name}'s health/ after: {status} {body}"
        # Every announcement stored for the session reaches the stream: the one held on the
        # victim if it lived through, else resumed (Last-Event-ID) through the balancer.
        await raw.request(run.url, session, "tools/call", announce)
        stored_now = await run.db.events(session, "get")
        wanted = {seq for seq, _, _ in stored_now}
        resumed = None

        def missing(*streams: Any) -> set[int]:
            return wanted - {e.seq for s in streams for e in s.received if e.data}

        try:
            while missing(stream):
                await stream.next_message(timeout=20)
        except (Ended, AssertionError):
            last = [e for e in stream.received if e.id][-1]
            resumed = await raw.get_stream(run.url, session, last_event_id=last.id)
            while missing(stream, resumed):
                await resumed.next_message(timeout=20)
        finally:
            await stream.close()
            if resumed is not None:
                await resumed.close()
                run.tally.resumed += 1
        check_once(
            "GET stream across the Redis outage",
            run,
            stored_now,
            [*stream.received, *(resumed.received if resumed else [])],
        )
    outcomes = load.outcomes
    run.note(
        f"Redis cut off (DROP) from {victim.name} for {OUTAGE_SECONDS:.0f}s: its health/ said {sorted(set(health_seen))}, "
        f"slowest in {health_slowest:.1f}s; its slowest answer to a call meanwhile {outage_slowest:.1f}s ({slowest_what}); load: {outcomes.summary()}; "
        f"both hosts answered ok again {recovered:.1f}s after; the GET stream it held "
        f"{'was resumed on another host' if resumed else 'lived through'}: {len(stored_now)} events, each once"
    )
    assert health_slowest <= HEALTH_BOUND, (
        f"{victim.name}'s health/ took {health_slowest:.1f}s (bound {HEALTH_BOUND:.0f}s)"
    )
    assert outage_slowest <= OUTAGE_BOUND, (
        f"{victim.name} took {outage_slowest:.1f}s to answer a call while Redis was cut off (bound {OUTAGE_BOUND:.0f}s)"
    )
    assert outcomes.slowest <= 25.0, f"a call took {outcomes.slowest:.1f}s"
    assert not outcomes.failed, f"calls that failed without a clear answer: {dict(outcomes.failed)}"


# -- 4. PostgreSQL restarted under load ---------------------------------------------------------------


SETTLE_SECONDS = 5.0
CLEAN_WINDOW_SECONDS = 5.0


async def postgres_restart(run: Run) -> None:
    data = run.cluster.data
    workers = {a.name: a.tasks.pid for a in run.cluster.apps if a.tasks is not None}
    async with Load(run, bound=25.0) as load:
        await asyncio.sleep(2)
        before = load.outcomes.ok
        stop_at = time.monotonic()
        await asyncio.to_thread(data.stop_postgres, "fast")
        await asyncio.to_thread(data.start_postgres)
        down = time.monotonic() - stop_at
        restored_at = time.monotonic()
        recovered = await load.wait_ok_on_both(restored_at, timeout=40)
        # Then every call must succeed again: a settling time, and a window that must be clean.
        await asyncio.sleep(SETTLE_SECONDS)
        window = time.monotonic()
        await asyncio.sleep(CLEAN_WINDOW_SECONDS)
        failed_later = load.outcomes.not_ok_since(window)
    outcomes = load.outcomes
    alive = {name: Path(f"/proc/{pid}").exists() for name, pid in workers.items()}
    run.note(
        f"PostgreSQL restarted (fast stop, down {down:.1f}s) under load: {outcomes.summary()} ({before} ok before); "
        f"some call ok on both hosts {recovered:.1f}s after it was back; failures {SETTLE_SECONDS:.0f}-"
        f"{SETTLE_SECONDS + CLEAN_WINDOW_SECONDS:.0f}s after: {dict(failed_later) or 0}; db_workers alive after: {alive}"
    )
    assert outcomes.slowest <= 25.0, f"a call took {outcomes.slowest:.1f}s"
    assert not outcomes.failed, f"calls that failed without a clear answer: {dict(outcomes.failed)}"
    assert not failed_later, (
        f"the app hosts did not recover from the PostgreSQL restart: {SETTLE_SECONDS:.0f}s after it, still {dict(failed_later)}"
    )
    if not all(alive.values()):
        raise AssertionError(f"a db_worker died with the PostgreSQL restart: {alive}")


# -- 5. rolling restart ------------------------------------------------------------------------------------


async def rolling_restart(run: Run) -> None:
    async with Load(run, bound=25.0) as load:
        await asyncio.sleep(2)
        for app in run.cluster.apps:
            began = time.monotonic()
            await asyncio.to_thread(
                app.stop
            )  # SIGTERM: uvicorn stops accepting, finishes what it has
            await asyncio.to_thread(app.start)
            await run.wait_balanced()
            await load.wait_ok_on_both(time.monotonic(), timeout=30)
            run.note(
                f"{app.name} restarted (SIGTERM, start, back in the balancer) in {time.monotonic() - began:.1f}s"
            )
        await asyncio.sleep(2)
    outcomes = load.outcomes
    run.note(
        f"rolling restart under load: {outcomes.summary()}; ok by host {dict(outcomes.by_host)}"
    )
    refused = outcomes.clear + outcomes.failed
    assert not refused, f"calls that failed without a retryable answer: {dict(refused)}"


# -- 6. CPU per call ---------------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (
            int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        )  # utime stime cutime cstime
    return total / ticks


CPU_CALLS = 400
CPU_CONCURRENCY = 6


async def load(run: Run, url: str, sse: bool, calls: int) -> None:
    """Make ``calls`` tools/call on one handshake-era session, CPU_CONCURRENCY at a time."""
    async with run.http() as http:
        raw = RawClient(http)
        session = await raw.initialize(url)
        queue = iter(range(calls))

        async def worker() -> None:
            for n in queue:
                if sse:  # a tool taking a Context is always answered on SSE
                    result = await raw.request(
                        url,
                        session,
                        "tools/call",
                        {"name": "countdown", "arguments": {"n": 1, "interval_ms": 0}},
                    )
                else:
                    result = await raw.request(
                        url,
                        session,
                        "tools/call",
                        {"name": "greet", "arguments": {"name": f"n{n}"}},
                    )
                assert not result.get("isError"), result

        await asyncio.gather(*(worker() for _ in range(CPU_CONCURRENCY)))


async def cpu_per_call(run: Run) -> None:
    solo = run.cluster.solo
    if not solo.running:
        await asyncio.to_thread(solo.start)
    per_call: dict[tuple[str, str], float] = {}
    for kind in ("json", "sse"):
        sse = kind == "sse"
        await load(run, run.url, sse, 20)  # warm every worker up
        await load(run, solo.url, sse, 20)
        pids = [pid for app in run.cluster.apps for pid in app.web_pids()]
        before = cpu_seconds(pids)
        start = time.monotonic()
        await load(run, run.url, sse, CPU_CALLS)
        hosts_wall = time.monotonic() - start
        per_call[("hosts", kind)] = (cpu_seconds(pids) - before) / CPU_CALLS
        solo_pids = solo.web_pids()
        before = cpu_seconds(solo_pids)
        start = time.monotonic()
        await load(run, solo.url, sse, CPU_CALLS)
        solo_wall = time.monotonic() - start
        per_call[("solo", kind)] = (cpu_seconds(solo_pids) - before) / CPU_CALLS
        run.tally.cpu[kind] = per_call[("hosts", kind)] / per_call[("solo", kind)]
        run.note(
            f"CPU {kind.upper()}: {per_call[('hosts', kind)] * 1000:.1f} ms per call on the app hosts' web processes "
            f"(2 hosts x 2 uvicorn workers, PostgreSQL + Redis; {CPU_CALLS} calls in {hosts_wall:.1f}s) vs "
            f"{per_call[('solo', kind)] * 1000:.1f} ms in one uvicorn process on SQLite ({solo_wall:.1f}s): {run.tally.cpu[kind]:.2f}x"
        )
    await asyncio.to_thread(solo.stop)


SCENARIOS: dict[str, Any] = {
    "1": ("both eras through the balancer", both_eras),
    "2": (
        "a whole app host killed (kill -9) during a streamed call, a GET stream and a task",
        host_killed,
    ),
    "3": ("Redis unreachable from one app host for 10 s", redis_unreachable),
    "4": ("a PostgreSQL restart under load", postgres_restart),
    "5": ("a rolling restart of both app hosts under steady load", rolling_restart),
    "6": ("CPU per call vs one SQLite process, JSON and SSE", cpu_per_call),
}
