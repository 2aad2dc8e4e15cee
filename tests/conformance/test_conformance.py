"""The example site passes the official MCP conformance suite (see run_conformance.py), under
each ASGI server of MCP_TEST_SERVERS (tests/asgi_servers.py), and its 2026-07-28 requirement set
under gunicorn (WSGI), where only what needs a held stream may fail. Its own authorization server
(MCP_AUTH=oauth) passes the suite's authorization-server scenarios under daphne and gunicorn."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import asgi_servers

pytestmark = pytest.mark.conformance

RUNNER = Path(__file__).with_name("run_conformance.py")
REPO = RUNNER.parents[2]
SUITE_PACKAGE_JSON = (
    REPO
    / ".conformance"
    / "node_modules"
    / "@modelcontextprotocol"
    / "conformance"
    / "package.json"
)

# Above the runner's own limits for a normal run (install once, then two short suite runs);
# only reached if the runner itself hangs.
RUNNER_TIMEOUT = 1200


VARIANTS = {
    "0.1.16-all": [],  # 0.1.16, --suite all, both answer modes
    "alpha-2026-07-28": [
        "--requirements",
        "2026-07-28",
    ],  # 0.2.0-alpha.12: the stateless revision, and its pending header/schema scenarios
    "alpha-2025-11-25": [
        "--requirements",
        "2025-11-25",
    ],  # 0.2.0-alpha.12: the handshake era, frozen at its release
}


# Under gunicorn (wsgi.py: the endpoint's plain view), once whatever the ASGI servers: the
# 2026-07-28 requirement set, in which only the checks that need a held stream may fail
# (run_conformance.WSGI_EXPECTED_FAILURES). One answer mode: the plain view answers JSON.
WSGI_VARIANTS = {
    "alpha-2026-07-28": ["--requirements", "2026-07-28", "--response-mode", "json"],
}


# The authorization server (`conformance authorization`: RFC 8414 metadata, the authorization-code
# grant): Django views whatever serves them, so once under daphne (make run) and once under
# gunicorn (make run-wsgi), not under every ASGI server.
AUTHORIZATION_SERVERS = ("daphne", "gunicorn")


@pytest.mark.parametrize(
    ("server", "arguments"),
    [
        pytest.param(server, arguments, id=f"{variant}-{server}")
        for server in asgi_servers.servers_under_test()
        for variant, arguments in VARIANTS.items()
    ]
    + [
        pytest.param("gunicorn", arguments, id=f"{variant}-gunicorn")
        for variant, arguments in WSGI_VARIANTS.items()
    ]
    + [
        pytest.param(server, ["--authorization"], id=f"alpha-authorization-{server}")
        for server in AUTHORIZATION_SERVERS
    ],
)
def test_example_site_passes_the_official_conformance_suite(
    capsys: pytest.CaptureFixture[str], server: str, arguments: list[str]
) -> None:
    # npm is needed only to install the suite the first time.
    if shutil.which("npm") is None and not SUITE_PACKAGE_JSON.exists():
        message = "npm is not installed: cannot install the MCP conformance suite (@modelcontextprotocol/conformance)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must provide it")
        pytest.skip(message)
    env = {
        k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"
    }  # the runner picks its own
    # Own session: on timeout the runner gets SIGTERM first, so it stops the server it started.
    process = subprocess.Popen(
        [sys.executable, str(RUNNER), "--server", server, *arguments],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=RUNNER_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        pytest.fail(f"the conformance runner did not finish in {RUNNER_TIMEOUT} s:\n{output}")
    # Shown even on success, so the CI log always carries the per-scenario table.
    with capsys.disabled():
        print("\n" + output)
    assert process.returncode == 0, (
        f"run_conformance.py exited with {process.returncode} (see the table above)"
    )
    if "--authorization" in arguments:
        # The grant went through the site's real sign-in and consent page, not around them.
        assert "signed in as reader (1 login), allowed on the consent page" in output
        for name in ("authorization-server-metadata-endpoint", "authorization-code-grant"):
            assert f"\n{name} " in output, f"{name} did not run"
    elif arguments:  # the alpha runs the skills extension's scenarios after each requirement set
        for name in (
            "sep-2640-skills-enumeration",
            "sep-2640-skills-manifest",
            "sep-2640-skills-directory",
        ):
            assert f"\n{name} " in output, f"{name} did not run"
