"""The automatic compaction's gate judges the count the engine's tier was decided on.

A driver with no provider count (the framework drivers, the proxy) sizes the request with the
calibration it learned; the compaction's own gate must not re-estimate without it and call the
request "below auto".
"""

from __future__ import annotations

import math

import pytest

from autocompact import Message
from autocompact.compaction import CompressionService, CompressionStatus, CompressionTrigger
from autocompact.compaction.plan import CompressOptions, count_history_tokens
from autocompact.engine import EngineConfig
from autocompact.engine.sizing import compaction_count, estimate_tokens
from autocompact.engine.state import CarriedState, ConversationState
from autocompact.estimation import Calibration
from autocompact.events import CompactionSkipped, Event
from autocompact.guard import ContextGuard, GuardState, learn_from_usage, request_stats
from autocompact.testing import FakeProvider
from autocompact.thresholds import compute_thresholds
from histories import text_history

WINDOW = 100_000  # warn 60,000 · auto 70,000 · hard 77,000


def counted_by_thirds(messages: list[Message]) -> int:
    """The provider's count: a tokenizer of three characters a token (the estimate uses four)."""
    return math.ceil(sum(len(m.text) for m in messages) / 3)


def test_an_auto_tier_reached_on_the_calibrated_count_compacts() -> None:
    """A history below auto on the plain estimate but in the auto tier on the learned scale
    (about 1.33) is compacted by the automatic compaction, not skipped as "below auto"."""
    state = GuardState()
    for tokens in (20_000, 30_000):  # two earlier requests teach the provider's scale
        earlier = text_history(tokens, end_on_user=True)
        stats = request_stats(earlier, system_instruction=None, tools=())
        state = learn_from_usage(state, stats, counted_by_thirds(earlier))
    assert 1.3 < state.calibration.factor < 1.4
    events: list[Event] = []
    fake = FakeProvider()
    guard = ContextGuard(
        context_window=WINDOW,
        compression=CompressionService(fake),
        clear_tool_outputs=False,
        hooks=[events.append],
    )
    messages = text_history(55_000, end_on_user=True)
    plain = guard.run(messages).tokens
    thresholds = compute_thresholds(WINDOW)
    result = guard.run(messages, state=state)
    assert plain < thresholds.auto <= result.tokens < thresholds.hard
    assert [info.trigger for info in result.compactions] == [CompressionTrigger.AUTO]
    assert result.compactions[0].status is CompressionStatus.COMPRESSED
    assert not [e for e in events if isinstance(e, CompactionSkipped)]
    assert [r.purpose for r in fake.requests] == ["side_query"]
    assert len(result.history) < len(messages)


@pytest.mark.parametrize(
    ("factor", "samples", "count", "passed"),
    [
        (1.33, 4, 0, "calibrated"),
        (0.7, 4, 0, "none"),
        (1.0, 0, 0, "none"),
        (1.33, 4, 41_000, "count"),
    ],
    ids=["raised-cold", "lowered-cold", "uncalibrated-cold", "provider-count"],
)
def test_the_count_a_compaction_starts_from(
    factor: float, samples: int, count: int, passed: str
) -> None:
    """The engine hands a compaction the provider's count, or on the cold path the estimate its
    tier used when the calibration raised it (the gate adds the pending message back to the
    same pre-send count); a lowering or no calibration leaves the plain estimate to it."""
    history = text_history(40_000, end_on_user=True)
    pending = Message.user("p" * 8_000)
    carried = CarriedState(calibration=Calibration(factor=factor, samples=samples))
    state = ConversationState.start(history, last_prompt_token_count=count, carried=carried)
    config = EngineConfig(context_window=WINDOW, system_instruction="s" * 400)
    handed = compaction_count(config, state, pending)
    options = CompressOptions(
        context_window=WINDOW, system_instruction="s" * 400, last_prompt_token_count=handed
    )
    plain = count_history_tokens(
        history, CompressOptions(context_window=WINDOW, system_instruction="s" * 400)
    )
    expected = {
        "calibrated": estimate_tokens(config, state, pending) - 2_000,
        "none": 0,
        "count": count,
    }[passed]
    assert handed == expected
    if passed == "calibrated":
        assert handed > plain
        assert count_history_tokens(history, options) + 2_000 == estimate_tokens(
            config, state, pending
        )
