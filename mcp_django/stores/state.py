"""Small persisted key-value stores for tools: per user (across sessions) and per session.

``ctx.user_state`` is keyed on the user and the MCP site, not the session: hosted clients often
open a new session for every call. ``ctx.session_state`` dies with its session.
"""

from __future__ import annotations

from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from ..conf import mcp_settings
from ..models import SessionState, UserState


class StateLimitError(ValueError):
    """A value is too large, or there are too many keys."""


class _Store:
    """The shared shape of both stores: async get/set/delete/items/clear with size limits."""

    def _rows(self) -> Any:
        raise NotImplementedError("state stores must implement _rows()")

    def _create(self, key: str, value: Any) -> None:
        raise NotImplementedError("state stores must implement _create(key, value)")

    @staticmethod
    def _check(key: str, value: Any) -> None:
        if not isinstance(key, str) or not key or len(key) > 200:
            raise StateLimitError("State keys are non-empty strings of at most 200 characters")
        size = len(orjson.dumps(value))
        limit = int(mcp_settings.state_max_value_bytes)
        if size > limit:
            raise StateLimitError(f"State value for {key!r} is {size} bytes; the limit is {limit}")

    def get_sync(self, key: str, default: Any = None) -> Any:
        row = self._rows().filter(key=key).values_list("value", flat=True).first()
        return default if row is None else row

    def set_sync(self, key: str, value: Any) -> None:
        self._check(key, value)
        with transaction.atomic():
            updated = self._rows().filter(key=key).update(value=value, updated_at=timezone.now())
            if not updated:
                if self._rows().count() >= int(mcp_settings.state_max_keys):
                    raise StateLimitError(
                        f"At most {mcp_settings.state_max_keys} keys may be stored"
                    )
                self._create(key, value)

    def delete_sync(self, key: str) -> None:
        self._rows().filter(key=key).delete()

    def items_sync(self) -> dict[str, Any]:
        return dict(self._rows().order_by("key").values_list("key", "value"))

    def clear_sync(self) -> None:
        self._rows().delete()

    async def get(self, key: str, default: Any = None) -> Any:
        return await sync_to_async(self.get_sync)(key, default)

    async def set(self, key: str, value: Any) -> None:
        await sync_to_async(self.set_sync)(key, value)

    async def delete(self, key: str) -> None:
        await sync_to_async(self.delete_sync)(key)

    async def items(self) -> dict[str, Any]:
        return await sync_to_async(self.items_sync)()

    async def clear(self) -> None:
        await sync_to_async(self.clear_sync)()


class UserStateStore(_Store):
    def __init__(self, user_id: Any, site_name: str) -> None:
        if user_id is None:
            raise StateLimitError(
                "user_state needs an authenticated user (the server runs without authentication)"
            )
        self.user_id = user_id
        self.site_name = site_name

    def _rows(self) -> Any:
        return UserState.objects.filter(user_id=self.user_id, site_name=self.site_name)

    def _create(self, key: str, value: Any) -> None:
        UserState.objects.create(
            user_id=self.user_id, site_name=self.site_name, key=key, value=value
        )


class SessionStateStore(_Store):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def _rows(self) -> Any:
        return SessionState.objects.filter(session_id=self.session_id)

    def _create(self, key: str, value: Any) -> None:
        SessionState.objects.create(session_id=self.session_id, key=key, value=value)
