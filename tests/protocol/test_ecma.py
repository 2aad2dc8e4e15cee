"""The translation of Python regular expressions into patterns every MCP client reads alike
(``protocol.ecma``), checked with Python's ``re`` and a real ECMA-262 engine (``regress``, in
Rust) with and without the u flag. Django's own validators' patterns are in test_schemas.py."""

from __future__ import annotations

import re
import warnings

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcp_django.protocol.ecma import ecma_pattern
from tests.fuzzing import examples

from .engines import compile_everywhere


@pytest.mark.parametrize(
    ("pattern", "flags", "expected"),
    [
        (r"^[\w.@+-]+\Z", re.UNICODE, None),  # \w means more letters in Python: left out
        # With re.ASCII, spelled as the ASCII sets (a Python client compiles without the flag).
        (r"^[\w.@+-]+\Z", re.ASCII, r"^[0-9A-Za-z_.@+-]+$"),
        (
            r"^\w\W\d\D\s\S$",
            re.ASCII,
            r"^[0-9A-Za-z_][^0-9A-Za-z_][0-9][^0-9][ \t\n\r\f\v][^ \t\n\r\f\v]$",
        ),
        (r"[^\W]", re.ASCII, None),
        (r"\bword\b", re.ASCII, None),
        (r"[\b]", 0, r"[\x08]"),
        (r"\A\d{13}\Z", 0, r"^\d{13}$"),
        (r"(?i)abc", 0, None),
        (r"abc", re.IGNORECASE, None),
        (r"a++", 0, None),
        (r"a{2}+", 0, None),
        (r"(?P<x>a)(?P=x)", 0, None),
        (r"(a)\1", 0, None),
        # ECMA-262's (?<x>...) is an error in Python's re: nothing refers to the name.
        (r"(?P<x>a)b", 0, r"(?:a)b"),
        (r"[\Z]", 0, None),
        (r"a{2,3}}", 0, r"a{2,3}\}"),
        # {,n} is {0,n} in Python, a literal (or an error with u) in ECMA-262.
        (r"a{,3}", 0, r"a{0,3}"),
        (r"a{}", 0, r"a\{\}"),
        # Bare ] and escaped punctuation other than syntax characters: errors with u.
        (r"a]", 0, r"a\]"),
        (r"\-\@\#\ \_", 0, r"\x2d\x40\x23\x20\x5f"),
        (r"[\-\]a]", 0, r"[\x2d\]a]"),
        (r"\.\/\$", 0, r"\.\/\$"),
        (r"\0", 0, r"\x00"),
        (r"\012", 0, None),
        (r"(?=a)*b", 0, None),
        (r"\ud83d", 0, None),
        ("😀+", 0, None),
    ],
)
def test_ecma_pattern_cases(pattern: str, flags: int, expected: str | None) -> None:
    assert ecma_pattern(pattern, flags) == expected
    if expected is not None:
        compile_everywhere(expected)


REGEX_TOKENS = [
    "a",
    "b",
    "1",
    "-",
    "é",
    " ",
    ".",
    "@",
    "^",
    "$",
    "*",
    "+",
    "?",
    "*?",
    "|",
    "(",
    ")",
    "[",
    "]",
    "[^",
    "{",
    "}",
    "{2}",
    "{,2}",
    "{1,}",
    "a{1,2}",
    "(?:",
    "(?P<n>",
    "(?=",
    "(?!",
    "(?<=",
    "(?<!",
    "(?i)",
    r"\d",
    r"\D",
    r"\s",
    r"\S",
    r"\w",
    r"\W",
    r"\b",
    r"\B",
    r"\A",
    r"\Z",
    r"\1",
    r"\n",
    r"\0",
    r"\x41",
    r"\u00e9",
    r"\-",
    r"\]",
    r"\.",
    r"\@",
    r"\{",
    r"\}",
    r"\/",
    r"\|",
    r"\$",
    r"\ ",
    r"\_",
    "[a-c]",
    "&&",
    "--",
    "[:",
]


@settings(max_examples=examples(500), derandomize=True, deadline=None)
@given(
    tokens=st.lists(st.sampled_from(REGEX_TOKENS), max_size=8),
    flags=st.sampled_from([0, re.ASCII]),
    texts=st.lists(st.text(alphabet="ab1-é .@{}]A\t/|$^_\\&:", max_size=6), min_size=1, max_size=6),
)
def test_a_translated_pattern_compiles_and_matches_alike_in_every_engine(
    tokens: list[str], flags: int, texts: list[str]
) -> None:
    pattern = "".join(tokens)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            server = re.compile(pattern, flags)
        except (re.error, Warning):
            assume(False)
    translated = ecma_pattern(pattern, flags)
    assume(translated is not None)
    ecma, ecma_u, python = compile_everywhere(translated)
    for text in texts:
        expected = server.search(text) is not None
        assert (ecma.find(text) is not None) == expected, (pattern, translated, text)
        assert (ecma_u.find(text) is not None) == expected, (pattern, translated, text)
        assert (python.search(text) is not None) == expected, (pattern, translated, text)


@pytest.mark.parametrize(
    ("pattern", "flags", "expected"),
    [
        # Escapes: a trailing backslash, hex escapes with and without their digits.
        ("a\\", 0, None),
        (r"\x4", 0, None),
        (r"\u00e", 0, None),
        (r"\u00e9+", 0, r"\u00e9+"),
        (r"\n\t\r\f\v", 0, r"\n\t\r\f\v"),
        (r"\U0001F600", 0, None),
        (r"\a", 0, None),
        # Class escapes: \d and \s kept without the flag, spelled as sets inside a class with it.
        (r"\d\s\D\S", 0, r"\d\s\D\S"),
        (r"[\d\s]", re.ASCII, r"[0-9 \t\n\r\f\v]"),
        (r"[\S]", re.ASCII, None),
        (r"\B", re.ASCII, None),
        # Classes: a leading ] after ^, a [ inside, POSIX-looking members, an unclosed class.
        (r"[^]a]", 0, r"[^\]a]"),
        (r"[a[b]", 0, r"[a\[b]"),
        (r"[[:alpha:]]", 0, None),
        (r"[[=a=]]", 0, None),
        (r"[ab", 0, None),
        # Groups: lookarounds kept, unquantified; names dropped; the other extensions refused.
        (r"(?<=a)b(?<!c)(?!d)", 0, r"(?<=a)b(?<!c)(?!d)"),
        (r"(?:(?=a)b)+", 0, r"(?:(?=a)b)+"),
        (r"(?!a){2}", 0, None),
        (r"(?<=a)?", 0, None),
        (r"(?P<name", 0, None),
        (r"(?>a)", 0, None),
        (r"(?#note)a", 0, None),
        (r"(a)|(b)", 0, r"(a)|(b)"),
        # Quantifiers: {m,} kept, possessive forms refused, a lazy one kept.
        (r"a{2,}", 0, r"a{2,}"),
        (r"a{,3}+", 0, None),
        (r"a*+", 0, None),
        (r"a?+", 0, None),
        (r"a+?", 0, r"a+?"),
        (r"{", 0, r"\{"),
        (r"a{x}", 0, r"a\{x\}"),
        # Flags other than ASCII and UNICODE cannot be said in a pattern.
        ("a", re.MULTILINE, None),
        ("a", re.DOTALL, None),
        ("a", re.UNICODE, "a"),
        ("", 0, ""),
    ],
)
def test_each_construct_is_translated_or_refused(
    pattern: str, flags: int, expected: str | None
) -> None:
    assert ecma_pattern(pattern, flags) == expected
    if expected is not None:
        compile_everywhere(expected)
