"""The layers hold: imports point down (``.importlinter``), and no import cycle exists inside
mcp_django, counting imports inside functions and ``if TYPE_CHECKING:`` imports (a cycle hidden
in a function, or in the types, is still a cycle: the modules cannot be understood, typed or
moved apart). Only the package facade (``mcp_django/__init__.py``, whose lazy attributes load
the public API) is exempt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
FACADE = "mcp_django"


def _graph(package: str = "mcp_django") -> grimp.ImportGraph:
    return grimp.build_graph(
        package, include_external_packages=False, exclude_type_checking_imports=False
    )


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    modules = sorted(m for m in graph.modules if m != FACADE)
    edges = {
        m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i != FACADE)
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def test_no_import_cycle_inside_mcp_django() -> None:
    graph = _graph()
    cycles = _cycles(graph)
    details = []
    for component in cycles:
        for importer in component:
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported in component:
                    lines = [
                        d["line_number"]
                        for d in graph.get_import_details(importer=importer, imported=imported)
                    ]
                    details.append(f"{importer} -> {imported} (line {', '.join(map(str, lines))})")
    assert not cycles, "import cycles:\n" + "\n".join(details)


def test_the_cycle_finder_finds_cycles_hidden_in_a_function_or_in_the_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("from . import d\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n"
    )
    (package / "e.py").write_text(
        "from . import a\n"
    )  # imports into a cycle without being part of one
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = _graph("cyclic")
    assert {"cyclic.a", "cyclic.b", "cyclic.c", "cyclic.d", "cyclic.e"} <= set(graph.modules)
    global FACADE
    saved, FACADE = FACADE, "cyclic"
    try:
        assert sorted(_cycles(graph)) == [["cyclic.a", "cyclic.b"], ["cyclic.c", "cyclic.d"]]
    finally:
        FACADE = saved


def test_imports_point_down_the_layers() -> None:
    # In a process of its own: the contracts read the source, they need no Django set up.
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "lint-imports"),
            "--config",
            ".importlinter",
            "--no-cache",
            "--no-logo",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_ruff_finds_nothing() -> None:
    # The rule set and why: [tool.ruff] in pyproject.toml.
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", "--no-cache", "mcp_django"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_settings_are_read_through_the_typed_object() -> None:
    """One way to read a setting inside mcp_django: ``mcp_settings.<typed property>``, never
    ``mcp_settings.get("KEY")`` or ``mcp_settings.KEY`` (untyped, and easy to misspell)."""
    import re

    found = []
    for path in (ROOT / "mcp_django").rglob("*.py"):
        if path.name == "conf.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(mcp_settings|self\.settings)\.(get\(|[A-Z])", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_every_entry_has_one_interface_and_one_gate() -> None:
    """Tools, resources, templates and prompts of every origin subclass the protocols the
    handlers see, and none decides its own visibility: ``is_visible`` is the gate's."""
    from mcp_django.extensions.mcp_apps import UIResource
    from mcp_django.registry.admin_bridge import AdminActionTool
    from mcp_django.registry.functions import (
        FunctionPrompt,
        FunctionResource,
        FunctionResourceTemplate,
        FunctionTool,
    )
    from mcp_django.registry.options import ModelTool
    from mcp_django.server.entries import (
        Entry,
        PromptEntry,
        ResourceEntry,
        TemplateEntry,
        ToolEntry,
    )

    kinds = {
        FunctionTool: ToolEntry,
        ModelTool: ToolEntry,
        AdminActionTool: ToolEntry,
        FunctionResource: ResourceEntry,
        FunctionResourceTemplate: TemplateEntry,
        FunctionPrompt: PromptEntry,
        UIResource: ResourceEntry,
    }
    for cls, protocol in kinds.items():
        assert protocol in cls.__mro__, cls
        assert cls.is_visible is Entry.is_visible, f"{cls.__name__} decides its own visibility"


def test_mypy_strict_finds_nothing() -> None:
    # Strict, with django-stubs' plugin: [tool.mypy] in pyproject.toml. No cache, so a stale
    # one can never hide an error.
    result = subprocess.run(
        [str(Path(sys.executable).parent / "mypy"), "--no-incremental", "--cache-dir", os.devnull],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


#: Imports inside functions left in mcp_django: app loading (modules Django imports before the app
#: registry is ready, and the models they must not import yet) and optional dependencies or apps.
#: A cycle is not a reason: it is a design bug (see the cycle test above). Issue 29 set the bound.
MAX_FUNCTION_IMPORTS = 35


def _function_imports(package: Path) -> list[tuple[str, int, str, bool]]:
    """``(path, line, import, has a reason)`` for every import inside a function of ``package``
    (migrations aside). The reason is a comment naming "app loading" or "optional" on the import's
    line, or in the comment above it or above the run of imports it belongs to."""
    import ast

    found = []
    for path in sorted(package.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        source = path.read_text()
        lines = source.splitlines()
        seen: set[int] = set()
        functions = [
            n
            for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for function in functions:
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                    continue
                seen.add(node.lineno)
                above = node.lineno - 1  # the line above, 1-based
                while above > 0 and lines[above - 1].lstrip().startswith(("import ", "from ")):
                    above -= 1
                comments = [lines[node.end_lineno - 1]]
                while above > 0 and lines[above - 1].lstrip().startswith(
                    "#"
                ):  # the comment above, every line of it
                    comments.append(lines[above - 1])
                    above -= 1
                reason = any(
                    "#" in c and ("app loading" in c.lower() or "optional" in c.lower())
                    for c in comments
                )
                found.append(
                    (str(path.relative_to(package.parent)), node.lineno, ast.unparse(node), reason)
                )
    return found


def test_imports_inside_functions_are_few_and_each_says_why() -> None:
    found = _function_imports(ROOT / "mcp_django")
    listing = "\n".join(f"{path}:{line}: {statement}" for path, line, statement, _ in found)
    assert len(found) <= MAX_FUNCTION_IMPORTS, (
        f"{len(found)} imports inside functions (at most {MAX_FUNCTION_IMPORTS}):\n{listing}"
    )
    silent = [
        f"{path}:{line}: {statement}" for path, line, statement, reason in found if not reason
    ]
    assert not silent, (
        "imports inside functions without a reason (# app loading: ... or # optional ...):\n"
        + "\n".join(silent)
    )


def test_the_function_import_count_sees_methods_and_reasons(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "migrations").mkdir(parents=True)
    (package / "migrations" / "0001_initial.py").write_text("def f():\n    import os\n")
    (package / "a.py").write_text(
        "import sys\n"
        "class C:\n"
        "    def m(self):\n"
        "        # App loading: models,\n"
        "        # not ready yet.\n"
        "        from . import b\n"
        "        from . import c\n"
        "        import json  # optional dependency\n"
        "        import os\n"
        "        if sys:\n"
        "            import re\n"
    )
    found = {(line, reason) for _, line, _, reason in _function_imports(package)}
    assert found == {(6, True), (7, True), (8, True), (9, True), (11, False)}
