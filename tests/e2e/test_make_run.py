"""What ``make run`` prints matches the README and the authentication it runs with, and the
demo data loads without a traceback (announcements left waiting at exit are sent, not lost
to a shut-down executor). ``make run-wsgi`` serves the site with gunicorn and a task worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests import asgi_servers

from .conftest import ROOT, _wait_until_ready, manage, server_env

pytestmark = pytest.mark.e2e

README = (ROOT / "README.md").read_text()


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_load_demo_data_matches_the_readme_and_exits_cleanly(tmp_path: Path) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth="none")
    manage(env, "migrate", "--noinput")
    first = _run(env, "load_demo_data")
    assert first.returncode == 0 and first.stderr == "", first.stderr
    summary = first.stdout.splitlines()[0]
    assert summary in README  # "Demo data ready (created 13 authors, 30 books, 6 users, ...)."
    users = int(re.search(r"(\d+) users", summary).group(1))  # type: ignore[union-attr]
    described = re.search(r"The demo data has (.+?)\n\n", README, re.S).group(1)  # type: ignore[union-attr]
    named = set(re.findall(r"`(\w+)`", described))
    assert len(named) == users, (named, users)
    again = _run(env, "load_demo_data")
    assert (
        again.returncode == 0
        and again.stderr == ""
        and "created 0 authors, 0 books, 0 users" in again.stdout
    )


@pytest.mark.parametrize(
    ("auth", "present", "absent"),
    [
        ("oauth", "OAuth clients: users sign in as reader / reader", "No sign-in"),
        ("none", "No sign-in", "OAuth"),
        ("django", "/accounts/login/", "OAuth"),
    ],
)
def test_the_banner_follows_the_authentication(
    tmp_path: Path, auth: str, present: str, absent: str
) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth=auth)
    out = _run(env, "demo_banner", "--port", "8123")
    assert out.returncode == 0, out.stderr
    assert "http://127.0.0.1:8123/mcp" in out.stdout
    assert present in out.stdout and absent not in out.stdout


def test_the_banner_says_daphne_alone_is_for_local_use(tmp_path: Path) -> None:
    out = _run(server_env(tmp_path / "example.sqlite3", auth="none"), "demo_banner")
    assert out.returncode == 0, out.stderr
    assert "for local use only" in out.stdout
    assert "docs/howto/deploy.md" in out.stdout and "In front of the server" in out.stdout


@pytest.mark.parametrize(
    ("backend", "said"),
    [
        ("", "Durable tasks: run in the Daphne process"),
        ("database", "Durable tasks: run by `manage.py db_worker`"),
    ],
)
def test_the_banner_says_where_durable_tasks_run(tmp_path: Path, backend: str, said: str) -> None:
    env = {**server_env(tmp_path / "example.sqlite3", auth="none"), "MCP_TASKS_BACKEND": backend}
    out = _run(env, "demo_banner")
    assert out.returncode == 0, out.stderr
    assert said in out.stdout


def test_the_readme_shows_the_banner_make_run_prints(tmp_path: Path) -> None:
    # make run's defaults: OAuth, port 8000, tasks in the Daphne process.
    env = {**server_env(tmp_path / "example.sqlite3", auth="oauth"), "MCP_TASKS_BACKEND": ""}
    out = _run(env, "demo_banner", "--port", "8000")
    assert out.returncode == 0, out.stderr
    missing = [
        line for line in out.stdout.splitlines() if line.strip() and line not in README.splitlines()
    ]
    assert missing == []


@pytest.mark.parametrize("server", ["daphne", "gunicorn"])
def test_the_banner_names_the_server(tmp_path: Path, server: str) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth="none")
    out = _run(env, "demo_banner", "--server", server)
    assert out.returncode == 0, out.stderr
    assert ("(gunicorn, WSGI" in out.stdout) == (server == "gunicorn")
    assert ("This Daphne" in out.stdout) == (server == "daphne")


async def test_make_run_wsgi_serves_the_site_with_gunicorn_and_a_worker(tmp_path: Path) -> None:
    env = server_env(tmp_path / "example.sqlite3", auth="none")
    port = asgi_servers.free_port()
    log_path = tmp_path / "make.log"
    # -o: the venv of this test run is installed already; make must not run pip into it.
    command = ["make", "--no-print-directory", "-o", ".venv/.requirements.stamp", "run-wsgi"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*command, f"PORT={port}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base_url = _wait_until_ready(process, log_path, port)
        async with Client(f"{base_url}/mcp", read_timeout_seconds=10) as client:
            version = client.protocol_version
            result = await client.call_tool("search_books", {"query": "wells"})
        # make's recipe execs with_worker, which starts db_worker and gunicorn.
        served = [
            pid
            for child in asgi_servers.children(process.pid)
            for pid in asgi_servers.children(child)
        ]
        served += asgi_servers.children(process.pid)
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in served]
    finally:
        asgi_servers.stop(process)
    log_text = log_path.read_text(errors="replace")

    assert version == "2026-07-28"
    assert not result.is_error and result.structured_content
    assert f"MCP endpoint:  http://127.0.0.1:{port}/mcp   (gunicorn, WSGI" in log_text
    assert "Durable tasks: run by `manage.py db_worker`" in log_text
    assert "Using worker: gthread" in log_text
    if served:  # Linux (/proc)
        assert any(b"db_worker" in argv for argv in commands), commands
        assert any(any(part.endswith(b"gunicorn") for part in argv) for argv in commands)


def test_the_banner_names_the_external_issuer_in_jwt_mode(tmp_path: Path) -> None:
    env = {
        **server_env(tmp_path / "example.sqlite3", auth="jwt"),
        "MCP_JWT_ISSUER": "https://login.example.com/tenant",
    }

    out = _run(env, "demo_banner", "--port", "8123")

    assert out.returncode == 0, out.stderr
    assert "Resource server for https://login.example.com/tenant" in out.stdout
    assert "MCP_AUTH=jwt" in out.stdout and "reader / reader" not in out.stdout


def test_jwt_mode_without_an_issuer_refuses_to_start(tmp_path: Path) -> None:
    out = _run(server_env(tmp_path / "example.sqlite3", auth="jwt"), "demo_banner")

    assert out.returncode != 0
    assert "MCP_AUTH=jwt needs MCP_JWT_ISSUER" in out.stderr
