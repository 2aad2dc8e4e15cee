"""Fixtures for driving the endpoint in-process."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from mcp_django.testing import MCPTestClient
from tests.conftest import BASE_SETTINGS


def mcp_settings(**overrides: Any) -> override_settings:
    """Override some MCP_DJANGO keys, keeping the rest of the test project's settings."""
    return override_settings(MCP_DJANGO={**BASE_SETTINGS, **overrides})


@pytest.fixture(autouse=True)
async def _flush_layer(fresh_channel_layer: None) -> None:
    """Every transport test starts with an empty in-memory layer (see tests/conftest.py)."""


@pytest.fixture
async def client() -> MCPTestClient:
    """A client with an initialized 2025-11-25 session."""
    client = MCPTestClient()
    await client.initialize()
    return client
