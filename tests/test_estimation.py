"""Local token estimates (SPEC §4): ratios per part kind, main vs cold path, caching."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction

import pytest

import autocompact.jsonsize as jsonsize_module
from autocompact import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolSpec,
    estimate_content_chars,
    estimate_content_tokens,
    estimate_prompt_tokens,
)
from autocompact.chat import ChatSession
from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.content import json_form
from autocompact.estimation import (
    BYTES_PER_TOKEN,
    BYTES_PER_TOKEN_JSON,
    estimate_text_tokens,
    estimate_tools_tokens,
)
from autocompact.testing import FakeProvider


def test_ratios_are_4_and_2() -> None:
    """Text counts 4 characters a token, function JSON 2."""
    assert (BYTES_PER_TOKEN, BYTES_PER_TOKEN_JSON) == (4, 2)


def test_text_part_four_chars_a_token() -> None:
    """Text is counted at 4 characters a token."""
    assert estimate_content_tokens([TextPart(text="x" * 400)]) == 100


def test_thinking_part_counts_like_text() -> None:
    """Thinking is counted at 4 characters a token, like text."""
    assert estimate_content_tokens([ThinkingPart(text="y" * 80)]) == 20


def test_function_call_counts_its_json_at_two_chars() -> None:
    """A function call is the length of its JSON form at 2 characters a token."""
    part = FunctionCallPart(id="c1", name="read_file", arguments={"path": "a" * 50})
    chars = len(json_form({"name": "read_file", "args": {"path": "a" * 50}}))
    assert estimate_content_chars([part]) == chars
    assert estimate_content_tokens([part]) == math.ceil(chars / 2)


def test_function_response_counts_its_json_at_two_chars() -> None:
    """A function response is the length of its JSON form at 2 characters a token."""
    part = FunctionResponsePart(id="c1", name="read_file", response={"out": "z" * 101})
    chars = len(json_form({"name": "read_file", "response": {"out": "z" * 101}}))
    assert estimate_content_tokens([part]) == math.ceil(chars / 2)


def test_json_is_denser_than_text_of_the_same_length() -> None:
    """The same characters cost twice as many tokens as JSON as they do as text."""
    body = "q" * 1000
    as_json = FunctionResponsePart(id="c", name="t", response=body)
    chars = as_json.stats.json_chars
    assert estimate_content_tokens([as_json]) == math.ceil(chars / 2)
    assert estimate_content_tokens([TextPart(text="q" * chars)]) == math.ceil(chars / 4)


@pytest.mark.parametrize(
    "part",
    [ImagePart(data="A" * 100_000), DocumentPart(url="https://x/y.pdf")],
    ids=["image", "document"],
)
@pytest.mark.parametrize("estimate", [1600, 258, 0])
def test_media_counts_image_token_estimate(part: ImagePart | DocumentPart, estimate: int) -> None:
    """An image or document counts image_token_estimate tokens, whatever its byte size."""
    assert estimate_content_tokens([part], image_token_estimate=estimate) == estimate
    assert estimate_content_chars([part], image_token_estimate=estimate) == estimate * 4


def test_default_image_estimate_is_1600() -> None:
    """Without an explicit estimate an image counts 1,600 tokens."""
    assert estimate_content_tokens([ImagePart(url="https://x/cat.png")]) == 1600


def test_rounding_up() -> None:
    """Fractions of a token round up (1 character is 1 token)."""
    assert estimate_content_tokens([TextPart(text="a")]) == 1
    assert estimate_content_tokens([TextPart(text="abcde")]) == 2
    assert estimate_content_tokens([]) == 0


def test_mixed_message_sums_each_kind_with_its_ratio() -> None:
    """A message mixing kinds sums text/4 + json/2 + media, rounded up once."""
    call = FunctionCallPart(id="c", name="ls", arguments={})
    msg = Message.model(TextPart(text="abc"), call, ImagePart(url="u"))
    expected = math.ceil(3 / 4 + call.stats.json_chars / 2 + 1600)
    assert estimate_content_tokens([msg]) == expected


def test_system_and_tools_estimates() -> None:
    """The system instruction counts as text, tool declarations by their JSON form at 2."""
    assert estimate_text_tokens("s" * 41) == 11
    assert estimate_text_tokens(None) == 0
    tool = ToolSpec(name="grep", description="search", parameters={"type": "object"})
    assert estimate_tools_tokens([tool]) == math.ceil(len(json_form(tool.as_json())) / 2)
    assert estimate_tools_tokens(None) == 0


class _ExplodingHistory(Sequence[Message]):
    """A history that fails the test if anything reads it."""

    def __len__(self) -> int:
        raise AssertionError("the main path walked the history")

    def __getitem__(self, index: object) -> Message:  # type: ignore[override]
        raise AssertionError("the main path walked the history")

    def __iter__(self) -> Iterator[Message]:
        raise AssertionError("the main path walked the history")


def test_main_path_is_last_count_plus_pending_without_a_walk() -> None:
    """With a last count > 0 the estimate is last + pending and never touches the history."""
    got = estimate_prompt_tokens(_ExplodingHistory(), "x" * 400, 50_000)
    assert got == 50_100


def test_main_path_ignores_system_and_tools() -> None:
    """The provider's count already includes system and tools: the main path does not add them."""
    tools = [ToolSpec(name="t" * 100)]
    got = estimate_prompt_tokens([], "abcd", 10, system_instruction="s" * 400, tools=tools)
    assert got == 11


def test_main_path_independent_of_history_size() -> None:
    """On the main path a huge history and an empty one estimate the same."""
    big = [Message.user("w" * 1_000_000), Message.model("ok")]
    assert estimate_prompt_tokens(big, "hi", 7) == estimate_prompt_tokens([], "hi", 7) == 8


def test_cold_path_counts_history_pending_system_and_tools() -> None:
    """With no last count the estimate walks the history and adds pending, system and tools."""
    history = [Message.user("a" * 400), Message.model("b" * 800)]
    tool = ToolSpec(name="read", description="d" * 20)
    got = estimate_prompt_tokens(history, "c" * 40, 0, system_instruction="s" * 4000, tools=[tool])
    expected = 300 + 10 + 1000 + estimate_tools_tokens([tool])
    assert got == expected


def test_cold_path_without_pending_message() -> None:
    """A pending message of None adds nothing."""
    assert estimate_prompt_tokens([Message.user("a" * 8)], None, 0) == 2


def test_pending_may_be_string_message_or_parts() -> None:
    """The pending message is accepted as a string, a Message or a list of parts."""
    parts = [TextPart(text="a" * 40)]
    assert (
        estimate_prompt_tokens([], "a" * 40, 0)
        == estimate_prompt_tokens([], Message.user("a" * 40), 0)
        == estimate_prompt_tokens([], parts, 0)
        == 10
    )


def test_part_stats_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part's JSON form is serialized once, however many times the history is estimated."""
    calls = 0
    real = jsonsize_module.json_form

    def counting(value: object) -> str:
        nonlocal calls
        calls += 1
        return real(value)

    monkeypatch.setattr(jsonsize_module, "json_form", counting)
    history = [
        # A Fraction is no JSON value: the encoder writes it (default=str), so it is serialized.
        Message.model(FunctionCallPart(id=f"c{i}", name="ls", arguments={"i": Fraction(i, 3)}))
        if i % 2
        else Message.user(FunctionResponsePart(id=f"c{i - 1}", name="ls", response="r" * i))
        for i in range(1, 21)
    ]
    for _ in range(5):
        estimate_prompt_tokens(history, "next", 0)
    # Once per function call that needs the encoder; string responses (and plain JSON
    # arguments) are measured without serializing at all.
    assert calls == 10


def test_large_pending_message_pushes_the_service_over_auto() -> None:
    """A pending message that crosses auto makes an unforced compaction run (not a NOOP)."""
    history = tuple(
        Message.user(f"question {i} " + "q" * 2000)
        if i % 2 == 0
        else Message.model(f"answer {i} " + "a" * 2000)
        for i in range(20)
    )
    service = CompressionService(FakeProvider())
    window = 100_000  # auto = 70,000
    small = service.compress(
        history, CompressOptions(context_window=window, last_prompt_token_count=60_000)
    )
    assert small.info.status is CompressionStatus.NOOP
    big = service.compress(
        history,
        CompressOptions(
            context_window=window, last_prompt_token_count=60_000, user_message="p" * 48_000
        ),
    )
    assert big.info.status is CompressionStatus.COMPRESSED


def test_large_pending_message_makes_the_session_compact_before_sending() -> None:
    """ChatSession.send compacts first when the message it is about to send crosses auto."""
    fake = FakeProvider()
    history = [
        Message.user(f"q{i} " + "q" * 4000) if i % 2 == 0 else Message.model("a" * 4000)
        for i in range(20)
    ]
    session = ChatSession(fake, context_window=100_000, history=history)
    assert session.estimate_tokens() < session.thresholds.warn
    message = "p" * 4 * 51_000
    assert session.thresholds.auto <= session.estimate_tokens(message) < session.thresholds.hard
    session.send(message)
    assert [r.purpose for r in fake.requests] == ["side_query", "chat"]
    assert session.compactions[0].status is CompressionStatus.COMPRESSED
    assert session.compactions[0].trigger == "auto"


class _CountingTool:
    """A tool declaration that counts how often it is serialized."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    def as_json(self) -> dict[str, object]:
        self.calls += 1
        return {"name": self.name, "description": "Read a file. " * 20, "parameters": {}}


def test_tools_measured_once_per_object_across_calls() -> None:
    """estimate_prompt_tokens(tools=...) serializes each declaration object once, not per call."""
    from autocompact.estimation import estimate_prompt_tokens

    tools = [_CountingTool("Read"), _CountingTool("Bash")]
    first = estimate_prompt_tokens([], "hi", 0, tools=tools)
    for _ in range(50):
        assert estimate_prompt_tokens([], "hi", 0, tools=tools) == first
    assert [t.calls for t in tools] == [1, 1]
    fresh = _CountingTool("Read")  # a new object is measured on its own
    estimate_prompt_tokens([], "hi", 0, tools=[fresh])
    assert fresh.calls == 1


def test_tools_estimate_equals_json_dumps_length() -> None:
    """The cached tool size is the length of json.dumps of each declaration (the old definition)."""
    import json
    import math

    from autocompact.estimation import estimate_tools_tokens, tool_json_chars

    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": 'é\n"x"' * i}}
        for i in range(15)
    ]
    expected = sum(
        len(json.dumps(t, ensure_ascii=False, separators=(",", ":"), default=str)) for t in tools
    )
    assert sum(tool_json_chars(t) for t in tools) == expected
    assert estimate_tools_tokens(tools) == math.ceil(expected / 2)
    assert estimate_tools_tokens(tools) == math.ceil(expected / 2)  # from the cache
