"""Quotas: rate limits on ``tools/call`` and caps on what one caller holds open.

Everything is counted in Django's cache (``QUOTAS["CACHE"]``), so the processes that share a
cache count together: with Redis, a whole deployment; with the local-memory cache, each
process alone. How a cache counts is its backend's business (:mod:`mcp_django.ops.quotas.backends`:
in this process for the local-memory cache, pipelines for Redis, ``add`` and ``incr`` for any
other); every backend counts atomically, so two concurrent requests never both take the last
unit of a limit: across processes where the cache's ``incr`` is atomic (Redis, memcached),
within a process for the database and file caches (checks W185 and W186 say when not).

Who is counted (:func:`caller_of`):

* an authenticated user, by primary key;
* an anonymous caller (authentication ``"none"``), by the client address the ASGI server
  reports (``REMOTE_ADDR``: behind a proxy, run the server with its proxy-headers option), or
  as one ``"anonymous"`` caller where there is none (stdio);
* with OAuth, the client (the token's application, or an external IdP token's ``client_id``), for
  ``TOOL_CALLS_PER_CLIENT``.

Every refusal is a :class:`~mcp_django.protocol.errors.QuotaExceededError` naming the limit;
the engine hands each one to ``Engine.quota_refused`` before answering it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import BaseCache
from django.utils import timezone

from ...auth.base import token_client
from ...conf import mcp_settings
from ...models import Elicitation, Session
from ...protocol.errors import QuotaExceededError

# The "x as x" names stay importable from here: this module's own before counting moved out.
from .backends import KEY_PREFIX as KEY_PREFIX
from .backends import BaseCounters, Scope, cache_key, counters_for
from .backends import aclose_clients as aclose_clients
from .backends import cache_for as cache_for
from .backends import forget_local_counts as forget_local_counts
from .batches import SlotPool, batches_for, buckets_for, cap_batch, rate_batch

#: The keys of ``MCP_DJANGO["QUOTAS"]`` (their defaults are in ``conf.DEFAULTS``).
RATE_KEYS = ("TOOL_CALLS", "TOOL_CALLS_PER_CLIENT", "NEW_TASKS_PER_USER")
CAP_KEYS = (
    "SESSIONS_PER_USER",
    "SESSIONS_PER_ADDRESS",
    "STREAMS_PER_SESSION",
    "STREAMS_PER_USER",
    "RUNNING_PER_SESSION",
    "RUNNING_PER_USER",
    "PENDING_ELICITATIONS_PER_USER",
    "LIVE_TASKS_PER_USER",
    "WAITING_TASKS_PER_USER",
)
QUOTA_KEYS = frozenset({"CACHE", "PER_TOOL", *RATE_KEYS, *CAP_KEYS})

UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}
_RATE_RE = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*")

logger = logging.getLogger("mcp_django.ops.quotas")


def now() -> float:
    """Seconds since the epoch; windows and buckets are aligned on it (tests move it)."""
    return time.time()


@dataclass(frozen=True)
class Rate:
    """At most ``count`` calls per fixed window of ``period`` seconds."""

    count: int
    period: int
    text: str


def parse_rate(value: Any) -> Rate:
    """``"600/minute"`` (or ``"10/5m"``, ``"2/second"``...) as a :class:`Rate`; ValueError
    otherwise."""
    match = _RATE_RE.fullmatch(value) if isinstance(value, str) else None
    unit = UNITS.get(match.group(3).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(
            f"{value!r} is not a rate like '600/minute' (units: second, minute, hour, day)"
        )
    count, multiple = int(match.group(1)), int(match.group(2) or 1)
    if count <= 0 or multiple <= 0:
        raise ValueError(f"{value!r} must allow at least one call per period of at least one unit")
    return Rate(count, unit * multiple, value.strip())


def _rate_or_none(value: Any) -> Rate | None:
    # At run time a malformed entry turns its limit off; the system check (E036) reports it.
    try:
        return None if value is None else parse_rate(value)
    except ValueError:
        return None


def _cap_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class Quotas:
    """``MCP_DJANGO["QUOTAS"]``, parsed."""

    cache_alias: str = "default"
    tool_calls: Rate | None = None
    tool_calls_per_client: Rate | None = None
    new_tasks_per_user: Rate | None = None
    per_tool: Mapping[str, Rate] = field(default_factory=dict)
    sessions_per_user: int | None = None
    sessions_per_address: int | None = None
    running_per_session: int | None = None
    running_per_user: int | None = None
    streams_per_session: int | None = None
    streams_per_user: int | None = None
    pending_elicitations_per_user: int | None = None
    live_tasks_per_user: int | None = None
    #: The rate limits of each (caller, client, tool) seen, made once (see _limits).
    limits_made: dict[tuple[str, str | None, str | None], list[_Limit]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Quotas:
        per_tool = raw.get("PER_TOOL")
        rates = (
            {str(k): _rate_or_none(v) for k, v in per_tool.items()}
            if isinstance(per_tool, dict)
            else {}
        )
        alias = raw.get("CACHE")
        return cls(
            cache_alias=alias if isinstance(alias, str) else "default",
            tool_calls=_rate_or_none(raw.get("TOOL_CALLS")),
            tool_calls_per_client=_rate_or_none(raw.get("TOOL_CALLS_PER_CLIENT")),
            new_tasks_per_user=_rate_or_none(raw.get("NEW_TASKS_PER_USER")),
            per_tool={name: rate for name, rate in rates.items() if rate is not None},
            sessions_per_user=_cap_or_none(raw.get("SESSIONS_PER_USER")),
            sessions_per_address=_cap_or_none(raw.get("SESSIONS_PER_ADDRESS")),
            running_per_session=_cap_or_none(raw.get("RUNNING_PER_SESSION")),
            running_per_user=_cap_or_none(raw.get("RUNNING_PER_USER")),
            streams_per_session=_cap_or_none(raw.get("STREAMS_PER_SESSION")),
            streams_per_user=_cap_or_none(raw.get("STREAMS_PER_USER")),
            pending_elicitations_per_user=_cap_or_none(raw.get("PENDING_ELICITATIONS_PER_USER")),
            live_tasks_per_user=_cap_or_none(raw.get("LIVE_TASKS_PER_USER")),
        )

    @property
    def limits_calls(self) -> bool:
        return (
            self.tool_calls is not None
            or self.tool_calls_per_client is not None
            or bool(self.per_tool)
        )

    @property
    def counters(self) -> BaseCounters:
        """The backend that counts in the cache ``QUOTAS["CACHE"]`` names."""
        return counters_for(self.cache_alias)

    @property
    def cache(self) -> BaseCache:
        return self.counters.cache


_parsed: tuple[Any, Quotas] | None = None


def current() -> Quotas:
    """The quotas in force, parsed again only when the setting changes."""
    global _parsed
    # By identity (the settings object keeps one merged dict per value): this runs several
    # times per tools/call, and comparing the dicts each time showed in profiles.
    raw = mcp_settings.quotas
    if _parsed is None or _parsed[0] is not raw:
        _parsed = (raw, Quotas.parse(raw))
    return _parsed[1]


@dataclass(frozen=True)
class Caller:
    """Who a quota counts: ``key`` for the per-user limits, ``client`` for the per-client one."""

    key: str
    user_id: Any = None
    client: str | None = None
    #: An anonymous caller's client address (None for a user, or where there is none: stdio).
    address: str | None = None


def caller_of(request: Any, user: Any) -> Caller:
    """The caller of ``request`` made by ``user`` (None when anonymous); see the module's
    docstring."""
    user_id = getattr(user, "pk", None)
    token = getattr(request, "auth_token", None)
    application = getattr(token, "application_id", None)
    issued_to = token_client(request)
    if application is not None:
        client: str | None = f"oauth-client:{application}"
    elif issued_to:
        # An external IdP's client, by issuer: two providers may use the same client ids.
        client = f"jwt-client:{request.auth_claims.get('iss')}\x1f{issued_to}"
    else:
        client = None
    if user_id is not None:
        return Caller(f"user:{user_id}", user_id, client)
    meta = getattr(request, "META", None)
    address = meta.get("REMOTE_ADDR") if isinstance(meta, dict) else None
    if not address:
        return Caller("anonymous", None, client)
    return Caller(f"address:{address}", None, client, str(address))


# -- rate limits ------------------------------------------------------------------------------


def check_tool_calls(caller: Caller, names: list[str | None]) -> list[QuotaExceededError | None]:
    """Count a ``tools/call`` of each of ``names`` (None: no valid name) against the rate
    limits, in order; for each, None or the error that refuses it. Every call counts against
    each limit that applies, up to the one that refuses it."""
    quotas = current()
    counters = quotas.counters
    results: list[QuotaExceededError | None] = []
    for name in names:
        at, error = now(), None
        for limit in _limits(quotas, caller, name):
            error = limit.refusal(counters.hit([limit.key(at)], limit.rate.period + 1)[0], at)
            if error is not None:
                break
        results.append(error)
    return results


async def acheck_tool_calls(
    caller: Caller, names: list[str | None]
) -> list[QuotaExceededError | None]:
    """:func:`check_tool_calls` without blocking the event loop (a shared cache is a network
    round trip)."""
    quotas = current()
    if not quotas.limits_calls:
        return [None] * len(names)
    counters = quotas.counters
    results: list[QuotaExceededError | None] = []
    for name in names:
        at, error = now(), None
        for limit in _limits(quotas, caller, name):
            error = await _ahit(counters, limit, at)
            if error is not None:
                break
        results.append(error)
    return results


async def _ahit(counters: BaseCounters, limit: _Limit, at: float) -> QuotaExceededError | None:
    """Count one unit against ``limit`` at ``at``: None, or the error that refuses it."""
    keys = [limit.key(at)]
    if counters.inline:
        return limit.refusal(counters.hit(keys, limit.rate.period + 1)[0], at)
    if rate_batch(limit.rate.count) > 1:
        # Units taken a batch at a time, handed out here (mcp_django.ops.quotas.batches).
        admitted = await batches_for(counters, _clock).admit(
            keys[0], limit.rate.count, limit.rate.period + 1
        )
        return None if admitted else limit.refused(at)
    return limit.refusal((await counters.ahit(keys, limit.rate.period + 1))[0], at)


async def acheck_new_task(caller: Caller) -> None:
    """Count a new durable task of ``caller`` against ``NEW_TASKS_PER_USER`` (anonymous: per
    client address); QuotaExceededError (429 with Retry-After) past it. Each task outlives
    its call and holds a row and a runner: the tools/call rate alone let a client start them
    far faster than they end."""
    quotas = current()
    if quotas.new_tasks_per_user is None:
        return
    limit = _Limit("NEW_TASKS_PER_USER", caller.key, quotas.new_tasks_per_user, "new tasks", None)
    error = await _ahit(quotas.counters, limit, now())
    if error is not None:
        raise error


def _clock() -> float:
    return now()  # looked up on each call: tests move quotas.now


@dataclass(eq=False)
class _Limit:
    """One rate limit as it applies to a caller's calls (of one tool, for PER_TOOL)."""

    name: str
    who: str
    rate: Rate
    what: str
    tool: str | None
    #: The window last counted in, and its key.
    last: tuple[int, str] = (-1, "")

    def key(self, at: float) -> str:
        window = int(at // self.rate.period)
        if self.last[0] != window:
            # The counter outlives its window by at most a period: no key is kept for long.
            self.last = (
                window,
                cache_key("rate", self.name, self.who, str(self.rate.period), str(window)),
            )
        return self.last[1]

    def refusal(self, count: int, at: float) -> QuotaExceededError | None:
        return None if count <= self.rate.count else self.refused(at)

    def refused(self, at: float) -> QuotaExceededError:
        window = int(at // self.rate.period)
        retry = max(1, math.ceil((window + 1) * self.rate.period - at))
        details: dict[str, Any] = {
            "rate": self.rate.text,
            **({"tool": self.tool} if self.name == "PER_TOOL" else {}),
        }
        return QuotaExceededError(
            f"Too many requests: {self.what} are limited to {self.rate.text} ({self.name}); retry "
            f"in {retry} s",
            limit=self.name,
            retry_after=retry,
            details=details,
        )


def _limits(quotas: Quotas, caller: Caller, name: str | None) -> list[_Limit]:
    """The rate limits a call of ``name`` by ``caller`` counts against, in the order checked
    (made once per caller and tool while the setting holds: they are the same every call)."""
    tool = name if name is not None and name in quotas.per_tool else None
    made = quotas.limits_made.get((caller.key, caller.client, tool))
    if made is None:
        if len(quotas.limits_made) > 10_000:
            quotas.limits_made.clear()  # a bound on callers remembered, not on what is counted
        made = quotas.limits_made[caller.key, caller.client, tool] = _make_limits(
            quotas, caller, tool
        )
    return made


def _make_limits(quotas: Quotas, caller: Caller, name: str | None) -> list[_Limit]:
    limits: list[_Limit] = []
    if name is not None and name in quotas.per_tool:
        limits.append(
            _Limit(
                "PER_TOOL",
                f"{caller.key}\x1f{name}",
                quotas.per_tool[name],
                f"calls of the tool {name!r}",
                name,
            )
        )
    if quotas.tool_calls_per_client is not None and caller.client is not None:
        limits.append(
            _Limit(
                "TOOL_CALLS_PER_CLIENT",
                caller.client,
                quotas.tool_calls_per_client,
                "tool calls by this OAuth client",
                name,
            )
        )
    if quotas.tool_calls is not None:
        limits.append(_Limit("TOOL_CALLS", caller.key, quotas.tool_calls, "tool calls", name))
    return limits


# -- caps on what is held open -----------------------------------------------------------------


def _session_cap(caller: Caller) -> tuple[str, str, int] | None:
    """(limit, who, cap) of the session cap that applies to ``caller``, if one does."""
    quotas = current()
    if caller.user_id is not None and quotas.sessions_per_user is not None:
        return "SESSIONS_PER_USER", caller.key, quotas.sessions_per_user
    if (
        caller.user_id is None
        and caller.address is not None
        and quotas.sessions_per_address is not None
    ):
        return "SESSIONS_PER_ADDRESS", caller.key, quotas.sessions_per_address
    return None


def live_sessions(caller: Caller, most: int | None = None) -> int:
    """How many live sessions count against ``caller``'s session cap (on any site); counted
    only up to ``most`` + 1 when given, which is all a cap needs to know."""
    live = Session.objects.live()
    by_caller = (
        {"user_id": caller.user_id}
        if caller.user_id is not None
        else {"user__isnull": True, "client_address": caller.address}
    )
    live = live.filter(**by_caller)
    # Every initialize counts: bounded, its cost does not grow with sessions a cap refuses anyway.
    return (live if most is None else live[: most + 1]).count()


async def areserve_session(caller: Caller) -> LeasedSlot | None:
    """Reserve a new session for ``caller`` against ``SESSIONS_PER_USER`` (a user) or
    ``SESSIONS_PER_ADDRESS`` (an anonymous caller, by client address): None when no cap
    applies, else a reservation to release once the session's row is written (or was not);
    QuotaExceededError (429) at the cap.

    Counting the rows and then inserting let concurrent initializes all see room for one more.
    So each initialize first takes a unit of a counter of reservations in flight (atomic in the
    cache, leased like a stream slot), then counts the rows: a concurrent one is either still
    reserved, and in the counter, or released after its insert committed, and in the count.
    Both at once may be counted, which errs on refusing.
    """
    cap = _session_cap(caller)
    if cap is None:
        return None
    limit, who, most = cap
    reservation = await LeasedSlot.take("sessions", [(limit, who, None)])
    try:
        live = await sync_to_async(live_sessions)(caller, most)
    except BaseException:
        await reservation.release()
        raise
    if live + reservation.counts[0] <= most:
        return reservation
    await reservation.release()
    scope = "user" if limit == "SESSIONS_PER_USER" else "client address"
    raise QuotaExceededError(
        f"Too many sessions: this {scope} already has {live} open, and {limit} is {most}; "
        "end one (HTTP DELETE) or let it expire",
        limit=limit,
        details={"max": most},
    )


def check_pending_elicitations(user_id: Any) -> QuotaExceededError | None:
    """Refuse a new URL elicitation to a user with ``PENDING_ELICITATIONS_PER_USER`` pages
    still waiting (unexpired); ``retryAfter`` is when the oldest of them expires."""
    cap = current().pending_elicitations_per_user
    if cap is None or user_id is None:
        return None
    at = timezone.now()
    pending = Elicitation.objects.filter(
        user_id=user_id, state=Elicitation.State.PENDING, expires_at__gt=at
    )
    count = pending.count()
    if count < cap:
        return None
    first = pending.order_by("expires_at").values_list("expires_at", flat=True).first()
    retry = max(1, math.ceil((first - at).total_seconds())) if first is not None else None
    return QuotaExceededError(
        f"Too many URL elicitations: this user already has {count} pages waiting, and "
        f"PENDING_ELICITATIONS_PER_USER is {cap}",
        limit="PENDING_ELICITATIONS_PER_USER",
        retry_after=retry,
        details={"max": cap},
    )


def slot_lease() -> float:
    """The length of a held slot's buckets: ``REQUEST_LEASE_SECONDS``, but at least a minute.
    A slot taken early in a bucket is registered in the next one by a renewal from the bucket's
    middle on, and a scope's count is its current bucket's: a minute leaves that renewal half a
    minute of slack on a loaded process, where the 10 s lease would leave it under 5 s. A
    crashed process's slots stop counting within two buckets."""
    return max(60.0, mcp_settings.request_lease_seconds)


class LeasedSlot:
    """Units held on counters in the cache, until :meth:`release`, by something that lasts: an
    open SSE stream (:class:`StreamSlot`), a running request (:class:`RunningSlot`), a session
    being created (:func:`areserve_session`).

    Counts live in the cache in time buckets of ``lease`` seconds (:func:`slot_lease`):
    a slot is registered in the current bucket and, from its middle on, in the next one too,
    by a renewal task while it is held. A scope's count is its current bucket's counter.
    Releasing gives back every registration still current; a process that dies without
    releasing stops renewing, and its slots stop counting within two buckets, so a crash can
    never hold one for good.

    On a local-memory cache, which only this process sees, a slot is counted in the process
    (:class:`~mcp_django.ops.quotas.backends.InProcessCounters`) without buckets or renewals: the
    counts die with the process anyway.
    """

    #: Whether a shared cache may count these slots in batches (mcp_django.ops.quotas.batches),
    #: where every cap they count under is large enough for it.
    batched = False

    def __init__(
        self,
        kind: str,
        counters: list[tuple[str, str, int | None]],
        *,
        lease: float,
        backend: BaseCounters,
    ) -> None:
        #: What is counted: part of every key.
        self.kind = kind
        #: (limit, who, cap or None) for each scope this slot counts in.
        self.counters = counters
        self.scopes: list[Scope] = [(kind, limit, who) for limit, who, _ in counters]
        self.lease = lease
        #: What counts the slot (chosen by the cache).
        self.backend = backend
        self.buckets: list[int] = []
        #: Each counter's count, this slot included, when it was taken.
        self.counts: list[int] = []
        self.released = False
        #: The pools a batched slot was handed out from (None: counted slot by slot).
        self.pools: list[SlotPool] | None = None

    @classmethod
    async def take(cls, kind: str, counters: list[tuple[str, str, int | None]]) -> LeasedSlot:
        """Take a slot on ``counters``; QuotaExceededError (429) when one with a cap is over it."""
        backend = current().counters
        if backend.inline:
            return cls.take_inline(kind, counters, backend)
        slot = cls(kind, counters, lease=slot_lease(), backend=backend)
        caps = [cap for _, _, cap in counters if cap is not None]
        if cls.batched and len(caps) == len(counters) and all(cap_batch(cap) > 1 for cap in caps):
            await slot._take_batched(caps)
            return slot
        await slot._take()
        if slot.backend.leased:
            _renewer.add(slot)
        return slot

    @classmethod
    def take_inline(
        cls, kind: str, counters: list[tuple[str, str, int | None]], backend: Any
    ) -> LeasedSlot:
        """:meth:`take` on counters in this process's memory: nothing awaits, nothing is leased.
        Every tools/call takes a running slot, and the coroutines around this were most of it."""
        slot = cls(kind, counters, lease=0.0, backend=backend)
        slot.counts = backend.hold(slot.scopes)
        over = slot._over_cap()
        if over is not None:
            backend.release(slot.scopes)
            slot.released = True
            raise slot.refusal(*over)
        return slot

    @classmethod
    async def per_session_and_caller(
        cls,
        kind: str,
        caller: Caller,
        session_id: str | None,
        per_session: tuple[str, int | None],
        per_caller: tuple[str, int | None],
    ) -> LeasedSlot | None:
        """Take a slot counted in ``session_id`` (when there is one) and for ``caller``, under
        each (limit, cap) whose cap is set; None when neither is."""
        counters: list[tuple[str, str, int | None]] = []
        if session_id is not None and per_session[1] is not None:
            counters.append((per_session[0], f"session:{session_id}", per_session[1]))
        if per_caller[1] is not None:
            counters.append((per_caller[0], caller.key, per_caller[1]))
        return await cls.take(kind, counters) if counters else None

    def refusal(self, limit: str, cap: int) -> QuotaExceededError:
        return QuotaExceededError(f"Too many: {limit} is {cap}", limit=limit, details={"max": cap})

    def _wanted(self, at: float) -> list[int]:
        return buckets_for(at, self.lease) if self.backend.leased else []

    async def _take_batched(self, caps: list[int]) -> None:
        batches = batches_for(self.backend, _clock)
        taken: list[SlotPool] = []
        try:
            for scope, cap in zip(self.scopes, caps, strict=True):
                # Each pool fetched just before its take: an idle one may be forgotten meanwhile.
                pool = batches.pool(scope, cap, self.lease)
                if not await pool.take():
                    raise self.refusal(scope[1], cap)
                taken.append(pool)
        except BaseException:
            self.released = True
            for pool in taken:
                pool.put_back()
            raise
        self.pools = taken

    async def _take(self) -> None:
        buckets = self._wanted(now())
        self.counts = await self.backend.ahold(self.scopes, self.lease, buckets)
        over = self._over_cap()
        if over is not None:
            await self.backend.arelease(self.scopes, self.lease, buckets)
            raise self.refusal(*over)
        self.buckets = buckets

    def _over_cap(self) -> tuple[str, int] | None:
        """(limit, cap) of the first counter this slot took past its cap, or None."""
        for (limit, _, cap), count in zip(self.counters, self.counts, strict=True):
            if cap is not None and count > cap:
                return limit, cap
        return None

    async def _register(self, bucket: int) -> None:
        if bucket in self.buckets:
            return
        await self.backend.ahold(self.scopes, self.lease, [bucket])
        if self.released:  # released while this counted: give this one back too
            await self.backend.arelease(self.scopes, self.lease, [bucket])
            return
        # Past buckets count for nobody any more: only those from the current one on are kept.
        self.buckets = [b for b in self.buckets if b >= int(now() // self.lease)] + [bucket]

    def renewal_due(self, at: float) -> int | None:
        """The bucket to register in next, once ``at`` is past the middle of the newest one."""
        if self.released or not self.buckets:
            return None
        newest = self.buckets[-1]
        return newest + 1 if at >= newest * self.lease + self.lease / 2 else None

    async def _give_back(self, buckets: list[int]) -> None:
        current_bucket = int(now() // self.lease)
        # Older buckets count for nobody any more.
        await self.backend.arelease(
            self.scopes, self.lease, [bucket for bucket in buckets if bucket >= current_bucket]
        )

    async def release(self) -> None:
        """Give the slot back (once; later calls do nothing)."""
        if self.released:
            return
        self.released = True
        if self.pools is not None:
            for pool in self.pools:
                # In this process: the pool gives spare slots back in the background.
                pool.put_back()
            return
        if self.backend.inline:
            # In this process: nothing suspends, so a cancellation cannot cut it short (no shield).
            self.backend.release(self.scopes)
            return
        if not self.backend.leased:
            await self.backend.arelease(self.scopes, self.lease, [])
            return
        _renewer.discard(self)
        buckets, self.buckets = self.buckets, []
        # Shielded: the task being cancelled must not leave the count behind.
        await asyncio.shield(self._give_back(buckets))


class StreamSlot(LeasedSlot):
    """One open SSE stream, counted against ``STREAMS_PER_SESSION`` and ``STREAMS_PER_USER``."""

    batched = True

    @classmethod
    async def acquire(cls, caller: Caller, session_id: str | None) -> LeasedSlot | None:
        """Take a slot for a stream of ``caller`` (in ``session_id``, if it has one); None when
        no cap applies, QuotaExceededError (429) when one is reached."""
        quotas = current()
        return await cls.per_session_and_caller(
            "streams",
            caller,
            session_id,
            ("STREAMS_PER_SESSION", quotas.streams_per_session),
            ("STREAMS_PER_USER", quotas.streams_per_user),
        )

    def refusal(self, limit: str, cap: int) -> QuotaExceededError:
        scope = "session" if limit == "STREAMS_PER_SESSION" else "user"
        return QuotaExceededError(
            f"Too many open streams: this {scope} already has {cap} open ({limit}); close one "
            "first",
            limit=limit,
            details={"max": cap},
        )


class RunningSlot(LeasedSlot):
    """One running ``tools/call``, counted against ``RUNNING_PER_SESSION`` and ``RUNNING_PER_USER``
    (anonymous callers: per client address) until it ends, whatever became of its connection."""

    batched = True

    @classmethod
    async def acquire(cls, caller: Caller, session_id: str | None) -> LeasedSlot | None:
        quotas = current()
        return await cls.per_session_and_caller(
            "running",
            caller,
            session_id,
            ("RUNNING_PER_SESSION", quotas.running_per_session),
            ("RUNNING_PER_USER", quotas.running_per_user),
        )

    def refusal(self, limit: str, cap: int) -> QuotaExceededError:
        who = next(w for name, w, _ in self.counters if name == limit)
        scope = (
            "session"
            if limit == "RUNNING_PER_SESSION"
            else "client address"
            if who.startswith("address:")
            else "user"
        )
        # Most tool calls end within seconds: worth retrying soon.
        return QuotaExceededError(
            f"Too many running requests: this {scope} already has {cap} tool calls running "
            f"({limit}); "
            "wait for one to end or cancel one",
            limit=limit,
            retry_after=1,
            details={"max": cap},
        )


class _Renewer:
    """One task per process renews every open stream's slot (a task per stream would cost
    each idle stream its own memory): at the middle of a slot's newest bucket it registers the
    slot in the next one."""

    #: How often it looks, as a fraction of the lease: renewals happen within this of the middle.
    STEP = 0.1

    def __init__(self) -> None:
        self.slots: set[LeasedSlot] = set()
        self.task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def add(self, slot: LeasedSlot) -> None:
        self.slots.add(slot)
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.loop is not loop:
            self.loop = loop
            self.task = loop.create_task(self._run())

    def discard(self, slot: LeasedSlot) -> None:
        self.slots.discard(slot)

    async def _run(self) -> None:
        while self.slots:
            await asyncio.sleep(min(slot.lease for slot in self.slots) * self.STEP)
            await self.renew_due(now())

    async def renew_due(self, at: float) -> None:
        for slot in list(self.slots):
            bucket = slot.renewal_due(at)
            if bucket is None:
                continue
            try:
                await slot._register(bucket)
            except Exception:
                # That stream stops counting (its slot frees itself): better than ending it.
                self.slots.discard(slot)
                logger.exception("Could not renew a %s slot in the cache", slot.kind)


_renewer = _Renewer()


def held(kind: str, limit: str, who: str) -> int:
    """How many ``kind`` slots (``"streams"``, ``"running"``) count against ``limit`` for ``who``
    now (``"session:<id>"`` or a :attr:`Caller.key`): for operators and tests."""
    lease = slot_lease()
    return current().counters.holding((kind, limit, who), lease, int(now() // lease))


def open_streams(limit: str, who: str) -> int:
    """How many streams count against ``limit`` for ``who`` now."""
    return held("streams", limit, who)


def running_requests(limit: str, who: str) -> int:
    """How many tool calls count as running against ``limit`` for ``who`` now."""
    return held("running", limit, who)
