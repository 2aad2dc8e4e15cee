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
