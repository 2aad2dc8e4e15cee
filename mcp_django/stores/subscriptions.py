"""Resource subscriptions: which sessions follow which URIs."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.utils import timezone

from ..models import Subscription


class SubscriptionStore:
    """Which sessions follow which resource URIs."""

    def subscribe(self, session_id: str, uri: str) -> None:
        Subscription.objects.get_or_create(session_id=session_id, uri=uri)

    def unsubscribe(self, session_id: str, uri: str) -> None:
        Subscription.objects.filter(session_id=session_id, uri=uri).delete()

    def subscribers(self, site_name: str, uri: str) -> list[str]:
        """Live sessions of ``site_name`` subscribed to ``uri``."""
        now = timezone.now()
        return list(
            Subscription.objects.filter(
                uri=uri,
                session__site_name=site_name,
                session__terminated_at__isnull=True,
                session__expires_at__gt=now,
            ).values_list("session_id", flat=True)
        )

    async def asubscribe(self, session_id: str, uri: str) -> None:
        await sync_to_async(self.subscribe)(session_id, uri)

    async def aunsubscribe(self, session_id: str, uri: str) -> None:
        await sync_to_async(self.unsubscribe)(session_id, uri)

    async def asubscribers(self, site_name: str, uri: str) -> list[str]:
        return await sync_to_async(self.subscribers)(site_name, uri)
