"""pydantic-ai: the tier events describe the request that is then sent."""

from __future__ import annotations

from autocompact.events import CompactionSucceeded, Event, ThresholdCrossed
from autocompact.integrations.pydantic_ai import Autocompact

from .test_pydantic_ai import WINDOW, Script, make_agent


def test_tier_after_a_compaction_counts_the_pending_tool_results() -> None:
    """A compaction made while a large tool result is pending (it stays, and is most of the
    next request) is followed by no tier event that leaves the result out: every tier event
    counts at least half of what the model then receives (by its own count). The one after a
    compaction counted the history without the result: 157 tokens and ``safe`` for a request
    of 20,089."""
    script = Script()
    events: list[tuple[Event, int]] = []  # each event, with the main requests sent before it
    capability = Autocompact(
        context_window=WINDOW,
        clear_tool_outputs=False,
        hooks=[lambda event: events.append((event, len(script.sent)))],
    )
    agent = make_agent(script, capability, output=60_000)  # each result ~20K tokens
    history = None
    for turn in range(3):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    assert any(isinstance(e, CompactionSucceeded) for e, _ in events)
    crossings = [(e, n) for e, n in events if isinstance(e, ThresholdCrossed)]
    assert crossings
    for crossed, before in crossings:
        received = script.sent[before]  # the model's count of the next request it received
        assert received > 0.6 * WINDOW  # the pending result alone is most of it
        assert crossed.tokens >= received / 2, (crossed, received)
