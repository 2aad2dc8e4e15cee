"""The distribution as users get it (issue 15): ``python -m build`` makes a wheel and an sdist
that hold every file of mcp_django/ (templates, static files, migrations, py.typed), and the wheel,
installed in a fresh virtual environment, serves a minimal project: ``manage.py check``,
``migrate``, then one MCP call over daphne with the official client. A file missing from the
package data fails here, not on a user's machine.

Slow (a build, a venv, a pip install that reuses pip's cache), hence the e2e marker. The build
and the venv are made once per session (tests/packaging_helpers.py) and shared with
tests/test_tutorial.py; the extras test installs on top of the venv, after the bare install's test.
"""

from __future__ import annotations

import email
import io
import re
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from mcp import Client

import mcp_django
from tests import asgi_servers
from tests.packaging_helpers import (
    COMMAND_TIMEOUT,
    DISTRIBUTION,
    PIP_TIMEOUT,
    ROOT,
    Built,
    Installed,
    run,
)

pytestmark = pytest.mark.e2e

MIGRATIONS = (
    "0001_initial.py",
    "0002_elicitations_secrets_state.py",
    "0003_running_requests.py",
    "0004_session_transport.py",
    "0005_toolcall.py",
)
STARTUP_TIMEOUT = 30.0
LISTENING_RE = re.compile(r"Listening on TCP address 127\.0\.0\.1:(\d+)")

# The project a user would write from docs/howto/add-to-project.md (the README's quick start is
# run as written by tests/test_readme.py).
PROJECT_FILES = {
    "manage.py": """
        import os
        import sys

        if __name__ == "__main__":
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smoke.settings")
            from django.core.management import execute_from_command_line

            execute_from_command_line(sys.argv)
    """,
    "smoke/__init__.py": "",
    "smoke/settings.py": """
        from pathlib import Path

        BASE_DIR = Path(__file__).resolve().parent.parent
        SECRET_KEY = "packaging-smoke-not-secret"
        DEBUG = False
        ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
        INSTALLED_APPS = [
            "daphne",
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "channels",
            "mcp_django",
            "smoke",
        ]
        MIDDLEWARE = [
            "django.middleware.security.SecurityMiddleware",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ]
        ROOT_URLCONF = "smoke.urls"
        TEMPLATES = [{
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]},
        }]
        DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
        DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
        USE_TZ = True
        ASGI_APPLICATION = "smoke.asgi.application"
        CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
        MCP_DJANGO = {"SERVER_NAME": "packaging-smoke", "AUTHENTICATION": "none"}
        # No authentication with DEBUG off is the point of this throwaway project.
        SILENCED_SYSTEM_CHECKS = ["mcp_django.W002"]
    """,
    "smoke/urls.py": """
        from django.contrib import admin
        from django.urls import include, path

        urlpatterns = [path("admin/", admin.site.urls), path("mcp/", include("mcp_django.urls"))]
    """,
    "smoke/asgi.py": """
        import os

        from django.core.asgi import get_asgi_application

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smoke.settings")
        django_asgi_app = get_asgi_application()

        from mcp_django.routing import MCPRouter  # after Django is set up

        application = MCPRouter(django_asgi_app)
    """,
    "smoke/mcp.py": """
        from mcp_django import site


        @site.tool(title="Add", annotations={"readOnlyHint": True})
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b
    """,
}


def package_files() -> set[str]:
    """Every file of mcp_django/ in the source tree, as a path relative to the root; bytecode aside."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "mcp_django").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in PROJECT_FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return tmp_path


@contextmanager
def serve(installed: Installed, project: Path) -> Iterator[str]:
    """Serve the project with the venv's daphne on a port the system picks; yield the MCP URL."""
    log_path = project / "daphne.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                installed.python,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                "0",
                "smoke.asgi:application",
            ],
            cwd=project,
            env={**installed.env, "DJANGO_SETTINGS_MODULE": "smoke.settings"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while (found := LISTENING_RE.search(log_path.read_text(errors="replace"))) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"daphne did not start:\n{log_path.read_text(errors='replace')}", pytrace=False
                )
            time.sleep(0.05)  # bounded by the deadline
        yield f"http://127.0.0.1:{found.group(1)}/mcp"
    finally:
        asgi_servers.stop(process)


def test_wheel_and_sdist_hold_every_file_of_the_package(built: Built) -> None:
    dist_info = f"django_mcp_site-{mcp_django.__version__}.dist-info"
    with zipfile.ZipFile(built.wheel) as wheel:
        in_wheel = set(wheel.namelist())
        metadata = email.message_from_bytes(wheel.read(f"{dist_info}/METADATA"))
        wheel_license = wheel.read(f"{dist_info}/licenses/LICENSE")
    with tarfile.open(built.sdist) as sdist:
        prefix = f"django_mcp_site-{mcp_django.__version__}/"
        in_sdist = {name.removeprefix(prefix) for name in sdist.getnames()}
        sdist_license = sdist.extractfile(f"{prefix}LICENSE").read()  # type: ignore[union-attr]

    expected = package_files()
    # The list, spelled out so the test says what it guards even if the tree changes.
    named = {"mcp_django/py.typed", *(f"mcp_django/migrations/{m}" for m in MIGRATIONS)}
    templates = {
        f
        for f in expected
        if f.startswith("mcp_django/templates/mcp_django/") and f.endswith(".html")
    }
    assert templates, "no templates found in the source tree"
    assert named <= expected
    for name, archive in (("wheel", in_wheel), ("sdist", in_sdist)):
        assert not expected - archive, f"missing from the {name}: {sorted(expected - archive)}"

    # The license travels with both (PEP 639: the expression and the file in the metadata).
    assert wheel_license == sdist_license == (ROOT / "LICENSE").read_bytes()
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata.get_all("License-File") == ["LICENSE"]

    assert metadata["Name"] == DISTRIBUTION
    assert (
        metadata["Version"] == mcp_django.__version__
    )  # pyproject.toml reads it from mcp_django/version.py
    assert metadata["Requires-Python"] == ">=3.10"
    assert set(metadata.get_all("Provides-Extra")) == {"redis", "oauth", "jwt", "tracing", "tasks"}
    classifiers = set(metadata.get_all("Classifier"))
    assert {
        "Framework :: Django :: 5.2",
        "Framework :: Django :: 6.0",
        "Framework :: Django :: 6.1",
    } <= classifiers
    assert {
        f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 14)
    } <= classifiers


async def test_installed_wheel_serves_a_minimal_project(
    installed: Installed, project: Path
) -> None:
    where = run(
        [installed.python, "-c", "import mcp_django; print(mcp_django.__file__)"],
        timeout=COMMAND_TIMEOUT,
        cwd=project,
        env=installed.env,
    )
    assert Path(where.strip()).is_relative_to(installed.python.parent.parent), (
        where
    )  # the wheel's copy, not this checkout
    run([installed.python, "-m", "pip", "check"], timeout=COMMAND_TIMEOUT, env=installed.env)

    manage = [installed.python, "manage.py"]
    check = run(
        [*manage, "check", "--fail-level", "WARNING"],
        timeout=COMMAND_TIMEOUT,
        cwd=project,
        env=installed.env,
    )
    assert "System check identified no issues" in check
    migrated = run(
        [*manage, "migrate", "--noinput"], timeout=COMMAND_TIMEOUT, cwd=project, env=installed.env
    )
    assert "Applying mcp_django.0005_toolcall... OK" in migrated
    # The templates must be in the wheel: render one through the installed app's loader.
    rendered = run(
        [
            *manage,
            "shell",
            "-v0",
            "-c",
            "from django.template.loader import get_template; print(get_template('mcp_django/elicitation/base.html').origin.name)",
        ],
        timeout=COMMAND_TIMEOUT,
        cwd=project,
        env=installed.env,
    )
    assert Path(rendered.strip()).is_relative_to(installed.python.parent.parent), rendered

    with serve(installed, project) as url:
        async with httpx.AsyncClient(
            timeout=10
        ) as http:  # the server is up: ping answers without a session
            ping = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        assert ping.status_code == 200, ping.text
        async with Client(url, read_timeout_seconds=10) as client:
            assert client.server_info is not None and client.server_info.name == "packaging-smoke"
            result = await client.call_tool("add", {"a": 2, "b": 40})
    assert not result.is_error
    assert result.structured_content == {"result": 42}


def test_extras_install_what_they_say(installed: Installed, project: Path) -> None:
    run(
        [
            installed.python,
            "-m",
            "pip",
            "install",
            "--quiet",
            f"{installed.wheel}[redis,oauth,tracing,tasks,jwt]",
        ],
        timeout=PIP_TIMEOUT,
        env=installed.env,
    )
    run([installed.python, "-m", "pip", "check"], timeout=COMMAND_TIMEOUT, env=installed.env)
    # One module each extra is for: the channel layer, the OAuth provider, the tracing API, the
    # task framework's database backend (and the backport on Django 5.2), PyJWT with the
    # asymmetric algorithms an identity provider's tokens are signed with.
    imports = (
        "import channels_redis.core, oauth2_provider, opentelemetry.trace, opentelemetry.metrics,"
        " django_tasks_db, jwt.algorithms; assert jwt.algorithms.has_crypto"
    )
    run([installed.python, "-c", imports], timeout=COMMAND_TIMEOUT, env=installed.env)
    settings = project / "smoke" / "settings.py"
    # With the extras in, OAuth, tracing and a worker for durable tasks still pass the system checks.
    settings.write_text(
        settings.read_text().replace('"smoke",\n]', '"oauth2_provider",\n    "smoke",\n]')
        + 'MCP_DJANGO = {**MCP_DJANGO, "TRACING": True, "TASKS_BACKEND": "default"}\n'
        + "import django\n"
        + 'INSTALLED_APPS += ([] if django.VERSION >= (6, 0) else ["django_tasks"]) + ["django_tasks_db"]\n'
        + 'TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}\n'
    )
    check = run(
        [installed.python, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=project,
        timeout=COMMAND_TIMEOUT,
        env=installed.env,
    )
    assert "System check identified no issues" in check


def _checkout_copy(where: Path) -> Path:
    """A git repository holding this checkout's last commit, as a user's checkout would: one
    commit, not shallow (pip's partial clone of a shallow repository fetches blob by blob)."""
    copy = where / "checkout"
    copy.mkdir()
    archive = subprocess.run(
        ["git", "archive", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=COMMAND_TIMEOUT,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(copy, filter="data")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        run([*git, *command], timeout=COMMAND_TIMEOUT, cwd=copy)
    return copy


def _left_in(copy: Path) -> list[str]:
    """What a build left in the checkout: build/ and *.egg-info (ignored by git, so asked as such)."""
    ignored = run(["git", "status", "--short", "--ignored"], timeout=COMMAND_TIMEOUT, cwd=copy)
    return sorted(line[3:].rstrip("/") for line in ignored.splitlines() if line.startswith("!! "))


def test_installing_from_a_checkout_as_documented_writes_nothing_into_it(tmp_path: Path) -> None:
    # docs/howto/add-to-project.md, "From a checkout or a wheel". --no-deps --target: only the
    # build and the install are under test (the dependencies come from the index either way).
    doc = (ROOT / "docs" / "howto" / "add-to-project.md").read_text()
    assert (
        'pip install "git+file:///path/to/checkout"' in doc
        and "pip install /path/to/checkout" in doc
    )
    copy = _checkout_copy(tmp_path)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    run([*pip, "--target", tmp_path / "from-git", f"git+file://{copy}"], timeout=PIP_TIMEOUT)
    assert (tmp_path / "from-git" / "mcp_django" / "migrations").is_dir()
    assert _left_in(copy) == []
    # What the doc warns of for the plain path form, which builds in the tree: the check above sees it.
    run([*pip, "--target", tmp_path / "from-path", copy], timeout=PIP_TIMEOUT)
    assert _left_in(copy) == ["build", "django_mcp_site.egg-info"]
