"""The official MCP Inspector's CLI against the example site: over stdio (it spawns
``manage.py mcp_stdio``) and over the 2024-11-05 HTTP+SSE transport, one call each.

The Inspector (npm, pinned) and a Node 22 binary are installed into ``.inspector/`` at the
repository root on first use; without npm the test is skipped, except under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ExampleDatabase, ExampleServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = ROOT / ".inspector"
PACKAGE = "@modelcontextprotocol/inspector@2.12.0"
NODE = INSTALL_DIR / "node_modules" / ".bin" / "node"
LAUNCHER = (
    INSTALL_DIR
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    if not LAUNCHER.exists():
        if shutil.which("npm") is None:
            message = "npm is not installed: cannot install the MCP Inspector"
            if os.environ.get("CI") == "true":
                pytest.fail(message + "; CI must provide it")
            pytest.skip(message)
        done = subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(INSTALL_DIR),
                "--no-audit",
                "--no-fund",
                PACKAGE,
                "node@22",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0 and LAUNCHER.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    return [str(NODE), str(LAUNCHER), "--cli"]


def run(command: list[str], tmp_path: Path) -> dict:
    # HOME in tmp_path: whatever the Inspector keeps (its catalog) stays out of the user's home.
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_inspector_cli_calls_a_tool_over_stdio(
    inspector: list[str], example_database: ExampleDatabase, tmp_path: Path
) -> None:
    env = [
        f"{key}={example_database.env[key]}"
        for key in ("DJANGO_SETTINGS_MODULE", "SQLITE_PATH")
        if key in example_database.env
    ]
    flags = [arg for pair in (["-e", e] for e in [*env, "MCP_AUTH=none"]) for arg in pair]
    result = run(
        [
            *inspector,
            *flags,
            "--cwd",
            str(ROOT),
            "--method",
            "tools/call",
            "--tool-name",
            "search_books",
            "--tool-arg",
            "query=wells",
            "--",
            sys.executable,
            "manage.py",
            "mcp_stdio",
        ],
        tmp_path,
    )
    assert result["structuredContent"]["books"], result


def test_the_inspector_cli_lists_tools_over_http_sse(
    inspector: list[str], example_server: ExampleServer, tmp_path: Path
) -> None:
    result = run(
        [
            *inspector,
            f"{example_server.mcp_url}/sse",
            "--transport",
            "sse",
            "--method",
            "tools/list",
        ],
        tmp_path,
    )
    assert "search_books" in {tool["name"] for tool in result["tools"]}, result
