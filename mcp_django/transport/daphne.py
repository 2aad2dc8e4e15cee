"""Daphne's request parsing, made as cheap as it should be.

Twisted (26.10 here), no longer on ``cgi.parse_header``, parses the Content-Type of every POST
in ``twisted.web.http.Request`` by building an ``email.message.EmailMessage``
(``_parseContentType``): a fifth of the CPU of a JSON ``tools/call`` under Daphne, more than all
of our engine's work for it (issue 45, docs/performance.md). The function is pure, bytes in and
bytes out, and clients send the same few values, so its answers are remembered: a bounded cache,
for values of a sane length only, the longer ones parsed as before. Under any other server
Twisted is not imported and nothing changes.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

#: Distinct Content-Type values remembered, and the longest one remembered (bytes): a client
#: inventing values churns the cache, it cannot grow it.
CACHED_VALUES = 64
CACHED_LENGTH = 256


def remember_content_types() -> bool:
    """Put the cache in front of Twisted's Content-Type parser, once; True if this call did."""
    module = sys.modules.get("twisted.web.http")
    parse: Callable[[bytes], bytes] | None = getattr(module, "_parseContentType", None)
    if parse is None or getattr(parse, "remembered", False):
        return False
    cached = functools.lru_cache(maxsize=CACHED_VALUES)(parse)

    def parse_content_type(line: bytes) -> bytes:
        return cached(line) if len(line) <= CACHED_LENGTH else parse(line)

    parse_content_type.remembered = True  # type: ignore[attr-defined]
    parse_content_type.__wrapped__ = parse  # type: ignore[attr-defined]
    module._parseContentType = parse_content_type  # type: ignore[union-attr]
    return True
