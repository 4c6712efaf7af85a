"""Messages history_from_dicts leaves undecoded: measured at once, their part built when asked,
and indistinguishable from the general path's messages to every reader."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import threading
from typing import Any

import pytest

from autocompact.codec import history_from_dicts, history_to_dicts, message_from_dict
from autocompact.content import FunctionCallPart, Message, TextPart, seed_stats
from autocompact.estimation import content_stats, estimate_prompt_tokens

DICTS: list[dict[str, Any]] = [
    {"role": "user", "parts": [{"kind": "text", "text": 'Fix "the" bug\n\tplease é'}]},
    {"role": "model", "parts": [{"kind": "thinking", "text": "hmm", "signature": "s"}]},
    {
        "role": "model",
        "parts": [
            {
                "kind": "function_call",
                "id": "c1",
                "name": "Bash",
                "arguments": {"command": 'echo "a\\b"\n', "timeout": 5, "bg": False},
            }
        ],
    },
    {
        "role": "user",
        "parts": [
            {
                "kind": "function_response",
                "id": "c1",
                "name": "Bash",
                "response": "a\\b\n\x01─",
                "is_error": True,
            }
        ],
    },
    {"role": "model", "parts": [{"kind": "text", "text": "Done."}]},
    {  # a response of content blocks (as Anthropic's tool results): measured by its JSON
        "role": "user",
        "parts": [
            {
                "kind": "function_response",
                "id": "c2",
                "name": "Read",
                "response": [{"type": "text", "text": 'a "b"\n\x1f'}, {"n": 3, "ok": None}],
            }
        ],
    },
]


def _pair() -> tuple[list[Message], list[Message]]:
    data = json.loads(json.dumps(DICTS))
    return history_from_dicts(data), [message_from_dict(d, index=i) for i, d in enumerate(data)]


def _undecoded(message: Message) -> bool:
    return type(message._stats) is tuple


def test_statistics_and_estimate_come_before_the_parts() -> None:
    """The estimate and each message's statistics equal the general path's without a part."""
    fresh, general = _pair()
    assert all(_undecoded(m) for m in fresh)
    assert content_stats(fresh) == content_stats(general)
    kwargs: dict[str, Any] = {"system_instruction": "sys", "tools": [{"name": "t"}]}
    assert estimate_prompt_tokens(fresh, None, 0, **kwargs) == estimate_prompt_tokens(
        general, None, 0, **kwargs
    )
    assert all(_undecoded(m) for m in fresh)  # the estimate built nothing
    assert [m.stats for m in fresh] == [m.stats for m in general]


def test_part_is_built_once_sharing_the_statistics() -> None:
    """The part is built on first use, once, with the message's own statistics object."""
    fresh, general = _pair()
    for got, want in zip(fresh, general, strict=True):
        parts = got.parts
        assert parts is got.parts
        assert got.stats is parts[0].stats
        assert parts == want.parts
        assert [p.stats for p in parts] == [p.stats for p in want.parts]


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda m: m.role, id="role"),
        pytest.param(lambda m: m.text, id="text"),
        pytest.param(lambda m: m.function_calls, id="function_calls"),
        pytest.param(lambda m: m.function_responses, id="function_responses"),
        pytest.param(repr, id="repr"),
        pytest.param(hash, id="hash"),
        pytest.param(lambda m: pickle.loads(pickle.dumps(m)), id="pickle"),
        pytest.param(copy.copy, id="copy"),
        pytest.param(copy.deepcopy, id="deepcopy"),
        pytest.param(lambda m: dataclasses.replace(m, role=m.role), id="replace"),
        pytest.param(lambda m: (m.stats, dataclasses.astuple(m)), id="astuple"),
        pytest.param(lambda m: history_to_dicts([m]), id="to_dict"),
        pytest.param(lambda m: m.stats, id="stats"),
    ],
)
def test_every_reader_sees_the_general_message(read: Any) -> None:
    """Equality, hashing, repr, pickling, copies, replace and the codec read it as built."""
    fresh, general = _pair()
    for got, want in zip(fresh, general, strict=True):
        assert _outcome(read, got) == _outcome(read, want)
        assert got == want
        assert _outcome(hash, got) == _outcome(hash, want)


def _outcome(read: Any, message: Message) -> tuple[str, object]:
    try:
        return "value", read(message)
    except TypeError as exc:  # a message holding a dict is unhashable: the same error either way
        return "error", str(exc)


def test_pickled_and_copied_messages_keep_their_statistics() -> None:
    """A pickled or copied undecoded message keeps its part and its statistics."""
    fresh, general = _pair()
    for got, want in zip(fresh, general, strict=True):
        for twin in (pickle.loads(pickle.dumps(got)), copy.deepcopy(got)):
            assert twin == want
            assert twin.stats == want.stats
            assert twin.parts[0].stats == want.parts[0].stats


def test_missing_attributes_still_raise() -> None:
    """Other attributes raise AttributeError as before; fields stay frozen."""
    fresh, _ = _pair()
    message = fresh[0]
    with pytest.raises(AttributeError):
        message.nope  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(message, "nope")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.parts = ()  # type: ignore[misc]
    assert _undecoded(message)  # neither built the part
    assert message.parts == (TextPart(text=DICTS[0]["parts"][0]["text"]),)


def test_seeded_statistics_do_not_replace_the_measured_ones() -> None:
    """seed_stats keeps an undecoded message's own statistics, as for any measured one."""
    fresh, general = _pair()
    seed_stats(fresh[0], general[1].stats)
    assert fresh[0].stats == general[0].stats


def test_later_changes_to_the_dicts_do_not_reach_the_message() -> None:
    """The part is built from the checked fields, not from the caller's dict."""
    data = json.loads(json.dumps(DICTS))
    fresh = history_from_dicts(data)
    data[0]["parts"][0]["text"] = "changed"
    data[2]["parts"][0]["name"] = 3
    data[2]["parts"][0] = {"kind": "text", "text": "x"}
    assert fresh[0].parts == (TextPart(text=DICTS[0]["parts"][0]["text"]),)
    assert isinstance(fresh[2].parts[0], FunctionCallPart)
    assert fresh[2].parts[0].name == "Bash"


def test_threads_building_the_same_part_agree() -> None:
    """Threads reading an undecoded message's parts at once all see an equal part."""
    for _ in range(20):
        fresh, general = _pair()
        seen: list[object] = []
        barrier = threading.Barrier(4)
        threads = [
            threading.Thread(target=_read_parts, args=(fresh[3], barrier, seen)) for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(parts == general[3].parts for parts in seen)
        assert fresh[3].stats is fresh[3].parts[0].stats


def _read_parts(message: Message, barrier: threading.Barrier, seen: list[object]) -> None:
    barrier.wait()
    seen.append(message.parts)
