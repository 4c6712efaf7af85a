"""The engine package (issue 23): one frozen config, one state record, flows any driver runs."""

from __future__ import annotations

import dataclasses

import pytest

from autocompact import ConfigError, Message, ToolSpec, Usage
from autocompact.chat import ChatSession
from autocompact.compaction import CompressionStatus
from autocompact.compaction.service import drive_flow
from autocompact.engine import CarriedState, ConversationState, Engine, EngineConfig
from autocompact.estimation import content_stats
from autocompact.guard import GuardState
from autocompact.testing import FakeProvider
from histories import text_history as history_of

WINDOW = 100_000  # auto 70,000 · hard 77,000


def test_config_is_frozen_validated_and_derives_the_ladder() -> None:
    """EngineConfig normalizes the window, derives thresholds and fixed sizes, and is frozen."""
    tool = ToolSpec(name="look", description="d", parameters={"type": "object"})
    config = EngineConfig(context_window="128k", system_instruction="be brief", tools=[tool])  # type: ignore[arg-type]
    assert config.context_window == 128_000
    assert config.tools == (tool,)
    assert config.thresholds.window == 128_000
    assert config.fixed_tokens > 0
    assert config.fixed_plain > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.context_window = 1  # type: ignore[misc]
    assert config.with_window(64_000).thresholds.window == 64_000
    with pytest.raises(ConfigError, match="image_token_estimate"):
        EngineConfig(context_window=1_000, image_token_estimate=-1)


def test_guard_state_is_the_engines_carried_state_with_the_same_json() -> None:
    """GuardState is CarriedState; its JSON form has the four fields it always had."""
    assert GuardState is CarriedState
    state = GuardState(consecutive_failures=2, hold_until=50_000)
    data = state.to_dict()
    assert sorted(data) == ["calibration", "consecutive_failures", "growth", "hold_until"]
    assert GuardState.from_dict(data) == state


def test_state_start_checks_the_history_and_sums_its_statistics() -> None:
    """ConversationState.start keeps the history, its statistics and the carried counters."""
    history = history_of(10_000)
    state = ConversationState.start(
        history, last_prompt_token_count=9_000, carried=CarriedState(consecutive_failures=1)
    )
    assert state.history == tuple(history)
    assert state.history_stats == content_stats(history)
    assert state.count_base() == 9_000
    assert state.carried() == CarriedState(consecutive_failures=1)
    with pytest.raises(ConfigError):
        ConversationState.start([Message.user("x")], last_prompt_token_count=-1)


def test_a_bare_engine_driven_by_hand_does_what_a_chat_session_does() -> None:
    """The same turn through Engine.turn_flow and ChatSession.send: the same requests, the same
    compacted history, the same state record (the oracle is the session, a separate driver)."""
    history = history_of(72_000)
    config = EngineConfig(context_window=WINDOW)
    results = []
    for use_session in (False, True):
        fake = FakeProvider()
        fake.enqueue_text("A summary of the earlier turns.", purpose="side_query")
        fake.enqueue_text("Answer.", usage=Usage(prompt_tokens=20_000, output_tokens=10))
        if use_session:
            driver: Engine = ChatSession(fake, config=config, history=history)
            reply = driver.send("next question").message  # type: ignore[attr-defined]
        else:
            driver = Engine(fake, config, state=ConversationState.start(history))
            flow = driver.turn_flow(Message.user("next question"))
            reply = drive_flow(flow, driver.provider_for).message
        results.append(
            (
                [r.purpose for r in fake.requests],
                driver.history,
                driver.state.last_prompt_token_count,
                driver.state.since_count,
                [c.status for c in driver.compactions],
                reply,
            )
        )
    assert results[0] == results[1]
    purposes, history_after, count, _, statuses, _ = results[0]
    assert purposes == ["side_query", "chat"]
    assert statuses == [CompressionStatus.COMPRESSED]
    assert len(history_after) < len(history)
    assert count == 20_000


def test_chat_session_takes_one_config_or_the_keywords_not_both() -> None:
    """ChatSession(config=…) equals the keyword form; mixing the two is a clear ConfigError."""
    config = EngineConfig(context_window=WINDOW, system_instruction="sys", max_output_tokens=500)
    by_config = ChatSession(FakeProvider(), config=config)
    by_keywords = ChatSession(
        FakeProvider(), context_window=WINDOW, system_instruction="sys", max_output_tokens=500
    )
    assert by_config.config == by_keywords.config == config
    with pytest.raises(ConfigError, match="not both"):
        ChatSession(FakeProvider(), config=config, system_instruction="other")
    with pytest.raises(ConfigError, match="context_window"):
        ChatSession(FakeProvider())


def test_a_clear_resets_the_record_but_keeps_the_calibration() -> None:
    """clear() empties the history and the counters of the one record; calibration stays."""
    fake = FakeProvider()
    fake.enqueue_text("ok", usage=Usage(prompt_tokens=6_000, output_tokens=5))
    session = ChatSession(fake, context_window=WINDOW, consecutive_failures=2)
    session.send("hello there " * 2_000)
    learned = session.state.calibration
    assert learned.samples == 1
    session.clear()
    assert session.state.history == ()
    assert (session.state.last_prompt_token_count, session.state.consecutive_failures) == (0, 0)
    assert session.state.calibration == learned


def test_settings_stay_settable_on_a_live_session() -> None:
    """The attributes a session had before the engine package can still be set (users did)."""
    session = ChatSession(FakeProvider(), context_window=32_000)
    session.summary_target_tokens = 600
    session.keep_share = 0.2
    session.clear_tool_outputs = False
    session.consecutive_failures = 2
    assert session.config.summary_target_tokens == 600
    assert session.config.keep_share == 0.2
    assert session.config.clear_tool_outputs is False
    assert session.state.consecutive_failures == 2
    assert session.estimate_tokens() == 0  # the new configuration is in use
