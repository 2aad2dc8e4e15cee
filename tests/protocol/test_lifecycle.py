"""The initialize handshake and logging levels."""

from __future__ import annotations

import pytest

from mcp_django.protocol.errors import INVALID_PARAMS, InvalidParamsError
from mcp_django.protocol.lifecycle import (
    LOG_LEVELS,
    InitializeParams,
    initialize_result,
    level_enabled,
)
from mcp_django.protocol.negotiation import LATEST_VERSION, SUPPORTED_VERSIONS
from mcp_django.protocol.params import parse, parse_initialize

# --- initialize --------------------------------------------------------------------------


def test_parse_initialize_full_params():
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": True}, "elicitation": {}},
        "clientInfo": {"name": "client", "version": "1.0", "title": "Client"},
    }
    assert parse_initialize(params) == InitializeParams(
        requested_version="2025-06-18",
        version="2025-06-18",
        capabilities={"roots": {"listChanged": True}, "elicitation": {}},
        client_info={"name": "client", "version": "1.0", "title": "Client"},
    )


def test_parse_initialize_defaults_missing_capabilities_and_client_info():
    parsed = parse_initialize({"protocolVersion": "2025-03-26"})
    assert parsed.capabilities == {}
    assert parsed.client_info == {}
    assert parsed.version == "2025-03-26"


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_parse_initialize_keeps_a_supported_version(version):
    assert parse_initialize({"protocolVersion": version}).version == version


@pytest.mark.parametrize("requested", ["2026-07-28", "1999-01-01", "DRAFT-2026-v1", " 2025-06-18"])
def test_parse_initialize_answers_latest_for_an_unsupported_version(requested):
    parsed = parse_initialize({"protocolVersion": requested})
    assert parsed.requested_version == requested
    assert parsed.version == LATEST_VERSION


@pytest.mark.parametrize("version", [None, "", 20250618, ["2025-06-18"], {"v": 1}, True])
def test_parse_initialize_rejects_bad_protocol_version(version):
    with pytest.raises(InvalidParamsError) as exc:
        parse_initialize({"protocolVersion": version, "capabilities": {}, "clientInfo": {}})
    assert exc.value.code == INVALID_PARAMS


def test_parse_initialize_rejects_missing_protocol_version():
    with pytest.raises(InvalidParamsError) as exc:
        parse_initialize({"capabilities": {}})
    assert exc.value.code == INVALID_PARAMS


@pytest.mark.parametrize("capabilities", [None, [], "all", 1, True])
def test_parse_initialize_rejects_non_object_capabilities(capabilities):
    with pytest.raises(InvalidParamsError) as exc:
        parse_initialize({"protocolVersion": "2025-06-18", "capabilities": capabilities})
    assert exc.value.code == INVALID_PARAMS


@pytest.mark.parametrize("client_info", [None, [], "client", 1])
def test_parse_initialize_rejects_non_object_client_info(client_info):
    with pytest.raises(InvalidParamsError) as exc:
        parse_initialize({"protocolVersion": "2025-06-18", "clientInfo": client_info})
    assert exc.value.code == INVALID_PARAMS


@pytest.mark.parametrize(
    "client_info", [{"name": 1}, {"name": None}, {"version": 1.0}, {"name": "c", "version": ["1"]}]
)
def test_parse_initialize_rejects_non_string_client_name_or_version(client_info):
    with pytest.raises(InvalidParamsError) as exc:
        parse_initialize({"protocolVersion": "2025-06-18", "clientInfo": client_info})
    assert exc.value.code == INVALID_PARAMS


def test_initialize_result_shape():
    result = initialize_result(
        "2025-06-18", {"tools": {"listChanged": True}}, {"name": "srv", "version": "1"}
    )
    assert result == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "srv", "version": "1"},
    }


def test_initialize_result_includes_instructions_only_when_non_empty():
    assert initialize_result("v", {}, {}, instructions="Use tools.")["instructions"] == "Use tools."
    assert "instructions" not in initialize_result("v", {}, {}, instructions="")
    assert "instructions" not in initialize_result("v", {}, {}, instructions=None)


# --- logging -----------------------------------------------------------------------------


def test_log_levels_are_rfc5424_least_severe_first():
    assert LOG_LEVELS == (
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    )


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_set_level_params_accept_every_level(level):
    assert parse("logging/setLevel", {"level": level}).level == level


@pytest.mark.parametrize(
    "level", [None, "", "DEBUG", "warn", "fatal", " info", 0, ["info"], {"l": 1}, True]
)
def test_set_level_params_reject_unknown_level(level):
    with pytest.raises(InvalidParamsError) as exc:
        parse("logging/setLevel", {"level": level})
    assert exc.value.code == INVALID_PARAMS


def test_set_level_params_reject_missing_level():
    with pytest.raises(InvalidParamsError) as exc:
        parse("logging/setLevel", {})
    assert exc.value.code == INVALID_PARAMS


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_level_enabled_without_threshold_passes_everything(level):
    assert level_enabled(level, None) is True


@pytest.mark.parametrize("threshold", LOG_LEVELS)
@pytest.mark.parametrize("level", LOG_LEVELS)
def test_level_enabled_passes_messages_at_or_above_the_threshold(level, threshold):
    assert level_enabled(level, threshold) is (
        LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)
    )


def test_level_enabled_examples():
    assert level_enabled("warning", "warning") is True
    assert level_enabled("error", "warning") is True
    assert level_enabled("info", "warning") is False
    assert level_enabled("emergency", "emergency") is True
    assert level_enabled("alert", "emergency") is False
