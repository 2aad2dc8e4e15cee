"""OpenTelemetry for the example site: spans and metrics printed on the console.

Off unless an ``OTEL_`` environment variable is set (``OTEL_SERVICE_NAME=library make run``, or
``OTEL_TRACES_EXPORTER=console``). mcp_django then records a span per MCP request and its
metrics through the OpenTelemetry API (``MCP_DJANGO["TRACING"]``, "auto" by default); this module
gives the API an SDK that prints them. ``OTEL_TRACES_EXPORTER=none`` or
``OTEL_METRICS_EXPORTER=none`` silences one of the two; ``OTEL_METRIC_EXPORT_INTERVAL`` (ms,
60000 by default) paces the metrics. A deployment would export to a collector instead (OTLP).
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured


def configure_from_environment() -> bool:
    """Install console exporters when any ``OTEL_`` variable is set; return whether it did."""
    if not any(name.startswith("OTEL_") for name in os.environ):
        return False
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"OTEL_ variables are set, but the OpenTelemetry SDK is missing ({exc}): pip install opentelemetry-sdk"
        ) from exc

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, name the service instead.
    resource = Resource.create(
        {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "example-library"}
    )
    if os.environ.get("OTEL_TRACES_EXPORTER", "console") != "none":
        tracer_provider = TracerProvider(resource=resource)
        # Each span as it ends (a batch processor would hold them back for seconds).
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        trace.set_tracer_provider(tracer_provider)
    if os.environ.get("OTEL_METRICS_EXPORTER", "console") != "none":
        metrics.set_meter_provider(
            MeterProvider(
                resource=resource,
                metric_readers=[PeriodicExportingMetricReader(ConsoleMetricExporter())],
            )
        )
    return True
