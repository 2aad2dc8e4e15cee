"""What a change to a registered model means for one site's clients: ``resources/updated``
to the sessions subscribed to its URI (if their user may still read it), and
``resources/list_changed`` when rows came or went. The bus (``notifications``) carries them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db.models.signals import post_delete
from django.http import HttpRequest
from django.utils import timezone

from ..exceptions import NotRegistered
from ..models import Subscription
from ..protocol.jsonrpc import notification_message
from ..server.entries import ServedSite
from ..server.handlers import readable
from ..server.notifications import announce_soon, list_changed, schedule, tell_listeners
from ..transport.streams import send_to_session
from .admin_bridge import is_never_exposed

if TYPE_CHECKING:
    from .options import ModelMCP


class ChangedSite(ServedSite, Protocol):
    """What a model change needs of its site: what the server sees of it, and the
    ``ModelMCP`` a model is registered with. An ``MCPSite`` is one; given, not imported."""

    def get_model_mcp(self, model: Any) -> ModelMCP[Any]: ...


async def anotify_resource_updated(site: ServedSite, uri: str) -> int:
    """Send ``notifications/resources/updated`` to the sessions subscribed to ``uri``."""
    pairs = await _still_readable(site, await sync_to_async(_subscriptions_to)(site.name, [uri]))
    for session_id, _ in pairs:
        await send_to_session(
            session_id, notification_message("notifications/resources/updated", {"uri": uri})
        )
    await tell_listeners(site=site.name, uri=uri)
    return len(pairs)


def notify_resource_updated(site: ServedSite, uri: str) -> int:
    """Synchronous twin of :func:`anotify_resource_updated` (views, signals, commands)."""
    return async_to_sync(anotify_resource_updated)(site, uri)


class ModelChanges:
    """The post_save / post_delete receiver of one site's registered models, from any code path
    (admin, shell, MCP, another process): tells subscribers of the row's URI, and every
    session when the list changed. Given its site, like a ``ModelAdmin``."""

    def __init__(self, site: ChangedSite) -> None:
        self.site = site

    def __call__(
        self, sender: Any, instance: Any, created: bool | None = None, **kwargs: Any
    ) -> None:
        if is_never_exposed(sender):
            return  # an announcement writes these rows: announcing them would loop
        try:
            model_mcp = self.site.get_model_mcp(sender)
        except NotRegistered:
            return  # unregistered since its signals were connected
        # A bulk import or an admin action over many rows: one batch of URIs, one list_changed.
        schedule(
            ("updated", self.site),
            _announce_updated,
            (self.site,),
            item=model_mcp.uri_for(instance),
        )
        if created or _is_delete(kwargs):
            announce_soon(list_changed, self.site, "resources")


async def _announce_updated(site: ServedSite, uris: frozenset[str]) -> int:
    """``resources/updated`` for each subscriber of each URI, found with one query."""
    pairs = await _still_readable(
        site, await sync_to_async(_subscriptions_to)(site.name, sorted(uris))
    )
    for session_id, uri in pairs:
        await send_to_session(
            session_id, notification_message("notifications/resources/updated", {"uri": uri})
        )
    for uri in sorted(uris):
        await tell_listeners(site=site.name, uri=uri)
    return len(pairs)


def _subscriptions_to(site_name: str, uris: list[str]) -> list[tuple[str, str, Any]]:
    """(session, URI, user id) of each live subscription to one of ``uris``."""
    return list(
        Subscription.objects.filter(
            uri__in=uris,
            session__site_name=site_name,
            session__terminated_at__isnull=True,
            session__expires_at__gt=timezone.now(),
        ).values_list("session_id", "uri", "session__user_id")
    )


async def _still_readable(
    site: ServedSite, subscriptions: list[tuple[str, str, Any]]
) -> list[tuple[str, str]]:
    """The subscriptions whose user may still read the URI.

    A subscription is checked when made; a permission or row lost since then must stop the
    announcements too, or ``resources/updated`` would keep naming rows the user may no longer
    see. Decided per (user, URI) with the same gate as ``resources/read``.
    """
    decided: dict[tuple[Any, str], bool] = {}
    requests: dict[Any, Any] = {}
    kept = []
    for session_id, uri, user_id in subscriptions:
        if (user_id, uri) not in decided:
            if user_id not in requests:
                requests[user_id] = await sync_to_async(_request_as)(user_id)
            decided[user_id, uri] = await readable(site, requests[user_id], uri)
        if decided[user_id, uri]:
            kept.append((session_id, uri))
    return kept


def _request_as(user_id: Any) -> Any:
    """A bare request carrying the session's user (anonymous when the session has none)."""
    request = HttpRequest()
    request.user = AnonymousUser()
    if user_id is not None:
        user = get_user_model()._default_manager.filter(pk=user_id).first()
        if user is not None and user.is_active:
            request.user = user
    return request


def _is_delete(kwargs: dict[str, Any]) -> bool:
    return kwargs.get("signal") is post_delete
