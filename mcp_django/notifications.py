"""Announce changes to connected clients from any code: a view, a signal handler, a management
command or a task queue worker, with or without an open MCP connection.

Each announcement is stored on the session's GET stream and sent over the channel layer, so it
reaches the stream wherever it is held, or waits for the client to resume.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync, sync_to_async

from .protocol.jsonrpc import notification_message
from .stores import SubscriptionStore, live_session_ids

if TYPE_CHECKING:
    from .sites import MCPSite

logger = logging.getLogger(__name__)

LIST_KINDS = ("tools", "resources", "prompts")


async def anotify_resource_updated(site: MCPSite, uri: str) -> int:
    """Send ``notifications/resources/updated`` to the sessions subscribed to ``uri``."""
    from .transport.streams import send_to_session

    session_ids = await SubscriptionStore().asubscribers(site.name, uri)
    for session_id in session_ids:
        await send_to_session(session_id, notification_message("notifications/resources/updated", {"uri": uri}))
    return len(session_ids)


async def anotify_list_changed(site: MCPSite, kind: str) -> int:
    """Send ``notifications/<kind>/list_changed`` to every live session of ``site``."""
    from .transport.streams import send_to_session

    if kind not in LIST_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LIST_KINDS)}, not {kind!r}")
    session_ids = await sync_to_async(live_session_ids)(site.name)
    for session_id in session_ids:
        await send_to_session(session_id, notification_message(f"notifications/{kind}/list_changed"))
    return len(session_ids)


def notify_resource_updated(site: MCPSite, uri: str) -> int:
    """Synchronous twin of :func:`anotify_resource_updated` (views, signals, commands)."""
    return async_to_sync(anotify_resource_updated)(site, uri)


def notify_list_changed(site: MCPSite, kind: str) -> int:
    """Synchronous twin of :func:`anotify_list_changed`."""
    return async_to_sync(anotify_list_changed)(site, kind)


def model_changed(sender: Any, instance: Any, created: bool | None = None, **kwargs: Any) -> None:
    """post_save / post_delete of a registered model, from any code path (admin, shell, MCP,
    another process): tell subscribers of its URI, and everyone when the list changed."""
    from .sites import all_sites

    list_changed = bool(created) or _is_delete(kwargs)
    for site in list(all_sites):
        model_mcp = site._registry.get(sender)
        if model_mcp is not None:
            announce_soon(_announce_model_change, site, model_mcp.uri_for(instance), list_changed)


async def _announce_model_change(site: MCPSite, uri: str, list_changed: bool) -> None:
    await anotify_resource_updated(site, uri)
    if list_changed:
        await anotify_list_changed(site, "resources")


def _is_delete(kwargs: dict[str, Any]) -> bool:
    from django.db.models.signals import post_delete

    return kwargs.get("signal") is post_delete


def announce_soon(coroutine_function: Any, *args: Any) -> None:
    """Run an announcement from sync or async code without blocking the caller.

    From an event loop it becomes a task; from sync code it runs after the current transaction
    commits (so nobody hears of a change that was rolled back).
    """
    import asyncio

    from django.db import transaction

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        task = loop.create_task(_logged(coroutine_function, *args))
        _background.add(task)
        task.add_done_callback(_background.discard)
        return

    def run() -> None:
        async_to_sync(_logged)(coroutine_function, *args)

    transaction.on_commit(run, robust=True)


_background: set[Any] = set()


async def _logged(coroutine_function: Any, *args: Any) -> None:
    # An announcement must never break the change (or the request) that caused it.
    try:
        await coroutine_function(*args)
    except Exception:
        logger.exception("Could not announce a change to connected clients")


async def anotify_user_lists_changed(user_ids: list[Any]) -> int:
    """Tell the live sessions of these users, on every site, that what they may use changed."""
    from .models import Session
    from .transport.streams import send_to_session

    sessions = [s async for s in Session.objects.filter(user_id__in=user_ids).live().values_list("pk", flat=True)]
    for session_id in sessions:
        for kind in LIST_KINDS:
            await send_to_session(session_id, notification_message(f"notifications/{kind}/list_changed"))
    return len(sessions)


def permissions_changed(sender: Any, instance: Any, action: str, reverse: bool, model: Any, pk_set: Any, **kwargs: Any) -> None:
    """m2m_changed on user permissions, user groups and group permissions: the tools, resources
    and prompts those users may see changed, so their sessions hear list_changed."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    if action not in ("post_add", "post_remove", "post_clear"):
        return
    User = get_user_model()
    if isinstance(instance, User):
        user_ids = [instance.pk]
    elif isinstance(instance, Group):
        user_ids = list(instance.user_set.values_list("pk", flat=True))
    elif model is Group and pk_set:
        user_ids = list(User.objects.filter(groups__in=pk_set).values_list("pk", flat=True).distinct())
    elif model is User and pk_set:
        user_ids = list(pk_set)
    else:
        return
    if user_ids:
        announce_soon(anotify_user_lists_changed, user_ids)
