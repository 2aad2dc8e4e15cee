"""Python regular expressions as patterns that every MCP client reads alike.

JSON Schema's ``pattern`` is an ECMA-262 regular expression. Clients compile it with an
ECMA-262 engine (Ajv in the TypeScript SDK and the Inspector, with the u flag on by default) or
with Python's ``re`` (python-jsonschema in the Python SDK). :func:`ecma_pattern` translates a
Python pattern into one that accepts the same strings in all three, or says it cannot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Word classes: Python's match any letter (é, ß, 名), ECMA-262's only ASCII ones, so a client
# would refuse a name the server accepts: such a pattern is left out. With ``re.ASCII`` they
# are spelled as the ASCII sets they then mean, which every engine reads alike (Python's own
# ``re`` in a client compiles the pattern without the flag). Word boundaries cannot be spelled
# so. (Without the flag \d and \s differ only for exotic digits and spaces; they are kept.)
_ASCII_CLASSES = {"w": "0-9A-Za-z_", "d": "0-9", "s": " \\t\\n\\r\\f\\v"}
# Escapes that mean the same in Python and in ECMA-262, with or without the u flag.
_CONTROL_ESCAPES = frozenset("nrtfv")
# ECMA-262's syntax characters: the only punctuation its u flag lets one escape (Ajv, the
# validator of the TypeScript SDK and the Inspector, turns the flag on by default). Any other
# escaped punctuation (\@, \-, \#, "\ ") is written as \xHH, which every engine reads alike,
# inside a class too.
_SYNTAX_CHARACTERS = frozenset("^$\\.*+?()[]{}|/")
# Python's {m,n} family: {,n} means {0,n} there and is a literal (or an error) in ECMA-262.
_QUANTIFIER = re.compile(r"\{(\d*)(,?)(\d*)\}")
_HEX2 = re.compile(r"[0-9a-fA-F]{2}")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_FLAGS_ALLOWED = re.ASCII | re.UNICODE  # UNICODE is Python 3's default for str patterns


def ecma_pattern(pattern: str, flags: int = 0) -> str | None:
    """``pattern`` (a Python regular expression) as a pattern that accepts the same strings in
    ECMA-262 (with or without the u flag) and in Python's ``re`` (python-jsonschema, hence the
    official Python client, compiles patterns with it), or None when that cannot be said
    exactly (then leave the pattern out: the server still validates).

    A conservative translation: anchors ``\\A``/``\\Z`` become ``^``/``$``, named groups become
    non-capturing (nothing can refer to them: back references are refused), ``{,n}`` becomes
    ``{0,n}``, stray ``]``, ``{`` and ``}`` and escaped punctuation are spelled so every engine
    reads a literal; anything whose meaning differs or that ECMA-262 lacks (inline flags,
    possessive quantifiers, atomic groups, back references, ``\\Z`` inside a class,
    Unicode-dependent classes, characters beyond U+FFFF) gives None.
    """
    if flags & ~_FLAGS_ALLOWED:
        return None  # IGNORECASE, MULTILINE, DOTALL, VERBOSE: no way to say them in a pattern
    if any(ord(char) > 0xFFFF for char in pattern):
        return None  # one character in Python, two UTF-16 units in ECMA-262 without the u flag
    try:
        return _Translation(pattern, ascii_only=bool(flags & re.ASCII)).run()
    except _Untranslatable:
        return None


class _Untranslatable(ValueError):
    """The pattern cannot be said exactly in ECMA-262 (raised inside the translation only)."""


@dataclass
class _Translation:
    """One left-to-right pass over a pattern; each step reads a token and returns its spelling."""

    pattern: str
    ascii_only: bool
    pos: int = 0
    in_class: bool = False
    groups: list[bool] = field(default_factory=list)  # for each open group: is it a lookaround?

    def run(self) -> str:
        out: list[str] = []
        while self.pos < len(self.pattern):
            out.append(self._token())
        if self.in_class:
            raise _Untranslatable("an unclosed class")
        return "".join(out)

    def _ahead(self, count: int = 1, offset: int = 0) -> str:
        start = self.pos + offset
        return self.pattern[start : start + count]

    def _token(self) -> str:
        char = self.pattern[self.pos]
        if char == "\\":
            return self._escape()
        if self.in_class:
            return self._class_member(char)
        if char == "[":
            return self._open_class()
        if char == "(" and self._ahead(offset=1) == "?":
            return self._extension()
        if char == "{":
            return self._brace()
        self.pos += 1
        if char == "(":
            self.groups.append(False)
        elif char == ")" and self.groups:
            self._close_group()
        elif char in "}]":
            return "\\" + char  # a literal in Python; ECMA-262's u mode refuses it bare
        elif char in "*+?" and self._ahead() == "+":
            raise _Untranslatable("a possessive quantifier (Python 3.11+)")
        return char

    # -- escapes -----------------------------------------------------------------------------

    def _escape(self) -> str:
        escaped = self._ahead(offset=1)
        if not escaped:
            raise _Untranslatable("a trailing backslash")
        self.pos += 2
        if escaped in "AZ":
            if self.in_class:
                raise _Untranslatable(r"\A or \Z in a class")
            return "^" if escaped == "A" else "$"
        if escaped.lower() in _ASCII_CLASSES:
            return self._class_escape(escaped)
        if escaped in "bB":
            if self.in_class and escaped == "b":
                return "\\x08"  # backspace, in a class
            raise _Untranslatable("word boundaries follow \\w: see _ASCII_CLASSES")
        if escaped in _CONTROL_ESCAPES or escaped in _SYNTAX_CHARACTERS:
            return "\\" + escaped
        if escaped in "0xu":
            return self._code_escape(escaped)
        if escaped.isascii() and not escaped.isalnum():
            return _literal(escaped)
        raise _Untranslatable(
            r"\U, \N{...}, back references by number or name, \a: not worth the risk"
        )

    def _class_escape(self, escaped: str) -> str:
        r"""``\w``, ``\d``, ``\s`` and their negations."""
        if not self.ascii_only:
            if escaped in "wW":
                raise _Untranslatable("\\w means more letters in Python")
            return "\\" + escaped
        ascii_set = _ASCII_CLASSES[escaped.lower()]
        if escaped.islower():
            return ascii_set if self.in_class else f"[{ascii_set}]"
        if self.in_class:
            raise _Untranslatable("a negated set inside a set: not expressible without v mode")
        return f"[^{ascii_set}]"

    def _code_escape(self, escaped: str) -> str:
        r"""``\0``, ``\xHH`` and ``\uHHHH``."""
        if escaped == "0":
            if self._ahead().isdigit():
                raise _Untranslatable("an octal escape in Python, an error in ECMA-262's u mode")
            return "\\x00"
        digits = self._ahead(2 if escaped == "x" else 4)
        if not (_HEX2 if escaped == "x" else _HEX4).fullmatch(digits):
            raise _Untranslatable(f"\\{escaped} without its hex digits")
        if escaped == "u" and 0xD800 <= int(digits, 16) <= 0xDFFF:
            raise _Untranslatable(
                "a surrogate: half a character in ECMA-262, a whole one in Python"
            )
        self.pos += len(digits)
        return f"\\{escaped}{digits}"

    # -- classes -----------------------------------------------------------------------------

    def _open_class(self) -> str:
        self.in_class = True
        self.pos += 1
        out = "["
        # A leading ] (or ^]) is a literal in Python, an empty class in ECMA-262.
        if self._ahead() == "^":
            out += "^"
            self.pos += 1
        if self._ahead() == "]":
            out += "\\]"
            self.pos += 1
        return out

    def _class_member(self, char: str) -> str:
        self.pos += 1
        if char == "[":
            if self._ahead() in (":", "=", "."):
                raise _Untranslatable(
                    "a POSIX-looking class: literal in Python, an error in ECMA v mode"
                )
            return "\\["
        if char == "]":
            self.in_class = False
        return char

    # -- groups and quantifiers ----------------------------------------------------------------

    def _extension(self) -> str:
        """A group opened with ``(?``: non-capturing, named, or a lookaround."""
        rest = self.pattern[self.pos + 2 :]
        if rest.startswith("P<"):
            close = rest.find(">")
            if close < 0:
                raise _Untranslatable("an unclosed group name")
            self.groups.append(False)
            self.pos += 2 + close + 1
            return "(?:"  # ECMA-262 spells it (?<name>, which Python refuses; nothing uses the name
        if rest[:1] in (":", "=", "!") or rest.startswith(("<=", "<!")):
            self.groups.append(rest[:1] != ":")
            self.pos += 2
            return "(?"
        raise _Untranslatable("inline flags, (?P=name), (?>...), (?#...), conditionals")

    def _close_group(self) -> None:
        """Called past a ``)`` that closes a group."""
        lookaround = self.groups.pop()
        if lookaround and (
            self._ahead() in ("*", "+", "?") or _QUANTIFIER.match(self.pattern, self.pos)
        ):
            raise _Untranslatable(
                "a quantified lookaround: allowed by Python, an error with the u flag"
            )

    def _brace(self) -> str:
        quantifier = _QUANTIFIER.match(self.pattern, self.pos)
        if quantifier is None or not (quantifier[1] or quantifier[2]):
            self.pos += 1
            return "\\{"  # a literal brace in Python; ECMA-262's u mode refuses it bare
        low, comma, high = quantifier.groups()
        self.pos = quantifier.end()
        if self._ahead() == "+":
            raise _Untranslatable("a possessive quantifier (Python 3.11+)")
        return f"{{{low or '0'}{comma}{high}}}"


def _literal(char: str) -> str:
    """An ASCII punctuation character as an escape every engine reads as that character."""
    return f"\\x{ord(char):02x}"
