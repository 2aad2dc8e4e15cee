"""The audit trail: a :class:`~mcp_django.models.ToolCall` row for every ``tools/call``.

What lives where, bottom first:

- ``redaction``: which argument values are secret, and what of a call's arguments is kept.
- ``buffer``: the process's writer, which buffers finished calls and writes them in batches,
  off the request's path (:func:`flush`, :func:`aflush` write it now).
- ``trail``: the durable trail (``AUDIT_DURABLE``), each call's row written on its request's
  path, and the receivers that mark "interrupted" the calls of processes that died.
- ``record``: the observer, which makes a call's record as it ends (or is refused) and hands it
  to the buffer or the durable trail.

This module wires them together (:func:`install`) and exports the names the docs give.

What they may import: each module only those listed before it, never this package (that would
be a cycle); outside the package, what the ``ops`` wing may (:mod:`mcp_django.ops`).
"""

from __future__ import annotations

import atexit

from ...conf import mcp_settings
from ...signals import request_orphaned, sweeping
from ...transport.process import leases
from ..observation import register_observer
from .buffer import aflush, flush, writer
from .record import arecord_refused, observe, record_refused, running_tool_calls
from .redaction import SECRET_WORDS
from .trail import on_request_orphaned, on_sweep

__all__ = [
    "SECRET_WORDS",
    "aflush",
    "arecord_refused",
    "flush",
    "install",
    "observe",
    "record_refused",
]


def _enabled() -> bool:
    return bool(mcp_settings.audit_tool_calls)


def install() -> None:
    """Run :func:`observe` around every request while ``AUDIT_TOOL_CALLS`` is on, and write the
    buffer when the process exits (called by the AppConfig; calling it again does nothing more)."""
    register_observer(observe, _enabled)
    sweeping.connect(on_sweep, dispatch_uid="mcp_django.ops.audit.on_sweep")
    request_orphaned.connect(
        on_request_orphaned, dispatch_uid="mcp_django.ops.audit.on_request_orphaned"
    )
    leases.tool_calls = running_tool_calls  # each streamed call's claim carries its record
    atexit.unregister(writer.flush_at_exit)
    atexit.register(writer.flush_at_exit)
