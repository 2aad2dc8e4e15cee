"""bench/servers.py's server kinds: the command line and environment each runs with, and
floor-gunicorn's view and settings; no server started."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from django.test import RequestFactory
from django.urls import resolve

from bench import floor_wsgi
from bench.run import kinds_for
from bench.servers import (
    FLOOR_GUNICORN,
    FLOORS,
    GUNICORN_SYNC,
    MODERN_KINDS,
    OPS_OFF_GUNICORN,
    OPS_OFF_TWINS,
    server_command,
    server_env,
)


def test_floor_gunicorn_and_the_opsoff_twin_run_as_ours_gunicorn_does() -> None:
    ours = server_command(GUNICORN_SYNC, 8000, "json")
    assert ours == [
        sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:8000", "--workers", "1",
        "--worker-class", "sync", "--backlog", "8192", "--log-level", "warning",
        "bench.oursite.wsgi:application",
    ]  # fmt: skip
    assert server_command(OPS_OFF_GUNICORN, 8000, "json") == ours
    assert server_command(FLOOR_GUNICORN, 8000, "json") == [
        *ours[:-1],
        "bench.oursite.floor_wsgi:application",
    ]
    assert FLOORS[GUNICORN_SYNC] == FLOOR_GUNICORN
    assert OPS_OFF_TWINS[GUNICORN_SYNC] == OPS_OFF_GUNICORN


def test_floor_gunicorn_gets_ours_s_environment_with_its_own_settings_module(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ours.sqlite3"

    def env(kind: str) -> dict[str, str]:
        return server_env(kind, "json", lambda: db)

    ours, opsoff, floor = env(GUNICORN_SYNC), env(OPS_OFF_GUNICORN), env(FLOOR_GUNICORN)
    assert (
        ours["DJANGO_SETTINGS_MODULE"]
        == opsoff["DJANGO_SETTINGS_MODULE"]
        == ("bench.oursite.settings")
    )
    assert floor["DJANGO_SETTINGS_MODULE"] == "bench.oursite.floor_settings"
    assert ours["BENCH_DB_PATH"] == floor["BENCH_DB_PATH"] == str(db)
    assert "BENCH_OPERATIONS" not in ours
    assert "BENCH_OPERATIONS" not in floor
    assert opsoff["BENCH_OPERATIONS"] == "off"


def test_the_gunicorn_twin_and_floor_run_in_the_modern_case_only() -> None:
    named = [GUNICORN_SYNC, OPS_OFF_GUNICORN, FLOOR_GUNICORN]
    assert kinds_for("modern", named, named=True) == named
    for case in ("tools", "setup", "notify", "memory"):
        assert kinds_for(case, named, named=True) == []
    assert {OPS_OFF_GUNICORN, FLOOR_GUNICORN} <= set(MODERN_KINDS)


def test_floor_gunicorn_settings_are_ours_but_for_the_urlconf() -> None:
    from bench.oursite import floor_settings, settings

    for name in ("INSTALLED_APPS", "MIDDLEWARE", "DEBUG", "DATABASES", "ALLOWED_HOSTS"):
        assert getattr(floor_settings, name) == getattr(settings, name), name
    assert "corsheaders.middleware.CorsMiddleware" in floor_settings.MIDDLEWARE
    assert floor_settings.ROOT_URLCONF == "bench.floor_wsgi"


@pytest.mark.parametrize("text", ["bench-1234", 'quote " and ünïcode'])
def test_the_floor_view_answers_the_echo_call_as_the_wrk_script_checks(text: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1000000007,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}, "_meta": {}},
    }
    assert resolve("/mcp", urlconf="bench.floor_wsgi").func is floor_wsgi.echo
    request = RequestFactory().post("/mcp", json.dumps(call), content_type="application/json")
    response = floor_wsgi.echo(request)

    assert (response.status_code, response["Content-Type"]) == (200, "application/json")
    assert json.loads(response.content) == {
        "jsonrpc": "2.0",
        "id": 1000000007,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }
    # tools_call.lua's check: a result, no error, not isError:true.
    assert b'"result"' in response.content
    assert b'"error"' not in response.content
