"""The scripted provider's own token counter and its window (the size guarantee's oracle)."""

from __future__ import annotations

import json

import pytest

from autocompact import ChatSession, ContextOverflowError, Message
from autocompact.content import FunctionCallPart, FunctionResponsePart, ImagePart
from autocompact.providers.base import ChatRequest, ToolSpec
from autocompact.testing import FakeProvider, FakeTokenizer


def _request(*messages: Message, system: str | None = None, tools=()) -> ChatRequest:
    return ChatRequest(messages=messages, system_instruction=system, tools=tuple(tools))


def test_text_is_counted_at_four_characters_times_the_factors() -> None:
    """Text (and the system prompt) count len/4 × factor × text_factor, rounded up."""
    tokenizer = FakeTokenizer(factor=0.5, text_factor=1.5)
    request = _request(Message.user("x" * 400), system="y" * 400)
    assert tokenizer.count(request) == 150  # 800 / 4 × 0.75


def test_json_is_counted_from_its_own_serialization() -> None:
    """Calls, responses and tool declarations count their json.dumps length / 2 × json_factor."""
    call = FunctionCallPart(id="c1", name="read", arguments={"path": "a.py"})
    response = FunctionResponsePart(id="c1", name="read", response="line\n" * 10)
    tool = ToolSpec(name="read", description="Read a file")
    request = _request(Message.model(call), Message.user(response), tools=[tool])
    chars = (
        len(json.dumps({"name": "read", "args": {"path": "a.py"}}))
        + len(json.dumps({"name": "read", "response": "line\n" * 10}))
        + len(json.dumps(tool.as_json()))
    )
    assert FakeTokenizer(json_factor=2.0).count(request) == chars  # chars / 2 × 2


def test_images_count_a_fixed_size_times_the_image_factor() -> None:
    """Each image or document counts image_tokens × factor × image_factor."""
    request = _request(Message.user(ImagePart(data="AAAA"), ImagePart(url="http://x/y.png")))
    assert FakeTokenizer(factor=2.0, image_factor=0.5, image_tokens=1000).count(request) == 2000


def test_per_message_overhead_is_added() -> None:
    """A chat template's per-message tokens are added once per message."""
    request = _request(Message.user("abcd"), Message.model("abcd"))
    assert FakeTokenizer(per_message=3).count(request) == 2 + 6


@pytest.mark.parametrize("field", ["factor", "text_factor", "json_factor", "image_factor"])
def test_a_factor_out_of_range_is_refused(field: str) -> None:
    """A non-positive or absurd factor is a clear error naming the field."""
    with pytest.raises(ValueError, match=field):
        FakeTokenizer(**{field: 0.0})


def test_usage_reports_the_fakes_own_count() -> None:
    """The prompt size in usage is the fake's count, logged in ``counts``."""
    fake = FakeProvider(tokenizer=FakeTokenizer(factor=0.6))
    completion = fake.complete(_request(Message.user("z" * 4000)))
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 600 == fake.counts[-1]


def test_prompt_scale_multiplies_the_count() -> None:
    """The older prompt_scale knob still multiplies the fake's count."""
    fake = FakeProvider(prompt_scale=1.25)
    assert fake.count_tokens(_request(Message.user("z" * 400))) == 125


def test_a_side_query_over_the_window_by_its_count_is_rejected() -> None:
    """Side queries are checked against the window like main turns."""
    fake = FakeProvider(context_window=1_000, tokenizer=FakeTokenizer(factor=2.0))
    request = ChatRequest(messages=(Message.user("q" * 2_400),), purpose="side_query")
    with pytest.raises(ContextOverflowError, match="1200 tokens > 1000"):
        fake.complete(request)
    assert fake.oversized == [0]


def test_oversized_requests_can_be_recorded_instead_of_rejected() -> None:
    """reject_oversized=False answers but records the leak."""
    fake = FakeProvider(context_window=100, reject_oversized=False)
    fake.complete(_request(Message.user("a" * 40)))
    fake.complete(_request(Message.user("a" * 800)))
    assert fake.oversized == [1]
    assert fake.counts == [10, 200]


def test_a_session_learns_the_fakes_tokenizer_not_its_own_estimate() -> None:
    """Usage follows the fake's count, so a session's provider count differs from its estimate."""
    fake = FakeProvider(tokenizer=FakeTokenizer(factor=0.5))
    session = ChatSession(fake, context_window=100_000)
    session.send("w" * 8_000)
    assert session.last_prompt_token_count == fake.counts[0] == 1_000
