"""A pattern compiled as each MCP client compiles it, for the tests of translated patterns."""

from __future__ import annotations

import re
import warnings
from typing import Any

import regress


def compile_everywhere(pattern: str) -> list[Any]:
    """``pattern`` compiled as each client compiles it: ECMA-262 without and with the u flag
    (regress, the Rust engine; Ajv, hence the TypeScript SDK and the Inspector, sets u) and
    Python's ``re`` without flags (python-jsonschema, hence the official Python client)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a FutureWarning from re is a pattern to fix too
        python = re.compile(pattern)
    return [regress.Regex(pattern), regress.Regex(pattern, "u"), python]
