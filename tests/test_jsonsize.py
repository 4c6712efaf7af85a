"""The JSON length counter of issue 25 (autocompact.jsonsize) against json.dumps, the oracle."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.codec import history_from_dicts
from autocompact.content import FunctionCallPart
from autocompact.errors import ContentError
from autocompact.jsonsize import plain_json_length, str_json_length, utf8_escape_extra


def _oracle(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


ANY_CHAR = st.characters(codec=None, exclude_categories=())
ESCAPY = st.text(alphabet=st.sampled_from('"\\\n\r\t\b\f\x00\x1f\x7f aé😀'), max_size=40)
PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=ANY_CHAR, max_size=60)
    | ESCAPY,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(alphabet=ANY_CHAR, max_size=8) | ESCAPY, inner, max_size=5)
    ),
    max_leaves=30,
)


@given(PLAIN)
@settings(max_examples=400)
def test_plain_values_count_exactly(value: Any) -> None:
    """Every plain JSON value (tuples, any key, floats, escapes) counts as json.dumps writes it."""
    assert plain_json_length(value) == _oracle(value)


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        {"x": [1, float("inf")]},
        {1: "int key"},
        {"when": Fraction(1, 3)},
        [True, {"deep": {"set": {1, 2}}}],
        type("S", (str,), {})("sub"),
        {"n": 10**5000},  # longer than int's str() limit: the encoder decides
        {"n": [10**5000]},
    ],
)
def test_anything_else_is_left_to_the_encoder(value: object) -> None:
    """Non-finite floats, non-string keys, subclasses, non-JSON values: -1 (serialized instead)."""
    assert plain_json_length(value) == -1


def test_too_deep_is_left_to_the_encoder() -> None:
    """A structure deeper than the counter's stack is not counted (the encoder decides)."""
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert plain_json_length(deep) == -1


@given(st.dictionaries(st.text(max_size=8), PLAIN, max_size=5), st.text(min_size=1, max_size=20))
@settings(max_examples=200)
def test_call_from_dicts_counts_its_json_object(arguments: dict[str, Any], name: str) -> None:
    """A function call built from plain dicts counts exactly its {"name", "args"} object."""
    data = [
        {
            "role": "model",
            "parts": [{"kind": "function_call", "id": "c1", "name": name, "arguments": arguments}],
        }
    ]
    (message,) = history_from_dicts(data)
    expected = _oracle({"name": name, "args": arguments})
    assert message.parts[0].stats.json_chars == expected
    assert FunctionCallPart(id="c1", name=name, arguments=arguments).stats.json_chars == expected


def test_circular_arguments_still_fail_naming_the_part() -> None:
    """Arguments that contain themselves still fail at construction, naming the field."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    data = [{"role": "model", "parts": [{"kind": "function_call", "id": "c", "name": "n"}]}]
    data[0]["parts"][0]["arguments"] = loop  # type: ignore[index]
    with pytest.raises(ContentError, match=r"FunctionCallPart\.arguments"):
        history_from_dicts(data)


PART = st.one_of(
    st.builds(lambda t: {"kind": "text", "text": t}, st.text(alphabet=ANY_CHAR, max_size=30)),
    st.builds(
        lambda n, r, e: (
            {"kind": "function_response", "id": "r", "name": n, "response": r}
            | ({"is_error": e} if e is not None else {})
        ),
        st.text(max_size=8),
        PLAIN,
        st.none() | st.booleans(),
    ),
    st.builds(
        lambda n, a: {"kind": "function_call", "id": "c", "name": n, "arguments": a},
        st.text(max_size=8),
        st.dictionaries(st.text(max_size=6), PLAIN, max_size=4) | st.just({"x": Fraction(1, 3)}),
    ),
    st.builds(lambda t: {"kind": "thinking", "text": t}, st.text(max_size=20)),
)


@given(st.lists(st.tuples(st.sampled_from(["user", "model"]), st.lists(PART, max_size=2))))
@settings(max_examples=200)
def test_fresh_history_equals_the_general_path(messages: list[tuple[str, list[Any]]]) -> None:
    """history_from_dicts builds and measures exactly what message_from_dict does, per message."""
    from autocompact.codec import message_from_dict
    from autocompact.estimation import content_stats

    data = [{"role": role, "parts": parts} for role, parts in messages]
    fast = history_from_dicts(data)
    general = [message_from_dict(item, index=i) for i, item in enumerate(data)]
    assert content_stats(fast) == content_stats(general)  # before any part is built
    assert [m.stats for m in fast] == [m.stats for m in general]
    assert fast == general
    for got, want in zip(fast, general, strict=True):
        assert got.stats == want.stats
        assert [p.stats for p in got.parts] == [p.stats for p in want.parts]


@pytest.mark.parametrize(
    "item",
    [
        {"role": "system", "parts": [{"kind": "text", "text": "x"}]},
        {"role": "user", "parts": [{"kind": "text", "text": 3}]},
        {"role": "user", "parts": [{"kind": "nope"}]},
        {"role": "model", "parts": [{"kind": "function_call", "id": "c", "name": "n"}]},
        {"role": "user", "parts": ["text"]},
    ],
)
def test_fresh_history_errors_name_the_message(item: dict[str, Any]) -> None:
    """Bad messages among good ones fail as the general path fails, naming the index."""
    good = {"role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    with pytest.raises(ContentError, match=r"message 1\b"):
        history_from_dicts([good, item])


def test_cleared_placeholders_carry_their_measured_size() -> None:
    """Clearing gives each placeholder the statistics a fresh measure of it gives."""
    from autocompact.compaction.clearing import clear_tool_outputs
    from autocompact.content import FunctionResponsePart, Message

    history = []
    for i in range(6):
        name = 'Ba"sh\n─' if i % 2 else "Read"
        history.append(Message.model(FunctionCallPart(id=f"c{i}", name=name, arguments={})))
        history.append(
            Message.user(FunctionResponsePart(id=f"c{i}", name=name, response="out é\n" * 3000))
        )
    result = clear_tool_outputs(history, protect_tokens=0)
    assert result.cleared >= 4
    for message in result.history:
        for part in message.parts:
            if isinstance(part, FunctionResponsePart):
                fresh = FunctionResponsePart(id=part.id, name=part.name, response=part.response)
                assert part.stats == fresh.stats
                assert part.stats.json_chars == _oracle(
                    {"name": part.name, "response": part.response}
                )


@given(st.lists(st.text(alphabet=ANY_CHAR, max_size=60) | ESCAPY, max_size=8))
@settings(max_examples=400)
def test_escapes_of_joined_strings_add_up(strings: list[str]) -> None:
    """What escaping adds, counted once over several strings' UTF-8 joined (any character:
    control characters, quotes, backslashes, lone surrogates, astral ones), plus their lengths
    and quotes, is the sum of their JSON lengths as json.dumps writes them."""
    joined = b"".join(s.encode("utf-8", "surrogatepass") for s in strings)
    counted = sum(len(s) + 2 for s in strings) + utf8_escape_extra(joined)
    assert counted == sum(_oracle(s) for s in strings)


@given(st.text(alphabet=ANY_CHAR, max_size=80) | ESCAPY)
@settings(max_examples=400)
def test_strings_count_exactly(value: str) -> None:
    """A string (lone surrogates and every escape included) counts as json.dumps writes it."""
    assert str_json_length(value) == _oracle(value)
