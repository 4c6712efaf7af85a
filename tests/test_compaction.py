"""CompressionService (SPEC §5–§6): every status, the side query's shape, history untouched."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocompact import (
    COMPACT_MAX_OUTPUT_TOKENS,
    ConfigError,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    ToolSpec,
    Usage,
)
from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.prompts import SUMMARY_ACKNOWLEDGEMENT, SUMMARY_FINAL_INSTRUCTION
from autocompact.estimation import estimate_content_tokens
from autocompact.providers.base import FinishReason
from autocompact.testing import FakeProvider

S = CompressionStatus


def conversation(turns: int = 10, size: int = 2_000) -> tuple[Message, ...]:
    """A plain user/model conversation of ``turns`` exchanges with tool use in the middle."""
    history: list[Message] = []
    for i in range(turns):
        history.append(Message.user(f"question {i} " + "q" * size))
        if i % 3 == 1:
            history.append(Message.model(FunctionCallPart(id=f"c{i}", name="grep")))
            history.append(
                Message.user(FunctionResponsePart(id=f"c{i}", name="grep", response="r" * size))
            )
        history.append(Message.model(f"answer {i} " + "a" * size))
    return tuple(history)


FAILURES: dict[str, tuple[Callable[[FakeProvider], None], CompressionStatus]] = {
    "truncated-finish-reason": (
        lambda f: f.enqueue_truncated(),
        S.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
    ),
    "truncated-by-size": (
        lambda f: f.enqueue_truncated(by_size=True),
        S.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
    ),
    "empty": (lambda f: f.enqueue("", purpose="side_query"), S.COMPRESSION_FAILED_EMPTY_SUMMARY),
    "whitespace": (lambda f: f.enqueue_empty(), S.COMPRESSION_FAILED_EMPTY_SUMMARY),
    "inflated": (lambda f: f.enqueue_inflated(), S.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT),
    "provider-error": (
        lambda f: f.enqueue_error(purpose="side_query"),
        S.COMPRESSION_FAILED_PROVIDER_ERROR,
    ),
    "timeout": (
        lambda f: f.enqueue_timeout(purpose="side_query"),
        S.COMPRESSION_FAILED_PROVIDER_ERROR,
    ),
    "malformed": (
        lambda f: f.enqueue_malformed(purpose="side_query"),
        S.COMPRESSION_FAILED_PROVIDER_ERROR,
    ),
}


# -- COMPRESSED -----------------------------------------------------------------------------


def test_compressed_replaces_head_with_summary_and_ack() -> None:
    """Success: [user summary, (model ack)] + kept tail, count = original − compressed + summary."""
    history = conversation()
    fake = FakeProvider()
    fake.enqueue_text(
        "<state_snapshot>goal</state_snapshot>",
        usage=Usage(output_tokens=700),
        purpose="side_query",
    )
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=200_000, force=True, last_prompt_token_count=50_000)
    )
    info = result.info
    assert info.status is S.COMPRESSED
    assert info.method == "summary"
    k = info.compressed_messages
    assert 0 < k < len(history)
    assert info.kept_messages == len(history) - k
    assert result.history[0].role == "user"
    assert result.history[0].text.endswith("<state_snapshot>goal</state_snapshot>")
    # The acknowledgement sits between the summary and a tail that begins with a user message;
    # a tail that begins with a model message follows the summary directly (roles alternate).
    ack = 1 if history[k].role == "user" else 0
    if ack:
        assert result.history[1] == Message.model(SUMMARY_ACKNOWLEDGEMENT)
    assert result.history[1 + ack :] == history[k:]
    assert all(a is b for a, b in zip(result.history[1 + ack :], history[k:], strict=True))
    assert info.original_token_count == 50_000
    assert info.new_token_count == 50_000 - estimate_content_tokens(history[:k]) + 700
    assert info.compression_output_token_count == 700
    assert info.compression_input_token_count > 0
    assert info.summary == "<state_snapshot>goal</state_snapshot>"
    assert info.error is None


def test_compressed_cold_count_uses_the_estimate_of_the_history() -> None:
    """With no provider count, original is the history's estimate and the formula still holds."""
    history = conversation(turns=20, size=8_000)
    fake = FakeProvider()
    fake.enqueue_text("summary", usage=Usage(output_tokens=9_000), purpose="side_query")
    info = (
        CompressionService(fake)
        .compress(history, CompressOptions(context_window=200_000, force=True))
        .info
    )
    assert info.status is S.COMPRESSED
    original = estimate_content_tokens(history)
    assert info.original_token_count == original
    compressed = estimate_content_tokens(history[: info.compressed_messages])
    assert info.new_token_count == original - compressed + 9_000
    assert info.new_token_count < original


def test_new_count_never_below_the_estimate_of_the_new_history() -> None:
    """The estimate of the new history is a floor: the new count may only err high."""
    history = conversation()
    fake = FakeProvider()
    fake.enqueue_text("s", usage=Usage(output_tokens=1), purpose="side_query")
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=200_000, force=True)
    )
    assert result.info.status is S.COMPRESSED
    assert result.info.new_token_count >= estimate_content_tokens(result.history)


@pytest.mark.parametrize("trigger", list(CompressionTrigger))
def test_trigger_is_recorded(trigger: CompressionTrigger) -> None:
    """The trigger passed in the options is recorded in the telemetry."""
    info = (
        CompressionService(FakeProvider())
        .compress(
            conversation(), CompressOptions(context_window=200_000, force=True, trigger=trigger)
        )
        .info
    )
    assert info.trigger is trigger
    assert info.as_dict()["trigger"] == trigger.value


def test_output_at_the_cap_with_a_stop_reason_is_not_truncated() -> None:
    """A finish reason of stop wins over the size rule: the summary is kept."""
    fake = FakeProvider()
    history = conversation(turns=30, size=8_000)
    fake.enqueue_text(
        "summary", usage=Usage(output_tokens=COMPACT_MAX_OUTPUT_TOKENS), purpose="side_query"
    )
    info = (
        CompressionService(fake)
        .compress(history, CompressOptions(context_window=1_000_000, force=True))
        .info
    )
    assert info.status is S.COMPRESSED


def test_local_summarizer_needs_no_provider() -> None:
    """A service with only a summarizer compacts without any model."""
    seen: list[int] = []

    def summarize(messages: Sequence[Message]) -> str:
        seen.append(len(messages))
        return "local summary"

    result = CompressionService(None, summarizer=summarize).compress(
        conversation(), CompressOptions(context_window=200_000, force=True)
    )
    assert result.info.status is S.COMPRESSED
    assert seen == [result.info.compressed_messages]


def test_service_needs_a_provider_or_summarizer() -> None:
    """CompressionService(None) without a summarizer is a configuration error."""
    with pytest.raises(ConfigError, match="provider or a summarizer"):
        CompressionService(None)


def test_acompress_matches_compress() -> None:
    """The async service produces the same result as the sync one."""
    history = conversation()
    options = CompressOptions(context_window=200_000, force=True)
    sync = CompressionService(FakeProvider()).compress(history, options)
    async_ = asyncio.run(CompressionService(FakeProvider()).acompress(history, options))
    assert async_.history == sync.history
    assert async_.info == sync.info


# -- NOOP -----------------------------------------------------------------------------------


def test_noop_below_auto_sends_nothing() -> None:
    """Unforced and below the auto threshold: NOOP, no side query, same history object."""
    history = conversation()
    fake = FakeProvider()
    result = CompressionService(fake).compress(history, CompressOptions(context_window=1_000_000))
    assert result.info.status is S.NOOP
    assert result.history is history
    assert fake.requests == []


def test_noop_when_breaker_open_and_not_forced() -> None:
    """With 3 failures in a row and no force: NOOP even far above auto."""
    history = conversation()
    fake = FakeProvider()
    options = CompressOptions(
        context_window=32_000, consecutive_failures=3, last_prompt_token_count=31_000
    )
    result = CompressionService(fake).compress(history, options)
    assert result.info.status is S.NOOP
    assert "breaker" in (result.info.error or "")
    assert fake.requests == []


def test_forced_call_ignores_the_breaker() -> None:
    """A forced call runs even with the breaker open."""
    fake = FakeProvider()
    options = CompressOptions(context_window=32_000, consecutive_failures=5, force=True)
    assert CompressionService(fake).compress(conversation(), options).info.status is S.COMPRESSED
    assert len(fake.requests) == 1


def test_unforced_above_auto_compacts() -> None:
    """Unforced at or above auto with the breaker closed: a side query is made."""
    fake = FakeProvider()
    options = CompressOptions(
        context_window=100_000, consecutive_failures=2, last_prompt_token_count=70_000
    )
    assert CompressionService(fake).compress(conversation(), options).info.status is S.COMPRESSED


def test_empty_history_is_a_noop_even_forced() -> None:
    """An empty history is a NOOP, forced or not."""
    fake = FakeProvider()
    result = CompressionService(fake).compress((), CompressOptions(context_window=10, force=True))
    assert result.info.status is S.NOOP
    assert fake.requests == []


# -- the side query -------------------------------------------------------------------------


def test_side_query_is_bounded_with_thinking_off() -> None:
    """The side query asks for max 20,000 output tokens, thinking off, purpose side_query."""
    fake = FakeProvider()
    options = CompressOptions(
        context_window=200_000,
        force=True,
        instructions="focus on the parser bug",
        system_instruction="you are a coding agent",
        tools=(ToolSpec(name="grep"),),
    )
    CompressionService(fake).compress(conversation(), options)
    (request,) = fake.requests
    assert request.max_output_tokens == 20_000 == COMPACT_MAX_OUTPUT_TOKENS
    assert request.thinking is False
    assert request.purpose == "side_query"
    assert request.system_instruction is not None
    assert "focus on the parser bug" in request.system_instruction
    assert "<state_snapshot>" in request.system_instruction
    assert request.tools == ()
    assert request.messages[0].role == "user"
    assert request.messages[-1] == Message.user(SUMMARY_FINAL_INSTRUCTION)


def test_side_query_system_prompt_without_instructions() -> None:
    """Without /compress instructions the system prompt has no additional-instructions block."""
    fake = FakeProvider()
    CompressionService(fake).compress(
        conversation(), CompressOptions(context_window=200_000, force=True)
    )
    assert "Additional instructions" not in (fake.requests[0].system_instruction or "")


# -- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(FAILURES), ids=list(FAILURES))
def test_each_failure_status_leaves_the_history_identical(kind: str) -> None:
    """Each failure returns its status and the very same history tuple."""
    script, status = FAILURES[kind]
    history = conversation()
    fake = FakeProvider()
    script(fake)
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=200_000, force=True, last_prompt_token_count=60_000)
    )
    assert result.info.status is status
    assert result.info.status.failed
    assert result.history is history
    assert result.info.new_token_count == result.info.original_token_count == 60_000
    assert result.info.summary is None
    assert result.info.error


def test_truncated_summary_is_never_kept_even_if_small() -> None:
    """A length finish reason refuses the summary whatever its size."""
    fake = FakeProvider()
    fake.enqueue_text("short", finish_reason=FinishReason.LENGTH, purpose="side_query")
    history = conversation()
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=200_000, force=True)
    )
    assert result.info.status is S.COMPRESSION_FAILED_OUTPUT_TRUNCATED
    assert result.history is history


def _circular_history() -> tuple[Message, ...]:
    # A part refuses a circular response when it is built; a dict made circular afterwards
    # is what is left for the compaction to meet (its size is measured again on the copy).
    loop: dict[str, object] = {}
    part = FunctionResponsePart(id="1", name="t", response=loop)
    loop["self"] = loop
    object.__setattr__(part, "_stats", None)
    return (
        Message.user("q" * 100),
        Message.model(FunctionCallPart(id="1", name="t")),
        Message.user(part),
        Message.model("a" * 100),
        Message.user("next"),
        Message.model("ok"),
    )


def test_token_count_error_on_the_cold_path() -> None:
    """A history that cannot be counted gives COMPRESSION_FAILED_TOKEN_COUNT_ERROR, untouched."""
    history = _circular_history()
    fake = FakeProvider()
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=1_000, force=True)
    )
    assert result.info.status is S.COMPRESSION_FAILED_TOKEN_COUNT_ERROR
    assert result.history is history
    assert fake.requests == []


def test_token_count_error_with_a_provider_count() -> None:
    """With a provider count, an uncountable history still fails cleanly (no exception)."""
    history = _circular_history()
    result = CompressionService(FakeProvider()).compress(
        history, CompressOptions(context_window=1_000, force=True, last_prompt_token_count=900)
    )
    assert result.info.status is S.COMPRESSION_FAILED_TOKEN_COUNT_ERROR
    assert result.history is history


def test_cancellation_during_the_side_query_propagates_and_keeps_nothing() -> None:
    """A KeyboardInterrupt in the side query propagates; the caller's history is untouched."""
    history = conversation()
    snapshot = list(history)
    fake = FakeProvider()
    fake.enqueue_error(KeyboardInterrupt(), purpose="side_query")
    with pytest.raises(KeyboardInterrupt):
        CompressionService(fake).compress(
            history, CompressOptions(context_window=200_000, force=True)
        )
    assert list(history) == snapshot


# -- property: every failure leaves any history identical -----------------------------------

_turn = st.tuples(
    st.sampled_from(["text", "call"]), st.integers(min_value=1, max_value=4_000), st.booleans()
)


def _random_history(turns: list[tuple[str, int, bool]]) -> list[Message]:
    history = [Message.user("task")]
    for n, (kind, size, flag) in enumerate(turns):
        if kind == "call":
            history.append(Message.model(FunctionCallPart(id=f"c{n}", name="t")))
            history.append(
                Message.user(FunctionResponsePart(id=f"c{n}", name="t", response="r" * size))
            )
            history.append(Message.model("m" * size))
        else:
            history.append(Message.model("m" * size) if flag else Message.model("x"))
        history.append(Message.user("u" * size))
    if turns and turns[-1][2]:
        history.append(Message.model("final " * 10))
    return history


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_turn, min_size=0, max_size=15),
    st.sampled_from(list(FAILURES)),
    st.booleans(),
    st.integers(min_value=0, max_value=300_000),
)
def test_property_every_failure_leaves_any_history_identical(
    turns: list[tuple[str, int, bool]], kind: str, as_tuple: bool, last: int
) -> None:
    """For random histories and every failure kind the history comes back element for element."""
    built = _random_history(turns)
    history: Sequence[Message] = tuple(built) if as_tuple else built
    snapshot = list(history)
    script, status = FAILURES[kind]
    fake = FakeProvider()
    script(fake)
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=128_000, force=True, last_prompt_token_count=last)
    )
    assert result.info.status in (status, S.NOOP)
    if result.info.status is S.NOOP:
        assert fake.requests == []
    assert list(history) == snapshot
    assert len(result.history) == len(snapshot)
    assert all(a is b for a, b in zip(result.history, snapshot, strict=True))
    if as_tuple:
        assert result.history is history
