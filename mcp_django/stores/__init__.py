"""Where sessions, stream events and requests are kept, behind classes the transport talks to
instead of the ORM, so that a project can swap the event store
(``MCP_DJANGO["EVENT_STORE_CLASS"]``) without touching the request path.

One idea per module: ``events`` (the event log), ``cache`` (this process's cache of live
sessions), ``sessions`` (session rows), ``requests`` (server-to-client and running requests),
``subscriptions`` (resource subscriptions), ``rows`` (the plain-SQL writes of the hot paths) and
``grouped`` (the group commit those writes share when requests come at once).
Every name is re-exported here: ``mcp_django.stores.DatabaseEventStore`` is the settings'
default and what projects import.
"""

from .cache import SessionCache, session_cache
from .events import BaseEventStore, DatabaseEventStore, StoredEvent, cut_page, get_event_store
from .grouped import GroupWrite
from .requests import ORPHAN_MESSAGE, RunningRequestStore, ServerRequestStore
from .rows import (
    RawJSON,
    RowTemplate,
    column,
    insert_rows,
    insert_values,
    prepare_row,
    update_row,
)
from .sessions import (
    InitializedMarks,
    SessionStore,
    announce_session_changed,
    initialized_marks,
    live_session_ids,
)
from .subscriptions import SubscriptionStore

__all__ = [
    "ORPHAN_MESSAGE",
    "BaseEventStore",
    "DatabaseEventStore",
    "GroupWrite",
    "InitializedMarks",
    "RawJSON",
    "RowTemplate",
    "RunningRequestStore",
    "ServerRequestStore",
    "SessionCache",
    "SessionStore",
    "StoredEvent",
    "SubscriptionStore",
    "announce_session_changed",
    "column",
    "cut_page",
    "get_event_store",
    "initialized_marks",
    "insert_rows",
    "insert_values",
    "live_session_ids",
    "prepare_row",
    "session_cache",
    "update_row",
]
