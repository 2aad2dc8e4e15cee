"""Signals sent by mcp_django."""

from django.dispatch import Signal

#: Sent when ``initialize`` creates a session. Provides: site, session, request.
session_created = Signal()

#: Sent when a session ends by DELETE or by the admin. Provides: site, session, reason.
session_closed = Signal()
