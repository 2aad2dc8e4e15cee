"""The audit trail: a :class:`~mcp_django.models.ToolCall` row for every ``tools/call``
(the code is in :mod:`.record`, to be split by job)."""

from .record import SECRET_WORDS, aflush, flush, install

__all__ = ["SECRET_WORDS", "aflush", "flush", "install"]
