"""docs/tutorial.md, run as written. Every file and command comes from the Markdown (nothing of it
is copied here), so an edit that breaks the tutorial fails this test: the project is made with
the wheel installed in a fresh venv (the ``installed`` fixture, shared with test_packaging.py),
served by ``manage.py runserver``, and the tutorial's agent.py, run with the librarian's and the
reader's session cookies, must print exactly the lines the tutorial shows; then the WSGI step
serves the same project with gunicorn (installed from PyPI), and the agent must print them again.

Slow (the build and the venv, unless test_packaging.py made them first), hence the e2e marker.
"""

from __future__ import annotations

import ast
import contextlib
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests import asgi_servers
from tests.packaging_helpers import (
    COMMAND_TIMEOUT,
    DISTRIBUTION,
    PIP_TIMEOUT,
    ROOT,
    Installed,
    run,
)

pytestmark = pytest.mark.e2e

TUTORIAL = ROOT / "docs" / "tutorial.md"
#: The line of a partial file that stands for what ``startproject`` generated.
REST_OF_FILE = "# ... the rest as startproject wrote it ..."
#: Where the tutorial serves; the test serves on a free port instead.
TUTORIAL_ADDRESS = "127.0.0.1:8000"
STARTUP_TIMEOUT = 30.0
AGENT_TIMEOUT = 60

FENCE_RE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_NAME_RES = {"python": re.compile(r"# (\S+\.py)"), "html": re.compile(r"<!-- (\S+) -->")}
SIGN_IN_RE = re.compile(r"sign in as `([^`]+)`\s*/\s*`([^`]+)`")
CSRF_INPUT_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class File:
    path: str
    text: str


@dataclass
class Command:
    argv: list[str]
    output: list[str] = field(default_factory=list)


def parse(markdown: str) -> list[File | Command]:
    """The tutorial's steps, in order.

    A ```console block gives commands: a line starting with ``$ `` starts one, which goes on over
    the next lines until its quotes close; the lines after it are its output. A ```python block
    whose first line is ``# path`` and an ```html block whose first line is ``<!-- path -->``
    give the file at that path (that first line names it and is not written). Other blocks, and
    the indented JSON of section 7, are not steps.
    """
    steps: list[File | Command] = []
    for language, body in FENCE_RE.findall(markdown):
        first, _, rest = body.partition("\n")
        if language == "console":
            steps.extend(_commands(body))
        elif language in FILE_NAME_RES and (name := FILE_NAME_RES[language].fullmatch(first)):
            steps.append(File(name.group(1), rest))
    return steps


def _commands(console: str) -> list[Command]:
    commands: list[Command] = []
    pending: str | None = None
    for line in console.splitlines():
        if pending is None and not line.startswith("$ "):
            commands[-1].output.append(line)
            continue
        pending = line.removeprefix("$ ") if pending is None else f"{pending}\n{line}"
        try:
            argv = shlex.split(pending)
        except ValueError:  # no closing quotation yet: the command goes on on the next line
            continue
        commands.append(Command(argv))
        pending = None
    assert pending is None, f"a command whose quotes never close: {pending!r}"
    return commands


def write(project: Path, file: File, address: str) -> None:
    """Write a file of the tutorial into the project. A partial one (with ``REST_OF_FILE``) edits
    the generated file: what comes before the marker replaces the generated assignments of the
    same names, what comes after is appended. The tutorial's address becomes the test server's."""
    path = project / file.path
    text = file.text.replace(f"http://{TUTORIAL_ADDRESS}/", f"http://{address}/")
    if REST_OF_FILE in text.splitlines():
        before, after = text.split(f"{REST_OF_FILE}\n")
        text = replace_assignments(path.read_text(), before).rstrip("\n") + "\n" + after
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def replace_assignments(source: str, assignments: str) -> str:
    """``source`` with each top-level assignment of ``assignments`` in place of the one of the same name."""
    for new in ast.parse(assignments).body:
        assert isinstance(new, ast.Assign), ast.dump(new)
        (old,) = (
            node
            for node in ast.parse(source).body
            if isinstance(node, ast.Assign)
            and ast.dump(node.targets[0]) == ast.dump(new.targets[0])
        )
        lines = source.splitlines(keepends=True)
        lines[old.lineno - 1 : old.end_lineno] = [f"{ast.get_source_segment(assignments, new)}\n"]
        source = "".join(lines)
    return source


@contextlib.contextmanager
def runserver(installed: Installed, project: Path, address: str) -> Iterator[Path]:
    """``manage.py runserver`` at ``address``, without the autoreloader's second process, until it
    answers; yield its log. Stopped on the way out: terminate, a bounded wait, then kill."""
    with serving(
        [installed.python, "manage.py", "runserver", address, "--noreload"],
        installed,
        project / "runserver.log",
        address,
    ) as log_path:
        yield log_path


@contextlib.contextmanager
def serving(
    command: list[str | Path], installed: Installed, log_path: Path, address: str
) -> Iterator[Path]:
    """``command`` (a server) in the project until it answers at ``address``; yield its log.
    Stopped on the way out: terminate, a bounded wait, then kill."""
    project = log_path.parent
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=project,
            env=installed.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _answers(f"http://{address}/"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"{command[-1]} did not answer:\n{log_path.read_text(errors='replace')}",
                    pytrace=False,
                )
            time.sleep(0.2)  # bounded by the deadline
        yield log_path
    finally:
        asgi_servers.stop(process)


def serve_as_written(
    server: contextlib.ExitStack,
    installed: Installed,
    project: Path,
    address: str,
    written: list[str],
) -> None:
    """The document's ``python manage.py runserver`` step: start it (stopped with ``server``) and
    check that it printed the lines ``written`` shows, at the test's address, any version."""
    log = server.enter_context(runserver(installed, project, address))
    started = {without_version(line) for line in log.read_text().splitlines()}
    for line in written:
        assert without_version(line.replace(TUTORIAL_ADDRESS, address)) in started, log.read_text()


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.TransportError:
        return False
    return True


def sign_in(address: str, username: str, password: str) -> str:
    """Sign in through Django's login page as a browser does; return the ``sessionid`` cookie."""
    login = f"http://{address}/accounts/login/"
    with httpx.Client(timeout=10) as browser:
        form = browser.get(login)
        assert form.status_code == 200, form.text
        (token,) = CSRF_INPUT_RE.findall(form.text)
        signed_in = browser.post(
            login,
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Referer": login},
        )
        # Signed in, the view redirects; a refused sign-in shows the form again (200).
        assert signed_in.status_code == 302, signed_in.text
        return browser.cookies["sessionid"]


def without_version(line: str) -> str:
    return re.sub(r"version \S+", "version *", line)


def test_the_tutorial_runs_as_written(installed: Installed, tmp_path: Path) -> None:
    markdown = TUTORIAL.read_text(encoding="utf-8")
    address = f"127.0.0.1:{asgi_servers.free_port()}"
    users = dict(SIGN_IN_RE.findall(markdown))  # username: password, as the tutorial signs in
    # The agent's placeholder argument for each user's cookie: python agent.py LIBRARIAN_SESSIONID.
    sessions: dict[str, str] = {}
    agent_ran_for: list[tuple[str, str]] = []  # (the user's placeholder, the server)
    served_by: list[str] = []
    gunicorn_log: Path | None = None
    project = tmp_path
    bin_dir = installed.python.parent

    with contextlib.ExitStack() as server:
        for step in parse(markdown):
            if isinstance(step, File):
                write(project, step, address)
            elif step.argv[:3] == ["python", "-m", "venv"] or step.argv[0] in (".", "source"):
                continue  # the installed fixture's venv stands for the tutorial's .venv
            elif step.argv == ["pip", "install", "gunicorn"]:
                # The WSGI step's server: from PyPI, into the installed fixture's venv.
                run(
                    [installed.python, "-m", "pip", "install", "--quiet", "gunicorn"],
                    timeout=PIP_TIMEOUT,
                    env=installed.env,
                )
            elif step.argv[:2] == ["pip", "install"]:
                # Installed by the fixture, from this checkout's wheel rather than from PyPI.
                assert step.argv[2:] == [DISTRIBUTION]
            elif step.argv[0] == "gunicorn":
                # The WSGI step: runserver stops, gunicorn serves mysite/wsgi.py at its address.
                server.close()
                argv = [arg.replace(TUTORIAL_ADDRESS, address) for arg in step.argv[1:]]
                assert address in argv, step.argv
                gunicorn_log = server.enter_context(
                    serving(
                        [bin_dir / "gunicorn", *argv], installed, project / "gunicorn.log", address
                    )
                )
                served_by.append("gunicorn")
            elif step.argv[0] == "cd":
                project = project / step.argv[1]
            elif step.argv == ["python", "manage.py", "runserver"]:
                # The line that says which server runs (Daphne: ASGI); the version is pip's choice.
                serve_as_written(server, installed, project, address, step.output)
                served_by.append("runserver")
                sessions = {
                    f"{username.upper()}_SESSIONID": sign_in(address, username, password)
                    for username, password in users.items()
                }
            elif step.argv[:2] == ["python", "agent.py"]:
                *agent, placeholder = step.argv[1:]
                assert (
                    f"http://{address}/mcp" in (project / agent[0]).read_text()
                )  # the URL, moved to the test's port
                # The tutorial installs mcp beside django-mcp-site; the installed venv holds the wheel's
                # dependencies only, and mcp there would also bring opentelemetry-api, hiding a broken
                # [tracing] extra from test_packaging.py. So the agent runs with this test run's
                # interpreter (.venv, whose requirements.txt has mcp>=2.3): it only talks HTTP.
                output = run(
                    [sys.executable, *agent, sessions[placeholder]],
                    timeout=AGENT_TIMEOUT,
                    cwd=project,
                    env=installed.env,
                )
                assert output.splitlines() == step.output
                agent_ran_for.append((placeholder, served_by[-1]))
            else:
                command = [
                    bin_dir / step.argv[0],
                    *step.argv[1:],
                ]  # python, django-admin: the venv's
                output = run(command, timeout=COMMAND_TIMEOUT, cwd=project, env=installed.env)
                if step.output:
                    assert output.splitlines() == step.output

    assert users, "the tutorial signs nobody in"
    assert {user for user, server in agent_ran_for if server == "runserver"} == set(sessions), (
        "the agent did not run for each user signed in"
    )
    # The WSGI step: gunicorn served the same project, and the agent ran against it.
    assert served_by == ["runserver", "gunicorn"]
    assert gunicorn_log is not None and "Booting worker" in gunicorn_log.read_text(errors="replace")
    assert any(server == "gunicorn" for _, server in agent_ran_for)
