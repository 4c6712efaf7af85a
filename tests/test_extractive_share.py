"""The extractive summary skips counting the token share of its input when the snapshot written
without the token cap is provably the one the cap gives: the summaries are the same as when the
share is always counted (recorded sessions and crafted texts, caps from tiny to large), and the
bound it uses is never above the share."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction import extractive, sidequery
from autocompact.compaction.extractive import _SPARE, _texts, extractive_summary
from autocompact.compaction.ledger import build_ledger, render_ledger
from autocompact.compaction.ledger.render import FRAME
from autocompact.compaction.ledger.tokens import least_token_share as _least_share
from autocompact.compaction.ledger.tokens import token_share
from autocompact.content import Message
from autocompact.estimation import BYTES_PER_TOKEN, estimate_content_chars
from autocompact.transcripts import read_transcript

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
RECORDED = sorted(DATA.rglob("*.jsonl.gz")) if DATA.is_dir() else []
CAPS = (16, 40, 64, 200, 600, 1_161, 3_200, 6_400, 10_000, 20_000)


def _always_counted(messages: Sequence[Message], max_tokens: int) -> str:
    """The summary as written before the skip: the share always counted."""
    limit = max_tokens * BYTES_PER_TOKEN
    if messages:
        limit = min(limit, estimate_content_chars(messages) - 1)
    if limit < FRAME:
        return "<state_snapshot>\n</state_snapshot>"
    tokens = int(max_tokens * min(1.0, token_share(_texts(messages))) * _SPARE)
    text = render_ledger(build_ledger(messages), limit, tokens=tokens)
    return text if len(text) <= limit else "<state_snapshot>\n</state_snapshot>"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.one_of(
                st.sampled_from(list("aZ09 \n\t._-/(){}[]'\"é€\u00a0\u2003\u3000ΣЖ漢😀")),
                st.characters(),
            ),
            max_size=300,
        ),
        max_size=40,
    )
)
def test_least_share_is_never_above_the_share(texts: list[str]) -> None:
    assert _least_share(texts) <= token_share(texts)


def test_least_share_on_a_long_history() -> None:
    """Past the sample's size only every n-th text is read: the bound reads the same ones."""
    texts = [f"text {i} " + "word " * (i % 50) + "x" * (i % 97) for i in range(3_000)]
    texts += ["     ", "", "UPPERCASE ACRONYMS AND 1234567 DIGITS"] * 50
    assert _least_share(texts) <= token_share(texts)


@pytest.mark.parametrize("max_tokens", CAPS)
def test_crafted_histories_summarize_alike(max_tokens: int) -> None:
    histories = [
        [],
        [Message.user("fix the bug in parser.py"), Message.model("Done: parser.py edited.")],
        [Message.user("   "), Message.model("\n\n")],
        [Message.user("Use Python 3.11. The port is 8080; never touch prod." * 20)],
        [Message.user("a" * 5_000), Message.model("ok")],
        [Message.user(" ".join(f"smtp-{i}.relay.example" for i in range(400)))],
    ]
    for history in histories:
        expected = _always_counted(history, max_tokens)
        assert extractive_summary(history, max_tokens=max_tokens) == expected


@pytest.mark.skipif(not RECORDED, reason="../shared/data is not present")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_sessions_summarize_alike(path: Path) -> None:
    """Slices of every recorded session, at caps from tiny to large, both ways."""
    messages = read_transcript(path).messages
    cuts = sorted({min(len(messages), n) for n in (1, 2, 5, 17, 60, 150, 400, sys.maxsize)})
    for stop in cuts:
        for start in {0, stop // 3}:
            part = messages[start:stop]
            for max_tokens in (16, 64, 600, 3_200, 10_000):
                expected = _always_counted(part, max_tokens)
                got = extractive_summary(part, max_tokens=max_tokens)
                assert got == expected, (path.name, start, stop, max_tokens)


def _session(path: Path, count: int = 120) -> tuple[Message, ...]:
    return read_transcript(path).messages[:count]


@pytest.mark.skipif(not RECORDED, reason="../shared/data is not present")
def test_a_known_ledger_serves_only_the_same_messages() -> None:
    """The ledger the flow built is read by a summary of the same message objects (in any
    container), and ignored for any other messages."""
    first, other = _session(RECORDED[0]), _session(RECORDED[3], 60)
    expected, expected_other = (_always_counted(m, 3_200) for m in (first, other))
    token = extractive.known_ledger(first, build_ledger(first))
    try:
        assert extractive_summary(list(first), max_tokens=3_200) == expected
        assert extractive_summary(other, max_tokens=3_200) == expected_other
        assert extractive_summary(first[:-1], max_tokens=3_200) == _always_counted(
            first[:-1], 3_200
        )
    finally:
        token.var.reset(token)
    # A ledger registered for these very messages is the one read (here a wrong one, to see it).
    token = extractive.known_ledger(first, build_ledger(other))
    try:
        assert extractive_summary(first, max_tokens=3_200) != expected
    finally:
        token.var.reset(token)
    assert extractive_summary(first, max_tokens=3_200) == expected


@pytest.mark.skipif(not RECORDED, reason="../shared/data is not present")
@pytest.mark.parametrize("path", RECORDED[:4], ids=lambda p: p.name)
def test_the_flow_summarizes_alike_with_its_ledger(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction with the extractive summarizer gives the same result whether the summary
    reads the flow's ledger or builds its own."""
    from autocompact.compaction import CompressionService, CompressOptions

    history = _session(path, 400)
    options = CompressOptions(context_window=64_000, force=True)
    service = CompressionService(None, summarizer=extractive_summary)
    reading = service.compress(history, options)
    monkeypatch.setattr(sidequery, "known_ledger", lambda messages, ledger: _unused.set(None))
    building = service.compress(history, options)
    assert reading.info == building.info
    assert reading.history == building.history


_unused: ContextVar[None] = ContextVar("unused", default=None)
