"""The protocol core stays sans-I/O: no web framework and no other part of mcp_django."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# Located from this file so the check does not depend on the working directory.
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "mcp_django" / "protocol"
PACKAGE = "mcp_django.protocol"
FORBIDDEN_TOP_LEVEL = frozenset(
    {"django", "channels", "asgiref", "daphne", "rest_framework", "oauth2_provider"}
)
DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


def protocol_files() -> list[Path]:
    return sorted(PACKAGE_DIR.glob("*.py"))


def resolve_relative(module: str | None, level: int, package: str) -> str:
    parts = package.split(".")
    if level > len(parts):
        # Beyond the top-level package: certainly outside mcp_django.protocol.
        return "<outside>"
    base = parts[: len(parts) - level + 1]
    return ".".join(base + ([module] if module else []))


def forbidden_reason(module: str) -> str | None:
    top = module.split(".", 1)[0]
    if top in FORBIDDEN_TOP_LEVEL:
        return f"imports {module}"
    if module == "<outside>":
        return "relative import escapes mcp_django"
    if top == "mcp_django" and not (module == PACKAGE or module.startswith(PACKAGE + ".")):
        return f"imports {module} outside {PACKAGE}"
    return None


def boundary_violations(source: str, filename: str = "<source>") -> list[str]:
    """Every import in ``source`` (a module of ``mcp_django.protocol``) that crosses the boundary."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                resolve_relative(node.module, node.level, PACKAGE)
                if node.level
                else (node.module or "")
            )
            # "from mcp_django import x" may name a submodule, so judge each imported name too.
            targets = [
                f"{base}.{alias.name}" if base == "mcp_django" else base for alias in node.names
            ]
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else None
            )
            if (
                name in DYNAMIC_IMPORTERS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                targets = [node.args[0].value]
        for target in targets:
            reason = forbidden_reason(target)
            if reason:
                found.append(f"{filename}:{node.lineno}: {reason}")
    return found


def test_protocol_package_is_found_relative_to_this_file():
    names = {path.name for path in protocol_files()}
    assert {
        "__init__.py",
        "errors.py",
        "jsonrpc.py",
        "negotiation.py",
        "sse.py",
        "lifecycle.py",
        "pagination.py",
        "dispatcher.py",
    } <= names


@pytest.mark.parametrize("path", protocol_files(), ids=lambda p: p.name)
def test_protocol_module_imports_nothing_outside_the_boundary(path):
    assert boundary_violations(path.read_text(encoding="utf-8"), path.name) == []


@pytest.mark.parametrize(
    "source",
    [
        "import django",
        "import django.http",
        "from django.conf import settings",
        "import channels.layers",
        "from asgiref.sync import sync_to_async",
        "import daphne",
        "from rest_framework import serializers",
        "import oauth2_provider.models",
        "import mcp_django.transport",
        "from mcp_django import transport",
        "from mcp_django.site import MCPSite",
        "from .. import transport",
        "from ..transport import views",
        "from ... import anything",
        "import os\nif True:\n    from django.db import models",
        "def f():\n    import channels",
        "import importlib\nimportlib.import_module('django.conf')",
        "__import__('asgiref')",
    ],
)
def test_boundary_checker_flags_forbidden_imports(source):
    assert boundary_violations(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import re, orjson",
        "from . import errors",
        "from .errors import MCPError",
        "from .jsonrpc import Request",
        "import mcp_django.protocol.errors",
        "from mcp_django.protocol import sse",
        "from mcp_django import protocol",
        "import djangoish",
        "from typing import TYPE_CHECKING",
    ],
)
def test_boundary_checker_allows_imports_inside_the_package(source):
    assert boundary_violations(source) == []
