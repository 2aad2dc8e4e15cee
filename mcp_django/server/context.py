"""The object a tool, resource or prompt receives when it asks for one (``ctx: Context``).

It is the same whatever the transport: it knows who is calling, and it sends progress and log
messages on the stream of the request being answered.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from asgiref.sync import sync_to_async
from jsonschema import Draft202012Validator
from pydantic import TypeAdapter

from ..conf import mcp_settings
from ..exceptions import ClientRequestError
from ..protocol.errors import MissingRequiredClientCapabilityError, URLElicitationRequiredError
from ..protocol.jsonrpc import RequestId, notification_message
from ..protocol.lifecycle import LOG_LEVELS, level_enabled
from ..protocol.modern import MODERN_VERSIONS
from .entries import (
    Completions as Completions,
)  # defined with the entries that offer them; kept importable here
from .rounds import InputRounds, StartTask

if TYPE_CHECKING:
    from django.http import HttpRequest

    from ..models import Session
    from ..protocol.modern import RequestMeta
    from .entries import ServedSite

logger = logging.getLogger(__name__)

#: The Context of the tool call running in this task (or in the thread of a sync tool).
current_context: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "mcp_django_context", default=None
)

T = TypeVar("T")


class Emitter(Protocol):
    """Where messages related to the current request go (the request's SSE stream)."""

    async def send(self, message: dict[str, Any]) -> object: ...

    async def close_connection(self) -> None: ...

    async def request(
        self, method: str, params: dict[str, Any], timeout: float
    ) -> dict[str, Any]: ...


ElicitationAction = Literal["accept", "decline", "cancel"]
ELICITATION_ACTIONS: tuple[ElicitationAction, ...] = ("accept", "decline", "cancel")


def _elicitation_action(result: dict[str, Any]) -> ElicitationAction:
    """The ``action`` of a client's answer to ``elicitation/create`` (both modes), checked."""
    action = result.get("action")
    for known in ELICITATION_ACTIONS:
        if action == known:
            return known
    raise ClientRequestError(
        f"The client answered elicitation/create with an unknown action {str(action)[:64]!r}"
    )


@dataclass(slots=True, frozen=True)
class ElicitationResult:
    """The user's answer to a form elicitation."""

    #: ``"accept"``, ``"decline"`` or ``"cancel"``.
    action: ElicitationAction
    #: The submitted form as JSON, on accept.
    content: dict[str, Any] | None = None
    #: ``content`` as an instance of the pydantic model or dataclass given as schema, on accept.
    data: Any = None


@dataclass(slots=True, frozen=True)
class URLElicitation:
    """A URL-mode elicitation sent to the client: its id, its page, and the user's action."""

    #: The elicitation's id (what :meth:`Context.wait_for_elicitation` takes).
    id: str
    #: The page's absolute URL, sent to the client.
    url: str
    #: The client's answer to being sent there: ``"accept"`` (the user agreed to open it),
    #: ``"decline"`` or ``"cancel"``.
    action: str


_PRIMITIVES = {"string", "number", "integer", "boolean"}


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if (
            "$ref" in schema
            and isinstance(schema["$ref"], str)
            and schema["$ref"].startswith("#/$defs/")
        ):
            return _inline_refs(defs[schema["$ref"].split("/")[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def elicitation_schema(schema: Any) -> tuple[dict[str, Any], Any]:
    """Turn a JSON Schema dict, pydantic model or dataclass into the flat object schema that
    form elicitation allows; return it with the type to build ``data`` from (or None)."""
    model = None
    if isinstance(schema, dict):
        result = dict(schema)
    else:
        model = schema
        raw = TypeAdapter(schema).json_schema()
        result = _inline_refs(raw, raw.get("$defs", {}))
        result.pop("title", None)
    if result.get("type") != "object" or not isinstance(result.get("properties"), dict):
        raise ValueError("An elicitation schema must be an object with properties")
    for name, prop in result["properties"].items():
        if not isinstance(prop, dict):
            raise ValueError(f"Elicitation property {name!r} must be a schema object")
        kind = prop.get("type")
        if kind == "array":
            items = prop.get("items", {})
            if not (
                isinstance(items, dict)
                and ("enum" in items or "anyOf" in items or "oneOf" in items)
            ):
                raise ValueError(
                    f"Elicitation property {name!r}: arrays must be multi-select enums"
                )
        elif kind not in _PRIMITIVES:
            raise ValueError(
                f"Elicitation property {name!r} must be a string, number, integer, boolean or "
                "enum, "
                f"not {kind!r}"
            )
    return result, model


class Log:
    """``ctx.log.info("...")`` and friends: ``notifications/message`` at or above the session's
    level."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def __call__(self, level: str, data: Any, logger: str | None = None) -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        session = self._ctx.session
        threshold = session.log_level if session is not None and session.log_level else None
        stateless = self._ctx.request_meta
        if stateless is not None:
            # 2026-07-28: log messages only for a request that asked for them, at its level.
            if stateless.log_level is None:
                return
            threshold = stateless.log_level
        if not level_enabled(level, threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._ctx.send_notification("notifications/message", params)

    async def debug(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``debug``."""
        await self("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``info``."""
        await self("info", data, logger)

    async def notice(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``notice``."""
        await self("notice", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``warning``."""
        await self("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``error``."""
        await self("error", data, logger)

    async def critical(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``critical``."""
        await self("critical", data, logger)

    async def alert(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``alert``."""
        await self("alert", data, logger)

    async def emergency(self, data: Any, logger: str | None = None) -> None:
        """Send ``data`` at level ``emergency``."""
        await self("emergency", data, logger)


def _anonymous_user() -> Any:
    # App loading: django.contrib.auth.models needs the app registry, and this module is
    # importable before it is ready (the facade's Context).
    from django.contrib.auth.models import AnonymousUser

    return AnonymousUser()


def no_stream_message(method: str) -> str:
    """Why ``method`` cannot be sent to the client: this request is answered as one JSON body,
    with no stream to ask on (a request that cannot stream under the ASGI router, or any
    request to the endpoint's plain view under WSGI, which holds no stream)."""
    return (
        f"{method} needs a streamed answer, and this request is answered as JSON: questions to "
        "the client go on a stream held by mcp_django's ASGI deployment (MCPRouter), which the "
        "endpoint's plain view (WSGI) does not hold"
    )


class Context:
    """What a tool knows about the request it serves, and how it talks back while it runs."""

    def __init__(
        self,
        *,
        site: ServedSite,
        request: HttpRequest | None,
        user: Any,
        session: Session | None,
        request_id: RequestId | None = None,
        meta: dict[str, Any] | None = None,
        emitter: Emitter | None = None,
        request_meta: RequestMeta | None = None,
        rounds: InputRounds | None = None,
    ) -> None:
        #: The :class:`~mcp_django.registry.sites.MCPSite` serving the request.
        self.site = site
        #: The Django ``HttpRequest`` the call came with (over stdio, one that carries the
        #: ``--user``).
        self.request = request
        #: The calling user, as Django has it: an ``AnonymousUser`` when nobody is signed in (as
        #: ``request.user``), so ``ctx.user.is_authenticated`` and ``ctx.user.is_superuser`` just
        #: work.
        self.user = user if user is not None else _anonymous_user()
        #: The ``Session`` row of a session's request; None in 2026-07-28.
        self.session = session
        #: The JSON-RPC id of the request.
        self.request_id = request_id
        #: The request's ``params._meta``.
        self.meta = meta or {}
        self._emitter = emitter
        #: What a 2026-07-28 request says of its client (None in a session's request).
        self.request_meta = request_meta
        # 2026-07-28: questions to the client become an input-required result (see rounds).
        self._rounds = rounds
        #: The ttlMs of what this request read, when its entry sets one (2026-07-28 caching).
        self.cache_ttl_ms: int | None = None
        self._last_progress: float | None = None
        self._last_progress_sent = 0.0
        self.loop: asyncio.AbstractEventLoop | None = None
        #: Whether a request to the client outlived CLIENT_REQUEST_TIMEOUT (the audit trail
        #: records the call as timed out, whatever the tool made of the error).
        self.client_timed_out = False
        #: 2026-07-28 tasks: "prelude" in the request of a task tool declared with prelude=True
        #: (start_task() hands the rest to a task), "task" inside the task, None otherwise.
        self.task_phase: Literal["prelude", "task"] | None = None
        #: A session's prelude: the answers its questions got on the call's stream, keyed as
        #: input rounds key them, so the task replays them instead of asking again.
        self.prelude_answers: InputRounds | None = None
        #: The id of the task this context runs in (inside a task only).
        self.task_id: str | None = None
        #: Whether the call's result was cut to MAX_RESULT_CHARS (the audit trail records it).
        self.result_cut = False

    @property
    def log(self) -> Log:
        """``await ctx.log.info(...)`` and the other levels (see :class:`Log`)."""
        # Built on access rather than stored: a stored Log pointing back at its Context made a
        # reference cycle per request, which only full collections could free (bench/ found it).
        return Log(self)

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` of the request's session; None in 2026-07-28."""
        return self.session.pk if self.session is not None else None

    @property
    def progress_token(self) -> str | int | None:
        """The client's ``_meta.progressToken``; None when it asked for no progress."""
        token = self.meta.get("progressToken")
        if isinstance(token, bool) or not isinstance(token, (str, int)):
            return None
        return token

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared it can do (``sampling``, ``elicitation``, ``roots``...)."""
        if self.request_meta is not None:
            return self.request_meta.client_capabilities
        return self.session.client_capabilities if self.session is not None else {}

    @property
    def protocol_version(self) -> str | None:
        """The revision this request speaks: the session's, or the request's own (2026-07-28)."""
        if self.request_meta is not None:
            return self.request_meta.version
        return self.session.protocol_version if self.session is not None else None

    async def send_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification related to this request (dropped when there is no stream)."""
        if self._emitter is None:
            logger.debug("No stream for %s on a JSON-answered request; not sent", method)
            return
        await self._emitter.send(notification_message(method, params))

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` with the client's token; nothing if it gave none."""
        token = self.progress_token
        if token is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            raise ValueError(f"Progress must increase: {progress} after {self._last_progress}")
        self._last_progress = progress

        now = time.monotonic()
        final = total is not None and progress >= total
        if not final and now - self._last_progress_sent < mcp_settings.progress_min_interval:
            return  # rate-limited: the client sees the next update instead
        self._last_progress_sent = now
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.send_notification("notifications/progress", params)

    async def start_task(self) -> None:
        """Where the work of a task tool declared with ``prelude=True`` begins.

        Before it, the tool runs in the request: its checks, and its questions, which the client
        answers in the request itself (2026-07-28 input-required rounds). At this call the request
        is answered with a task, which runs the tool again from its first line with the same
        answers, and goes on from here. Without a task (the client did not declare the tasks
        extension, or an older revision) and inside the task it does nothing.
        """
        if self.task_phase == "prelude":
            raise StartTask

    # -- requests to the client ---------------------------------------------------------

    def _require_capability(self, name: str) -> dict[str, Any]:
        capability = self.client_capabilities.get(name)
        if not isinstance(capability, dict) and self.protocol_version in MODERN_VERSIONS:
            # 2026-07-28 names this refusal: the client learns which capability to declare. (A
            # task a session made runs with its session's revision: it is refused as there.)
            raise MissingRequiredClientCapabilityError(
                f"This request needs the client capability {name!r}",
                data={"requiredCapabilities": {name: {}}},
            )
        if not isinstance(capability, dict):
            raise ClientRequestError(
                f"The client did not declare the {name!r} capability, so it cannot be asked for it"
            )
        return capability

    async def _request(
        self, method: str, params: dict[str, Any], timeout: float | None, key: str | None = None
    ) -> dict[str, Any]:
        if self._rounds is not None:
            response = await self._rounds.ask(method, params, key)
        elif self._emitter is None:
            raise ClientRequestError(no_stream_message(method))
        else:
            asked = self._prelude_key(method, key)
            response = await self._send_request(
                method, params, timeout or mcp_settings.client_request_timeout
            )
            if asked is not None and isinstance(response.get("result"), dict):
                assert self.prelude_answers is not None
                self.prelude_answers.answers[asked] = response["result"]
        if "error" in response:
            error = response["error"]
            raise ClientRequestError(
                f"The client refused {method}: {error.get('message', 'error')} "
                f"({error.get('code')})"
            )
        result = response.get("result") or {}
        if not isinstance(result, dict):
            raise ClientRequestError(f"The client's answer to {method} is not an object")
        return result

    def _prelude_key(self, method: str, key: str | None) -> str | None:
        """The round key of a question a session's prelude asks on the call's stream (its answer
        goes with the task, as a 2026-07-28 round's does), or None outside a prelude."""
        if self.task_phase != "prelude":
            return None
        if self.prelude_answers is None:
            self.prelude_answers = InputRounds()
        return self.prelude_answers.key_for(method, key)

    def can_relay(self) -> bool:
        """Whether :meth:`relay` can ask the client: a session's request answered on a stream
        (2026-07-28 servers send no requests of their own)."""
        return self._emitter is not None and self.request_meta is None

    async def relay(
        self, method: str, params: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        """Send the client a question asked elsewhere (a parked task's, relayed by 2025-11-25
        ``tasks/result``) on this request's stream; its answer as a JSON-RPC body (``result``
        or ``error``). ClientRequestError without a stream, or when the client is silent."""
        if self._emitter is None:
            raise ClientRequestError(no_stream_message(method))
        return await self._send_request(
            method, params, timeout or mcp_settings.client_request_timeout
        )

    async def _send_request(
        self, method: str, params: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        assert self._emitter is not None
        try:
            return await self._emitter.request(method, params, timeout)
        except TimeoutError:
            self.client_timed_out = True
            raise ClientRequestError(f"The client did not answer {method} in time") from None

    async def sample(
        self,
        messages: list[dict[str, Any]] | str,
        max_tokens: int,
        *,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: dict[str, Any] | None = None,
        include_context: str | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Ask the client's LLM for a completion (``sampling/createMessage``); return its result.

        ``key`` names the question in a 2026-07-28 input-required result (``inputRequests``);
        by default its kind and place in the tool. Sessions ignore it.
        """
        self._require_capability("sampling")
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
        for field, value in (
            ("systemPrompt", system_prompt),
            ("temperature", temperature),
            ("stopSequences", stop_sequences),
            ("modelPreferences", model_preferences),
            ("includeContext", include_context),
            ("metadata", metadata),
        ):
            if value is not None:
                params[field] = value
        return await self._request("sampling/createMessage", params, timeout, key)

    async def elicit(
        self, message: str, schema: Any, *, timeout: float | None = None, key: str | None = None
    ) -> ElicitationResult:
        """Ask the user to fill a form (form-mode ``elicitation/create``).

        ``schema`` is a flat JSON Schema object, a pydantic model or a dataclass. An accepted
        answer is validated against the schema before it is returned. ``key`` as for :meth:`sample`.
        """
        capability = self._require_capability("elicitation")
        if capability and "form" not in capability:
            raise ClientRequestError("The client supports only URL-mode elicitation, not forms")
        requested, model = elicitation_schema(schema)
        params: dict[str, Any] = {"message": message, "requestedSchema": requested}
        if (self.protocol_version or "") >= "2025-11-25":
            params["mode"] = "form"  # the field exists from 2025-11-25 (URL mode came with it)
        result = await self._request("elicitation/create", params, timeout, key)
        action = _elicitation_action(result)
        content = result.get("content") if action == "accept" else None
        data = None
        if action == "accept":
            errors = [e.message for e in Draft202012Validator(requested).iter_errors(content or {})]
            if errors:
                raise ClientRequestError(
                    "The elicitation answer does not match the form: " + "; ".join(errors)
                )
            if model is not None:
                data = TypeAdapter(model).validate_python(content or {})
        return ElicitationResult(action, content, data)

    async def list_roots(
        self, *, timeout: float | None = None, key: str | None = None
    ) -> list[dict[str, Any]]:
        """Ask the client for its roots (``roots/list``); ``key`` as for :meth:`sample`."""
        self._require_capability("roots")
        result = await self._request("roots/list", {}, timeout, key)
        roots = result.get("roots", [])
        return roots if isinstance(roots, list) else []

    async def ping(self, *, timeout: float | None = None) -> None:
        """Check that the client is there (server-to-client ``ping``)."""
        await self._request("ping", {}, timeout)

    # -- URL-mode elicitation, secrets and state ------------------------------------------

    def _supports_url_elicitation(self) -> bool:
        capability = self.client_capabilities.get("elicitation")
        return isinstance(capability, dict) and isinstance(capability.get("url"), dict)

    async def elicit_url(
        self,
        message: str,
        view: str = "mcp_django:elicit-confirm",
        *,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        key: str | None = None,
    ) -> URLElicitation:
        """Send the user to a page of this site (URL-mode ``elicitation/create``).

        The page (``view``, a URL name taking ``elicitation_id``) only opens for the user who
        triggered it. The result's ``action`` says whether the user agreed to open it
        ("accept" means only that); :meth:`wait_for_elicitation` waits until the page is done.
        When the client cannot do URL mode, this raises ``URLElicitationRequiredError``, which
        answers the request with -32042 and the page's URL (in 2026-07-28: -32021, naming the
        capability). In 2026-07-28 the question is an input request (``key`` as for
        :meth:`sample`) and the page is kept in ``requestState``: the retry finds it, done or not.
        """
        from ..elicitation import (
            services,
        )  # app loading: its models; this module imports before apps are ready

        user_id = getattr(self.user, "pk", None)
        if user_id is None:
            raise ClientRequestError(
                "URL elicitation needs an authenticated user: the page must know who may open it"
            )
        rounds = self._rounds
        if rounds is not None and not self._supports_url_elicitation():
            raise MissingRequiredClientCapabilityError(
                "This request needs a client that opens pages (URL-mode elicitation)",
                required_capabilities={"elicitation": {"url": {}}},
            )
        elicitation = None
        if rounds is not None:
            key = rounds.key_for("elicitation/create", key)
            page = rounds.notes.get(f"page:{key}")
            if isinstance(page, str):
                elicitation = await sync_to_async(services.of_user)(page, user_id)
        if elicitation is None:
            elicitation = await sync_to_async(services.create)(
                user_id=user_id,
                session_id=self.session_id,
                request_id=self.request_id,
                message=message,
                view_name=view,
                params=params or {},
            )
            if rounds is not None:
                rounds.notes[f"page:{key}"] = elicitation.pk
        url = services.page_url(elicitation, self.request)
        request: dict[str, Any] = {"mode": "url", "message": message, "url": url}
        if rounds is None:
            request["elicitationId"] = (
                elicitation.pk
            )  # 2025-11-25; the 2026 retry carries it in requestState
            if not self._supports_url_elicitation() or self._emitter is None:
                raise URLElicitationRequiredError(
                    "This request needs you to complete an action in your browser first.",
                    data={"elicitations": [request]},
                )
        result = await self._request("elicitation/create", request, timeout, key)
        action = _elicitation_action(result)
        if action != "accept":
            await sync_to_async(services.finish)(
                elicitation,
                "declined" if action == "decline" else "cancelled",
                announce_to_client=False,
            )
        return URLElicitation(elicitation.pk, url, action)

    async def wait_for_elicitation(
        self, elicitation: URLElicitation | str, timeout: float | None = None
    ) -> str:
        """Wait until the page is finished; return "completed", "declined", "cancelled" or
        "expired"."""
        from ..elicitation import (
            services,
        )  # app loading: its models; this module imports before apps are ready

        elicitation_id = elicitation if isinstance(elicitation, str) else elicitation.id
        return await services.wait(elicitation_id, timeout or float(mcp_settings.elicitation_ttl))

    async def get_secret(self, service: str) -> str | None:
        """The calling user's secret for ``service``, entered on a secret page; None if absent."""
        from ..elicitation import (
            services,
        )  # app loading: its models; this module imports before apps are ready

        user_id = getattr(self.user, "pk", None)
        if user_id is None:
            return None
        return await sync_to_async(services.read_secret)(user_id, service)

    async def require_secret(
        self, service: str, message: str, *, label: str | None = None, timeout: float | None = None
    ) -> str:
        """The user's secret for ``service``; if there is none, ask for it on a page and wait."""
        params = {"service": service, **({"label": label} if label else {})}
        name = label or service
        return await self._get_or_elicit(
            lambda: self.get_secret(service),
            message,
            "mcp_django:elicit-secret",
            params,
            timeout,
            refused=f"The user did not open the page to connect {name}",
            missing=f"No secret for {name} was given",
        )

    async def get_connection(self, provider: str) -> dict[str, Any] | None:
        """The calling user's tokens for a third-party provider (``CONNECT_PROVIDERS``), if
        connected."""
        stored = await self.get_secret(f"connect:{provider}")
        return json.loads(stored) if stored else None

    async def require_connection(
        self, provider: str, message: str, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """The user's tokens for ``provider``; if not connected, send them to the connect page
        (which logs them in to the provider) and wait."""
        return await self._get_or_elicit(
            lambda: self.get_connection(provider),
            message,
            "mcp_django:elicit-connect",
            {"provider": provider},
            timeout,
            refused=f"The user did not open the page to connect {provider}",
            missing=f"{provider} was not connected",
        )

    async def _get_or_elicit(
        self,
        read: Callable[[], Awaitable[T | None]],
        message: str,
        view: str,
        params: dict[str, Any],
        timeout: float | None,
        *,
        refused: str,
        missing: str,
    ) -> T:
        """Return ``await read()``; when it gives None, send the user to ``view``, wait, read
        again."""
        value = await read()
        if value is not None:
            return value
        elicitation = await self.elicit_url(message, view, params=params)
        if elicitation.action != "accept":
            raise ClientRequestError(refused)
        state = await self.wait_for_elicitation(elicitation, timeout)
        value = await read() if state == "completed" else None
        if value is None:
            raise ClientRequestError(f"{missing} ({state})")
        return value

    @property
    def user_state(self) -> Any:
        """A persisted key-value store for the calling user on this site (outlives sessions)."""
        from ..stores.state import (
            UserStateStore,
        )  # app loading: its models; this module imports before apps are ready

        return UserStateStore(getattr(self.user, "pk", None), self.site.name)

    @property
    def session_state(self) -> Any:
        """A persisted key-value store that dies with the session."""
        from ..stores.state import (
            SessionStateStore,
        )  # app loading: its models; this module imports before apps are ready

        if self.session_id is None:
            raise ClientRequestError(
                "There is no session to keep state in (2026-07-28 requests have none: use "
                "ctx.user_state)"
            )
        return SessionStateStore(self.session_id)

    async def close_stream(self) -> None:
        """Close this request's SSE connection now; the client resumes with ``Last-Event-ID``.

        Events sent afterwards are stored and replayed on resume (2025-11-25 SSE polling).
        """
        if self._emitter is not None:
            await self._emitter.close_connection()
