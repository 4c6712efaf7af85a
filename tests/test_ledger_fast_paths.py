"""The ledger's fast paths read what the plain forms read: code dropped with string searches, and
patterns for a text in ASCII (tables, not the Unicode database) where the others would test."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction.ledger.code import drop_code
from autocompact.compaction.ledger.goals import NAMED, has_name
from autocompact.compaction.ledger.keys import named
from autocompact.compaction.ledger.text import hinted, specific_counts, specific_marks
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


_TOP_ITEM = re.compile(r"^(?:\d{1,3}[.)]|[-*+•]) ", re.M)


@settings(max_examples=500, deadline=None)
@given(text=_TEXT)
def test_drop_code_drops_what_the_two_substitutions_dropped(text: str) -> None:
    """A fence to the next one (or to the end) becomes a line break and an indented line that
    is no list item is emptied, found with string searches: the text of the substitutions
    (where no list item opens a line: the lines under one are read below)."""
    expected = _CODE_FENCE.sub("\n", text) if "```" in text else text
    if _TOP_ITEM.search(expected) is not None and ("\n " in expected or "\n\t" in expected):
        return
    if "\n " in expected or "\n\t" in expected:
        expected = _INDENTED.sub("", expected)
    assert drop_code(text) == expected


def test_the_prose_under_a_list_item_is_read_and_code_below_it_is_not() -> None:
    """Markdown continues a list item with the lines indented to its text: those are prose.
    Deeper lines, fenced code, and an indented block under a paragraph stay code."""
    text = (
        "Summary:\n1. Current Work:\n   Porting the parser to Rust.\n   \n"
        "   Two tests still fail.\n\n"
        "2. Files:\n   - src/lib.rs\n       fn parse() {}\n"
        "   ```rust\n   let x = 1;\n   ```\n"
        "- Next: run the suite\n  then push.\n"
        "The build printed:\n   Traceback (most recent call last):\n"
        'Traceback (most recent call last):\n  File "a.py", line 3, in f\n    foo()\n'
        "3. Tabs:\n\tnot prose"
    )
    kept = drop_code(text).split("\n")
    for prose in ("Porting the parser to Rust.", "Two tests still fail.", "- src/lib.rs"):
        assert prose in kept
    assert "then push." in kept  # a bullet's text starts at its third character
    for code in ("fn parse", "let x", "File ", "foo()", "not prose", "   Traceback"):
        assert not any(code in line for line in kept), code


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
