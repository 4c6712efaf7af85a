"""A request of a conversation the worker has not read yet is read without counting what JSON
escaping adds to its strings, bounded by the request's size (module
``autocompact.serve.readings``): the exact estimate always lies within the bounds, the tier
decided on them is the exact one, and the exact estimate made afterwards is the full path's.

The oracle is the full path (conversion and the guard: ``full_path`` in ``test_fastpath``),
and the bodies are written the ways clients write them: ``ensure_ascii`` on and off, and with
every ``/`` escaped (valid JSON, written by some encoders, one more byte per character).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.guard import GuardState
from autocompact.serve.fastpath import bounds, estimate, read
from autocompact.serve.readings import Readings
from autocompact.serve.walk import Walk, escape_bound, string_lengths
from autocompact.thresholds import compute_thresholds, tier_of

from .test_fastpath import (
    ANTHROPIC_CASES,
    HISTORIES,
    OPENAI_CASES,
    STATES,
    TOOLS_ANTHROPIC,
    _growing,
    bodies,
    full_path,
)


def _encodings(body: dict[str, Any]) -> dict[str, bytes]:
    """The body as clients write it."""
    ascii_form = json.dumps(body).encode()
    return {
        "ensure_ascii": ascii_form,
        "utf-8": json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        "escaped slashes": ascii_form.replace(b"/", b"\\/"),  # only strings hold a "/"
    }


@pytest.mark.parametrize("state", ["cold", "raised"])
@pytest.mark.parametrize(("name", "history"), HISTORIES, ids=[n for n, _ in HISTORIES])
def test_bounds_hold_the_exact_estimate(name: str, history: list[Message], state: str) -> None:
    """Recorded sessions and generated turns full of quotes, backslashes, control characters
    and non-ASCII, in both protocols and three encodings: the bounded reading reads what the
    exact one reads, the full path's estimate lies within its bounds, and what escaping adds
    lies within the escape bound."""
    guard_state = STATES[state]
    for protocol, body in bodies(history).items():
        for encoding, raw in _encodings(body).items():
            decoded = json.loads(raw)
            where = (name, protocol, encoding)
            expected = full_path(protocol, decoded, guard_state)
            assert expected is not None, where
            exact = read(protocol, decoded, decoded["messages"], weight=len(raw))
            bounded = read(protocol, decoded, decoded["messages"], weight=len(raw), exact=False)
            assert exact is not None, where
            assert bounded is not None, where
            assert estimate(exact.stats, guard_state) == expected, where
            span = bounds(bounded, guard_state)
            assert span is not None, where
            assert span[0] <= expected[0] <= span[1], (where, span, expected[0])
            added = (
                exact.stats.history.json_chars
                + exact.stats.pending.json_chars
                - bounded.stats.history.json_chars
                - bounded.stats.pending.json_chars
            )
            pushed = string_lengths(bounded.walk.strings)
            assert 0 <= added <= escape_bound(len(raw), pushed), where
            # Everything but what escaping adds is read alike.
            assert bounded.stats.history.text_chars == exact.stats.history.text_chars, where
            assert bounded.stats.pending.media_parts == exact.stats.pending.media_parts, where
            # Counted afterwards, the walk is the exact one: its statistics, and every
            # checkpoint a later request would resume from.
            bounded.walk.make_exact()
            made = bounded.walk.result(bounded.stats.system, bounded.stats.tools)
            assert made == exact.stats, where
            assert _points(bounded.walk) == _points(exact.walk), where


def _points(walk: Walk) -> list[Any]:
    """The walk's checkpoints, without where the last message's strings ended in the walk's
    list (which no reader reads back from a checkpoint)."""
    return [None if p is None else (*p[:4], p[4][:6], *p[5:]) for p in walk.checkpoints]


def test_the_bound_is_tight_when_the_strings_are_all_escapes() -> None:
    """A tool result of control characters (five characters more each once escaped, six bytes
    each in the request): the bound exceeds what escaping adds by no more than the request's
    structure and its other strings, a few percent of it."""
    history = [
        Message.user("run it"),
        *to_history_with_result("\x01" * 5000 + '"\\' * 1000),
        Message.user("next"),
    ]
    body = bodies(history)["anthropic_messages"]
    raw = json.dumps(body).encode()
    decoded = json.loads(raw)
    exact = read("anthropic_messages", decoded, decoded["messages"], weight=len(raw))
    bounded = read("anthropic_messages", decoded, decoded["messages"], weight=len(raw), exact=False)
    assert exact is not None
    assert bounded is not None
    added = exact.stats.history.json_chars - bounded.stats.history.json_chars
    assert added == 5 * 5000 + 2 * 1000
    slack = escape_bound(len(raw), string_lengths(bounded.walk.strings)) - added
    assert 0 <= slack < len(raw) // 20  # its keys, the system prompt, the tools, the texts


def to_history_with_result(output: str) -> list[Message]:
    call = FunctionCallPart(id="c1", name="Bash", arguments={"cmd": "x"})
    return [
        Message(role="model", parts=(call,)),
        Message(role="user", parts=(FunctionResponsePart(id="c1", name="Bash", response=output),)),
    ]


def _request(history: list[Message]) -> tuple[dict[str, Any], bytes]:
    body = bodies(history)["anthropic_messages"]
    raw = json.dumps(body).encode()
    return json.loads(raw), raw


def test_a_new_conversation_is_decided_on_bounds_and_measured_later() -> None:
    """Far below auto: the tier is decided on the bounds (the reading is not kept yet); the
    exact estimate made afterwards is the full path's, and the reading it made is kept, so
    the conversation's next request resumes from it."""
    history = next(h for n, h in HISTORIES if n != "generated")
    body, raw = _request(history)
    expected = full_path("anthropic_messages", body, GuardState())
    assert expected is not None
    readings = Readings()
    sizing = readings.read("k", "anthropic_messages", body, body["messages"], len(raw))
    assert sizing is not None
    assert not sizing.walk.exact
    reading = readings.decide("k", sizing, GuardState(), 100 * expected[0])
    assert reading is not None
    assert reading.tier == tier_of(expected[0], compute_thresholds(100 * expected[0]))
    again = readings.read("k", "anthropic_messages", body, body["messages"], len(raw))
    assert again is not None
    assert not again.walk.exact
    assert reading.exact() == expected
    assert reading.exact() == expected  # made once
    resumed = readings.read("k", "anthropic_messages", body, body["messages"], len(raw))
    assert resumed is not None
    assert resumed.walk.exact


def test_bounds_across_a_threshold_read_exactly_before_deciding() -> None:
    """A window whose warn threshold falls between the bounds: the request is read exactly
    before the decision (its tier is the exact estimate's, on either side), and one whose
    exact estimate is at auto is left to the full path. Control: the bounds do straddle it."""
    history = HISTORIES[0][1]  # generated: escapes everywhere, so the bounds are apart
    body, raw = _request(history)
    expected = full_path("anthropic_messages", body, GuardState())
    assert expected is not None
    exact_tokens = expected[0]
    sizing = read("anthropic_messages", body, body["messages"], weight=len(raw), exact=False)
    assert sizing is not None
    span = bounds(sizing, GuardState())
    assert span is not None
    assert span[0] < exact_tokens < span[1]
    straddled = 0
    for window in range(span[0], 3 * span[1], max(1, span[1] // 400)):
        thresholds = compute_thresholds(window)
        if tier_of(span[0], thresholds) == tier_of(span[1], thresholds):
            continue
        straddled += 1
        readings = Readings()
        first = readings.read("k", "anthropic_messages", body, body["messages"], len(raw))
        assert first is not None
        reading = readings.decide("k", first, GuardState(), window)
        tier = tier_of(exact_tokens, thresholds)
        if tier.name in ("AUTO", "HARD"):
            assert reading is None
            continue
        assert reading is not None, window
        assert reading.tier == tier, window
        assert reading.exact() == expected
    assert straddled > 0


def test_a_learned_factor_is_not_bounded() -> None:
    """A calibration that applies a learned factor (not monotone in the JSON characters):
    no bounds; the decision reads exactly, with the full path's estimate."""
    history = HISTORIES[0][1]
    body, raw = _request(history)
    state = STATES["lowered"]
    expected = full_path("anthropic_messages", body, state)
    assert expected is not None
    sizing = read("anthropic_messages", body, body["messages"], weight=len(raw), exact=False)
    assert sizing is not None
    assert bounds(sizing, state) is None
    readings = Readings()
    reading = readings.decide("k", sizing, state, 100 * expected[0])
    assert reading is not None
    assert reading.exact() == expected


@pytest.mark.parametrize(("name", "history"), HISTORIES[:3], ids=[n for n, _ in HISTORIES[:3]])
def test_a_conversation_resumes_from_a_reading_made_exact(
    name: str, history: list[Message]
) -> None:
    """Each request of a growing conversation: the first decided on bounds and made exact
    after, the next ones resumed from the reading kept, every estimate the full path's."""
    readings = Readings()
    compared = 0
    for number, messages in enumerate(_growing(history)):
        body = {"model": "m", "system": "be brief", "tools": TOOLS_ANTHROPIC, "messages": messages}
        raw = json.dumps(body).encode()
        expected = full_path("anthropic_messages", body, GuardState())
        sizing = readings.read("c", "anthropic_messages", body, messages, len(raw))
        if expected is None:  # cut between parallel tool results: both paths refuse it
            assert sizing is None, (name, number)
            continue
        assert sizing is not None, (name, number)
        assert sizing.walk.exact == (compared > 0), (name, number)
        reading = readings.decide("c", sizing, GuardState(), 100 * expected[0] + 10**6)
        assert reading is not None, (name, number)
        assert reading.exact() == expected, (name, number)
        compared += 1
    assert compared > 3


@pytest.mark.parametrize(
    ("protocol", "body"),
    [("anthropic_messages", b) for b in ANTHROPIC_CASES.values()]
    + [("openai_chat", b) for b in OPENAI_CASES.values()],
    ids=[f"anthropic-{k}" for k in ANTHROPIC_CASES] + [f"openai-{k}" for k in OPENAI_CASES],
)
def test_the_bounded_reading_steps_aside_where_the_exact_one_does(
    protocol: str, body: dict[str, Any]
) -> None:
    """Every odd shape: the bounded reading reads it exactly when the exact one does, and
    made exact gives the same statistics."""
    raw = json.dumps(body).encode()
    exact = read(protocol, body, body["messages"], weight=len(raw))
    bounded = read(protocol, body, body["messages"], weight=len(raw), exact=False)
    assert (bounded is None) == (exact is None)
    if exact is not None and bounded is not None:
        bounded.walk.make_exact()
        assert bounded.walk.result(bounded.stats.system, bounded.stats.tools) == exact.stats
