"""Routing requests to handlers and mapping what they raise onto JSON-RPC errors."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest

from mcp_django.protocol.dispatcher import dispatch
from mcp_django.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    InvalidParamsError,
    MCPError,
    ResourceNotFoundError,
    URLElicitationRequiredError,
)
from mcp_django.protocol.jsonrpc import Request

pytestmark = pytest.mark.asyncio

LOGGER = "mcp_django.protocol"


async def test_dispatch_returns_the_handler_result_with_the_request_id():
    calls = []

    async def handler(params, context):
        calls.append((params, context))
        return {"echo": params["x"]}

    context = object()
    response = await dispatch(Request("r1", "echo", {"x": 1}), {"echo": handler}, context)
    assert response == {"jsonrpc": "2.0", "id": "r1", "result": {"echo": 1}}
    assert calls == [({"x": 1}, context)]


async def test_dispatch_keeps_integer_ids():
    async def handler(params, context):
        return {}

    response = await dispatch(Request(0, "ping"), {"ping": handler}, None)
    assert response == {"jsonrpc": "2.0", "id": 0, "result": {}}


async def test_dispatch_unknown_method_is_method_not_found_with_the_id():
    response = await dispatch(Request(7, "nope/nothing"), {}, None)
    assert response["id"] == 7
    assert response["error"]["code"] == METHOD_NOT_FOUND
    assert "nope/nothing" in response["error"]["message"]
    assert "result" not in response


async def test_dispatch_method_not_found_message_is_bounded():
    response = await dispatch(Request(1, "m" * 10_000), {}, None)
    assert response["error"]["code"] == METHOD_NOT_FOUND
    assert len(response["error"]["message"]) < 200


async def test_dispatch_method_lookup_is_exact():
    async def handler(params, context):
        return {}

    for method in ("Ping", "ping ", "pin"):
        response = await dispatch(Request(1, method), {"ping": handler}, None)
        assert response["error"]["code"] == METHOD_NOT_FOUND


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (
            InvalidParamsError("Unknown tool: x", data={"tool": "x"}),
            {"code": INVALID_PARAMS, "message": "Unknown tool: x", "data": {"tool": "x"}},
        ),
        (InvalidParamsError(), {"code": INVALID_PARAMS, "message": "Invalid params"}),
        (
            ResourceNotFoundError("file:///a"),
            {
                "code": RESOURCE_NOT_FOUND,
                "message": "Resource not found: file:///a",
                "data": {"uri": "file:///a"},
            },
        ),
        (
            URLElicitationRequiredError(data={"elicitations": []}),
            {
                "code": URL_ELICITATION_REQUIRED,
                "message": "This request requires more information.",
                "data": {"elicitations": []},
            },
        ),
    ],
)
async def test_dispatch_mcp_error_becomes_its_code_message_and_data(exc, error):
    async def handler(params, context):
        raise exc

    response = await dispatch(Request("a", "m"), {"m": handler}, None)
    assert response == {"jsonrpc": "2.0", "id": "a", "error": error}


async def test_dispatch_custom_mcp_error_subclass_keeps_its_code():
    class Custom(MCPError):
        code = -32099
        default_message = "Custom failure"

    async def handler(params, context):
        raise Custom(data=[1, 2])

    response = await dispatch(Request(3, "m"), {"m": handler}, None)
    assert response["error"] == {"code": -32099, "message": "Custom failure", "data": [1, 2]}


async def test_dispatch_mcp_error_is_not_logged_as_an_exception(caplog):
    async def handler(params, context):
        raise InvalidParamsError("bad")

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        await dispatch(Request(1, "m"), {"m": handler}, None)
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("db password=hunter2 at /srv/app.py"),
        KeyError("secret_key"),
        ValueError("boom"),
        ZeroDivisionError(),
    ],
)
async def test_dispatch_unexpected_exception_is_internal_error_without_details(exc, caplog):
    async def handler(params, context):
        raise exc

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        response = await dispatch(Request(9, "tools/call"), {"tools/call": handler}, None)
    assert response == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
    }
    wire = orjson.dumps(response)
    for leak in (str(exc), type(exc).__name__, "Traceback", "hunter2", "secret_key"):
        if leak:
            assert leak.encode() not in wire
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[1] is exc
    assert "tools/call" in record.getMessage()


async def test_dispatch_handler_that_is_not_awaitable_is_internal_error(caplog):
    def handler(params, context):
        return {}

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        response = await dispatch(Request(1, "m"), {"m": handler}, None)
    assert response["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    assert any(r.exc_info for r in caplog.records)


async def test_dispatch_lets_cancelled_error_propagate(caplog):
    async def handler(params, context):
        raise asyncio.CancelledError()

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        with pytest.raises(asyncio.CancelledError):
            await dispatch(Request(1, "m"), {"m": handler}, None)
    assert not caplog.records


async def test_dispatch_task_cancellation_reaches_the_caller():
    started = asyncio.Event()
    never = asyncio.Event()

    async def handler(params, context):
        started.set()
        await never.wait()
        return {}

    task = asyncio.ensure_future(dispatch(Request(1, "slow"), {"slow": handler}, None))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
async def test_dispatch_lets_base_exceptions_propagate(exc_type):
    async def handler(params, context):
        raise exc_type()

    with pytest.raises(exc_type):
        await dispatch(Request(1, "m"), {"m": handler}, None)
