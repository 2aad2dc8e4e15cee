"""The official TypeScript SDK's task client (the 2025-11-25 form VS Code uses) runs the example
site's long tools as tasks: created, polled, its question answered on ``tasks/result``, its
result returned; another cancelled; the session's tasks listed.

The SDK comes with the conformance suite's install (``.conformance/alpha/``, the same Node 22);
without npm the test is skipped, except on CI where it must run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conformance import run_conformance

from .conftest import ExampleServer

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).with_name("ts_tasks_client.mjs")
RELATED = "io.modelcontextprotocol/related-task"


@pytest.fixture(scope="module")
def sdk() -> tuple[Path, Path]:
    """Node and the TypeScript SDK the alpha conformance suite depends on, installed if needed."""
    suite = run_conformance.ALPHA
    if shutil.which("npm") is None and not suite.entry.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("npm is not installed: CI must provide it")
        pytest.skip("npm is not installed: cannot install the TypeScript SDK")
    run_conformance.ensure_installed(suite)
    sdk_dir = suite.install_dir / "node_modules" / "@modelcontextprotocol" / "sdk"
    assert (sdk_dir / "dist" / "esm" / "experimental" / "tasks" / "client.js").exists()
    return suite.node, sdk_dir


def test_the_typescript_sdks_task_client_runs_the_export_as_a_task(
    example_server: ExampleServer, sdk: tuple[Path, Path]
) -> None:
    node, sdk_dir = sdk
    done = subprocess.run(
        [str(node), str(SCRIPT), str(sdk_dir), example_server.mcp_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    assert seen["taskSupport"]["export_catalogue"] == "optional"
    assert seen["taskSupport"]["slow_compute"] == "optional"

    kinds = [m["type"] for m in seen["messages"]]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result", seen["messages"]
    statuses = [m["status"] for m in seen["messages"] if m["type"] == "taskStatus"]
    assert "input_required" in statuses, statuses
    result = seen["messages"][-1]["result"]
    task_id = seen["messages"][0]["taskId"]
    assert not result.get("isError") and result["structuredContent"]["format"] == "csv"
    assert result["_meta"][RELATED] == {"taskId": task_id}
    ((question,),) = [seen["asked"]]
    # The catalogue's size depends on what other tests of the shared server added before.
    assert re.fullmatch(r"Export \d+ books: in which format\?", question["message"]), question
    assert question["meta"][RELATED] == {"taskId": task_id}

    cancelled = seen["cancelled"]
    assert cancelled["status"] == "cancelled"
    listed = dict(seen["listed"])
    assert listed[task_id] == "completed" and listed[cancelled["taskId"]] == "cancelled"
