"""Signals sent by mcp_django."""

from django.dispatch import Signal

#: Sent when ``initialize`` creates a session. Provides: site, session, request. Hook this, not
#: ``post_save``: session rows are written with a plain INSERT, which sends no model signals.
session_created = Signal()

#: Sent when a session ends by DELETE or by the admin. Provides: site, session, reason.
session_closed = Signal()

#: Sent (with ``asend``) when a stored session changed in a way every process's session cache
#: must hear (ended, re-bound, level changed). Provides: session_id. The bus broadcasts it;
#: storage sends it, so storage never imports the bus.
session_changed = Signal()

#: Sent (with ``asend``) each time a process sweeps up after dead processes: at its first
#: request, then with every renewal of its leases. Provides: nothing. The bus sends it; the
#: audit trail closes the running calls of processes that died (``audit.trail.on_sweep``).
sweeping = Signal()

#: Sent when a sweep ends a streamed request whose process died (its lease lapsed). Provides:
#: session_id, request_id (the JSON-RPC id as JSON text), tool_call (the audit trail's record
#: of a tools/call it has no row of yet, else None). Storage sends it, from the sweeping
#: thread: a project resolves its own records of that request (the example site's TaskRun),
#: and the audit trail writes the call's row "interrupted" (``audit.trail.on_request_orphaned``).
request_orphaned = Signal()
