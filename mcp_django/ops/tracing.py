"""OpenTelemetry spans and metrics for every MCP request (``pip install
"django-mcp-site[tracing]"``).

One ``SERVER`` span per request, named and described as OpenTelemetry's MCP semantic
conventions say (``{mcp.method.name} {target}``, ``mcp.method.name``, ``gen_ai.tool.name``,
``mcp.session.id``, ``error.type``...), parented on the client's trace context: the request's
``params._meta`` first (the conventions' carrier, and 2026-07-28's), then the span already
current (an ASGI or HTTP instrumentation), then the HTTP ``traceparent`` header. The span is
current while the request runs, so the tool's own spans and the database spans of Django's
instrumentation are its children.

Metrics: ``mcp.server.operation.duration`` and ``mcp.server.session.duration`` (the
conventions'), and counters of requests, errors, open streams and open sessions.

``MCP_DJANGO["TRACING"]``: ``"auto"`` (on when ``opentelemetry-api`` is importable), True or
False. OpenTelemetry is imported by this module only, and only once tracing is on: with False
nothing of it is ever imported. Where the spans and metrics go is the project's choice (the
OpenTelemetry SDK, or a distro); without one, a request outside any trace is left alone, and
one inside a trace only carries the client's context on (the API's no-op span).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..conf import mcp_settings
from ..models import Session
from ..server.rounds import InputRequired
from ..signals import session_closed, session_created
from ..version import __version__
from .observation import Observation, register_observer

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Link, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from ..server.context import Context

logger = logging.getLogger(__name__)

INSTRUMENTATION_NAME = "mcp_django"

#: The conventions' advice for ``mcp.server.operation.duration`` and
#: ``mcp.server.session.duration``.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)

#: Methods the conventions name besides a site's handler table (and the 2026-07-28 additions).
#: Any other method a client sends is recorded as ``_OTHER``: a client must not be able to mint
#: metric series, or span names, at will.
EXTRA_METHODS = frozenset({"initialize", "ping", "server/discover", "subscriptions/listen"})

#: Longest client-given string (a tool name, a resource URI) copied into a span attribute.
MAX_ATTRIBUTE_LENGTH = 256
#: Longest W3C trace-context value read from a request; longer ones are ignored, unparsed.
MAX_CARRIER_LENGTH = 8192

#: The propagation keys (unprefixed in ``_meta``, as SEP-414 and the conventions say).
CARRIER_KEYS = ("traceparent", "tracestate", "baggage")
#: The same, as Django's request.META names the HTTP headers.
HEADER_KEYS = {
    "traceparent": "HTTP_TRACEPARENT",
    "tracestate": "HTTP_TRACESTATE",
    "baggage": "HTTP_BAGGAGE",
}

_available: bool | None = None


def is_available() -> bool:
    """Whether ``opentelemetry-api`` can be imported (it is imported, once, to find out)."""
    global _available
    if _available is None:
        try:
            # Optional dependency (the tracing extra): importing it is the test.
            from opentelemetry import metrics, propagate, trace  # noqa: F401
        except ImportError:
            _available = False
        else:
            _available = True
    return _available


def enabled() -> bool:
    """Whether requests are traced: the ``TRACING`` setting, and the API importable."""
    setting = mcp_settings.tracing
    if setting is True or setting == "auto":
        return is_available()
    return False  # False, or a value E041 reports


class Telemetry:
    """The tracer and the instruments, made once from the providers (the global ones by
    default: OpenTelemetry's proxies follow a provider set later)."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        from opentelemetry import (
            context,
            metrics,
            propagate,
            trace,
        )  # optional dependency (the tracing extra)

        self.tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider
        )
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            description=(
                "MCP request duration as observed on the receiver from the time it was "
                "received until the result is sent."
            ),
        )
        self.session_duration = meter.create_histogram(
            "mcp.server.session.duration",
            unit="s",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            description="The duration of the MCP session as observed on the MCP server.",
        )
        self.requests = meter.create_counter(
            "mcp_django.server.requests", unit="{request}", description="MCP requests answered."
        )
        self.errors = meter.create_counter(
            "mcp_django.server.errors",
            unit="{request}",
            description="MCP requests that ended with an error (error.type says which).",
        )
        self.streams = meter.create_up_down_counter(
            "mcp_django.server.active_streams", unit="{stream}", description="Open SSE streams."
        )
        self.sessions = meter.create_up_down_counter(
            "mcp_django.server.active_sessions",
            unit="{session}",
            description="Sessions initialized and not yet ended by DELETE or the admin.",
        )
        # What a request needs of the API, looked up once rather than on every request.
        self.extract = propagate.extract
        self.inject = propagate.inject
        self.attach = context.attach
        self.detach = context.detach
        self.current_span = trace.get_current_span
        self.set_span_in_context = trace.set_span_in_context
        self.link = trace.Link
        self.server = trace.SpanKind.SERVER
        self.status = trace.Status
        self.error = trace.StatusCode.ERROR
        # Until an SDK is set as the global provider, the API hands out proxies that drop
        # everything: then a request outside any trace needs no span at all (recording()).
        self.own_providers = tracer_provider is not None or meter_provider is not None
        self.tracer_provider = trace.get_tracer_provider
        self.meter_provider = metrics.get_meter_provider
        self.proxy_tracer_provider = trace.ProxyTracerProvider
        try:
            from opentelemetry.metrics._internal import (
                _ProxyMeterProvider,
            )  # optional dependency, private name
        except ImportError:  # an API without it: count metrics as possibly recorded
            self.proxy_meter_provider: tuple[type, ...] = ()
        else:
            self.proxy_meter_provider = (_ProxyMeterProvider,)

    def recording(self) -> bool:
        """Whether spans or metrics may be recorded: providers of the project's own, or an SDK's."""
        return (
            self.own_providers
            or not isinstance(self.tracer_provider(), self.proxy_tracer_provider)
            or not isinstance(self.meter_provider(), self.proxy_meter_provider)
        )


_telemetry: Telemetry | None = None


def telemetry() -> Telemetry:
    """The tracer and instruments in use (made on first use)."""
    global _telemetry
    if _telemetry is None:
        _telemetry = Telemetry()
    return _telemetry


def set_providers(
    tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None
) -> None:
    """Send spans and metrics to these providers instead of the global ones (None: the global
    one), for a project that keeps its own, or a test with the SDK's in-memory exporters."""
    global _telemetry
    _telemetry = (
        Telemetry(tracer_provider, meter_provider) if (tracer_provider or meter_provider) else None
    )


def install() -> None:
    """Trace every request while :func:`enabled`, and count sessions (AppConfig.ready). Imports
    nothing of OpenTelemetry: that waits for the first request with tracing on."""
    register_observer(observe, enabled)
    session_created.connect(
        on_session_created, dispatch_uid="mcp_django.ops.tracing.session_created"
    )
    session_closed.connect(on_session_closed, dispatch_uid="mcp_django.ops.tracing.session_closed")


# -- the span of a request ----------------------------------------------------------------


def observe(observation: Observation) -> AbstractAsyncContextManager[None]:
    """The observer: the request runs inside its span, made current; its metrics are recorded
    on the way out. With no SDK configured and no trace context from the client there is
    nothing to record nor to propagate, and nothing is done."""
    t = telemetry()
    if not t.recording() and not _carries_context(t, observation):
        return _UNOBSERVED
    return RequestSpan(t, observation)


_UNOBSERVED: AbstractAsyncContextManager[None] = nullcontext()


class RequestSpan(AbstractAsyncContextManager[None]):
    """The span of one request, current while it runs, and its metrics."""

    def __init__(self, t: Telemetry, observation: Observation) -> None:
        self.t = t
        self.observation = observation

    async def __aenter__(self) -> None:
        t, observation = self.t, self.observation
        self.name, self.attributes = describe(observation)
        parent, links = _parent(
            t, observation.message.params.get("_meta"), observation.ctx, observation.transport
        )
        self.span = span = t.tracer.start_span(
            self.name, context=parent, kind=t.server, attributes=self.attributes, links=links
        )
        if span.is_recording():  # not for a span sampled out, or the API's no-op one
            span.set_attributes(_span_only(observation))
        span_context = span.get_span_context()
        if span_context.is_valid:
            observation.trace_id = format(span_context.trace_id, "032x")
        self.token = t.attach(t.set_span_in_context(span, parent))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        t, span, attributes = self.t, self.span, self.attributes
        t.detach(self.token)
        description: str | None = None
        if exc is None:
            error_type, description = _outcome(
                self.observation.message.method, self.observation.response, attributes
            )
            if self.observation.ctx.result_cut:
                span.set_attribute("mcp_django.result_cut", True)  # over MAX_RESULT_CHARS
        elif isinstance(exc, asyncio.CancelledError):
            error_type, description = "cancelled", "cancelled by the client"
        elif isinstance(exc, InputRequired):
            # Not a failure: the answer is an input-required result (2026-07-28).
            error_type = None
            span.set_attribute("mcp_django.result_type", "input_required")
        else:
            error_type = type(exc).__qualname__
            span.record_exception(exc)
        if error_type is not None:
            attributes["error.type"] = error_type
            span.set_attributes(
                {
                    k: attributes[k]
                    for k in ("error.type", "rpc.response.status_code")
                    if k in attributes
                }
            )
            span.set_status(t.status(t.error, description))
        span.end()
        t.requests.add(1, attributes)
        if error_type is not None:
            t.errors.add(1, attributes)
        t.duration.record(self.observation.duration, attributes)


def _carries_context(t: Telemetry, observation: Observation) -> bool:
    """Whether the request arrives in a trace: a span already current, or the client's trace
    context (which the API propagates even without an SDK)."""
    meta = observation.message.params.get("_meta")
    if isinstance(meta, dict) and "traceparent" in meta:
        return True
    request = observation.ctx.request
    if request is not None and "HTTP_TRACEPARENT" in request.META:
        return True
    return bool(t.current_span().get_span_context().is_valid)


def describe(observation: Observation) -> tuple[str, dict[str, AttributeValue]]:
    """The span name, and the attributes the span and the metrics share: low-cardinality ones
    only (known methods, tools and prompts; no ids)."""
    message, ctx = observation.message, observation.ctx
    method = (
        message.method
        if (message.method in ctx.site.get_handlers() or message.method in EXTRA_METHODS)
        else "_OTHER"
    )
    attributes: dict[str, AttributeValue] = {"mcp.method.name": method}
    if observation.revision:
        attributes["mcp.protocol.version"] = observation.revision
    if observation.transport == "stdio":
        attributes["network.transport"] = "pipe"
    else:
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
    target = None
    name = message.params.get("name")
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if isinstance(name, str) and ctx.site.get_tool(name) is not None:
            target = attributes["gen_ai.tool.name"] = name
    elif (
        method == "prompts/get" and isinstance(name, str) and ctx.site.get_prompt(name) is not None
    ):
        target = attributes["gen_ai.prompt.name"] = name
    return (f"{method} {target}" if target else method), attributes


def _span_only(observation: Observation) -> dict[str, AttributeValue]:
    """Attributes of one request that would make a metric series each (ids, URIs)."""
    message, ctx = observation.message, observation.ctx
    attributes: dict[str, AttributeValue] = {}
    if message.id is not None:
        attributes["jsonrpc.request.id"] = str(message.id)
    if ctx.session is not None:
        attributes["mcp.session.id"] = str(ctx.session.pk)
    params = message.params
    name = params.get("name")
    if isinstance(name, str) and message.method in ("tools/call", "prompts/get"):
        # Unknown names too (kept out of the name and the metrics): what the client asked for.
        attributes[
            "gen_ai.tool.name" if message.method == "tools/call" else "gen_ai.prompt.name"
        ] = name[:MAX_ATTRIBUTE_LENGTH]
    uri = params.get("uri")
    if isinstance(uri, str) and message.method in (
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
    ):
        attributes["mcp.resource.uri"] = uri[:MAX_ATTRIBUTE_LENGTH]
    request = ctx.request
    if request is not None and observation.transport != "stdio":
        address = request.META.get("REMOTE_ADDR")
        if isinstance(address, str) and address:
            attributes["client.address"] = address
    return attributes


def _carrier(source: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, str]:
    carrier: dict[str, str] = {}
    for key, source_key in keys.items():
        value = source.get(source_key)
        if isinstance(value, str) and len(value) <= MAX_CARRIER_LENGTH:
            carrier[key] = value
    return carrier


_META_KEYS = {key: key for key in CARRIER_KEYS}


def _parent(t: Telemetry, meta: Any, ctx: Context, transport: str) -> tuple[Any, list[Link]]:
    """The context the span starts in, and its links: the client's ``_meta`` (linking the span
    already current, as the conventions advise), else that span, else the HTTP header."""
    ambient = t.current_span().get_span_context()
    if isinstance(meta, dict):
        carrier = _carrier(meta, _META_KEYS)
        if carrier:
            extracted = t.extract(carrier)
            if t.current_span(extracted).get_span_context().is_valid:
                return extracted, [t.link(ambient)] if ambient.is_valid else []
    if ambient.is_valid:
        return None, []
    request = ctx.request
    if request is not None and transport != "stdio":
        carrier = _carrier(request.META, HEADER_KEYS)
        if carrier:
            extracted = t.extract(carrier)
            if t.current_span(extracted).get_span_context().is_valid:
                return extracted, []
    return None, []


def _outcome(
    method: str, response: dict[str, Any] | None, attributes: dict[str, AttributeValue]
) -> tuple[str | None, str | None]:
    """``error.type`` and the status description of a response (None, None: a success)."""
    if response is None:
        return None, None
    error = response.get("error")
    if isinstance(error, dict):
        code = str(error.get("code"))
        attributes["rpc.response.status_code"] = code
        message = error.get("message")
        return code, message[:MAX_ATTRIBUTE_LENGTH] if isinstance(message, str) else None
    result = response.get("result")
    if method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
        return "tool_error", None
    return None, None


# -- the span of a durable task's run -------------------------------------------------------

#: What a task's row keeps of the creating call's trace context: W3C trace context only
#: (baggage is the client's, and a row outlives the request).
TASK_CARRIER_KEYS = ("traceparent", "tracestate")


def current_trace_context() -> dict[str, str]:
    """The W3C trace context of the span current now (``traceparent``, ``tracestate``), for a
    durable task's row, so that its run continues the call's trace; {} with tracing off or
    outside any trace."""
    if not enabled():
        return {}
    t = telemetry()
    if not t.current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    t.inject(carrier)
    return {key: carrier[key] for key in TASK_CARRIER_KEYS if key in carrier}


class TaskSpan:
    """The span of one run of a durable task, current while it runs (the tool's own spans are
    its children), parented on the call that made the task (``Task.trace_context``): the
    run, in this process or a worker, is found under the call's trace id, which the audit
    trail keeps. Set :attr:`status` before leaving: it becomes ``mcp_django.task.status``."""

    def __init__(
        self, task_id: str, tool_name: str, trace_context: Mapping[str, Any] | None
    ) -> None:
        self.task_id = task_id
        self.tool_name = tool_name
        self.trace_context = trace_context or {}
        #: The task's status when the run ended (the runner sets it).
        self.status = ""
        self.span: Any = None

    def __enter__(self) -> TaskSpan:
        if not enabled():
            return self
        t = telemetry()
        parent = None
        carrier = _carrier(self.trace_context, {key: key for key in TASK_CARRIER_KEYS})
        if carrier:
            extracted = t.extract(carrier)
            if t.current_span(extracted).get_span_context().is_valid:
                parent = extracted
        if parent is None and not t.recording():
            return self  # nothing to record, no trace to carry on
        attributes: dict[str, AttributeValue] = {
            "mcp_django.task.id": self.task_id,
            "gen_ai.tool.name": self.tool_name[:MAX_ATTRIBUTE_LENGTH],
            "gen_ai.operation.name": "execute_tool",
        }
        self.span = t.tracer.start_span(
            f"mcp task {self.tool_name[:MAX_ATTRIBUTE_LENGTH]}",
            context=parent,
            attributes=attributes,
        )
        self.token = t.attach(t.set_span_in_context(self.span, parent))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        span = self.span
        if span is None:
            return
        t = telemetry()
        t.detach(self.token)
        if self.status:
            span.set_attribute("mcp_django.task.status", self.status)
        if exc is not None and not isinstance(exc, asyncio.CancelledError):
            span.record_exception(exc)
            span.set_status(t.status(t.error, type(exc).__qualname__))
        elif self.status == "failed":
            span.set_attribute("error.type", "failed")
            span.set_status(t.status(t.error, "the task failed"))
        span.end()


# -- streams and sessions -----------------------------------------------------------------


class _OpenStream(weakref.ref[Any]):
    """An open stream on the gauge, weakly: what takes it off, on close or when the stream is
    collected without one (a connection that ended on an exception). One small object per
    open stream, where a weakref.finalize and a WeakKeyDictionary entry took four."""

    __slots__ = ("add", "attributes", "key")
    key: int
    add: Any
    attributes: dict[str, AttributeValue]


#: id() of each open stream -> its entry (the stream is alive while it is listed: collecting it
#: takes it off before its id can be reused).
_open_streams: dict[int, _OpenStream] = {}
#: One attributes mapping per kind, shared by its streams.
_stream_kinds: dict[str, dict[str, AttributeValue]] = {}


def stream_opened(stream: Any, kind: str) -> None:
    """Count ``stream`` as open ("session": a session's stored streams; "response": a
    2026-07-28 request's own; "listen": subscriptions/listen) until :func:`stream_closed`."""
    if not enabled() or id(stream) in _open_streams:
        return
    add = telemetry().streams.add
    attributes = _stream_kinds.get(kind)
    if attributes is None:
        attributes = _stream_kinds[kind] = {"mcp_django.stream.kind": kind}
    add(1, attributes)
    entry = _OpenStream(stream, _stream_collected)
    entry.key, entry.add, entry.attributes = id(stream), add, attributes
    _open_streams[entry.key] = entry


def _stream_collected(entry: _OpenStream) -> None:
    if _open_streams.get(entry.key) is entry:
        del _open_streams[entry.key]
        entry.add(-1, entry.attributes)


def stream_closed(stream: Any) -> None:
    """Take ``stream`` off the open streams (once, however often it is called)."""
    entry = _open_streams.pop(id(stream), None)
    if entry is not None:
        entry.add(-1, entry.attributes)


def _session_attributes(session: Any) -> dict[str, AttributeValue]:
    version = getattr(session, "protocol_version", "")
    transport = "pipe" if getattr(session, "transport", "") == "stdio" else "tcp"
    return (
        {"mcp.protocol.version": str(version), "network.transport": transport}
        if version
        else {"network.transport": transport}
    )


async def on_session_created(sender: Any, session: Any, **kwargs: Any) -> None:
    if enabled():
        telemetry().sessions.add(1, _session_attributes(session))


async def on_session_closed(sender: Any, session: Any, **kwargs: Any) -> None:
    if not enabled() or not await _was_initialized(session):
        return
    t = telemetry()
    attributes = _session_attributes(session)
    t.sessions.add(-1, attributes)
    created = getattr(session, "created_at", None)
    if isinstance(created, datetime):
        t.session_duration.record(
            max((datetime.now(timezone.utc) - created).total_seconds(), 0.0), attributes
        )


async def _was_initialized(session: Any) -> bool:
    """Whether ``session_created`` was sent for ``session``: always, except for a 2024-11-05
    HTTP+SSE session, opened with its stream, whose client may leave before ``initialize`` (the
    stream's copy of the row is stale, so the row is read: once per such session)."""
    if getattr(session, "transport", "") != "sse" or getattr(session, "client_info", None):
        return True
    client_info = (
        await Session.objects.filter(pk=session.pk).values_list("client_info", flat=True).afirst()
    )
    return bool(client_info)
