"""A tool author's module keeps its types: the ``myapp/mcp.py`` of docs/howto/tools.md (tests/typecheck/)
passes ``mypy --strict`` with django-stubs, and each mistake in ``mistakes.py`` is reported, so
the public API is typed rather than ``Any`` (issue 29).

mypy runs as an author runs it over their app (tests/typecheck/mypy.ini): mcp_django is read
as an installed package, whose own errors ``tests/test_architecture.py`` reports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "typecheck"
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")
EXPECTED = re.compile(r"# error: (?P<codes>[a-z-]+(?:, [a-z-]+)*)$")


def _mypy(*files: Path) -> subprocess.CompletedProcess[str]:
    # No cache, so that a stale one can never hide an error (as in test_architecture).
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "mypy"),
            "--config-file",
            str(PACKAGE / "mypy.ini"),
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--show-error-codes",
            "--no-pretty",
            *(str(f.relative_to(ROOT)) for f in files),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _errors(output: str) -> set[tuple[int, str]]:
    return {(int(m["line"]), m["code"]) for line in output.splitlines() if (m := ERROR.match(line))}


def test_the_readme_module_type_checks_strictly() -> None:
    result = _mypy(PACKAGE / "readme_module.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 1 source file" in result.stdout


def test_each_mistake_is_reported_and_nothing_else() -> None:
    path = PACKAGE / "mistakes.py"
    expected = {
        (number, code)
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if (m := EXPECTED.search(text))
        for code in m["codes"].split(", ")
    }
    assert len(expected) >= 15
    result = _mypy(path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert _errors(result.stdout) == expected, result.stdout
