"""The compactors ``quality.py`` compares, the size oracles, the match rule and the round loop.

Compactors (each gets the part to summarize and a target in tokens, at 4 characters a token):

- ``autocompact``: the engine's own path, ``CompressionService(None,
  summarizer=extractive_summary)`` (what the CLI and ``ChatSession`` use offline) with
  ``CompressOptions(force=True, keep_share=0.0, summary_target_tokens=target,
  clear_tool_outputs=False, trigger=MANUAL)``; the summary is ``result.info.summary`` and the next
  round continues from ``result.history``;
- ``head+tail`` (control): the first and last halves of the budget in characters of the part's
  text, cut at a space;
- ``random sentences`` (control): sentences of the part drawn at random until the budget is full,
  in their original order;
- ``oracle`` (reference, not a control): it knows the planted items and writes their shortest
  sentences, latest values only, as many as fit in four fifths of the budget (the values cost
  more tiktoken tokens a character than prose). It shows that the targets can be met within the
  budget; a compactor cannot know the items, so it is no competitor.

Size oracles (neither is the engine's estimate): characters / 4 of the text, and the real
``tiktoken`` ``o200k_base`` (``_offline_tiktoken.py``). The part's text is every text part, every
tool call's name and JSON arguments and every tool result, one message a line.

Match rule: an item is kept when its value occurs in the summary after both are normalised
(Unicode NFKC, case folded, backticks, quotes and ``*`` removed, runs of white space made one
space), not preceded or followed by a letter or a digit, nor followed by ``-``, ``.``, ``/`` or
``_`` and one (``pg-x-41`` is not in ``pg-x-410``, ``spotter-gqc`` not in ``spotter-gqc.4``).
A value cut by an ellipsis is not kept. A stale value is *carried* when it matches the same way.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from _quality_corpus import Planted, SessionState, new_round, new_state
from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import Message

__all__ = ["COMPACTORS", "Counter", "Record", "kept", "message_text", "run_session"]

Counter = Callable[[str], int]


def message_text(message: Message) -> str:
    """A message as the oracles count it: text, tool calls (name + JSON arguments), results."""
    pieces = [message.text]
    pieces += [f"{c.name} {json.dumps(c.arguments)}" for c in message.function_calls]
    pieces += [str(r.response) for r in message.function_responses]
    return "\n".join(p for p in pieces if p)


def _part_text(messages: Sequence[Message]) -> str:
    return "\n".join(message_text(m) for m in messages)


_DROP = str.maketrans("", "", "`'\"*“”‘’")


def normalise(text: str) -> str:
    """The match rule's normal form (module docstring)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_DROP).split())


def kept(summary_normal: str, value: str) -> bool:
    """Whether ``value`` occurs in an already normalised summary (module docstring)."""
    needle = re.escape(normalise(value))
    pattern = rf"(?<![a-z0-9]){needle}(?![a-z0-9]|[-./_][a-z0-9])"
    return re.search(pattern, summary_normal) is not None


# A compactor: (part, target tokens, items active now, rng) -> (summary, next history head)
Compactor = Callable[
    [Sequence[Message], int, Sequence[Planted], random.Random], tuple[str, tuple[Message, ...]]
]


def _carry(summary: str) -> tuple[Message, ...]:
    return (Message.user(summary), Message.model("OK, continuing from there."))


def _autocompact(
    part: Sequence[Message], target: int, _items: Sequence[Planted], _rng: random.Random
) -> tuple[str, tuple[Message, ...]]:
    service = CompressionService(None, summarizer=extractive_summary)
    options = CompressOptions(
        context_window=10_000_000,
        force=True,
        keep_share=0.0,
        summary_target_tokens=target,
        clear_tool_outputs=False,
        trigger=CompressionTrigger.MANUAL,
    )
    result = service.compress(part, options)
    if result.info.status is not CompressionStatus.COMPRESSED:
        raise RuntimeError(f"autocompact: {result.info.status.value}: {result.info.error}")
    return result.info.summary or "", result.history


def _head_tail(
    part: Sequence[Message], target: int, _items: Sequence[Planted], _rng: random.Random
) -> tuple[str, tuple[Message, ...]]:
    text, room = _part_text(part), target * 4
    head = text[: room // 2].rsplit(" ", 1)[0]
    tail = text[len(text) - room // 2 + 5 :].split(" ", 1)[-1]
    summary = f"{head}\n…\n{tail}"
    return summary, _carry(summary)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _random_sentences(
    part: Sequence[Message], target: int, _items: Sequence[Planted], rng: random.Random
) -> tuple[str, tuple[Message, ...]]:
    sentences = [s for s in _SENTENCE.split(_part_text(part)) if s.strip()]
    order = list(range(len(sentences)))
    rng.shuffle(order)
    room, chosen = target * 4, []
    for index in order:
        if len(sentences[index]) + 1 <= room:
            chosen.append(index)
            room -= len(sentences[index]) + 1
    summary = " ".join(sentences[i] for i in sorted(chosen))
    return summary, _carry(summary)


def _oracle(
    _part: Sequence[Message], target: int, items: Sequence[Planted], _rng: random.Random
) -> tuple[str, tuple[Message, ...]]:
    room, lines = target * 4 * 4 // 5, []  # a fifth to spare: values cost more tiktoken tokens
    for item in items:
        if len(item.sentence) + 1 <= room:
            lines.append(item.sentence)
            room -= len(item.sentence) + 1
    summary = "\n".join(lines)
    return summary, _carry(summary)


COMPACTORS: dict[str, Compactor] = {
    "autocompact": _autocompact,
    "head+tail": _head_tail,
    "random sentences": _random_sentences,
    "oracle": _oracle,
}


@dataclass(frozen=True, kw_only=True)
class Record:
    """One compaction's measures (the JSON output's ``records``)."""

    compactor: str
    kind: str
    seed: int
    budget: float
    round: int
    part_chars: int
    part_tokens: int
    target_tokens: int
    summary_chars: int
    summary_tokens: int
    within_chars: bool
    within_tokens: bool
    kept: dict[str, list[int]]  # item kind -> [kept, planted]
    stale_carried: int
    stale_total: int
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The record as plain JSON data."""
        return dict(self.__dict__)


def active(items: Sequence[Planted], rnd: int) -> list[Planted]:
    """The items said by round ``rnd`` and not superseded by then."""
    return [i for i in items if i.round <= rnd and (i.superseded is None or i.superseded > rnd)]


def run_session(
    compactor: str, kind: str, seed: int, budget: float, rounds: int, tokens: Counter
) -> list[Record]:
    """Generate one session round by round, compact it after each round, measure each summary."""
    state: SessionState = new_state(seed, kind)
    head: tuple[Message, ...] = ()
    records = []
    for rnd in range(1, rounds + 1):
        part = (*head, *new_round(state, rnd))
        text = _part_text(part)
        part_tokens = tokens(text)
        target = int(budget * len(text) / 4)
        items = active(state.items, rnd)
        rng = random.Random(f"{compactor}:{kind}:{seed}:{budget}:{rnd}")
        error = None
        try:
            summary, head = COMPACTORS[compactor](part, target, items, rng)
        except RuntimeError as exc:  # a failed compaction keeps nothing and counts as missed
            summary, head, error = "", tuple(part), str(exc)
        normal = normalise(summary)
        by_kind: dict[str, list[int]] = {}
        for item in items:
            tally = by_kind.setdefault(item.kind, [0, 0])
            tally[0] += kept(normal, item.value)
            tally[1] += 1
        stale = [i.stale for i in state.items if i.stale is not None and i.round <= rnd]
        summary_tokens = tokens(summary)
        records.append(
            Record(
                compactor=compactor,
                kind=kind,
                seed=seed,
                budget=budget,
                round=rnd,
                part_chars=len(text),
                part_tokens=part_tokens,
                target_tokens=target,
                summary_chars=len(summary),
                summary_tokens=summary_tokens,
                within_chars=len(summary) <= budget * len(text),
                within_tokens=summary_tokens <= budget * part_tokens,
                kept=by_kind,
                stale_carried=sum(kept(normal, value) for value in stale),
                stale_total=len(stale),
                error=error,
            )
        )
    return records
