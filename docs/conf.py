"""Sphinx configuration of the mcp_django documentation (``make docs``).

Markdown pages through MyST; the API reference through autodoc, which imports mcp_django and
so needs Django set up first: the test suite's settings are enough, since autodoc only imports.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402  (after sys.path and the settings module are set)

django.setup()

from mcp_django import __version__  # noqa: E402

project = "mcp_django"
author = "mcp_django contributors"
copyright = "mcp_django contributors"
release = version = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# Anchors for the "page.md#section" links the pages (and the README) use, as GitHub makes them
# (tests/test_readme.py resolves the README's the same way).
myst_heading_anchors = 4

# Members are listed by name in reference/api.md, in the order the source gives them.
autodoc_member_order = "bysource"

html_theme = "furo"
html_title = f"mcp_django {release}"
# No html_static_path: images (docs/_static/screenshots/) are copied where pages use them.
