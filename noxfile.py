"""The support matrix (issue 15): Django 5.2 on Python 3.10 to 3.13, Django 6 on 3.12 and 3.13.

``make test`` runs the whole suite on the default cell (.venv: python3, 3.11 on our machines, and
the newest Django 5.2). Each other cell runs the in-process suite and one end-to-end test, the
example site under daphne driven by the official client, with a fifth of the property tests'
examples (tests/fuzzing.py). CI runs every cell, beside the whole suite (.ci/run):

    make matrix                                               # every cell, one after the other
    .venv/bin/nox -l                                          # the cells' names
    .venv/bin/nox -s "tests(python='3.12', django='6.0')"     # one cell
    .venv/bin/nox -s "tests(python='3.12', django='6.0')" -- tests/test_sites.py -x   # chosen tests

Interpreters are looked up on PATH, then in pyenv's versions directory. A missing one fails the
run under CI (``CI=true``) and is skipped elsewhere, with nox naming it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import nox

# (Python, Django series). Django 6 needs Python 3.12 or newer. Each series requirements.txt
# allows (Django>=5.2,<6.2) runs at least once: 6.0 and 6.1 take one 6.x cell each.
CELLS = [("3.10", "5.2"), ("3.12", "5.2"), ("3.13", "5.2"), ("3.12", "6.0"), ("3.13", "6.1")]
# The tests that start servers, browsers or other processes: the default cell runs them.
OUT_OF_PROCESS = ("e2e", "conformance", "multiprocess", "browser")
# Checks of the source and the docs (ruff, import-linter, mypy, the typed README module,
# sphinx-build): the interpreter running them changes nothing, and import-linter needs 3.11.
STATIC = ("tests/test_architecture.py", "tests/test_docs.py", "tests/test_typing.py")
# One short end-to-end test: the example site under daphne, a tool called in both protocol eras
# by the official client, and the server's log free of errors.
E2E = (
    "tests/e2e/test_example_site.py",
    "-k",
    "search_books_returns or (logged_no_errors and not django_auth)",
)

nox.options.default_venv_backend = "uv"
nox.options.download_python = "never"  # the cells run on the machine's own interpreters
nox.options.error_on_missing_interpreters = os.environ.get("CI") == "true"
nox.options.reuse_venv = "yes"  # uv brings a kept venv up to requirements.txt in a second


def _runs(candidate: str) -> str | None:
    """The interpreter's real path if it starts (pyenv's shim of a version not selected does not)."""
    try:
        result = subprocess.run(
            [candidate, "-c", "import sys; print(sys.executable)"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (result.stdout.strip() or None) if result.returncode == 0 else None


def _pyenv_root() -> Path:
    if root := os.environ.get("PYENV_ROOT"):
        return Path(root)
    if pyenv := shutil.which("pyenv"):
        result = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30)
        if result.returncode == 0 and result.stdout.strip():
            return Path(result.stdout.strip())
    return Path.home() / ".pyenv"


def _release(path: str) -> tuple[int, ...]:
    """(3, 12, 1) for .../versions/3.12.1/bin/python3.12; () for a name that is not a release."""
    name = Path(path).parents[1].name
    return (
        tuple(int(part) for part in name.split("."))
        if all(part.isdigit() for part in name.split("."))
        else ()
    )


def find_interpreter(version: str) -> str:
    """The path of a working ``python<version>``: PATH first, then pyenv's versions (newest
    patch release first). Else ``version`` itself, which nox reports as missing."""
    name = f"python{version}"
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK) and (found := _runs(candidate)):
            return found
    for candidate in sorted(
        glob.glob(str(_pyenv_root() / "versions" / f"{version}.*" / "bin" / name)),
        key=_release,
        reverse=True,
    ):
        if found := _runs(candidate):
            return found
    return version


INTERPRETERS = {
    version: find_interpreter(version) for version in sorted({python for python, _ in CELLS})
}


@nox.session
@nox.parametrize(
    ("python", "django"),
    [(INTERPRETERS[python], django) for python, django in CELLS],
    ids=[f"python='{python}', django='{django}'" for python, django in CELLS],
)
def tests(session: nox.Session, django: str) -> None:
    """The in-process suite and one end-to-end test on one cell."""
    session.install("-r", "requirements.txt", "pytest-xdist>=3.8", f"Django=={django}.*")
    session.run(
        "python",
        "-c",
        "import django, sys; print(f'Python {sys.version.split()[0]}, Django {django.__version__}')",
    )
    # A fifth of the property tests' examples (tests/fuzzing.py): the default cell tries them all.
    env = {"MCP_TEST_SERVERS": "daphne", "MCP_TEST_EXAMPLES": "matrix"}
    pytest = ("python", "-m", "pytest", "-p", "no:cacheprovider", "-q")
    # .ci/run keeps the written order here (MCP_MATRIX_WRITTEN_ORDER, see there); elsewhere each
    # run is shuffled by pytest-randomly.
    if os.environ.get("MCP_MATRIX_WRITTEN_ORDER"):
        pytest = (*pytest, "-p", "no:randomly")
    if session.posargs:
        session.run(*pytest, *session.posargs, env=env)
        return
    # Two workers (xdist) by default: the suite is CPU-bound, and our machines have two cores.
    # MCP_MATRIX_WORKERS=1 runs it in one process: .ci/run does, as the whole suite has the other
    # core. xdist's default distribution keeps each worker's tests in file order; "--dist
    # worksteal" is faster by a minute but once left a worker's database in a transaction for the
    # tests after it.
    in_process = " and ".join(f"not {marker}" for marker in OUT_OF_PROCESS)
    workers = int(os.environ.get("MCP_MATRIX_WORKERS", "2"))
    xdist = ("-n", str(workers)) if workers > 1 else ()
    session.run(
        *pytest, *xdist, "-m", in_process, *(f"--ignore={path}" for path in STATIC), env=env
    )
    session.run(*pytest, *E2E, env=env)
