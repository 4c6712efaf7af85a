"""The ledger's fast paths read what the plain forms read: code dropped with string searches, and
patterns for a text in ASCII (tables, not the Unicode database) where the others would test."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction.ledger.goals import NAMED, has_name
from autocompact.compaction.ledger.keys import named
from autocompact.compaction.ledger.text import drop_code, hinted, specific_counts, specific_marks
from autocompact.compaction.ledger.tools import error_line, kind_of, result_line

# Pieces of prose, code, output and commands, with blanks of every kind and letters outside
# ASCII (a digit of another script among them: ``\d`` matches it, ``0-9`` does not).
_PIECES = [
    *"ab Zys.!?:,-*•>`'\"(_/0$@=#\\)[]{}<>;…€£",
    *("```", "``", "\n", "\n ", "\n\t", "\n  - ", "\n 1. ", "\n  x = 1", "\t", "  ", "\r"),
    *("\x1c", "\x1f", "\u0663", "é", "K", "İ", "\xa0", "ſ"),
    *("error: ", "FAILED ", "3 passed", " OK", "exit code 1", "not found", "BUILD "),
    *("pytest ", "ruff ", "make ", "cd /a && ", "X=1 ", "npm run build", "go test "),
    *("the ", "runners ", "v1.2 ", "pg-a-12.internal ", "getX ", "a_b ", "ab12 ", "12ms ", "9xy"),
]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
_ASCII = _TEXT.filter(str.isascii)

# What drop_code did with two substitutions (a lazy fence pattern, a multi-line one).
_CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INDENTED = re.compile(r"^[ \t]+(?![-*•+>] |\d+[.)] )\S.*$", re.M)


@settings(max_examples=500, deadline=None)
@given(text=_TEXT)
def test_drop_code_drops_what_the_two_substitutions_dropped(text: str) -> None:
    """A fence to the next one (or to the end) becomes a line break and an indented line that
    is no list item is emptied, found with string searches: the text of the substitutions."""
    expected = _CODE_FENCE.sub("\n", text) if "```" in text else text
    if "\n " in expected or "\n\t" in expected:
        expected = _INDENTED.sub("", expected)
    assert drop_code(text) == expected


# The patterns as they read any text (``\d``, ``\w`` and ``\b`` from the Unicode database).
_SPECIFIC = r"\d/_@#=`$€£\\"
_SPECIFIC_MARKS = re.compile(
    rf"[{_SPECIFIC}A-Z.-](?:(?<=[{_SPECIFIC}])[{_SPECIFIC}]*"
    r"|(?<=[a-z,;:] [A-Z])(?=[a-z]{2}|[A-Z])|(?<=[a-z][A-Z])|(?<=[a-z][.-])(?=[a-z]))"
)
_HINT_CHARS = re.compile(r"[\d/_@#=`\"$€£\\-]")
_TWO_LETTERS = re.compile(r"[A-Za-z][^A-Za-z]*[A-Za-z]")
_MEASURE = re.compile(r"[$€£]?[\d.,]+[a-zA-Z%]{0,3}")


@settings(max_examples=500, deadline=None)
@given(text=_TEXT)
def test_the_patterns_for_ascii_find_what_the_unicode_ones_find(text: str) -> None:
    """In any text (in ASCII or not) the specific marks, the hint of a specific token, a name
    and a measure are those the patterns read from the Unicode database find."""
    assert specific_marks(text) == len(_SPECIFIC_MARKS.findall(text))
    lines = text.splitlines()
    assert specific_counts(lines) == [len(_SPECIFIC_MARKS.findall(line)) for line in lines]
    assert has_name(text) == (NAMED.search(text) is not None)
    if _HINT_CHARS.search(text) is not None:
        assert hinted(text)
    for token in text.split():
        expected = _TWO_LETTERS.search(token) is not None and _MEASURE.fullmatch(token) is None
        assert named(token) == expected


@settings(max_examples=500, deadline=None)
@given(text=_ASCII)
def test_tool_results_read_in_ascii_as_in_any_text(text: str) -> None:
    """A run's kind, its result line and a failure's error line are the same when a letter
    outside ASCII (read by the Unicode patterns) is added where it matches nothing."""
    command = text.replace("\n", " ")[:60]
    assert kind_of(command) == kind_of(command + " é")
    assert result_line(text, failed=True) == result_line(text + "\né", failed=True)
    assert result_line(text, failed=False) == result_line(text + "\né", failed=False)
    assert error_line("x\n" + text) == error_line("x\n" + text + "\né")
