"""A readiness view for load balancers: ``GET <endpoint>/health/``.

It answers 200 when this process can reach what MCP needs, the database that holds sessions (with
mcp_django's migrations applied) and the channel layer that carries events between processes, and
503 otherwise, with a JSON body that says which check failed and nothing more (the causes go to
the log), except for unapplied migrations: their names and the command to run. It is a plain Django
view, off the MCP path: no authentication, no Origin check, never cached.
"""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.db import DatabaseError, connections, router
from django.http import HttpRequest, JsonResponse
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from ..models import Session
from ..tables import MIGRATE_HINT, unapplied_migrations
from .layers import get_layer

logger = logging.getLogger(__name__)

OK = "ok"
ERROR = "error"
UNAPPLIED = "unapplied"


def _ping_database() -> None:
    """Reach the database that holds sessions (a trivial query on the backends that need one);
    raise if it does not answer."""
    connection = connections[router.db_for_write(Session)]
    try:
        if connection.connection is not None and not connection.is_usable():
            # Broken since the last check (the database restarted): a new one tells the truth.
            connection.close()
        connection.ensure_connection()
        if not connection.is_usable():
            raise DatabaseError("the connection is not usable")
    finally:
        # This runs in a pool thread: keep its connection only as long as CONN_MAX_AGE allows.
        connection.close_if_unusable_or_obsolete()


async def _round_trip(layer: Any) -> None:
    """Send a message to a new channel of ``layer`` and read it back."""
    # The default prefix, as the process channel's: channels_redis reads every "specific." channel
    # of a process in one receive at a time, and the process channel's waits on Redis for up to
    # 5 s. A channel of another prefix waited behind it, past the check's 2 s (503 on a healthy
    # host: HAProxy took both app hosts of tests/multihost out).
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "mcp.health"})
    message = await layer.receive(channel)
    if message.get("type") != "mcp.health":
        raise RuntimeError(f"the channel layer answered {message.get('type')!r}")


def _unapplied_migrations() -> list[str]:
    connection = connections[router.db_for_write(Session)]
    try:
        return unapplied_migrations(connection.alias)
    finally:
        connection.close_if_unusable_or_obsolete()


class HealthView(View):
    """``{"status": "ok"|"unavailable", "checks": {"database": ..., "migrations": ...,
    "channel_layer": ...}}``,
    200 or 503 (``Cache-Control: no-store``); with unapplied migrations, also
    ``"unapplied_migrations": [...]`` and a ``"hint"`` to run ``migrate``."""

    http_method_names = ["get", "head"]
    #: Seconds each check may take before it counts as failed.
    timeout: float = 2.0

    async def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        database, channel_layer = await asyncio.gather(
            self.check_database(), self.check_channel_layer()
        )
        pending: list[str] = []
        migrations = ERROR
        if database == OK:
            migrations, pending = await self.check_migrations()
        checks = {"database": database, "migrations": migrations, "channel_layer": channel_layer}
        healthy = all(result == OK for result in checks.values())
        body: dict[str, Any] = {"status": "ok" if healthy else "unavailable", "checks": checks}
        if pending:
            # A deployment step left out, not a secret: say which, and what to run.
            body.update(unapplied_migrations=pending, hint=MIGRATE_HINT)
        response = JsonResponse(body, status=HTTPStatus.OK if healthy else 503)
        response["Cache-Control"] = "no-store"
        return response

    async def check_database(self) -> str:
        # Not thread_sensitive: a database that hangs holds a pool thread, not the request's
        # (whose executor Django waits for when the request ends).
        return await self._check(
            "database", sync_to_async(_ping_database, thread_sensitive=False)()
        )

    async def check_migrations(self) -> tuple[str, list[str]]:
        """``(OK, [])``, ``(UNAPPLIED, names)``, or ``(ERROR, [])`` when they cannot be read."""
        try:
            pending = await asyncio.wait_for(
                sync_to_async(_unapplied_migrations, thread_sensitive=False)(), self.timeout
            )
        except Exception:  # a health check's top level, as in _check
            logger.warning(
                "Health check: the migrations of mcp_django cannot be read", exc_info=True
            )
            return ERROR, []
        if pending:
            logger.warning("Health check: unapplied migrations %s", ", ".join(pending))
            return UNAPPLIED, pending
        return OK, []

    async def check_channel_layer(self) -> str:
        return await self._check("channel layer", _round_trip(get_layer()))

    async def _check(self, what: str, probe: Any) -> str:
        try:
            await asyncio.wait_for(probe, self.timeout)
        except Exception:  # a health check's top level: whatever failed, the answer is "error"
            logger.warning("Health check: the %s is unavailable", what, exc_info=True)
            return ERROR
        return OK


def health_view() -> Any:
    """The readiness view, open to anonymous callers even under ``LoginRequiredMiddleware``;
    exempt from CSRF, since it changes nothing (other methods than GET and HEAD get 405)."""
    return login_not_required(csrf_exempt(HealthView.as_view()))
