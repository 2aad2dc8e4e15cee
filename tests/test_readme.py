"""The README is the short version it says it is (issue 29): its links into docs/ resolve, and
its quick start, run as written, wires a fresh project that a client calls.

The quick start runs as tests/test_tutorial.py runs the tutorial: every file and command comes
from the Markdown (the same parser), the project is made with the wheel installed in a fresh venv
(the ``installed`` fixture) and served by ``manage.py runserver``, and the client must print
exactly the lines the README shows. That run is slow, hence the e2e marker on it alone.
"""

from __future__ import annotations

import contextlib
import re
import sys
import unicodedata
from pathlib import Path

import pytest

from tests import asgi_servers
from tests.packaging_helpers import COMMAND_TIMEOUT, DISTRIBUTION, ROOT, Installed, run
from tests.test_tutorial import Command, File, parse, serve_as_written, write

README = ROOT / "README.md"
QUICK_START_HEADING = "## Quick start: five minutes"
#: The README is the short version; the rest lives in docs/. A guard, not a target.
MAX_LINES = 300
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
HEADING_RE = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
CLIENT_TIMEOUT = 60


def _section(markdown: str, heading: str) -> str:
    start = markdown.index(f"\n{heading}\n")
    end = markdown.find("\n## ", start + len(heading) + 1)
    return markdown[start : end if end != -1 else None]


def _github_anchor(heading: str) -> str:
    """The id GitHub (and MyST's ``myst_heading_anchors``) gives a heading."""
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_the_readme_is_the_short_version() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, (
        f"README.md has {lines} lines: move the details into docs/ and link them"
    )


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = [
        link for link in LINK_RE.findall(README.read_text(encoding="utf-8")) if "://" not in link
    ]
    assert any(link.startswith("docs/") for link in links)  # the pattern still finds them
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        if not target.is_file():
            broken.append(link)
        elif anchor and target.suffix == ".md":
            anchors = {
                _github_anchor(h) for h in HEADING_RE.findall(target.read_text(encoding="utf-8"))
            }
            if anchor not in anchors:
                broken.append(link)
    assert broken == []


@pytest.mark.e2e
def test_the_quick_start_runs_as_written(installed: Installed, tmp_path: Path) -> None:
    steps = parse(_section(README.read_text(encoding="utf-8"), QUICK_START_HEADING))
    address = f"127.0.0.1:{asgi_servers.free_port()}"
    project = tmp_path
    bin_dir = installed.python.parent
    served = client_ran = False

    with contextlib.ExitStack() as server:
        for step in steps:
            if isinstance(step, File):
                write(project, step, address)
                continue
            assert isinstance(step, Command)
            if step.argv[:3] == ["python", "-m", "venv"] or step.argv[0] in (".", "source"):
                continue  # the installed fixture's venv stands for the README's .venv
            if step.argv[:2] == ["pip", "install"]:
                # django-mcp-site is the fixture's wheel; the client's SDK is this run's .venv's.
                assert step.argv[2:] in ([DISTRIBUTION], ["mcp>=2.3"]), step.argv
            elif step.argv[0] == "cd":
                project = project / step.argv[1]
            elif step.argv == ["python", "manage.py", "runserver"]:
                serve_as_written(server, installed, project, address, step.output)
                served = True
            elif step.argv[:2] == ["python", "client.py"]:
                assert served, "the client runs before the server"
                assert (
                    f"http://{address}/mcp" in (project / "client.py").read_text()
                )  # moved to the test's port
                # The SDK is not a dependency of the wheel: the client runs with this run's interpreter
                # (.venv, whose requirements.txt has mcp>=2.3); it only talks HTTP.
                output = run(
                    [sys.executable, "client.py"],
                    timeout=CLIENT_TIMEOUT,
                    cwd=project,
                    env=installed.env,
                )
                assert output.splitlines() == step.output
                client_ran = True
            else:
                output = run(
                    [bin_dir / step.argv[0], *step.argv[1:]],
                    timeout=COMMAND_TIMEOUT,
                    cwd=project,
                    env=installed.env,
                )
                if step.output:
                    assert output.splitlines() == step.output

    assert client_ran, "the quick start never connects a client"
