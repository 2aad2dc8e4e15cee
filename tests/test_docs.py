"""The documentation site (docs/, ``make docs``): it builds with warnings as errors, and its
reference pages name every setting, every system check id and every management command that
the code has, and nothing the code does not have.

The build is real (``sphinx-build`` in a subprocess, autodoc importing mcp_django), so a
docstring that breaks reST, a broken cross-reference or a missing screenshot fails here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import find_commands

import mcp_django
from mcp_django.conf import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = Path(mcp_django.__file__).resolve().parent

#: A check id as the code writes it, and as the reference's tables list it (first column).
CHECK_ID_RE = re.compile(r"mcp_django\.[EIW]\d{3}")
TABLE_KEY_RE = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def _table_keys(page: str) -> list[str]:
    """The first-column names of every table row of a reference page, in order."""
    return TABLE_KEY_RE.findall((DOCS / "reference" / page).read_text(encoding="utf-8"))


def _check_ids_in_code() -> set[str]:
    return {
        match
        for path in PACKAGE.rglob("*.py")
        for match in CHECK_ID_RE.findall(path.read_text(encoding="utf-8"))
    }


def test_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    if (
        importlib.util.find_spec("sphinx") is None
        or importlib.util.find_spec("myst_parser") is None
    ):
        message = "Sphinx and myst-parser are missing: .venv/bin/python -m pip install -r requirements.txt"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-q",
        "-b",
        "html",
        "-d",
        str(tmp_path / "doctrees"),
        str(DOCS),
        str(tmp_path / "html"),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"sphinx-build exited {result.returncode}:\n{result.stderr}\n{result.stdout}"
    )
    # autodoc really imported the package: the registry's class has its entry.
    assert 'id="mcp_django.registry.sites.MCPSite"' in (
        tmp_path / "html" / "reference" / "api.html"
    ).read_text(encoding="utf-8")


def test_settings_reference_lists_every_setting_and_quota() -> None:
    documented = _table_keys("settings.md")
    quota_keys = set(DEFAULTS["QUOTAS"])
    assert sorted(set(DEFAULTS) - set(documented)) == []
    assert sorted(quota_keys - set(documented)) == []
    assert sorted(set(documented) - set(DEFAULTS) - quota_keys) == []


def test_checks_reference_lists_every_check_id_in_the_code() -> None:
    documented = set(_table_keys("checks.md"))
    in_code = _check_ids_in_code()
    assert len(in_code) > 40  # the pattern still finds the ids where the code writes them
    assert sorted(in_code - documented) == []
    assert sorted(documented - in_code) == []


def test_commands_reference_has_a_section_for_every_management_command() -> None:
    commands = find_commands(str(PACKAGE / "management"))
    text = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## `([a-z_]+)`$", text, re.MULTILINE)
    assert sorted(commands) == sorted(sections)


def _architecture_tree() -> set[str]:
    """The paths the tree in docs/architecture.md names, relative to mcp_django/: modules, and
    folders written with no lines under them (they stand for all their modules)."""
    text = (DOCS / "architecture.md").read_text()
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    lines = [line for line in block.splitlines()[1:] if line.strip()]
    assert lines[0] == "mcp_django/", lines[0]
    named: set[str] = set()
    stack: list[tuple[int, str]] = []  # (indent, folder path)
    for index, line in enumerate(lines[1:], 1):
        indent = len(line) - len(line.lstrip())
        names = re.split(r"\s{2,}", line.strip())[0].split()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        prefix = stack[-1][1] if stack else ""
        following = lines[index + 1] if index + 1 < len(lines) else ""
        has_children = len(following) - len(following.lstrip()) > indent
        for name in names:
            if name.endswith("/") and has_children and len(names) == 1:
                stack.append((indent, prefix + name))
            else:
                named.add(prefix + name)
    return named


def test_the_architecture_tree_names_every_module_and_nothing_else() -> None:
    package = Path(mcp_django.__file__).parent
    named = _architecture_tree()
    missing_paths = [name for name in named if not (package / name.rstrip("/")).exists()]
    assert not missing_paths, f"docs/architecture.md names what is not there: {missing_paths}"
    folders = tuple(name for name in named if name.endswith("/"))
    modules = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "__init__.py" or path.parent == package
    }
    unnamed = sorted(m for m in modules if m not in named and not m.startswith(folders))
    assert not unnamed, f"docs/architecture.md's tree leaves out: {unnamed}"
