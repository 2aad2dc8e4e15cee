"""How many examples the property tests (hypothesis) try.

The default cell (``make test``) tries every one. The matrix's other cells (noxfile.py sets
``MCP_TEST_EXAMPLES=matrix``) try a fifth: they show that the code runs on that Python and
Django, which the same properties over fewer inputs show as well, and CI's time limit is shared
by the whole suite and five cells.
"""

from __future__ import annotations

import os

from hypothesis import settings

MATRIX = os.environ.get("MCP_TEST_EXAMPLES") == "matrix"


def examples(count: int) -> int:
    """``count`` examples on the default cell, a fifth of them (at least 10) on the others."""
    return max(10, count // 5) if MATRIX else count


def load_profile() -> None:
    """The same share for the tests that keep hypothesis's default (100 examples)."""
    settings.register_profile("matrix", max_examples=examples(settings.default.max_examples))
    if MATRIX:
        settings.load_profile("matrix")
