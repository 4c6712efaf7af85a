"""Bad input to the readers of other formats and to the function API: each case raises the
library's own error, naming the field or value, never a raw ``TypeError`` or ``IndexError``.

The cases come from a fuzzer run over the readers (2026-12-06): every one of them raised an
exception from inside the reader before these checks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from autocompact.codec import history_from_dicts
from autocompact.convert import from_anthropic_messages, from_openai_messages
from autocompact.convert.openai_responses import dict_usage
from autocompact.errors import ConfigError, ContentError
from autocompact.estimation import estimate_prompt_tokens
from autocompact.serve.responses import from_responses_input

_HUGE_TOKENS = json.loads(
    '[{"role": "model", "parts": [{"kind": "opaque", "provider": "p", "family": "f", '
    '"payload": {}, "tokens": 1' + "0" * 400 + "}]}]"
)

CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "OpenAI tool_calls not a list",
        lambda: from_openai_messages([{"role": "assistant", "content": "hi", "tool_calls": 5}]),
        ContentError,
        "tool_calls must be a list, got int",
    ),
    (
        "OpenAI messages not a list",
        lambda: from_openai_messages(5),  # type: ignore[arg-type]
        ContentError,
        "messages must be a list",
    ),
    (
        "Anthropic system a number",
        lambda: from_anthropic_messages([{"role": "user", "content": "hi"}], system=5),  # type: ignore[arg-type]
        ContentError,
        "system must be a string or a list of text blocks, got int",
    ),
    (
        "Anthropic messages None",
        lambda: from_anthropic_messages(None),  # type: ignore[arg-type]
        ContentError,
        "messages must be a list",
    ),
    (
        "Responses arguments an object",
        lambda: from_responses_input(
            [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": 1}}]
        ),
        ContentError,
        "input item 0: arguments must be a JSON string, got dict",
    ),
    (
        "Responses reasoning summary a number",
        lambda: from_responses_input([{"type": "reasoning", "id": "rs_1", "summary": 5}]),
        ContentError,
        "input item 0: summary must be a list, got int",
    ),
    (
        "Responses reasoning content a string",
        lambda: from_responses_input([{"type": "reasoning", "id": "rs_1", "content": "x"}]),
        ContentError,
        "input item 0: content must be a list, got str",
    ),
    (
        "Responses input a number",
        lambda: from_responses_input(5),  # type: ignore[arg-type]
        ContentError,
        "input must be a string or a list of items, got int",
    ),
    (
        "codec history not a list",
        lambda: history_from_dicts(5),  # type: ignore[arg-type]
        ContentError,
        "messages must be a list",
    ),
    (
        "codec history not a list, decoded",
        lambda: history_from_dicts(5, decoded=True),  # type: ignore[arg-type]
        ContentError,
        "messages must be a list",
    ),
    (
        "codec opaque part with 401 digits of tokens",
        lambda: history_from_dicts(_HUGE_TOKENS),
        ContentError,
        "field 'tokens' of a opaque part is out of range",
    ),
    (
        "function API: system instruction a number",
        lambda: estimate_prompt_tokens([], None, 0, system_instruction=5),  # type: ignore[arg-type]
        ConfigError,
        "system_instruction must be a str or None, got int",
    ),
    (
        "function API: tools a bool",
        lambda: estimate_prompt_tokens([], None, 0, tools=True),  # type: ignore[arg-type]
        ConfigError,
        "tools must be a list of tool declarations, got bool",
    ),
    (
        "function API: no last count",
        lambda: estimate_prompt_tokens([], None, None),  # type: ignore[arg-type]
        ConfigError,
        "last_prompt_token_count must be a whole number",
    ),
    (
        "function API: a dict in the history",
        lambda: estimate_prompt_tokens([{"role": "user", "parts": []}], None, 0),  # type: ignore[list-item]
        ContentError,
        "history[0] must be a Message, got dict",
    ),
    (
        "function API: no history",
        lambda: estimate_prompt_tokens(None, None, 0),  # type: ignore[arg-type]
        ContentError,
        "history must be a sequence of Message objects, got NoneType",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_named(call: Callable[[], Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as caught:
        call()
    assert says in str(caught.value)


def test_a_usage_count_that_is_no_count_is_read_as_not_reported() -> None:
    """A provider's usage with a count that is not a whole number (a string, infinity, a list)
    is read as not reported, not a crash; whole floats are counts."""
    usage = dict_usage(
        {
            "input_tokens": "many",
            "output_tokens": 1e999,
            "input_tokens_details": {"cached_tokens": [1]},
            "output_tokens_details": {"reasoning_tokens": 7.0},
        }
    )
    assert usage is not None
    assert (usage.prompt_tokens, usage.output_tokens, usage.cached_tokens) == (0, 0, 0)
    assert usage.thinking_tokens == 7


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], True),
        ((1, 2), True),
        (iter([1]), True),
        ({1}, True),
        ("ab", False),
        (b"ab", False),
        ({"a": 1}, False),
        (3, False),
        (None, False),
    ],
)
def test_is_array_is_the_one_list_test_every_reader_asks(value: object, expected: bool) -> None:
    from autocompact.jsonsafe import is_array

    assert is_array(value) is expected


BIG_NUMBER = "1" * 5000  # more digits than Python converts to an int (4,300)


def test_a_number_too_long_to_read_is_a_json_error_at_the_number() -> None:
    """``json.loads`` raises a plain ValueError for it (no JSONDecodeError, so no caller's
    "not valid JSON" message caught it); jsonsafe.loads reports it as one, at the number."""
    import json

    from autocompact.jsonsafe import loads

    with pytest.raises(json.JSONDecodeError, match="more than 4,300 digits") as caught:
        loads('{"a": ' + BIG_NUMBER + "}")
    assert caught.value.pos == 6


def test_tool_arguments_with_a_number_too_long_to_read_are_a_content_error() -> None:
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "f", "arguments": '{"a": ' + BIG_NUMBER + "}"}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    with pytest.raises(ContentError, match=r"message 1: .*'f'.*more than 4,300 digits"):
        from_openai_messages(messages)
