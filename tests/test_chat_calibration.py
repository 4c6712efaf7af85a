"""ChatSession learns its tokenizer from reported usage and applies it to cold estimates: raising
at once, lowering too once learned from enough reports (issue 11)."""

from __future__ import annotations

import pytest

from autocompact import ChatRequest, ChatSession, CompressionStatus, Message
from autocompact.estimation import Calibration
from autocompact.testing import FakeProvider

SYSTEM = "You are terse. " * 40


def _grown_session(scale: float, turns: int = 6) -> ChatSession:
    provider = FakeProvider(prompt_scale=scale)
    session = ChatSession(provider, context_window=1_000_000, system_instruction=SYSTEM)
    for i in range(turns):
        session.send(f"turn {i}: " + "lorem ipsum dolor " * 300)
    return session


def test_session_learns_the_ratio_between_reported_and_estimated() -> None:
    """A provider counting 1.3× the estimate teaches a factor of about 1.3."""
    session = _grown_session(1.3)
    assert session.calibration.samples == 6
    assert session.calibration.factor == pytest.approx(1.3, rel=0.01)


def test_restored_session_starts_calibrated() -> None:
    """A restored history with its saved calibration estimates what the provider will count."""
    live = _grown_session(1.3)
    saved = Calibration.from_dict(live.calibration.to_dict())
    provider = FakeProvider()
    restored = ChatSession(
        provider,
        context_window=1_000_000,
        system_instruction=SYSTEM,
        history=live.history,
        calibration=saved,
    )
    uncalibrated = ChatSession(
        provider, context_window=1_000_000, system_instruction=SYSTEM, history=live.history
    )
    assert restored.estimate_tokens() > uncalibrated.estimate_tokens() * 1.25
    assert restored.estimate_tokens() == pytest.approx(live.estimate_tokens(), rel=0.02)


def test_a_learned_calibration_lowers_a_cold_estimate_with_a_margin() -> None:
    """A tokenizer counting 0.7× the estimate, learned from enough reports, lowers the restored
    session's cold estimate to about 0.7 × 1.03 of the plain one (the low-side margin)."""
    live = _grown_session(0.7)
    assert live.calibration.factor == pytest.approx(0.7, rel=0.01)
    kwargs = {"context_window": 1_000_000, "system_instruction": SYSTEM, "history": live.history}
    calibrated = ChatSession(FakeProvider(), calibration=live.calibration, **kwargs)
    plain = ChatSession(FakeProvider(), **kwargs).estimate_tokens("next")
    lowered = calibrated.estimate_tokens("next")
    assert lowered == pytest.approx(plain * 0.7 * 1.03, rel=0.02)
    provider_count = live.provider.count_tokens(  # type: ignore[attr-defined]
        ChatRequest(messages=(*live.history, Message.user("next")), system_instruction=SYSTEM)
    )
    assert provider_count <= lowered <= 1.1 * provider_count


def test_a_single_report_only_raises() -> None:
    """With fewer reports than CALIBRATION_MIN_SAMPLES a low factor does not lower anything."""
    live = _grown_session(0.7)
    kwargs = {"context_window": 1_000_000, "system_instruction": SYSTEM, "history": live.history}
    once = Calibration(factor=live.calibration.factor, samples=1)
    calibrated = ChatSession(FakeProvider(), calibration=once, **kwargs)
    plain = ChatSession(FakeProvider(), **kwargs)
    assert calibrated.estimate_tokens("next") == plain.estimate_tokens("next")


def test_calibration_makes_a_restored_session_compact_on_its_first_send() -> None:
    """Plain estimate below auto, calibrated above it: the first send compacts first."""
    live = _grown_session(1.5, turns=12)
    history = live.history
    plain_count = ChatSession(
        FakeProvider(), context_window=1_000_000, history=history, system_instruction=SYSTEM
    ).estimate_tokens("go on")
    # A window whose auto threshold (70 %) sits between the plain and the calibrated estimate.
    window = int(plain_count * 1.2 / 0.7)
    provider = FakeProvider()
    session = ChatSession(
        provider,
        context_window=window,
        system_instruction=SYSTEM,
        history=history,
        calibration=live.calibration,
    )
    assert plain_count < session.thresholds.auto <= session.estimate_tokens("go on")
    session.send(Message.user("go on"))
    assert session.compactions[0].status is CompressionStatus.COMPRESSED
    assert provider.requests[0].purpose == "side_query"


def test_running_history_statistics_match_a_fresh_count() -> None:
    """The per-turn running statistics always equal a fresh sum, across compactions and clear."""
    from autocompact.estimation import content_stats

    provider = FakeProvider(context_window=40_000)
    session = ChatSession(provider, context_window=40_000, system_instruction=SYSTEM)
    for i in range(30):
        session.send(f"turn {i}: " + "words and more words " * 200)
        assert session.state.history_stats == content_stats(session.history)
    assert any(info.status is CompressionStatus.COMPRESSED for info in session.compactions)
    session.clear()
    assert session.state.history_stats == content_stats(session.history)
