"""Declared method params: each method's checks, their messages and their order."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_django.protocol.errors import INVALID_PARAMS, InvalidParamsError
from mcp_django.protocol.pagination import encode_cursor
from mcp_django.protocol.params import (
    METHOD_PARAMS,
    CallToolParams,
    CancelledParams,
    CompleteParams,
    CompletionArgument,
    InitializeRequestParams,
    ListenParams,
    PromptRef,
    ResourceRef,
    RoundParams,
    at_most,
    is_identifier,
    parse,
    parse_as,
    parse_initialize,
    peek,
    request_meta,
    takes,
)

NAME = 'Invalid params: "name" must be a non-empty string'
NAME_CONTROL = 'Invalid params: "name" must not contain control characters'
URI = 'Invalid params: "uri" must be a non-empty string'
URI_CONTROL = 'Invalid params: "uri" must not contain control characters'
ARGUMENTS = 'Invalid params: "arguments" must be an object'
NAME_AND_VALUE = 'Invalid params: "argument" needs string "name" and "value"'
ARGUMENT_CONTROL = 'Invalid params: "argument" must not contain control characters'
REF_TYPE = 'Invalid params: "ref.type" must be "ref/prompt" or "ref/resource"'
CURSOR = "Invalid params: invalid cursor"
LEVEL = 'Invalid params: "level" must be one of debug, info, notice, warning, error, critical, alert, emergency'

PROMPT = {"type": "ref/prompt", "name": "p"}
ARG = {"name": "a", "value": "v"}


def message(method: str, params: dict[str, Any]) -> str:
    with pytest.raises(InvalidParamsError) as exc:
        parse(method, params)
    assert exc.value.code == INVALID_PARAMS
    return exc.value.message


# The messages clients have always been sent, one per kind of fault (the wire is unchanged).
@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("tools/call", {}, NAME),
        ("tools/call", {"name": ""}, NAME),
        ("tools/call", {"name": 7}, NAME),
        ("tools/call", {"name": None}, NAME),
        ("tools/call", {"name": "add\x00"}, NAME_CONTROL),
        ("tools/call", {"name": "add\x9f"}, NAME_CONTROL),
        ("tools/call", {"name": "add", "arguments": []}, ARGUMENTS),
        ("tools/call", {"name": "add", "arguments": "x"}, ARGUMENTS),
        ("prompts/get", {"name": ["p"]}, NAME),
        ("prompts/get", {"name": "p", "arguments": 1}, ARGUMENTS),
        ("resources/read", {}, URI),
        ("resources/read", {"uri": "x://\x1b"}, URI_CONTROL),
        ("resources/subscribe", {"uri": ""}, URI),
        ("resources/unsubscribe", {"uri": "x://\x7f"}, URI_CONTROL),
        ("logging/setLevel", {}, LEVEL),
        ("logging/setLevel", {"level": "DEBUG"}, LEVEL),
        ("tools/list", {"cursor": 1}, CURSOR),
        ("resources/list", {"cursor": "not base64 json"}, CURSOR),
        ("prompts/list", {"cursor": "x" * 1025}, CURSOR),
        ("resources/templates/list", {"cursor": encode_cursor([1])}, CURSOR),  # type: ignore[arg-type]
        (
            "completion/complete",
            {"ref": "p", "argument": ARG},
            'Invalid params: "ref" must be an object',
        ),
        (
            "completion/complete",
            {"ref": PROMPT, "argument": []},
            'Invalid params: "argument" must be an object',
        ),
        ("completion/complete", {"ref": PROMPT}, NAME_AND_VALUE),
        (
            "completion/complete",
            {"ref": PROMPT, "argument": {"name": "a", "value": None}},
            NAME_AND_VALUE,
        ),
        (
            "completion/complete",
            {"ref": PROMPT, "argument": {"name": "a\x00", "value": ""}},
            ARGUMENT_CONTROL,
        ),
        (
            "completion/complete",
            {"ref": PROMPT, "argument": {"name": "a", "value": "\n"}},
            ARGUMENT_CONTROL,
        ),
        (
            "completion/complete",
            {"ref": PROMPT, "argument": ARG, "context": 1},
            'Invalid params: "context" must be an object',
        ),
        (
            "completion/complete",
            {"ref": PROMPT, "argument": ARG, "context": {"arguments": 1}},
            ARGUMENTS,
        ),
        ("completion/complete", {"argument": ARG}, REF_TYPE),
        ("completion/complete", {"ref": {"type": "ref/tool"}, "argument": ARG}, REF_TYPE),
        ("completion/complete", {"ref": {"type": "ref/prompt"}, "argument": ARG}, NAME),
        (
            "completion/complete",
            {"ref": {"type": "ref/resource", "uri": "x://{a}\x00"}, "argument": ARG},
            URI_CONTROL,
        ),
        ("tasks/update", {"taskId": "t"}, 'Invalid params: "inputResponses" must be an object'),
    ],
)
def test_malformed_params_answer_the_message_clients_have_always_had(
    method: str, params: dict[str, Any], expected: str
) -> None:
    assert message(method, params) == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        # The ref is checked as an object first, and for what it names last.
        ({"ref": 1, "argument": 1}, 'Invalid params: "ref" must be an object'),
        ({"ref": {"type": "x"}, "argument": {"name": 1}}, NAME_AND_VALUE),
        ({"ref": {"type": "x"}, "argument": ARG, "context": {"arguments": []}}, ARGUMENTS),
        # Both strings are checked before either's characters.
        ({"ref": PROMPT, "argument": {"name": "a\x00", "value": 1}}, NAME_AND_VALUE),
    ],
)
def test_completion_checks_run_in_the_order_clients_have_always_seen(
    params: dict[str, Any], expected: str
) -> None:
    assert message("completion/complete", params) == expected


def test_a_name_is_checked_before_the_arguments() -> None:
    assert message("tools/call", {"name": "a\x00", "arguments": 1}) == NAME_CONTROL


def test_parse_returns_the_typed_params() -> None:
    assert parse("tools/call", {"name": "add", "arguments": {"a": 1}}) == CallToolParams(
        name="add", arguments={"a": 1}, task=None, task_ttl=None
    )
    assert parse("tools/call", {"name": "add", "arguments": None}).arguments == {}


@pytest.mark.parametrize(
    ("task", "ttl"), [({}, None), ({"ttl": None}, None), ({"ttl": 60000}, 60000), ({"ttl": 5.0}, 5)]
)
def test_a_2025_11_25_task_request_is_read_with_its_ttl(task: Any, ttl: Any) -> None:
    parsed = parse("tools/call", {"name": "add", "task": task})
    assert parsed.task == task and parsed.task_ttl == ttl


@pytest.mark.parametrize(
    "task", [3, "x", [], {"ttl": -1}, {"ttl": 1.5}, {"ttl": "9"}, {"ttl": True}, {"ttl": 1e400}]
)
def test_a_malformed_task_request_is_invalid_params(task: Any) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        parse("tools/call", {"name": "add", "task": task})
    assert refused.value.message.startswith('Invalid params: "task')


def test_completion_params_read_the_ref_by_its_type() -> None:
    parsed = parse(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "x://{a}"},
            "argument": {"name": "a"},
            "context": {"arguments": {"b": "1"}},
        },
    )
    assert isinstance(parsed, CompleteParams)
    assert parsed.ref == ResourceRef(uri="x://{a}")
    assert parsed.argument == CompletionArgument(name="a", value="")
    assert parsed.context_arguments == {"b": "1"}
    assert parse("completion/complete", {"ref": PROMPT, "argument": ARG}).ref == PromptRef(name="p")


def test_list_params_keep_a_well_formed_cursor_for_the_list_to_place() -> None:
    cursor = encode_cursor({"o": 10_000})
    assert parse("tools/list", {"cursor": cursor}).cursor == cursor
    assert parse("tools/list", {"cursor": None}).cursor is None


def test_task_ids_are_taken_as_given() -> None:
    # Any id: one that names none of the caller's tasks answers "not found", never a shape error.
    assert parse("tasks/get", {"taskId": 12}).task_id == 12
    assert parse("tasks/cancel", {}).task_id is None


def test_unknown_members_are_ignored() -> None:
    assert (
        parse("resources/read", {"uri": "x://a", "_meta": {"progressToken": 1}, "extra": True}).uri
        == "x://a"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("a", True), ("", False), ("a\x00", False), ("a\x85", False), (1, False), (None, False)],
)
def test_is_identifier_matches_the_identifier_check(value: Any, expected: bool) -> None:
    assert is_identifier(value) is expected
    if not expected:
        with pytest.raises(InvalidParamsError):
            parse("tools/call", {"name": value})


async def test_takes_hands_the_handler_its_typed_params() -> None:
    seen: list[Any] = []

    @takes("tools/call")
    async def handler(params: CallToolParams, ctx: Any) -> dict[str, Any]:
        seen.append((params, ctx))
        return {}

    assert await handler({"name": "add"}, "ctx") == {}
    assert seen == [(CallToolParams(name="add", arguments={}, task=None, task_ttl=None), "ctx")]
    assert handler.__name__ == "handler"
    with pytest.raises(InvalidParamsError):
        await handler({"name": ""}, "ctx")
    assert len(seen) == 1


def test_every_params_class_is_a_frozen_dataclass() -> None:
    import dataclasses

    for cls in METHOD_PARAMS.values():
        assert dataclasses.is_dataclass(cls)
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def _listen(params: dict[str, Any], *, declared: bool = True) -> ListenParams:
    def tasks_declared(value: Any, label: str) -> Any:
        if value is not None and not declared:
            raise RuntimeError("tasks extension not declared")
        return value

    return parse_as(
        ListenParams,
        params,
        max_task_ids=at_most(2, "taskIds per stream"),
        tasks_declared=tasks_declared,
        max_uris=at_most(2, "resourceSubscriptions per stream"),
    )


def _listen_message(params: dict[str, Any]) -> str:
    with pytest.raises(InvalidParamsError) as exc:
        _listen(params)
    assert exc.value.code == INVALID_PARAMS
    return exc.value.message


# The strings Engine.listen_filter raised by hand before they were declared.
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"notifications": None}, 'Invalid params: "notifications" must be an object'),
        ({"notifications": []}, 'Invalid params: "notifications" must be an object'),
        (
            {"notifications": {"taskIds": "t"}},
            'Invalid params: "notifications.taskIds" must be an array of task ids',
        ),
        (
            {"notifications": {"taskIds": [1]}},
            'Invalid params: "notifications.taskIds" must be an array of task ids',
        ),
        (
            {"notifications": {"taskIds": ["a", "b", "c"]}},
            "Invalid params: at most 2 taskIds per stream",
        ),
        (
            {"notifications": {"resourceSubscriptions": {}}},
            'Invalid params: "notifications.resourceSubscriptions" must be an array of URIs',
        ),
        (
            {"notifications": {"resourceSubscriptions": ["a", "b", "c"]}},
            "Invalid params: at most 2 resourceSubscriptions per stream",
        ),
        # Task ids are checked before the URIs, as they always were.
        (
            {"notifications": {"taskIds": 1, "resourceSubscriptions": 1}},
            'Invalid params: "notifications.taskIds" must be an array of task ids',
        ),
    ],
)
def test_listen_params_answer_the_messages_clients_have_always_had(
    params: dict[str, Any], expected: str
) -> None:
    assert _listen_message(params) == expected


def test_listen_params_ask_for_the_tasks_extension_before_checking_uris() -> None:
    with pytest.raises(RuntimeError):
        _listen({"notifications": {"taskIds": ["t"], "resourceSubscriptions": 1}}, declared=False)


def test_listen_params_read_an_absent_filter_as_empty() -> None:
    assert _listen({}) == ListenParams(notifications={}, task_ids=None, resource_subscriptions=None)
    assert _listen({"notifications": {"taskIds": ["t"]}}).task_ids == ["t"]


def test_round_params_unseal_the_state_before_checking_the_answers() -> None:
    def refuse(value: Any, label: str) -> Any:
        raise InvalidParamsError(
            "Invalid params: requestState is not valid for this request (malformed)"
        )

    with pytest.raises(InvalidParamsError) as exc:
        parse_as(RoundParams, {"requestState": "x", "inputResponses": []}, unseal=refuse)
    assert "requestState" in exc.value.message
    with pytest.raises(InvalidParamsError) as exc:
        parse_as(RoundParams, {"inputResponses": []}, unseal=lambda value, label: value)
    assert exc.value.message == 'Invalid params: "inputResponses" must be an object'
    assert parse_as(RoundParams, {}, unseal=lambda value, label: value) == RoundParams(
        request_state=None, input_responses={}
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"name": "add"}, "add"),
        ({}, None),
        ({"name": ""}, None),
        ({"name": 1}, None),
        ({"name": "a\x00"}, None),
    ],
)
def test_peek_reads_the_declared_field_or_none(params: dict[str, Any], expected: Any) -> None:
    assert peek(CallToolParams, "name", params) == expected


def test_peek_falls_back_to_none_where_the_handler_answers() -> None:
    assert peek(CallToolParams, "arguments", {"arguments": [1]}) is None
    assert peek(CallToolParams, "arguments", {}) == {}
    assert peek(InitializeRequestParams, "protocol_version", {"protocolVersion": 5}) is None
    assert request_meta({"_meta": []}) is None
    assert request_meta({"_meta": {"progressToken": 1}}) == {"progressToken": 1}
    assert request_meta({}) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1), ("r", "r"), (True, None), (None, None), (1.5, None), ([1], None)],
)
def test_a_cancellation_names_a_request_only_by_a_valid_id(value: Any, expected: Any) -> None:
    assert peek(CancelledParams, "request_id", {"requestId": value}) == expected


CLIENT_INFO_SIZE = 'Invalid params: "clientInfo" is 107 bytes as JSON; the limit is 100'


# The strings lifecycle.parse_initialize raised by hand before they were declared, in its order.
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"protocolVersion": ""}, 'Invalid params: "protocolVersion" must be a non-empty string'),
        (
            {"protocolVersion": "v", "capabilities": None, "clientInfo": 1},
            'Invalid params: "capabilities" must be an object',
        ),
        (
            {"protocolVersion": "v", "clientInfo": None},
            'Invalid params: "clientInfo" must be an object',
        ),
        (
            {"protocolVersion": "v", "clientInfo": {"name": 1}},
            'Invalid params: "clientInfo.name" must be a string',
        ),
        (
            {"protocolVersion": "v", "clientInfo": {"version": "x" * 101}},
            'Invalid params: "clientInfo.version" is longer than 100 characters',
        ),
        ({"protocolVersion": "v", "clientInfo": {"a": "x" * 99}}, CLIENT_INFO_SIZE),
        # clientInfo's size is checked before the capabilities' (both too large).
        (
            {
                "protocolVersion": "v",
                "clientInfo": {"a": "x" * 99},
                "capabilities": {"a": "x" * 99},
            },
            CLIENT_INFO_SIZE,
        ),
        (
            {"protocolVersion": "v", "capabilities": {"a": "x" * 99}},
            'Invalid params: "capabilities" is 107 bytes as JSON; the limit is 100',
        ),
        (
            {"protocolVersion": "v", "capabilities": {"a": {"b": {"c": {}}}}},
            'Invalid params: "capabilities" nests deeper than 3 levels',
        ),
    ],
)
def test_initialize_params_answer_the_messages_clients_have_always_had(
    params: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InvalidParamsError) as exc:
        parse_initialize(params, max_client_info_bytes=100, max_capabilities_bytes=100, max_depth=3)
    assert exc.value.message == expected


def test_initialize_params_give_each_session_its_own_empty_objects() -> None:
    first, second = (
        parse_initialize({"protocolVersion": "v"}),
        parse_initialize({"protocolVersion": "v"}),
    )
    assert first.capabilities == first.client_info == {}
    assert first.capabilities is not second.capabilities
    assert first.client_info is not second.client_info
