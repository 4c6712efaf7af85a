"""Exact JSON lengths counted without building the JSON (issue 25), and the estimate unchanged.

The oracle is the old definition, ``len(json.dumps(value, ensure_ascii=False, separators=(",",
":"), default=str))``, computed here with the standard library, never by the code under test;
the recorded sessions' totals below were taken with the code before issue 25 (the escaped copy
of every string) and must not move by one token.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    json_length,
    utf8_json_length,
)
from autocompact.convert import from_anthropic_message
from autocompact.estimation import content_stats, estimate_content_tokens


def _oracle(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


# Every code point, surrogates and control characters included.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
TEXT = st.text(alphabet=ANY_CHAR, max_size=200)
ESCAPY = st.text(alphabet=st.sampled_from('"\\\n\r\t\b\f\x00\x01\x1f\x7f aé─😀'), max_size=80)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
    | ESCAPY
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(alphabet=ANY_CHAR, max_size=10) | ESCAPY, inner, max_size=5)
    ),
    max_leaves=30,
)


@given(TEXT | ESCAPY)
@settings(max_examples=400)
def test_string_length_matches_json_dumps(text: str) -> None:
    """A string's counted JSON length is len(json.dumps(s, ensure_ascii=False)), any code point."""
    assert json_length(text) == _oracle(text)


@given(TEXT | ESCAPY)
@settings(max_examples=300)
def test_utf8_length_matches_json_dumps(text: str) -> None:
    """The length counted from UTF-8 bytes is the length of the decoded string's JSON."""
    assert utf8_json_length(text.encode("utf-8", "surrogatepass")) == _oracle(text)


@given(VALUES)
@settings(max_examples=300)
def test_nested_values_match_json_dumps(value: Any) -> None:
    """Nested values (lists, objects, numbers, NaN, strings) measure as json.dumps writes them."""
    assert json_length(value) == _oracle(value)


@given(VALUES)
@settings(max_examples=200)
def test_function_response_size_is_its_json_object(response: Any) -> None:
    """A function response counts exactly its {"name": ..., "response": ...} object."""
    part = FunctionResponsePart(id="c1", name="Bash", response=response)
    assert part.stats.json_chars == _oracle({"name": "Bash", "response": response})


def test_long_strings_of_every_escape() -> None:
    """Megabyte strings with every escape class count exactly (the C pass, not a sample)."""
    for unit in ("ascii only ", 'q"b\\\n\t', "\x00\x1fé", "─┼😀\ud800\n"):
        text = unit * 100_000
        assert json_length(text) == _oracle(text)


def test_str_subclass_and_other_values_use_the_encoder() -> None:
    """A str subclass and values JSON cannot carry keep json.dumps's answer (default=str)."""

    class Name(str):
        pass

    assert json_length(Name("a\nb")) == _oracle(Name("a\nb"))
    assert json_length({"when": object}) == _oracle({"when": object})


# -- the recorded sessions: estimates unchanged to the token ---------------------------------

DATA = Path(
    os.environ.get("AUTOCOMPACT_SESSIONS_DIR")
    or Path(__file__).resolve().parents[2] / "shared" / "data" / "claude-code-sessions"
)
if not DATA.is_dir():  # a worktree under wt/: the shared folder is one level further up
    DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "claude-code-sessions"

# (messages, text chars, JSON chars, media parts, estimate) of every message of every file,
# measured before issue 25 (json_length as the length of json.encoder's escaped copy).
BEFORE: dict[str, tuple[int, int, int, int, int]] = {
    "258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl.gz": (
        8,
        4149,
        119962,
        0,
        61019,
    ),
    "258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl.gz": (
        4,
        24473,
        0,
        0,
        6119,
    ),
    "258c7280-ae70-4798-800f-63464d01a85d.jsonl.gz": (491, 31560, 476392, 0, 246086),
    "4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl.gz": (
        74,
        17323,
        168223,
        0,
        88443,
    ),
    "4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-acompact-e1f845.jsonl.gz": (
        5,
        27773,
        0,
        0,
        6944,
    ),
    "4d5611e5-241a-462a-8d15-5122611a9569.jsonl.gz": (408, 35373, 566664, 0, 292176),
    "6c2214d7-b87e-4432-8e41-22ba294ea584/subagents/agent-afc096d.jsonl.gz": (
        115,
        11331,
        87947,
        0,
        46807,
    ),
    "short.jsonl.gz": (9, 312, 673, 0, 415),
    "subagent.jsonl.gz": (48, 15533, 43300, 0, 25534),
    "tool_heavy.jsonl.gz": (22, 886, 8755, 0, 4599),
}


def _messages(path: Path) -> list[Message]:
    names: dict[str, str] = {}
    out: list[Message] = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            message = record.get("message")
            if record.get("type") in ("user", "assistant") and isinstance(message, dict):
                out.append(from_anthropic_message(message, tool_names=names))
    return out


def _figures(messages: list[Message]) -> tuple[int, int, int, int, int]:
    """What BEFORE records of a session: messages, the three statistics, the estimate."""
    stats = content_stats(messages)
    return (
        len(messages),
        stats.text_chars,
        stats.json_chars,
        stats.media_parts,
        estimate_content_tokens(messages),
    )


@pytest.mark.skipif(not DATA.is_dir(), reason=f"recorded sessions not found at {DATA}")
def test_recorded_sessions_estimate_unchanged_to_the_token() -> None:
    """Every recorded session's statistics and estimate equal those measured before issue 25,
    and every function part's JSON size equals json.dumps's length of the same object."""
    files = {str(p.relative_to(DATA)): p for p in sorted(DATA.rglob("*.jsonl.gz"))}
    assert set(files) == set(BEFORE)
    for name, path in files.items():
        messages = _messages(path)
        assert _figures(messages) == BEFORE[name], name
        for message in messages:
            for part in message.parts:
                if isinstance(part, FunctionResponsePart):
                    expected = _oracle({"name": part.name, "response": part.response})
                    assert part.stats.json_chars == expected, name
                elif isinstance(part, FunctionCallPart):
                    expected = _oracle({"name": part.name, "args": part.arguments})
                    assert part.stats.json_chars == expected, name


@pytest.mark.skipif(not DATA.is_dir(), reason=f"recorded sessions not found at {DATA}")
def test_recorded_sessions_from_plain_dicts_estimate_unchanged() -> None:
    """Each recorded session as plain dicts: history_from_dicts gives the same statistics and
    estimate before any part is built, and then the general path's messages and statistics."""
    from autocompact.codec import history_from_dicts, history_to_dicts, message_from_dict

    for name, path in sorted((str(p.relative_to(DATA)), p) for p in DATA.rglob("*.jsonl.gz")):
        dicts = json.loads(json.dumps(history_to_dicts(_messages(path))))
        fresh = history_from_dicts(dicts)
        assert _figures(fresh) == BEFORE[name], name
        general = [message_from_dict(d, index=i) for i, d in enumerate(dicts)]
        assert [m.stats for m in fresh] == [m.stats for m in general], name
        assert fresh == general, name
        for got_message, want in zip(fresh, general, strict=True):
            assert [p.stats for p in got_message.parts] == [p.stats for p in want.parts], name
