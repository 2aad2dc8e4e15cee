"""The transport-neutral engine: decoded messages, the principal and the session in; answers,
and events through an emitter, out.

Every transport is a thin adapter over :class:`Engine`: it reads bytes, checks what only it can
check (HTTP headers, for instance), decodes, and asks the engine. The engine knows nothing of
HTTP; where the protocol refuses something it raises
:class:`~mcp_django.protocol.errors.TransportError` (whose status an HTTP transport answers
with) or an authentication error, and the adapter turns them into its own wire form.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, cast

from ..auth.base import NoAuthentication
from ..auth.oauth import InsufficientScope, resource_url
from ..conf import mcp_settings
from ..exceptions import InvalidSessionId
from ..extensions.tasks import handshake as handshake_tasks
from ..extensions.tasks import runner as taskrun
from ..ops.audit.record import arecord_refused
from ..ops.observation import Observation, Observer, active_observers
from ..ops.quotas.limits import (
    LeasedSlot,
    RunningSlot,
    StreamSlot,
    acheck_tool_calls,
    areserve_session,
)
from ..protocol import modern, negotiation
from ..protocol.dispatcher import Handler, dispatch
from ..protocol.errors import (
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    InvalidParamsError,
    InvalidRequestError,
    MCPError,
    MethodNotFoundError,
    MissingRequiredClientCapabilityError,
    QuotaExceededError,
    TransportError,
)
from ..protocol.jsonrpc import (
    Decoded,
    Invalid,
    Notification,
    Request,
    Response,
    error_message,
    notification_message,
    result_message,
)
from ..protocol.lifecycle import InitializeParams, initialize_result
from ..protocol.limits import check_progress_token, check_request_id
from ..protocol.params import (
    CallToolParams,
    CancelledParams,
    Check,
    InitializeRequestParams,
    ListenParams,
    RoundParams,
    at_most,
    parse_as,
    parse_initialize,
    peek,
    request_meta,
)
from ..signals import session_closed, session_created
from ..stores import RunningRequestStore, SessionStore
from ..transport.layers import get_layer, session_group
from ..transport.process import (
    RUNNING,
    cancel_request,
    cancel_session,
    process_channel,
    request_key,
)
from ..transport.streams import StreamEmitter, deliver_response
from . import handlers, request_state
from .context import Context, Emitter
from .entries import Access, ToolEntry, agate
from .principal import (
    Principal as Principal,
)  # re-exported: transports and projects import it from here
from .rounds import ROUND_PARAMS, InputRequired, InputRounds

if TYPE_CHECKING:
    from ..models import Session
    from .entries import ServedSite

#: subscriptions/listen filter flags, and the list each one follows.
LISTEN_FLAGS = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}

#: 2026-07-28 results that carry cache hints (caching spec).
CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "skills/list",
        "skills/get",
    }
)

#: Tools whose x-mcp-header paths Engine keeps (the registry's own are a few hundred at most).
HEADER_PATHS_KEPT = 4096

logger = logging.getLogger("mcp_django.server.engine")
invalid_session_logger = logging.getLogger("django.security.InvalidSessionId")


@dataclass
class Received:
    """What a POSTed body asks for once notifications and responses are dealt with."""

    #: Requests to run, valid and not already in use, in order.
    requests: list[Request] = field(default_factory=list)
    #: Error answers for members refused before running, in order.
    replies: list[dict[str, Any]] = field(default_factory=list)


class StreamedRequests:
    """Requests answered on one stream, each in its own task, registered for cancellation
    before the client hears of the stream; none runs before :meth:`start`."""

    def __init__(
        self, engine: Engine, principal: Principal, session: Session, emitter: StreamEmitter
    ) -> None:
        self.engine = engine
        self.principal = principal
        self.session = session
        self.emitter = emitter
        self._pending = 0
        self._lock = asyncio.Lock()
        self._started = asyncio.Event()
        self.slots: dict[int, LeasedSlot] = {}

    async def register(self, requests: list[Request]) -> None:
        # Registered on the process channel, a cancel POSTed as soon as the client sees the
        # priming event finds the task, on this process or another.
        self._pending = len(requests)
        # Their running slots are theirs from now on, given back as each ends (or never runs).
        self.slots = self.engine.take_held(requests)
        loop = asyncio.get_running_loop()
        for message in requests:
            task = loop.create_task(self._answer(message))
            await process_channel.watch(
                request_key(self.session.pk, message.id), task, self.emitter.stream
            )

    async def start(self, replies: list[dict[str, Any]]) -> None:
        """Send the refusals first, then let the requests run."""
        for reply in replies:
            await self.emitter.send(reply)
        self._started.set()

    async def _answer(self, message: Request) -> None:
        key = request_key(self.session.pk, message.id)
        response: dict[str, Any] | None
        try:
            await self._started.wait()
            ctx = self.engine.context(self.principal, self.session, message, self.emitter)
            response = await self.engine.run(
                self.principal, message, self.engine.session_handlers(self.session), ctx
            )
        except asyncio.CancelledError:
            response = None  # cancelled by the client: no response is sent (cancellation spec)
        finally:
            slot = self.slots.pop(id(message), None)
            if slot is not None:
                await slot.release()
            claimed = await process_channel.unwatch(key)
        async with self._lock:
            self._pending -= 1
            last = self._pending == 0
            if response is not None:
                # The claim goes with the response, in one transaction.
                await self.emitter.send(response, closes=last, finishes=key if claimed else None)
                return
            if claimed:
                await RunningRequestStore().afinish(*key)
            if last:
                await self.emitter.end_without_event()


async def _within(
    observers: list[Observer],
    index: int,
    observation: Observation,
    answer: Callable[[], Awaitable[dict[str, Any]]],
) -> None:
    """``answer()`` inside ``observers[index:]``, each made and entered in turn, as nested
    ``async with`` blocks (an AsyncExitStack cost as much as the audit trail's record)."""
    if index == len(observers):
        observation.response = await answer()
        return
    async with observers[index](observation):
        await _within(observers, index + 1, observation, answer)


class Engine:
    """One site's protocol engine, shared by every transport and connection."""

    def __init__(self, site: ServedSite) -> None:
        self.site = site
        self.sessions = SessionStore()
        self.settings = mcp_settings
        self._stateless: tuple[dict[str, Handler], dict[str, Handler]] | None = None
        self._handshake_tasks: tuple[dict[str, Handler], dict[str, Handler]] | None = None
        #: Running slots taken by check_quotas for calls that have not run yet, by id(request).
        self._held: dict[int, LeasedSlot] = {}
        #: Each tool's x-mcp-header paths, by id(tool) (with the tool, so an id reused is seen).
        self._header_paths: dict[int, tuple[ToolEntry, dict[str, tuple[str, ...]]]] = {}

    def context(
        self,
        principal: Principal,
        session: Session | None,
        message: Request,
        emitter: Emitter | None = None,
    ) -> Context:
        return Context(
            site=self.site,
            request=principal.request,
            user=principal.user,
            session=session,
            request_id=message.id,
            meta=request_meta(message.params),
            emitter=emitter,
        )

    # -- sessions -------------------------------------------------------------------------

    async def initialize(
        self, principal: Principal, message: Request, *, transport: str = "streamable-http"
    ) -> tuple[dict[str, Any], Session | None]:
        """Answer ``initialize``: the response, and the new session (None when refused). It
        runs inside the observers like every other request (its span, its metrics)."""
        created: list[Session] = []

        async def answer() -> dict[str, Any]:
            response, session = await self._initialize(principal, message, transport=transport)
            if session is not None:
                created.append(session)
            return response

        version = peek(InitializeRequestParams, "protocol_version", message.params)
        response = await self._observed(
            principal,
            message,
            self.context(principal, None, message),
            answer,
            revision=version or "",
        )
        return response, created[0] if created else None

    async def _initialize(
        self, principal: Principal, message: Request, *, transport: str
    ) -> tuple[dict[str, Any], Session | None]:
        try:
            params = self._initialize_params(message)
            reservation = await self.reserve_session(principal, message)
        except MCPError as exc:
            return error_message(message.id, exc), None
        try:
            session = await self.sessions.acreate(
                site_name=self.site.name,
                user_id=principal.user_id,
                protocol_version=params.version,
                client_info=params.client_info,
                capabilities=params.capabilities,
                transport=transport,
                client_address=principal.caller.address,
            )
        finally:
            if reservation is not None:
                await reservation.release()  # the row counts from now on
        await session_created.asend(
            sender=self.site.__class__, site=self.site, session=session, request=principal.request
        )
        return self._initialize_result(message, params.version), session

    def _initialize_params(self, message: Request) -> InitializeParams:
        """``initialize``'s params, checked and bounded (an MCPError otherwise)."""
        return parse_initialize(
            message.params,
            max_client_info_bytes=self.settings.max_client_info_bytes,
            max_capabilities_bytes=self.settings.max_client_capabilities_bytes,
            max_depth=self.settings.max_client_value_depth,
        )

    def _initialize_result(self, message: Request, version: str) -> dict[str, Any]:
        capabilities = self.site.offered_capabilities()
        if version == negotiation.V2025_11_25 and self._has_task_tools():
            capabilities["tasks"] = handshake_tasks.capability()
        result = initialize_result(
            version,
            capabilities,
            self.site.get_server_info(),
            self.site.get_instructions(),
        )
        return result_message(message.id, result)

    def _has_task_tools(self) -> bool:
        """Whether a tool of the site may run as a task (read from the 2026-07-28 table, which
        is rebuilt with the site's, so the tools are not walked on every request)."""
        return "tasks/get" in self.stateless_handlers()

    def session_handlers(self, session: Session | None) -> Mapping[str, Handler]:
        """The method table of a handshake-era session: the site's, plus the 2025-11-25 form
        of tasks for a session of that revision on a site with a task tool (its initialize
        declared ``capabilities.tasks``). Built once per site table."""
        site_table = self.site.get_handlers()
        if (
            session is None
            or session.protocol_version != negotiation.V2025_11_25
            or not self._has_task_tools()
        ):
            return site_table
        if self._handshake_tasks is None or self._handshake_tasks[0] is not site_table:
            table = {**site_table, **handshake_tasks.HANDSHAKE_TASK_HANDLERS}
            self._handshake_tasks = (site_table, table)
        return self._handshake_tasks[1]

    async def open_session(self, principal: Principal, *, transport: str) -> Session:
        """A session opened before its ``initialize`` (2024-11-05 HTTP+SSE: the stream comes
        first, and names the session in the URL it tells the client to POST to)."""
        reservation = await self.reserve_session(principal)
        try:
            return await self.sessions.acreate(
                site_name=self.site.name,
                user_id=principal.user_id,
                protocol_version=negotiation.V2024_11_05,
                client_info={},
                capabilities={},
                transport=transport,
                client_address=principal.caller.address,
            )
        finally:
            if reservation is not None:
                await reservation.release()

    async def initialize_session(
        self, principal: Principal, session: Session, message: Request
    ) -> dict[str, Any]:
        """Answer ``initialize`` for a session :meth:`open_session` made: the negotiated version,
        the client's info and capabilities are recorded on it."""
        if session.client_info or session.initialized:
            return error_message(
                message.id,
                InvalidRequestError("Invalid Request: this session is already initialized"),
            )
        try:
            params = self._initialize_params(message)
        except MCPError as exc:
            return error_message(message.id, exc)
        client_info = params.client_info or {"name": "", "version": ""}
        fields = {
            "protocol_version": params.version,
            "client_info": client_info,
            "client_capabilities": params.capabilities,
            "client_name": str(client_info.get("name", ""))[:200],
            "client_version": str(client_info.get("version", ""))[:100],
        }
        await self.sessions.aupdate(session.pk, **fields)
        for name, value in fields.items():
            setattr(session, name, value)
        await session_created.asend(
            sender=self.site.__class__, site=self.site, session=session, request=principal.request
        )
        return self._initialize_result(message, params.version)

    async def load_session(self, principal: Principal, session_id: str) -> Session:
        """The caller's live session ``session_id``; 400 for a malformed id, 404 otherwise."""
        if not negotiation.is_valid_session_id(session_id):
            # Never issued by any server: a guess or a forgery, logged like Django's
            # SuspiciousOperations (django.security.InvalidSessionId), answered 400.
            invalid_session_logger.warning(
                "%s", InvalidSessionId(f"Malformed Mcp-Session-Id ({len(session_id)} characters)")
            )
            raise TransportError(HTTPStatus.BAD_REQUEST, "Bad Request: malformed Mcp-Session-Id")
        session = await self.sessions.aload(
            session_id, site_name=self.site.name, user_id=principal.user_id
        )
        if session is None:
            # Unknown, expired, terminated and someone else's: the same answer for all.
            raise TransportError(
                HTTPStatus.NOT_FOUND,
                "Not Found: session not found or terminated; initialize a new session",
            )
        return session

    async def terminate(self, session: Session, reason: str = "deleted") -> None:
        """End ``session``: its running requests stop and its streams end, on every process."""
        await self.sessions.aterminate(session.pk)
        await cancel_session(session.pk)
        await get_layer().group_send(session_group(session.pk), {"type": "mcp.terminate"})
        await session_closed.asend(
            sender=self.site.__class__, site=self.site, session=session, reason=reason
        )

    # -- messages -------------------------------------------------------------------------

    def check_batch(self, decoded: Decoded, session: Session) -> None:
        if not decoded.is_batch:
            return
        if not negotiation.supports_batches(session.protocol_version):
            raise TransportError(
                HTTPStatus.BAD_REQUEST,
                "Invalid Request: JSON-RPC batches are not supported in protocol revision "
                f"{session.protocol_version}",
            )
        if len(decoded.messages) > self.settings.max_batch_size:
            raise TransportError(
                HTTPStatus.BAD_REQUEST,
                f"Invalid Request: a batch may hold at most {self.settings.max_batch_size} "
                "messages",
            )

    async def receive(self, principal: Principal, session: Session, decoded: Decoded) -> Received:
        """Act on the notifications and responses of a body, and sort its requests into those
        to run and those refused; refuse it all (403) if the token lacks a scope one needs."""
        self.check_batch(decoded, session)
        received = Received()
        seen: set[str] = set()
        for message in decoded.messages:
            if isinstance(message, Invalid):
                received.replies.append(error_message(message.id, message.error))
            elif isinstance(message, Notification):
                await self.notification(session, message)
            elif isinstance(message, Response):
                answer = (
                    {"result": message.result}
                    if message.error is None
                    else {"error": message.error}
                )
                if not await deliver_response(session.pk, message.id, answer):
                    logger.debug(
                        "Response %r from the client matches no pending request", message.id
                    )
            else:
                refusal = self.refuse(message, session, seen)
                if refusal is not None:
                    received.replies.append(refusal)
                else:
                    received.requests.append(message)
        await self.check_scopes(principal, received.requests, session)
        received.requests, refused = await self.check_quotas(
            principal, received.requests, session=session
        )
        received.replies += refused
        return received

    def refuse(self, message: Request, session: Session, seen: set[str]) -> dict[str, Any] | None:
        """The error answer for a request that must not run (id or token out of bounds, id in
        use), or None; ``seen`` collects the ids of this body."""
        try:
            # Both are echoed into every stored event of the request's stream.
            check_request_id(message.id, self.settings.max_client_id_length)
            check_progress_token(message.params, self.settings.max_client_id_length)
        except InvalidRequestError as exc:
            return error_message(None, exc)  # an id too long to echo
        except MCPError as exc:
            return error_message(message.id, exc)
        key = request_key(session.pk, message.id)
        if key[1] in seen or key in RUNNING:
            return error_message(
                message.id, InvalidRequestError("Invalid Request: request id already in use")
            )
        seen.add(key[1])
        return None

    async def notification(self, session: Session, message: Notification) -> None:
        if message.method == "notifications/initialized":
            if not session.initialized:
                session.initialized = True
                await self.sessions.amark_initialized(session.pk)
        elif message.method == "notifications/cancelled":
            request_id = peek(CancelledParams, "request_id", message.params)
            if request_id is not None:
                await cancel_request(session.pk, request_id)
        # Other notifications (progress, roots/list_changed) need no action here.

    async def check_scopes(
        self, principal: Principal, requests: list[Request], session: Session | None = None
    ) -> None:
        """Refuse, before anything runs, an operation the OAuth token lacks scopes for: 403 with
        a step-up challenge naming every scope it needs (2025-11-25 authorization spec).

        Only the scopes of an entry the site's gate says the user may use count: a hidden or
        unknown entry's handler answers as for one that does not exist, so a 403 never reveals it.
        """
        request = principal.request
        granted = getattr(request, "auth_scopes", None)
        if granted is None:
            return
        needed: list[str] = []
        for message in requests:
            entry, access = await handlers.target(
                self.site, request, message.method, message.params
            )
            if access is Access.MISSING_SCOPES:
                needed += [
                    scope for scope in entry.scopes if scope not in granted and scope not in needed
                ]
        if needed:
            base = [s for s in self.settings.required_scopes if s not in needed]
            for message in requests:  # the whole body is refused: each call in it is denied
                await arecord_refused(
                    principal,
                    session,
                    message,
                    f"insufficient scope: needs {' '.join(needed)}",
                    site=self.site,
                )
            raise InsufficientScope(
                resource_url(request, getattr(request, "mcp_endpoint_path", None)), base + needed
            )

    # -- quotas (mcp_django.ops.quotas.limits)
    # --------------------------------------------------------

    async def check_quotas(
        self,
        principal: Principal,
        requests: list[Request],
        *,
        raise_first: bool = False,
        session: Session | None = None,
    ) -> tuple[list[Request], list[dict[str, Any]]]:
        """Count each ``tools/call`` of ``requests`` against the rate limits: the requests that
        may run, and the error answers (-32029) of those refused, each with ``data.limit`` and
        ``data.retryAfter``. ``raise_first``: raise the first refusal instead (one request
        answered whole: HTTP 429 with Retry-After)."""
        calls = [m for m in requests if m.method == "tools/call"]
        if not calls:
            return requests, []
        errors = await acheck_tool_calls(
            principal.caller, [peek(CallToolParams, "name", m.params) for m in calls]
        )
        refusals = {id(m): e for m, e in zip(calls, errors, strict=True) if e is not None}
        for message in calls:
            if id(message) in refusals:
                continue
            # Taken here, before anything runs, and held until the call ends (Engine.run).
            try:
                slot = await RunningSlot.acquire(
                    principal.caller, session.pk if session is not None else None
                )
            except QuotaExceededError as cap:
                refusals[id(message)] = cap
                continue
            if slot is None:
                break  # no running cap applies
            self._held[id(message)] = slot
        if not refusals:
            return requests, []
        allowed: list[Request] = []
        refused: list[dict[str, Any]] = []
        for message in requests:
            error = refusals.get(id(message))
            if error is None:
                allowed.append(message)
                continue
            await self.quota_refused(principal, error, message, session)
            if raise_first:
                raise error
            refused.append(error_message(message.id, error))
        return allowed, refused

    async def reserve_session(
        self, principal: Principal, message: Request | None = None
    ) -> LeasedSlot | None:
        """Reserve a new session, to release once its row is written; refused (-32029, HTTP 429)
        to a user at ``SESSIONS_PER_USER``, or an anonymous caller's address at
        ``SESSIONS_PER_ADDRESS``."""
        try:
            return await areserve_session(principal.caller)
        except QuotaExceededError as error:
            await self.quota_refused(principal, error, message)
            raise

    def take_held(self, requests: list[Request]) -> dict[int, LeasedSlot]:
        """The running slots of ``requests``, by id, for a caller that runs them itself."""
        return {id(m): slot for m in requests if (slot := self._held.pop(id(m), None)) is not None}

    async def release_held(self, requests: list[Request]) -> None:
        """Give back the running slots of ``requests`` that will not run after all (a stream
        refused, a connection gone before they started); those that ran gave theirs back."""
        for message in requests:
            slot = self._held.pop(id(message), None)
            if slot is not None:
                await slot.release()

    async def stream_slot(self, principal: Principal, session_id: str | None) -> LeasedSlot | None:
        """A slot for one more open SSE stream of this caller (and session), to release when the
        stream ends; refused (-32029, HTTP 429) at ``STREAMS_PER_SESSION`` or
        ``STREAMS_PER_USER``."""
        try:
            return await StreamSlot.acquire(principal.caller, session_id)
        except QuotaExceededError as error:
            await self.quota_refused(principal, error)
            raise

    async def quota_refused(
        self,
        principal: Principal,
        error: QuotaExceededError,
        message: Request | None = None,
        session: Session | None = None,
    ) -> None:
        """Called with every refusal by a quota (rate limit or cap) before it is answered:
        ``error.limit`` names the limit, ``error.retry_after`` the seconds to wait (or None),
        ``message`` the request refused, if one was. A refused ``tools/call`` is recorded in the
        audit trail as denied."""
        logger.info(
            "Quota %s refused %s for %s (%s)",
            error.limit,
            message.method if message is not None else "a stream or session",
            principal.caller.key,
            principal.transport,
        )
        if message is not None:
            await arecord_refused(
                principal,
                session,
                message,
                f"quota: {error.limit}",
                site=self.site,
                error_code=error.code,
            )

    def needs_stream(self, requests: list[Request]) -> bool:
        """Whether the answers go on a stream: the setting, or a tool that streams."""
        if self.settings.response_mode == "sse":
            return True
        return any(self.streams_answer(message) for message in requests)

    def streams_answer(self, message: Request) -> bool:
        """Whether a handshake-era request is answered on a stream in either ``RESPONSE_MODE``:
        ``tasks/result``, or a call of a tool that streams."""
        if message.method == "tasks/result":
            # It blocks until the task ends and relays the task's questions meanwhile: a
            # stream carries them (the 2025-11-25 tasks page suggests it), and keeps the
            # connection alive while it waits.
            return True
        tool = self._tool_called(message)
        return tool is not None and tool.streams

    def _tool_called(self, message: Request) -> Any:
        """The tool a ``tools/call`` names (None for other methods and names of no tool), for
        routing before its handler parses the call and answers for what is malformed."""
        name = (
            peek(CallToolParams, "name", message.params) if message.method == "tools/call" else None
        )
        return handlers.site_tool(self.site, name) if name is not None else None

    async def answer(
        self,
        principal: Principal,
        session: Session | None,
        requests: list[Request],
        emitter: Emitter | None = None,
    ) -> list[dict[str, Any]]:
        """Run ``requests`` concurrently and return their responses, in order (``emitter``: where
        progress, logs and questions to the client go, for a transport that writes them at once)."""
        table = self.session_handlers(session)
        if len(requests) == 1:
            # Most bodies hold one request: awaited here, without gather's task around it.
            return [
                await self.run(
                    principal,
                    requests[0],
                    table,
                    self.context(principal, session, requests[0], emitter),
                )
            ]
        return list(
            await asyncio.gather(
                *(
                    self.run(principal, r, table, self.context(principal, session, r, emitter))
                    for r in requests
                )
            )
        )

    async def run(
        self, principal: Principal, message: Request, table: Mapping[str, Handler], ctx: Context
    ) -> dict[str, Any]:
        """Dispatch one request inside the enabled observers (audit trail, tracing): every
        request of every transport and revision comes through here (``initialize`` too)."""
        slot = self._held.pop(id(message), None)
        try:
            return await self._observed(
                principal, message, ctx, lambda: dispatch(message, table, ctx)
            )
        finally:
            if slot is not None:
                await slot.release()

    async def _observed(
        self,
        principal: Principal,
        message: Request,
        ctx: Context,
        answer: Callable[[], Awaitable[dict[str, Any]]],
        *,
        revision: str | None = None,
    ) -> dict[str, Any]:
        observers = active_observers()
        if not observers:
            return await answer()
        observation = Observation(
            message=message,
            ctx=ctx,
            transport=principal.transport,
            revision=_revision(ctx) if revision is None else revision,
        )
        await _within(observers, 0, observation, answer)
        # Read after every observer exited, as before: None only if one swallowed the error.
        return cast("dict[str, Any]", observation.response)

    async def stream(
        self,
        principal: Principal,
        session: Session,
        requests: list[Request],
        emitter: StreamEmitter,
    ) -> StreamedRequests:
        """Register ``requests`` to be answered through ``emitter``; they run after ``start``."""
        streamed = StreamedRequests(self, principal, session, emitter)
        await streamed.register(requests)
        return streamed

    # -- 2026-07-28: stateless requests ---------------------------------------------------

    def stateless_handlers(self) -> dict[str, Handler]:
        """The 2026-07-28 method table: the site's, less what the revision removed, plus
        ``server/discover``. Built once per site table (the site rebuilds that one when its
        registry changes), not on every request."""
        site_table = self.site.get_handlers()
        if self._stateless is None or self._stateless[0] is not site_table:
            table = {m: h for m, h in site_table.items() if m not in modern.REMOVED_METHODS}
            table["server/discover"] = self._discover
            # The tasks extension is offered by a site with a tool that may run as a task.
            if any(tool.task_support != "forbidden" for tool in self.site.get_tools()):
                table.update(taskrun.TASK_HANDLERS)
            self._stateless = (site_table, table)
        return self._stateless[1]

    def stateless_capabilities(self) -> dict[str, Any]:
        """What ``server/discover`` declares: the site's capabilities, and the extensions served."""
        capabilities = self.site.offered_capabilities()
        if "tasks/get" in self.stateless_handlers():
            capabilities["extensions"] = {
                **capabilities.get("extensions", {}),
                taskrun.TASKS_EXTENSION: {},
            }
        return capabilities

    async def _discover(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return modern.discover_result(
            versions=[*modern.MODERN_VERSIONS, *negotiation.SUPPORTED_VERSIONS],
            capabilities=self.stateless_capabilities(),
            server_info=self.site.get_server_info(),
            instructions=self.site.get_instructions(),
            cache=self.cache_hint(ctx.request, "server/discover"),
        )

    def cache_hint(
        self, request: Any, method: str, ttl_ms: int | None = None
    ) -> modern.CacheHint | None:
        """How long a client may keep the answer to ``method``, and for whom (caching spec).

        Lists and reads depend on the user whenever authentication is on (permissions, scopes,
        row querysets), so they are ``private`` then; discover depends on nobody.
        """
        if method not in CACHEABLE_METHODS:
            return None
        ttl = (
            ttl_ms
            if ttl_ms is not None
            else self.settings.cache_ttl_ms
            if method != "resources/read"
            else self.settings.read_cache_ttl_ms
        )
        if (
            method.endswith("/list")
            and self.settings.unscoped_entries == "hide"
            and getattr(request, "auth_scopes", None) is not None
        ):
            # Hidden entries make a list depend on the token's scopes, not only on the user, and
            # a client may keep a private answer per user across a token change (a step-up): a
            # list kept for a moment would hide what the new token allows. "list" (the default)
            # lists the same entries for every token of a user, so its lists keep CACHE_TTL_MS.
            ttl = 0
        personal = method != "server/discover" and not issubclass(
            self.settings.authentication_class, NoAuthentication
        )
        return modern.CacheHint(ttl_ms=ttl, scope="private" if personal else "public")

    async def stateless_meta(
        self, principal: Principal, message: Request, headers: Mapping[str, str]
    ) -> modern.RequestMeta:
        """Check a 2026-07-28 request before it runs: its ``_meta``, the headers that mirror the
        body (HTTP transports pass them; others an empty mapping), the bounds of its id and
        progress token, and the OAuth scopes of what it names (403 with a step-up challenge)."""
        if headers:
            header_version = headers.get("mcp-protocol-version")
        else:
            # No headers on this transport (stdio): nothing mirrors the body, so nothing to compare.
            own = request_meta(message.params)
            header_version = own.get(modern.META_PROTOCOL_VERSION) if own is not None else None
            header_version = header_version if isinstance(header_version, str) else None
        meta = modern.parse_request_meta(
            message.params,
            header_version=header_version,
            max_client_info_bytes=self.settings.max_client_info_bytes,
            max_capabilities_bytes=self.settings.max_client_capabilities_bytes,
            max_depth=self.settings.max_client_value_depth,
        )
        if headers:
            modern.check_request_headers(message.method, message.params, headers)
            if message.method == "tools/call":
                await self.check_param_headers(principal, message, headers)
        check_request_id(message.id, self.settings.max_client_id_length)
        check_progress_token(message.params, self.settings.max_client_id_length)
        await self.check_scopes(principal, [message])
        await self.check_quotas(principal, [message], raise_first=True)
        return meta

    async def check_param_headers(
        self, principal: Principal, message: Request, headers: Mapping[str, str]
    ) -> None:
        """``Mcp-Param-*`` headers of a call against its arguments, for a tool this user may use
        (an unknown or hidden tool is refused by its handler, revealing nothing here)."""
        tool = self._tool_called(message)
        if tool is None:
            return
        paths = self._header_params(tool)
        if paths and await agate(tool, principal.request) is not Access.HIDDEN:
            modern.check_param_headers(
                paths, peek(CallToolParams, "arguments", message.params) or {}, headers
            )

    def _header_params(self, tool: ToolEntry) -> dict[str, tuple[str, ...]]:
        """The ``x-mcp-header`` paths of ``tool``'s input schema, found once per tool: walking
        the schema (and building the definition) on every call cost a tenth of a call."""
        known = self._header_paths.get(id(tool))
        if known is not None and known[0] is tool:
            return known[1]
        paths = modern.mcp_header_params(tool.definition().get("inputSchema") or {})
        if len(self._header_paths) >= HEADER_PATHS_KEPT:
            self._header_paths.clear()  # tools made per request (none of ours today): no growth
        self._header_paths[id(tool)] = (tool, paths)
        return paths

    async def listen_filter(self, principal: Principal, message: Request) -> dict[str, Any]:
        """The part of a ``subscriptions/listen`` filter this server honours for this user: list
        changes of what the site offers, and updates of the URIs the user may read now (the
        others are left out, as unsupported, revealing nothing)."""
        limit = self.settings.max_listen_uris
        params = parse_as(
            ListenParams,
            message.params,
            max_task_ids=at_most(limit, "taskIds per stream"),
            tasks_declared=_tasks_declared(message),
            max_uris=at_most(limit, "resourceSubscriptions per stream"),
        )
        offered = self.site.offered_capabilities()
        agreed: dict[str, Any] = {}
        for flag, kind in LISTEN_FLAGS.items():
            if params.notifications.get(flag) is True and offered.get(kind, {}).get("listChanged"):
                agreed[flag] = True
        if params.task_ids is not None:
            agreed["taskIds"] = await self._listen_tasks(principal, params.task_ids)
        uris = params.resource_subscriptions
        if uris is not None and offered.get("resources", {}).get("subscribe"):
            agreed["resourceSubscriptions"] = [
                u
                for u in dict.fromkeys(uris)
                if len(u) <= 2000 and await handlers.readable(self.site, principal.request, u)
            ]
        return agreed

    async def _listen_tasks(self, principal: Principal, task_ids: list[str]) -> list[str]:
        """The tasks of ``task_ids`` this user's listen stream may follow (notifications/tasks)."""
        if "tasks/get" not in self.stateless_handlers():
            return []
        return [
            t
            for t in dict.fromkeys(task_ids)
            if await taskrun.afind(self.site, principal.request, principal.user, t) is not None
        ]

    async def listen_notification(
        self, principal: Principal, agreed: dict[str, Any], event: dict[str, Any]
    ) -> dict[str, Any] | None:
        """What a listen stream with filter ``agreed`` sends for a change announced on the bus
        (see notifications.tell_listeners), or None: another site, another user, unasked, or
        a resource this user may no longer read."""
        if event.get("site") not in (None, self.site.name):
            return None
        users = event.get("users")
        if users is not None and str(principal.user_id) not in users:
            return None
        task_id = event.get("task")
        if task_id is not None:
            if task_id not in agreed.get("taskIds", ()):
                return None
            task = await taskrun.afind(self.site, principal.request, principal.user, task_id)
            return (
                notification_message("notifications/tasks", taskrun.wire(task))
                if task is not None
                else None
            )
        kind = event.get("kind")
        if kind is not None:
            flag = next((f for f, k in LISTEN_FLAGS.items() if k == kind), None)
            return (
                notification_message(f"notifications/{kind}/list_changed")
                if flag and agreed.get(flag)
                else None
            )
        uri = event.get("uri")
        if (
            isinstance(uri, str)
            and uri in agreed.get("resourceSubscriptions", ())
            and await handlers.readable(self.site, principal.request, uri)
        ):
            return notification_message("notifications/resources/updated", {"uri": uri})
        return None

    def needs_stream_stateless(self, message: Request) -> bool:
        """Whether a 2026-07-28 request is answered as an SSE stream: a tool that may send
        progress or logs (only when the request asked for them) streams; anything else is JSON."""
        if message.method != "tools/call":
            return False
        tool = self._tool_called(message)
        return tool is not None and tool.streams

    def rounds_for(self, principal: Principal, message: Request) -> InputRounds:
        """The answers a retried request brings: those sealed in ``requestState`` (checked
        against this user and this request) and the new ``inputResponses``."""

        def unseal(state: Any, label: str) -> dict[str, Any]:
            if state is None:
                return {}
            try:
                return request_state.unseal(
                    state, principal=principal.key, binding=_binding(message)
                )
            except request_state.InvalidRequestState as exc:
                raise InvalidParamsError(
                    f"Invalid params: requestState is not valid for this request ({exc.reason})"
                ) from None

        params = parse_as(RoundParams, message.params, unseal=unseal)
        sealed: dict[str, Any] = params.request_state
        previous, notes = sealed.get("answers"), sealed.get("notes")
        answers: dict[str, Any] = dict(previous) if isinstance(previous, dict) else {}
        answers.update(params.input_responses)
        return InputRounds(answers, notes if isinstance(notes, dict) else None)

    async def answer_stateless(
        self,
        principal: Principal,
        message: Request,
        meta: modern.RequestMeta,
        emitter: Emitter | None = None,
    ) -> dict[str, Any]:
        """Answer one 2026-07-28 request: its response, with ``resultType`` and ``serverInfo``
        on a result, or an input-required result when a tool asks the client something."""
        # The running slot check_quotas took for the request as it came (run() sees a copy).
        slot = self._held.pop(id(message), None)
        try:
            return await self._answer_stateless(principal, message, meta, emitter)
        finally:
            if slot is not None:
                await slot.release()

    async def _answer_stateless(
        self,
        principal: Principal,
        message: Request,
        meta: modern.RequestMeta,
        emitter: Emitter | None,
    ) -> dict[str, Any]:
        table = self.stateless_handlers()
        if message.method not in table:
            return error_message(
                message.id, MethodNotFoundError(f"Method not found: {message.method[:100]}")
            )
        try:
            rounds = (
                self.rounds_for(principal, message)
                if message.method in modern.INPUT_METHODS
                else None
            )
        except MCPError as exc:
            return error_message(message.id, exc)
        request = (
            message
            if rounds is None
            else Request(
                message.id,
                message.method,
                {k: v for k, v in message.params.items() if k not in ROUND_PARAMS},
            )
        )
        ctx = Context(
            site=self.site,
            request=principal.request,
            user=principal.user,
            session=None,
            request_id=message.id,
            meta=request_meta(message.params),
            emitter=emitter,
            request_meta=meta,
            rounds=rounds,
        )
        server_info = self.site.get_server_info()
        try:
            response = await self.run(principal, request, table, ctx)
        except InputRequired:
            assert rounds is not None
            # Always sealed, even with no answers yet: the retry proves it continues this request.
            state = request_state.seal(
                {"answers": rounds.answers, "notes": rounds.notes},
                principal=principal.key,
                binding=_binding(message),
            )
            result: dict[str, Any] = {
                "resultType": "input_required",
                "inputRequests": rounds.asked,
                "requestState": state,
            }
            return result_message(
                message.id, modern.complete_result(result, server_info=server_info)
            )
        if "result" in response:
            cache = self.cache_hint(principal.request, message.method, ctx.cache_ttl_ms)
            response["result"] = modern.complete_result(
                response["result"], server_info=server_info, cache=cache
            )
        elif response["error"].get("code") == RESOURCE_NOT_FOUND:
            # Retired in 2026-07-28: a missing resource is invalid params there.
            response["error"]["code"] = INVALID_PARAMS
        return response


def _revision(ctx: Context) -> str:
    """The revision a request speaks: its own in 2026-07-28, else its session's."""
    if ctx.request_meta is not None:
        return ctx.request_meta.version
    return ctx.session.protocol_version if ctx.session is not None else ""


def _tasks_declared(message: Request) -> Check:
    """The check that a listen request following tasks declares the tasks extension."""

    def check(task_ids: list[str] | None, label: str) -> list[str] | None:
        meta = request_meta(message.params)
        capabilities = meta.get(modern.META_CLIENT_CAPABILITIES) if meta is not None else None
        if task_ids is not None and not taskrun.declares_tasks_in(
            capabilities if isinstance(capabilities, dict) else {}
        ):
            raise MissingRequiredClientCapabilityError(
                f"Declare the {taskrun.TASKS_EXTENSION} extension to follow tasks",
                required_capabilities=taskrun.required_capability(),
            )
        return task_ids

    return check


def _binding(message: Request) -> str:
    """What a sealed requestState is bound to: this method, on this tool, prompt or resource,
    with these arguments (a state cannot be replayed on another request)."""
    target = (
        message.params.get("uri")
        if message.method == "resources/read"
        else message.params.get("name")
    )
    arguments = message.params.get("arguments")
    return request_state.request_binding(
        message.method, str(target), arguments if isinstance(arguments, dict) else None
    )
