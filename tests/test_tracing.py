"""OpenTelemetry spans and metrics (mcp_django.ops.tracing), read back with the OpenTelemetry SDK's
in-memory exporters: one span per request as the MCP semantic conventions describe it, parented
on the client's trace context, and the request, error, duration, stream and session metrics."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_django import Context, crypto, site
from mcp_django.checks import check_settings
from mcp_django.exceptions import InternalError
from mcp_django.extensions.tasks import runner as taskrun
from mcp_django.extensions.tasks import store as taskstore
from mcp_django.models import Task
from mcp_django.ops import tracing
from mcp_django.ops.observation import Observation, register_observer, unregister_observer
from mcp_django.protocol.errors import METHOD_NOT_FOUND, RESOURCE_NOT_FOUND
from mcp_django.protocol.modern import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)
from mcp_django.registry.sites import MCPSite
from mcp_django.testing import MCPTestClient, StreamClosed
from mcp_django.transport.consumers import MCPConsumer
from tests.conftest import BASE_SETTINGS

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[1]
MODERN = "2026-07-28"
# A client's trace (W3C trace context): 32 hex digits of trace id, 16 of parent span id.
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
OTHER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER_TRACEPARENT = f"00-{OTHER_TRACE_ID}-00f067aa0ba902b7-01"


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.finished() if s.name == name]
        assert len(found) == 1, f"{name!r} among {[s.name for s in self.finished()]}"
        return found[0]

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def total(self, name: str, **attributes: Any) -> int:
        """The sum of a counter's points whose attributes include ``attributes``."""
        return sum(
            p.value for p in self.points(name) if attributes.items() <= dict(p.attributes).items()
        )


@pytest.fixture
def otel(fresh_channel_layer: None) -> Iterator[Telemetry]:
    """mcp_django's spans and metrics go to the SDK's in-memory exporters during the test."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    tracing.set_providers(tracer_provider, meter_provider)
    try:
        yield Telemetry(spans, reader, tracer_provider)
    finally:
        tracing.set_providers()
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
async def client(otel: Telemetry) -> MCPTestClient:
    client = MCPTestClient()
    await client.initialize()
    return client


@asynccontextmanager
async def observed() -> AsyncIterator[list[Observation]]:
    """The observations of the requests made in the block (an observer after tracing's)."""
    seen: list[Observation] = []

    @asynccontextmanager
    async def capture(observation: Observation) -> AsyncIterator[None]:
        seen.append(observation)
        yield

    register_observer(capture)
    try:
        yield seen
    finally:
        unregister_observer(capture)


def modern(
    method: str, params: dict[str, Any], meta: dict[str, Any] | None = None, request_id: Any = 1
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """A 2026-07-28 request and the headers that mirror it."""
    full_meta = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: {"name": "t", "version": "1"},
        **(meta or {}),
    }
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": full_meta},
    }
    headers: dict[str, str | None] = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if method in ("tools/call", "prompts/get"):
        headers["mcp-name"] = params["name"]
    return message, headers


# -- one span per request -----------------------------------------------------------------


async def test_tools_call_span_carries_the_conventions_attributes(client, otel):
    async with observed() as seen:
        assert (await client.call_tool("add", {"a": 2, "b": 3}))["structuredContent"] == {
            "result": 5
        }
    span = otel.span("tools/call add")
    assert span.kind is SpanKind.SERVER
    assert dict(span.attributes) == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "mcp.protocol.version": "2025-11-25",
        "mcp.session.id": client.session_id,
        "jsonrpc.request.id": str(seen[0].message.id),
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "client.address": "127.0.0.1",
    }
    assert span.status.status_code is StatusCode.UNSET
    # A new trace (no client context), whose id the other observers see.
    assert span.parent is None
    assert seen[0].trace_id == format(span.context.trace_id, "032x")


async def test_resources_read_span_names_the_method_and_records_the_uri(client, otel):
    await client.call("resources/read", {"uri": "test://hello"})
    span = otel.span("resources/read")
    assert span.attributes["mcp.method.name"] == "resources/read"
    assert span.attributes["mcp.resource.uri"] == "test://hello"
    assert "error.type" not in span.attributes


async def test_prompt_span_is_named_after_the_prompt(client, otel):
    await client.call("prompts/get", {"name": "explain", "arguments": {"topic": "django"}})
    assert otel.span("prompts/get explain").attributes["gen_ai.prompt.name"] == "explain"


async def test_error_response_sets_error_type_status_and_code(client, otel):
    response = await client.request("resources/read", {"uri": "test://nothing"})
    assert response["error"]["code"] == RESOURCE_NOT_FOUND
    span = otel.span("resources/read")
    assert span.attributes["error.type"] == str(RESOURCE_NOT_FOUND)
    assert span.attributes["rpc.response.status_code"] == str(RESOURCE_NOT_FOUND)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == response["error"]["message"]


async def test_tool_error_result_is_error_type_tool_error(client, otel):
    result = await client.call_tool("fail")
    assert result["isError"] is True
    span = otel.span("tools/call fail")
    assert span.attributes["error.type"] == "tool_error"
    assert span.status.status_code is StatusCode.ERROR
    assert "rpc.response.status_code" not in span.attributes  # the JSON-RPC call itself succeeded


async def test_a_result_cut_to_max_result_chars_is_marked_on_the_span(client, otel):
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "MAX_RESULT_CHARS": 1000}):
        await client.call_tool("echo", {"text": "short"})
        result = await client.call_tool("echo", {"text": "long " * 1000})
    assert result["content"][-1]["text"].startswith("[Result cut:")
    short, cut = [s for s in otel.spans.get_finished_spans() if s.name == "tools/call echo"]
    assert "mcp_django.result_cut" not in short.attributes
    assert cut.attributes["mcp_django.result_cut"] is True
    assert "error.type" not in cut.attributes  # cut is not failed


async def test_unknown_method_and_tool_names_stay_out_of_span_names(client, otel):
    assert (await client.request("made/up"))["error"]["code"] == METHOD_NOT_FOUND
    await client.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    other = otel.span("_OTHER")
    assert other.attributes["mcp.method.name"] == "_OTHER"
    assert other.attributes["error.type"] == str(METHOD_NOT_FOUND)
    # What the client asked for is on the span, not in its name.
    assert otel.span("tools/call").attributes["gen_ai.tool.name"] == "no_such_tool"


async def test_cancelled_request_span_ends_with_error_type_cancelled(otel):
    client = MCPTestClient()
    await client.initialize(capabilities={"sampling": {}})

    async def cancel_instead_of_answering(params: dict[str, Any]) -> dict[str, Any]:
        assert (await client.notify("notifications/cancelled", {"requestId": 41})).status == 202
        return {"role": "assistant", "content": {"type": "text", "text": "too late"}, "model": "m"}

    client.request_handlers["sampling/createMessage"] = cancel_instead_of_answering
    with pytest.raises(StreamClosed):
        await client.request(
            "tools/call", {"name": "ask", "arguments": {"question": "q"}}, id=41, resume=False
        )
    span = otel.span("tools/call ask")
    assert span.attributes["error.type"] == "cancelled"
    assert span.status.status_code is StatusCode.ERROR
    assert otel.total("mcp_django.server.errors", **{"error.type": "cancelled"}) == 1


async def test_input_required_is_not_an_error(otel):
    message, headers = modern(
        "tools/call",
        {"name": "ask", "arguments": {"question": "q"}},
        {META_CLIENT_CAPABILITIES: {"sampling": {}, "elicitation": {"form": {}}}},
    )
    result = (await MCPTestClient().post_raw(orjson.dumps(message), headers)).json()["result"]
    assert result["resultType"] == "input_required"
    span = otel.span("tools/call ask")
    assert span.attributes["mcp_django.result_type"] == "input_required"
    assert span.attributes["mcp.protocol.version"] == MODERN
    assert "mcp.session.id" not in span.attributes and "error.type" not in span.attributes


# -- parenting ----------------------------------------------------------------------------


async def test_span_is_parented_on_the_traceparent_header(client, otel):
    async with observed() as seen:
        await client.request(
            "tools/call",
            {"name": "add", "arguments": {"a": 1, "b": 1}},
            headers={"traceparent": TRACEPARENT},
        )
    span = otel.span("tools/call add")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and span.parent.is_remote
    assert format(span.parent.span_id, "016x") == PARENT_ID
    assert seen[0].trace_id == TRACE_ID


async def test_meta_traceparent_of_a_2026_request_wins_over_the_header(otel):
    message, headers = modern(
        "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, {"traceparent": TRACEPARENT}
    )
    async with observed() as seen:
        response = await MCPTestClient().post_raw(
            orjson.dumps(message), {**headers, "traceparent": OTHER_TRACEPARENT}
        )
    assert response.json()["result"]["content"][0]["text"] == "hi"
    span = otel.span("tools/call echo")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID
    assert seen[0].trace_id == TRACE_ID


async def test_malformed_meta_traceparent_falls_back_to_a_new_trace(otel):
    message, headers = modern(
        "tools/call",
        {"name": "echo", "arguments": {"text": "hi"}},
        {"traceparent": ["not", "a", "string"]},
    )
    assert (await MCPTestClient().post_raw(orjson.dumps(message), headers)).status == 200
    span = otel.span("tools/call echo")
    assert span.parent is None and span.context.is_valid


async def test_without_an_sdk_the_clients_trace_still_reaches_the_observers(fresh_channel_layer):
    tracing.set_providers()  # the global providers: the API's proxies, no SDK in this process
    assert not tracing.telemetry().recording()
    client = MCPTestClient()
    await client.initialize()
    async with observed() as seen:
        await client.call_tool("add", {"a": 1, "b": 1})
        await client.call_tool("add", {"a": 1, "b": 1}, meta={"traceparent": TRACEPARENT})
    # Outside any trace nothing is done; inside one, the API's no-op span carries the client's
    # context (to the audit trail, and to outgoing calls of instrumented libraries).
    assert [o.trace_id for o in seen] == [None, TRACE_ID]


async def test_the_tools_own_spans_are_children_of_the_request_span(client, otel):
    tracer = otel.tracer_provider.get_tracer("a-tool")

    def lookup(isbn: str) -> str:
        # A sync tool runs in a worker thread, where Django's database instrumentation
        # records its query spans: the request's context must be current there.
        with tracer.start_as_current_span("lookup in the catalogue"):
            return isbn

    site.tool(name="traced_lookup")(lookup)
    try:
        await client.call_tool("traced_lookup", {"isbn": "978"})
    finally:
        site.unregister("tool", "traced_lookup")
    request_span = otel.span("tools/call traced_lookup")
    child = otel.span("lookup in the catalogue")
    assert child.parent is not None and child.parent.span_id == request_span.context.span_id
    assert child.context.trace_id == request_span.context.trace_id


# -- metrics ------------------------------------------------------------------------------


async def test_requests_errors_and_durations_are_counted_with_low_cardinality_attributes(
    client, otel
):
    await client.call_tool("add", {"a": 1, "b": 2})
    await client.call_tool("add", {"a": 3, "b": 4})
    await client.call_tool("fail")
    await client.request("tools/call", {"name": "no_such_tool", "arguments": {}})

    assert otel.total("mcp_django.server.requests", **{"gen_ai.tool.name": "add"}) == 2
    assert otel.total("mcp_django.server.requests", **{"mcp.method.name": "tools/call"}) == 4
    assert (
        otel.total(
            "mcp_django.server.errors", **{"gen_ai.tool.name": "fail", "error.type": "tool_error"}
        )
        == 1
    )
    assert otel.total("mcp_django.server.errors", **{"gen_ai.tool.name": "add"}) == 0
    durations = otel.points("mcp.server.operation.duration")
    assert sum(p.count for p in durations if p.attributes["mcp.method.name"] == "tools/call") == 4
    assert sum(p.count for p in durations if p.attributes["mcp.method.name"] == "initialize") == 1
    assert list(durations[0].explicit_bounds) == list(tracing.DURATION_BUCKETS)
    # No per-request values, and no name a client made up, in any series.
    keys = {key for p in durations for key in p.attributes}
    assert not keys & {"jsonrpc.request.id", "mcp.session.id", "client.address"}
    assert "no_such_tool" not in {p.attributes.get("gen_ai.tool.name") for p in durations}


async def test_initialize_has_its_span_like_every_other_request(otel):
    client = MCPTestClient()
    await client.initialize(protocol_version="2025-06-18")
    span = otel.span("initialize")
    assert span.kind == SpanKind.SERVER
    assert span.attributes["mcp.method.name"] == "initialize"
    assert span.attributes["mcp.protocol.version"] == "2025-06-18"


async def test_sessions_are_counted_while_open_and_their_duration_recorded(otel):
    client = MCPTestClient()
    await client.initialize()
    assert otel.total("mcp_django.server.active_sessions") == 1
    assert (await client.delete()).status == 204
    assert otel.total("mcp_django.server.active_sessions") == 0
    (duration,) = otel.points("mcp.server.session.duration")
    assert duration.count == 1 and duration.attributes["mcp.protocol.version"] == "2025-11-25"


async def test_open_streams_are_counted_until_they_close(client, otel):
    async with await client.open_stream() as stream:
        await stream.next_event()  # the priming event: the stream is live
        assert (
            otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "session"})
            == 1
        )
    assert (
        otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "session"}) == 0
    )

    message, headers = modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    async with await client.post_stream(message, headers) as listen:
        await listen.next_message()
        assert (
            otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "listen"})
            == 1
        )
    assert (
        otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "listen"}) == 0
    )


async def test_a_2026_response_stream_is_counted_while_it_streams(otel):
    seen: list[int] = []

    async def working(ctx: Context) -> str:
        await ctx.report_progress(1, 2)  # opens the request's own SSE stream
        seen.append(
            otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "response"})
        )
        return "done"

    site.tool(name="working")(working)
    try:
        message, headers = modern(
            "tools/call", {"name": "working", "arguments": {}}, {"progressToken": "p"}
        )
        response = await MCPTestClient().post_raw(orjson.dumps(message), headers)
    finally:
        site.unregister("tool", "working")
    assert response.is_sse and response.messages()[-1]["result"]["content"][0]["text"] == "done"
    assert seen == [1]
    assert (
        otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "response"})
        == 0
    )


async def test_a_2026_response_stream_the_client_closes_is_taken_off(otel):
    async def stalled(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await asyncio.Event().wait()  # until the client leaves, which cancels the request
        return "never"

    site.tool(name="stalled")(stalled)
    try:
        message, headers = modern(
            "tools/call", {"name": "stalled", "arguments": {}}, {"progressToken": "p"}
        )
        async with await MCPTestClient().post_stream(message, headers) as stream:
            assert (await stream.next_message())["method"] == "notifications/progress"
            assert (
                otel.total(
                    "mcp_django.server.active_streams", **{"mcp_django.stream.kind": "response"}
                )
                == 1
            )
    finally:
        site.unregister("tool", "stalled")
    gc.collect()  # the stream's finalizer takes it off once nothing holds it
    assert (
        otel.total("mcp_django.server.active_streams", **{"mcp_django.stream.kind": "response"})
        == 0
    )
    assert otel.span("tools/call stalled").attributes["error.type"] == "cancelled"


# -- durable tasks ----------------------------------------------------------------------------


def task_site(otel: Telemetry) -> MCPSite:
    mcp = MCPSite(name="traced-tasks")

    @mcp.tool(task="optional")
    async def quick() -> str:
        """Ends at once, with a span of its own."""
        with otel.tracer_provider.get_tracer("tests").start_as_current_span("inside the task"):
            return "done"

    @mcp.tool(task="optional")
    async def broken() -> str:
        """Fails the task."""
        raise InternalError("out of paper")

    return mcp


async def run_as_task(mcp: MCPSite, name: str, meta: dict[str, Any] | None = None) -> str:
    """Call ``name`` as a task from a client that declares the extension; its id once it ran."""
    capabilities = {META_CLIENT_CAPABILITIES: {"extensions": {taskrun.TASKS_EXTENSION: {}}}}
    message, headers = modern(
        "tools/call", {"name": name, "arguments": {}}, {**capabilities, **(meta or {})}
    )
    response = await MCPTestClient(MCPConsumer.as_asgi(site=mcp)).post_raw(
        orjson.dumps(message), headers
    )
    task_id: str = response.json()["result"]["taskId"]
    runner = taskrun._local.get(task_id)  # gone when it already ended
    if runner is not None and runner.future is not None:
        await asyncio.wait_for(runner.future, 5)
    return task_id


async def test_a_task_run_has_a_span_that_is_a_child_of_the_creating_call(otel):
    task_id = await run_as_task(task_site(otel), "quick", {"traceparent": TRACEPARENT})
    call, run = otel.span("tools/call quick"), otel.span("mcp task quick")
    assert run.parent is not None and run.parent.span_id == call.context.span_id
    assert format(run.context.trace_id, "032x") == TRACE_ID
    assert (
        dict(run.attributes or {}).items()
        >= {
            "mcp_django.task.id": task_id,
            "gen_ai.tool.name": "quick",
            "mcp_django.task.status": "completed",
        }.items()
    )
    assert run.status.status_code is not StatusCode.ERROR
    inside = otel.span("inside the task")
    assert inside.parent is not None and inside.parent.span_id == run.context.span_id
    task = await Task.objects.aget(pk=task_id)
    assert (
        task.trace_context["traceparent"]
        == f"00-{TRACE_ID}-{format(call.context.span_id, '016x')}-01"
    )


async def test_a_failed_task_run_ends_its_span_with_an_error(otel):
    await run_as_task(task_site(otel), "broken")
    run = otel.span("mcp task broken")
    assert run.attributes is not None and run.attributes["mcp_django.task.status"] == "failed"
    assert run.status.status_code is StatusCode.ERROR


async def test_a_run_elsewhere_continues_the_trace_kept_on_the_row(otel):
    """As in a worker: no request around the run, only the row's trace context."""
    mcp = task_site(otel)
    payload = crypto.encrypt(orjson.dumps({"arguments": {}, "answers": {}, "meta": None}).decode())
    task = await sync_to_async(taskstore.create)(
        site_name=mcp.name,
        user_id=None,
        owner="anon",
        tool_name="quick",
        payload=payload,
        trace_context={"traceparent": TRACEPARENT},
    )
    await taskrun.Runner(mcp, task.pk).run()
    run = otel.span("mcp task quick")
    assert format(run.context.trace_id, "032x") == TRACE_ID
    assert (
        run.parent is not None
        and run.parent.is_remote
        and format(run.parent.span_id, "016x") == PARENT_ID
    )
    assert run.attributes is not None and run.attributes["mcp_django.task.status"] == "completed"


async def test_with_tracing_off_a_task_keeps_no_trace_context_and_its_run_no_span(otel):
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "TRACING": False}):
        task_id = await run_as_task(task_site(otel), "quick", {"traceparent": TRACEPARENT})
    assert (await Task.objects.aget(pk=task_id)).trace_context == {}
    assert [s.name for s in otel.finished()] == ["inside the task"]


# -- the switch -----------------------------------------------------------------------------


async def test_tracing_off_records_nothing(otel):
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "TRACING": False}):
        assert not tracing.enabled()
        client = MCPTestClient()
        await client.initialize()
        async with observed() as seen:
            await client.call_tool("add", {"a": 1, "b": 2})
    assert otel.finished() == []
    assert (
        otel.points("mcp_django.server.requests") == []
        and otel.points("mcp_django.server.active_sessions") == []
    )
    assert seen[0].trace_id is None


NOT_IMPORTED_SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from django.conf import settings
    from tests import settings as base

    values = {k: getattr(base, k) for k in dir(base) if k.isupper()}
    values["DATABASES"] = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[2]}}
    values["MCP_DJANGO"] = {**base.MCP_DJANGO, "TRACING": {"off": False, "auto": "auto"}[sys.argv[1]]}
    settings.configure(**values)
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    call_command("check")
    from mcp_django.testing import MCPTestClient

    async def main():
        client = MCPTestClient()
        await client.initialize()
        assert (await client.call_tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        assert (await client.call("resources/read", {"uri": "test://hello"}))["contents"]

    asyncio.run(main())
    print(sorted(m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")))
""")


@pytest.mark.parametrize("setting", ["off", "auto"])
def test_opentelemetry_is_never_imported_with_tracing_off(setting, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", NOT_IMPORTED_SCRIPT, setting, str(tmp_path / "db.sqlite3")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    imported = result.stdout.strip().splitlines()[-1]
    if setting == "off":
        assert imported == "[]"
    else:  # the same run with tracing on does import it: the check above can see an import
        assert "'opentelemetry.trace'" in imported


# -- checks -----------------------------------------------------------------------------------


def _tracing_errors(value: Any) -> list[str]:
    with override_settings(DEBUG=True, MCP_DJANGO={**BASE_SETTINGS, "TRACING": value}):
        return [m.id for m in check_settings() if m.id in ("mcp_django.E040", "mcp_django.E041")]


def test_e040_tracing_true_without_opentelemetry(monkeypatch):
    assert _tracing_errors(True) == []
    # What an environment without opentelemetry-api looks like to an import.
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(tracing, "_available", None)
    assert _tracing_errors(True) == ["mcp_django.E040"]
    assert _tracing_errors("auto") == [] and _tracing_errors(False) == []
    with override_settings(MCP_DJANGO={**BASE_SETTINGS, "TRACING": "auto"}):
        assert not tracing.enabled()  # "auto" without the API: simply off


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_e041_tracing_must_be_auto_true_or_false(value):
    assert _tracing_errors(value) == ["mcp_django.E041"]
