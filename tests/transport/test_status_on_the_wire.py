"""The transports name HTTP statuses with ``HTTPStatus`` members but send plain ints: on
Python 3.10 ``str(HTTPStatus.OK)`` is ``"HTTPStatus.OK"``, and an ASGI server that writes the
status line with ``str()`` (Twisted, under Daphne) would send that instead of the number."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from channels.testing import ApplicationCommunicator

from mcp_django.testing import MCPTestClient
from mcp_django.transport.metadata import MetadataConsumer

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.mark.parametrize(
    ("message", "status"), [(PING, 200), (INITIALIZED, 202)], ids=["answer", "accepted"]
)
async def test_the_endpoint_sends_its_status_as_a_plain_int(
    client: MCPTestClient, message: dict[str, Any], status: int
) -> None:
    communicator = ApplicationCommunicator(
        client.application, client.scope("POST", client.build_headers("POST"))
    )
    await communicator.send_input(
        {"type": "http.request", "body": orjson.dumps(message), "more_body": False}
    )
    start = await communicator.receive_output(5)
    await communicator.receive_output(5)
    await communicator.wait(5)
    assert start["type"] == "http.response.start"
    assert start["status"] == status and type(start["status"]) is int


async def test_the_metadata_consumer_sends_its_status_as_a_plain_int() -> None:
    consumer = MetadataConsumer("/mcp")
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    consumer.send = send
    consumer.scope = {"type": "http", "method": "OPTIONS"}
    await consumer.handle(b"")
    start = sent[0]
    assert start["type"] == "http.response.start"
    assert start["status"] == 204 and type(start["status"]) is int
