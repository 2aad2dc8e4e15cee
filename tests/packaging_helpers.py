"""The distribution as users get it, shared by tests/test_packaging.py and tests/test_tutorial.py:
the wheel and sdist ``python -m build`` makes (``built``), and the wheel installed in a fresh
virtual environment (``installed``).

Both fixtures are session-scoped and made available by tests/conftest.py, not imported by each
module: pytest makes a fixture imported into two modules two fixtures, and would build twice.
Standard library and pytest only: tests/conftest.py imports this module for every test run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "django-mcp-site"
BUILD_TIMEOUT = 300
PIP_TIMEOUT = 600  # a cold pip cache downloads Django, Twisted, cryptography...
COMMAND_TIMEOUT = 120


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path


@dataclass(frozen=True)
class Installed:
    python: Path
    wheel: Path
    env: dict[str, str]


def run(
    args: list[str | Path],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run a command; fail the test with its output when it fails or outlives ``timeout``."""
    try:
        result = subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{args} did not finish in {timeout}s:\n{exc.stdout}\n{exc.stderr}", pytrace=False
        )
    if result.returncode != 0:
        pytest.fail(
            f"{args} exited with {result.returncode}:\n{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    return result.stdout


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    # From a clean copy: setuptools reads a SOURCES.txt left in an old mcp_django.egg-info/ back
    # into the sdist, which would hide a package-data entry gone missing.
    source = tmp_path_factory.mktemp("source")
    for path in ROOT.iterdir():
        if path.is_file():
            shutil.copy2(path, source)
    shutil.copytree(
        ROOT / "mcp_django",
        source / "mcp_django",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    # Without --sdist/--wheel, build makes the sdist and then the wheel *from the sdist*: a file
    # the sdist lacks is missing from the wheel too.
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, source], timeout=BUILD_TIMEOUT)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Built(wheel=wheel, sdist=sdist)


@pytest.fixture(scope="session")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv (no system site-packages) holding the wheel and its dependencies only."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--clear", venv], timeout=COMMAND_TIMEOUT)
    python = venv / "bin" / "python"
    # Nothing of this checkout or of the test run may leak in: the package must come from the wheel.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE", "PYTHONHOME")
    }
    env.update(PYTHONUNBUFFERED="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    run([python, "-m", "pip", "install", "--quiet", built.wheel], timeout=PIP_TIMEOUT, env=env)
    return Installed(python=python, wheel=built.wheel, env=env)
