"""Fixtures for driving the endpoint in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.test import override_settings

from mcp_django.testing import MCPTestClient

#: The test project's MCP_DJANGO; overrides build on it so authentication stays off.
BASE_SETTINGS: dict[str, Any] = {"AUTHENTICATION": "none", "SERVER_NAME": "mcp-django-tests"}


def mcp_settings(**overrides: Any) -> override_settings:
    """Override some MCP_DJANGO keys, keeping the rest of the test project's settings."""
    return override_settings(MCP_DJANGO={**BASE_SETTINGS, **overrides})


@pytest.fixture(autouse=True)
async def fresh_channel_layer() -> AsyncIterator[None]:
    # The in-memory layer outlives each test's event loop; queues and group memberships left
    # behind by one test must not reach the next.
    layer = get_channel_layer()
    await layer.flush()
    yield
    await layer.flush()


@pytest.fixture
async def client() -> MCPTestClient:
    """A client with an initialized 2025-11-25 session."""
    client = MCPTestClient()
    await client.initialize()
    return client
