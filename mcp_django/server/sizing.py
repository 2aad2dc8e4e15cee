"""Fitting a ``tools/call`` result to ``MAX_RESULT_CHARS``: cut, with a notice, never dropped.

A client's model reads a tool's result as text, and clients cap it (Claude at about 150,000
characters, Claude Code at 25,000 tokens): beyond that the client truncates or rejects the result
without telling the model why. So a result is measured here as the characters of its JSON text,
the whole ``CallToolResult`` as it is serialized (content blocks, ``structuredContent``,
``_meta``): that is what the client receives and passes on, and it bounds what the model sees.

Two cuts exist:

* :func:`fit_result`, the generic one, applied to every result: content blocks are kept in
  order while they fit, the text block that crosses the limit is cut, a block that is not text
  (image, audio, resource) that does not fit is left out, and one notice (a text block) says what
  was cut and by how much. ``structuredContent`` is never cut: a tool with an ``outputSchema``
  must return conforming structured content, and a truncated object would not be; when it alone
  does not fit, the result becomes a tool error (``isError``) that says so.
* :func:`fit_page`, for a page of a list (``{"items": [...], "nextCursor": ...}``): trailing
  items are dropped and ``nextCursor`` continues right after the last item kept, so a client that
  follows the cursor sees every item once. Only the tool knows how to make a cursor after any item,
  so the tool calls it (the generated ``search`` tools do).

A result one of them cut is a :class:`Cut` (a plain ``dict`` to everything else), so the server
records the cut in the audit trail.

Pure: JSON in, JSON out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

#: The smallest limit allowed: room for the notice and a useful part of the result.
MIN_RESULT_CHARS = 1000

#: Room kept for the notice's list of what was left out (its counts vary).
_NOTICE_ROOM = 240


class Cut(dict[str, Any]):
    """A result cut to fit the limit (serialized like any dict)."""


def size(value: Any) -> int:
    """Characters of ``value``'s JSON text (what the client's model reads)."""
    return len(orjson.dumps(value, default=str).decode())


def _limit_text(total: int, limit: int) -> str:
    return (
        f"[Result cut: {total:,} characters, over this server's limit of {limit:,} "
        "(MAX_RESULT_CHARS)."
    )


def _too_large(total: int, limit: int, why: str) -> Cut:
    text = (
        f"[Result too large: {total:,} characters, over this server's limit of {limit:,} "
        f"(MAX_RESULT_CHARS), and {why} Ask for less: a narrower query, fewer fields or a "
        "smaller page.]"
    )
    return Cut(content=[{"type": "text", "text": text}], isError=True)


def _cut_text(block: dict[str, Any], budget: int) -> dict[str, Any] | None:
    """``block`` with its text cut so the block's JSON is at most ``budget`` characters."""
    text = block["text"]
    # Escapes (quotes, newlines, control characters) serialize longer than they read: search for
    # the longest prefix that fits (a few dozen serializations at most).
    low, high = 0, max(0, min(len(text), budget - size({**block, "text": ""})))
    while low < high:
        middle = (low + high + 1) // 2
        if size({**block, "text": text[:middle]}) <= budget:
            low = middle
        else:
            high = middle - 1
    return {**block, "text": text[:low]} if low > 0 else None


def fit_result(result: dict[str, Any], limit: int | None) -> tuple[dict[str, Any], bool]:
    """``result`` fitted to ``limit`` characters of JSON, and whether it was cut.

    A result within the limit (or with no limit) comes back as it is. A fitted result is at most
    ``limit`` characters (``limit`` is at least :data:`MIN_RESULT_CHARS`).
    """
    if not limit or isinstance(result, Cut):
        return result, isinstance(result, Cut)
    total = size(result)
    if total <= limit:
        return result, False
    rest = {key: value for key, value in result.items() if key != "content"}
    placeholder = {"type": "text", "text": _limit_text(total, limit) + " " * _NOTICE_ROOM}
    # What the result weighs without its blocks, with the notice and a comma for each block.
    budget = limit - size({**rest, "content": [placeholder]})
    if budget < 0:
        why = (
            "its structured content cannot be cut without breaking the tool's output schema."
            if "structuredContent" in rest
            else "what it holds besides its content blocks does not fit."
        )
        return _too_large(total, limit, why), True
    kept: list[Any] = []
    blocks = list(result.get("content") or ())
    left_out: dict[str, int] = {}
    cut_one = False
    for index, block in enumerate(blocks):
        cost = size(block) + 1
        if cost <= budget:
            kept.append(block)
            budget -= cost
            continue
        if isinstance(block, dict) and block.get("type") == "text" and "text" in block:
            piece = _cut_text(block, budget - 1)
            if piece is not None:
                kept.append(piece)
                cut_one = True
            else:
                left_out["text"] = left_out.get("text", 0) + 1
        else:
            kind = str(block.get("type", "block")) if isinstance(block, dict) else "block"
            left_out[kind] = left_out.get(kind, 0) + 1
        for later in blocks[index + 1 :]:
            kind = str(later.get("type", "block")) if isinstance(later, dict) else "block"
            left_out[kind] = left_out.get(kind, 0) + 1
        break
    said = []
    if cut_one:
        said.append("the text of the last block shown is cut short")
    if left_out:
        # Bounded: a handful of block types, each said once with its count.
        listed = ", ".join(f"{count} {kind}" for kind, count in sorted(left_out.items())[:8])
        said.append(f"content blocks left out: {listed}")
    if "structuredContent" in rest:
        said.append("structuredContent is complete")
    notice = _limit_text(total, limit) + " " + "; ".join(said)[: _NOTICE_ROOM - 40]
    notice += ". Ask for less to see the rest.]"
    return Cut({**result, "content": [*kept, {"type": "text", "text": notice}]}), True


def fit_page(
    items: list[Any],
    next_cursor: str | None,
    cursor_after: Callable[[int], str],
    make: Callable[[list[Any], str | None], dict[str, Any]],
    limit: int | None,
) -> tuple[dict[str, Any], bool]:
    """The page ``make(items, next_cursor)`` fitted to ``limit`` by dropping trailing items.

    ``cursor_after(i)`` is the cursor of the items after ``items[i]``: the page's ``nextCursor``
    when items from ``i + 1`` on are dropped. The notice names that cursor, so the model can
    continue; no item is lost or repeated. When even the first item alone does not fit, the
    result is a tool error naming the cursor that skips it.
    """
    full = make(items, next_cursor)
    if not limit:
        return full, False
    total = size(full)
    if total <= limit:
        return full, False

    def page(count: int) -> dict[str, Any]:
        cursor = cursor_after(count - 1)
        result = make(items[:count], cursor)
        notice = (
            f"{_limit_text(total, limit)} Only the first {count} of the {len(items)} items "
            f'of this page are here; call again with cursor "{cursor}" for the rest.]'
        )
        return {**result, "content": [*result.get("content", ()), {"type": "text", "text": notice}]}

    low, high = 0, len(items) - 1  # page(low) fits (low 0: nothing yet), page(high + 1) does not
    while low < high:
        middle = (low + high + 1) // 2
        if size(page(middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    while low > 0 and size(page(low)) > limit:  # cursors differ in length: make sure
        low -= 1
    if low == 0:
        skip = cursor_after(0)
        return (
            _too_large(
                total,
                limit,
                f'the first item alone does not fit. Call again with cursor "{skip}" to skip it.',
            ),
            True,
        )
    return Cut(page(low)), True
