"""Create, finish and wait for URL-mode elicitations."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.urls import reverse
from django.utils import timezone

from ..auth.oauth import public_url
from ..conf import mcp_settings
from ..crypto import InvalidToken, decrypt, encrypt
from ..models import Elicitation, Session, UserSecret
from ..ops.quotas.limits import check_pending_elicitations
from ..protocol.jsonrpc import notification_message
from ..server.notifications import announce_soon
from ..transport.layers import get_layer
from ..transport.streams import send_to_session

FINAL_STATES = (
    Elicitation.State.COMPLETED,
    Elicitation.State.DECLINED,
    Elicitation.State.CANCELLED,
    Elicitation.State.EXPIRED,
)


def elicitation_group(elicitation_id: str) -> str:
    return f"mcp.elicitation.{elicitation_id}"


def create(
    *,
    user_id: Any,
    session_id: str | None,
    request_id: Any,
    message: str,
    view_name: str,
    params: dict[str, Any],
) -> Elicitation:
    """Record a pending URL elicitation; QuotaExceededError (-32029) when the user already has
    ``PENDING_ELICITATIONS_PER_USER`` pages waiting."""
    refusal = check_pending_elicitations(user_id)
    if refusal is not None:
        raise refusal
    now = timezone.now()
    return Elicitation.objects.create(
        user_id=user_id,
        session_id=session_id,
        request_id="" if request_id is None else str(request_id)[:200],
        message=message,
        view_name=view_name,
        params=params,
        created_at=now,
        expires_at=now + timedelta(seconds=int(mcp_settings.elicitation_ttl)),
    )


def page_url(elicitation: Elicitation, request: Any) -> str:
    """The page's absolute URL: on the configured public origin when there is one."""
    return public_url(
        request, reverse(elicitation.view_name, kwargs={"elicitation_id": elicitation.pk})
    )


def open_for(elicitation_id: str, user: Any) -> Elicitation | None:
    """The pending, unexpired elicitation ``elicitation_id`` of ``user``; None otherwise (the page
    answers unknown, foreign, used and expired ids with the same 404)."""
    if user is None or not user.is_authenticated:
        return None
    return Elicitation.objects.filter(
        pk=elicitation_id, user=user, state=Elicitation.State.PENDING, expires_at__gt=timezone.now()
    ).first()


def of_user(elicitation_id: str, user_id: Any) -> Elicitation | None:
    """The elicitation ``elicitation_id`` if ``user_id`` started it, whatever its state (a
    2026-07-28 retry finds the page its first round made)."""
    return Elicitation.objects.filter(pk=elicitation_id, user_id=user_id).first()


def finish(elicitation: Elicitation, state: str, *, announce_to_client: bool = True) -> bool:
    """Close a pending elicitation, then tell the session that started it and any waiting tool.

    ``announce_to_client=False`` when the client itself declined to open the page: it knows,
    and no out-of-band interaction took place to report as complete. Return False when the
    elicitation was already closed (a double submit): nothing is sent twice.
    """
    closed = Elicitation.objects.filter(pk=elicitation.pk, state=Elicitation.State.PENDING).update(
        state=state, completed_at=timezone.now()
    )
    if not closed:
        return False
    elicitation.state = state

    announce_soon(
        announce, elicitation.pk, elicitation.session_id if announce_to_client else None, state
    )
    return True


async def announce(elicitation_id: str, session_id: str | None, state: str) -> None:
    if session_id is not None:
        session = await Session.objects.filter(pk=session_id).afirst()
        # notifications/elicitation/complete exists from 2025-11-25, and only for its own session.
        if session is not None and session.is_live() and session.protocol_version >= "2025-11-25":
            await send_to_session(
                session_id,
                notification_message(
                    "notifications/elicitation/complete", {"elicitationId": elicitation_id}
                ),
            )
    await get_layer().group_send(
        elicitation_group(elicitation_id), {"type": "mcp.elicitation", "state": state}
    )


#: How often a waiting tool also reads the row: the page may be finished by a process whose
#: channel layer this one does not share (manage.py mcp_stdio beside a web server, in memory).
RECHECK_SECONDS = 2.0


async def wait(elicitation_id: str, timeout: float) -> str:
    """Wait until the elicitation is finished (on any process); return its final state."""
    layer = get_layer()
    channel = await layer.new_channel()
    group = elicitation_group(elicitation_id)
    await layer.group_add(group, channel)
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        while True:
            # Read after joining: a finish between the two arrives on the channel.
            state = (
                await Elicitation.objects.filter(pk=elicitation_id)
                .values_list("state", flat=True)
                .afirst()
            )
            if state in FINAL_STATES:
                return state
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                await sync_to_async(expire)(elicitation_id)
                return Elicitation.State.EXPIRED
            try:
                message = await asyncio.wait_for(layer.receive(channel), min(left, RECHECK_SECONDS))
            except asyncio.TimeoutError:
                continue
            return cast(str, message["state"])  # as announce sent it
    finally:
        await layer.group_discard(group, channel)


def expire(elicitation_id: str) -> None:
    Elicitation.objects.filter(pk=elicitation_id, state=Elicitation.State.PENDING).update(
        state=Elicitation.State.EXPIRED, completed_at=timezone.now()
    )


def store_secret(user: Any, service: str, secret: str) -> None:
    now = timezone.now()
    UserSecret.objects.update_or_create(
        user=user, service=service, defaults={"ciphertext": encrypt(secret), "updated_at": now}
    )


def read_secret(user_id: Any, service: str) -> str | None:
    ciphertext = (
        UserSecret.objects.filter(user_id=user_id, service=service)
        .values_list("ciphertext", flat=True)
        .first()
    )
    if ciphertext is None:
        return None
    try:
        return decrypt(ciphertext)
    except InvalidToken:
        return None  # encrypted with a key that is gone: as good as missing
