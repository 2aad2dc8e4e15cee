"""The 2026-07-28 path of the Streamable HTTP endpoint: one message in a POST, no session.

A request is answered as JSON, or as an SSE stream of its own (its progress and logs, then its
response) that the client cancels by closing; ``subscriptions/listen`` stays open as a
:class:`~mcp_django.transport.sse.ListenStream`. The consumer chooses this path per request
(:func:`mcp_django.protocol.modern.is_modern_request`).
"""

from __future__ import annotations

from http import HTTPStatus

from channels.exceptions import StopConsumer

from ..protocol import modern
from ..protocol.errors import MCPError
from ..protocol.jsonrpc import Notification, Request, error_message
from ..server.engine import Principal
from .base import BaseMCPConsumer
from .sse import ListenStream, ResponseStream, until_disconnect


async def post(
    consumer: BaseMCPConsumer, principal: Principal, message: Request | Notification
) -> None:
    """Answer one 2026-07-28 message on ``consumer``'s connection."""
    if isinstance(message, Notification):
        await consumer.send_empty(
            HTTPStatus.ACCEPTED
        )  # none is defined over HTTP in this revision; accepted
        return
    engine = consumer.engine
    try:
        meta = await engine.stateless_meta(principal, message, consumer.headers)
    except MCPError as exc:
        await consumer.send_answer(
            exc.http_status or HTTPStatus.BAD_REQUEST, error_message(message.id, exc)
        )
        return
    if message.method == "subscriptions/listen":
        await open_listen(consumer, principal, message)
        return
    try:
        await answer(consumer, principal, message, meta)
    finally:
        await engine.release_held([message])  # when it never ran


async def answer(
    consumer: BaseMCPConsumer, principal: Principal, message: Request, meta: modern.RequestMeta
) -> None:
    """Answer ``message`` as JSON, or as its own SSE stream when it may send events first."""
    engine = consumer.engine
    if not engine.needs_stream_stateless(message):
        response = await until_disconnect(
            engine.answer_stateless(principal, message, meta), consumer.base_receive
        )
        if response is None:
            raise StopConsumer()  # the client left, and with it the request
        await consumer.send_answer(modern.http_status(response), response)
        return
    try:
        await consumer.hold_stream_slot(principal, None)
    except MCPError as exc:
        await consumer.send_answer(
            exc.http_status or HTTPStatus.BAD_REQUEST, error_message(message.id, exc)
        )
        return
    stream = ResponseStream(consumer)
    streamed = await stream.run(
        lambda: engine.answer_stateless(principal, message, meta, stream), consumer.base_receive
    )
    if streamed is None:
        raise StopConsumer()  # the client left, and with it the request
    if stream.started:
        await stream.finish(streamed)
    else:
        await consumer.send_answer(modern.http_status(streamed), streamed)


async def open_listen(consumer: BaseMCPConsumer, principal: Principal, message: Request) -> None:
    """Open the ``subscriptions/listen`` stream ``message`` asks for (what it follows is agreed
    first); the consumer then writes the changes announced to it (``mcp_listen``)."""
    try:
        agreed = await consumer.engine.listen_filter(principal, message)
        await consumer.hold_stream_slot(principal, None)
    except MCPError as exc:
        await consumer.send_answer(
            modern.http_status(error_message(message.id, exc)), error_message(message.id, exc)
        )
        return
    consumer.listening = (principal, agreed)
    consumer.listen = ListenStream(consumer, message.id, consumer.settings)
    await consumer.listen.open(agreed)
