"""The ledger's speed work (issue 22): the same ledger however memory is reused, linear time."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction.ledger.keys import KeyWords, key_words, shapes
from autocompact.compaction.ledger.model import Entry
from autocompact.compaction.ledger.subjects import Subjects
from autocompact.compaction.ledger.text import each_specific_token, marked_tokens, specific_tokens

# Words and marks of every kind the readers tell apart: plurals and possessives, values,
# identifiers, names, quotes, edge punctuation, blanks of several kinds, letters outside ASCII.
_TEXT = st.lists(
    st.sampled_from(
        [
            *"ab Zys.!?:,-*•>`'\"(_/0$@=#\\)[]{}<>;…€£",
            *("İ", "Σ", "é", "K", "\u0663", "²", "  ", "\t", "\n", "\xa0", "'s ", "ies "),
            *("the ", "runners ", "team's ", "policies ", "status ", "Name ", "(Name ", "AB "),
            *("pg-a-12.internal ", "v1.2 ", "x.y ", "a-b ", "getX ", "`x` ", "'q' ", "I "),
        ]
    ),
    max_size=30,
).map("".join)
_SHARED = KeyWords()  # one reader over many texts, as a ledger reads a session


@settings(max_examples=400, deadline=None)
@given(text=_TEXT)
def test_key_words_read_word_by_word_are_those_of_the_whole_text(text: str) -> None:
    """KeyWords (each distinct word read once, over many texts) gives key_words'."""
    assert KeyWords()(text) == key_words(text)
    assert _SHARED(text) == key_words(text)


@settings(max_examples=400, deadline=None)
@given(text=_TEXT)
def test_the_marked_tokens_have_the_shapes_of_all_the_specific_tokens(text: str) -> None:
    """The value shapes read from the words with a digit or a mark are those of every specific
    token; the tokens one at a time are specific_tokens, in order."""
    assert shapes(marked_tokens(text)) == shapes(specific_tokens(text))
    assert list(each_specific_token(text)) == specific_tokens(text)


def test_a_superseded_entry_is_held_so_a_new_entry_never_takes_its_id() -> None:
    """An entry marked superseded and then let go (a replaced rule) does not make an entry
    created after it count as superseded: CPython gives a freed entry's memory, and so its id,
    to the next one made."""
    subjects = Subjects()
    taken = []
    for n in range(200):
        old = Entry(f"Only deploy the exporter on day {n}.", 3.0, 2 * n, f"rule:{n}")
        subjects.drop(old)
        del old
        new = Entry(f"Only deploy the exporter on night {n}.", 3.0, 2 * n + 1, f"rule:{n}")
        if id(new) in subjects.gone:
            taken.append(new.text)
    assert taken == []


@pytest.mark.skipif(
    importlib.util.find_spec("langchain_core") is None,
    reason="benchmark extra not installed: pip install -e '.[bench]'",
)
def test_speed_benchmark_fails_a_quadratic_control() -> None:
    """benchmarks/extractive_speed.py --control quadratic (a compaction that rereads the whole
    history every 10 requests) misses the linear-time target: FAILED on chat, exit status 1,
    with the load average printed next to the verdicts."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "extractive_speed.py"
    args = ["--rounds", "1", "--counts", "20", "160", "--max-seconds", "1000"]
    run = subprocess.run(
        [sys.executable, str(script), *args, "--control", "quadratic"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stderr
    assert "CONTROL: 'quadratic'" in run.stdout
    chat = next(line for line in run.stdout.splitlines() if line.startswith("- chat: time per"))
    assert chat.endswith("FAILED")
    assert "load average at the end:" in run.stdout
