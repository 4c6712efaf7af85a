"""The proxy's fast path: the estimate read from the decoded JSON equals the full path's.

The oracle is the full path the planner takes otherwise: the protocol's converter to the content
model, then :meth:`ContextGuard.guarantee` and :func:`request_stats` on the result.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact import CompressionService
from autocompact.content import (
    CharStats,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    TextPart,
    ThinkingPart,
)
from autocompact.convert import to_anthropic_messages, to_openai_messages
from autocompact.errors import AutocompactError
from autocompact.estimation import Calibration
from autocompact.guard import ContextGuard, GuardState, request_stats
from autocompact.serve.anthropic_messages import ANTHROPIC_MESSAGES
from autocompact.serve.fastpath import Sizing, estimate, read, wire_stats
from autocompact.serve.openai_chat import OPENAI_CHAT
from autocompact.testing import FakeProvider
from autocompact.transcripts import read_transcript

from .scripted import image_block, tool_media_request

DATA = Path(
    os.environ.get("AUTOCOMPACT_SESSIONS_DIR")
    or Path(__file__).resolve().parents[3] / "shared" / "data" / "claude-code-sessions"
)
if not DATA.is_dir():  # a worktree under wt/: the shared folder is one level further up
    DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "claude-code-sessions"

STATES = {
    "cold": GuardState(),
    "raised": GuardState(calibration=Calibration(factor=1.4, samples=1, json_share=0.9)),
    "lowered": GuardState(calibration=Calibration(factor=0.7, samples=3, json_share=0.1)),
}
TOOLS_ANTHROPIC = [
    {"name": f"t{i}", "description": "does a thing", "input_schema": {"type": "object"}}
    for i in range(3)
]
TOOLS_OPENAI = [
    {"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}}
    for i in range(3)
]
PROTOCOLS = {"anthropic_messages": ANTHROPIC_MESSAGES, "openai_chat": OPENAI_CHAT}


def full_path(protocol: str, body: dict[str, Any], state: GuardState) -> tuple[int, Any] | None:
    """The estimate and sent statistics by conversion and the guard (``None``: it refuses)."""
    wire = PROTOCOLS[protocol]
    try:
        converted = wire.convert(body, body["messages"])
        guard = ContextGuard(
            context_window=10**8,
            compression=CompressionService(FakeProvider(), native_compaction=False),
        )
        result = guard.guarantee(
            converted.messages,
            system_instruction=converted.system,
            tools=converted.tools,
            state=state,
        )
    except AutocompactError:
        return None
    sent = request_stats(
        converted.messages, system_instruction=converted.system, tools=converted.tools
    )
    return result.tokens, sent


def fast_path(protocol: str, body: dict[str, Any], state: GuardState) -> tuple[int, Any] | None:
    """The estimate and sent statistics read from the JSON (``None``: not read)."""
    stats = wire_stats(protocol, body, body["messages"])
    return None if stats is None else estimate(stats, state)


def _generated() -> list[Message]:
    rng = random.Random(7)
    out: list[Message] = [Message.user("start: read the files")]
    for i in range(60):
        call = FunctionCallPart(id=f"c{i}", name="Read", arguments={"path": f"a\n{i}.py", "n": i})
        text = "".join(rng.choice('ab "\\\n\t\x01é€😀') for _ in range(rng.randint(0, 300)))
        out.append(Message(role="model", parts=(ThinkingPart(text="hm", signature="s"), call)))
        out.append(
            Message(
                role="user", parts=(FunctionResponsePart(id=f"c{i}", name="Read", response=text),)
            )
        )
    out.append(Message(role="model", parts=(TextPart(text="done"),)))
    out.append(Message.user("next"))
    return out


def _histories() -> list[tuple[str, list[Message]]]:
    found: list[tuple[str, list[Message]]] = [("generated", _generated())]
    for path in sorted(DATA.glob("*.jsonl.gz"))[:6]:
        messages = list(read_transcript(path).messages)
        while messages and messages[-1].role != "user":
            messages.pop()
        if messages:
            found.append((path.name, messages))
    return found


HISTORIES = _histories()


def bodies(history: list[Message]) -> dict[str, dict[str, Any]]:
    """The history as a request of each protocol (a system prompt and tools beside it)."""
    return {
        "anthropic_messages": {
            "model": "m",
            "system": [{"type": "text", "text": "be brief"}],
            "tools": TOOLS_ANTHROPIC,
            "messages": to_anthropic_messages(history),
        },
        "openai_chat": {
            "model": "m",
            "tools": TOOLS_OPENAI,
            "messages": to_openai_messages(history, "sys\nprompt", thinking="reasoning_content"),
        },
    }


@pytest.mark.parametrize("state", list(STATES), ids=list(STATES))
@pytest.mark.parametrize(("name", "history"), HISTORIES, ids=[n for n, _ in HISTORIES])
def test_fast_estimate_equals_the_full_path(name: str, history: list[Message], state: str) -> None:
    """Recorded sessions (and generated turns with escapes and non-ASCII) in both protocols:
    the fast path reads them and gives the full path's estimate and statistics to the token."""
    for protocol, body in bodies(history).items():
        body = json.loads(json.dumps(body))  # as decoded from the wire
        expected = full_path(protocol, body, STATES[state])
        assert expected is not None, (name, protocol)
        assert fast_path(protocol, body, STATES[state]) == expected, (name, protocol)


def _a(*messages: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages), **body}


USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "u1", "name": "Bash", "input": {}}],
}
ANTHROPIC_CASES = {
    "string content": _a({"role": "user", "content": "hi"}),
    "result list": _a(
        USE,
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "u1",
                    "content": [{"type": "text", "text": 'a"b', "cache_control": {}}],
                }
            ],
        },
    ),
    "result none": _a(
        USE, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1"}]}
    ),
    "result image": _a(
        USE,
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "u1",
                    "content": [{"type": "image", "source": {"type": "url", "url": "u"}}],
                }
            ],
        },
    ),
    "image": _a(
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                },
                {"type": "text", "text": "see"},
            ],
        }
    ),
    "bad image": _a({"role": "user", "content": [{"type": "image", "source": {"type": "file"}}]}),
    "redacted": _a(
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [{"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "a"}],
        },
        {"role": "user", "content": "r"},
    ),
    "system string": _a({"role": "user", "content": "hi"}, system="sys"),
    "system bad block": _a({"role": "user", "content": "hi"}, system=[{"type": "image"}]),
    "orphan result": _a(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "x"}]}
    ),
    "unanswered call": _a(USE, {"role": "user", "content": "go"}),
    "model last": _a({"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}),
    "unknown block": _a({"role": "user", "content": [{"type": "server_tool_use", "id": "x"}]}),
    "bad role": _a({"role": "system", "content": "hi"}),
    "input not object": _a(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "u", "name": "n", "input": [1]}],
        },
        {"role": "user", "content": "x"},
    ),
    "text not str": _a({"role": "user", "content": [{"type": "text", "text": 5}]}),
}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": '{"cmd": 1}'}}
    ],
}
OPENAI_CASES = {
    "tools then user": _a(
        {"role": "system", "content": "s"},
        {"role": "developer", "content": [{"type": "text", "text": "d"}]},
        {"role": "user", "content": "q"},
        CALL,
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
        {"role": "user", "content": "more"},
    ),
    "tools last": _a(
        {"role": "user", "content": "q"},
        CALL,
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "o"}]},
    ),
    "tool none": _a(
        {"role": "user", "content": "q"},
        CALL,
        {"role": "tool", "tool_call_id": "c1", "content": None},
    ),
    "refusal": _a(
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "refusal": "no"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
            ],
        },
    ),
    "assistant parts": _a(
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
            "reasoning_content": "r",
        },
        {"role": "user", "content": "c"},
    ),
    "bad arguments": _a(
        {"role": "user", "content": "q"},
        {**CALL, "tool_calls": [{"id": "c1", "function": {"name": "B", "arguments": "{oops"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ),
    "system late": _a(
        {"role": "user", "content": "q"},
        {"role": "system", "content": "s"},
        {"role": "user", "content": "c"},
    ),
    "file part": _a(
        {
            "role": "user",
            "content": [
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA=="}}
            ],
        }
    ),
    "assistant last": _a({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}),
    "orphan tool": _a(
        {"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "zz", "content": "x"}
    ),
}


@pytest.mark.parametrize(
    ("protocol", "body"),
    [("anthropic_messages", b) for b in ANTHROPIC_CASES.values()]
    + [("openai_chat", b) for b in OPENAI_CASES.values()],
    ids=[f"anthropic-{k}" for k in ANTHROPIC_CASES] + [f"openai-{k}" for k in OPENAI_CASES],
)
def test_fast_path_agrees_or_steps_aside(protocol: str, body: dict[str, Any]) -> None:
    """Every shape either reads to the full path's exact answer or is left to the full path
    (never an answer where the full path refuses the request)."""
    expected = full_path(protocol, body, GuardState())
    got = fast_path(protocol, body, GuardState())
    if got is not None:
        assert got == expected


def test_common_shapes_take_the_fast_path() -> None:
    """The shapes agents send every turn are read by the fast path (not left to the full one)."""
    common = ["string content", "result list", "result none", "image", "redacted", "system string"]
    for key in common:
        assert fast_path("anthropic_messages", ANTHROPIC_CASES[key], GuardState()) is not None, key
    for key in ["tools then user", "tools last", "tool none", "refusal", "assistant parts"]:
        assert fast_path("openai_chat", OPENAI_CASES[key], GuardState()) is not None, key


def test_responses_always_take_the_full_path() -> None:
    """The Responses protocol is not read by the fast path."""
    body = {"input": [{"role": "user", "content": "hi"}]}
    assert wire_stats("openai_responses", body, body["input"]) is None


def _growing(history: list[Message]) -> list[list[dict[str, Any]]]:
    """The requests of a conversation as an agent sends them: the whole history each time,
    the last user message carrying a cache_control marker that moves on the next request."""
    wire = json.loads(json.dumps(to_anthropic_messages(history)))
    ends = [i + 1 for i, m in enumerate(wire) if m["role"] == "user"]
    requests = []
    for end in ends[1::3]:
        messages = json.loads(json.dumps(wire[:end]))
        last = messages[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        last["content"][-1]["cache_control"] = {"type": "ephemeral"}
        requests.append(messages)
    return requests


@pytest.mark.parametrize(("name", "history"), HISTORIES[:3], ids=[n for n, _ in HISTORIES[:3]])
def test_resumed_reading_equals_the_full_path(name: str, history: list[Message]) -> None:
    """Each request of a growing conversation read from the previous one's reading (markers
    moving, an early message edited once, a different conversation in between) gives the full
    path's estimate."""
    previous: Sizing | None = None
    requests = _growing(history)
    compared = 0
    for step, messages in enumerate(requests):
        if step == len(requests) // 2:
            messages[0] = {"role": "user", "content": "an edited first message"}
        if step == len(requests) // 3:
            previous = read("anthropic_messages", _a({"role": "user", "content": "x"}), [])
        body = _a(*messages, tools=TOOLS_ANTHROPIC)
        sizing = read("anthropic_messages", body, messages, previous=previous)
        expected = full_path("anthropic_messages", body, GuardState())
        if expected is None:  # cut between parallel tool results: both paths refuse it
            assert sizing is None, step
            continue
        assert sizing is not None, step
        assert estimate(sizing.stats, GuardState()) == expected, step
        previous = sizing
        compared += 1
    assert compared > 3


def test_resumed_reading_reads_only_what_was_added() -> None:
    """A request that repeats the last one's messages resumes from its checkpoint: the
    reading does not look at the repeated messages again (a poisoned copy is not read)."""
    first = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    body = _a(*first, {"role": "user", "content": "c"})
    sizing = read("anthropic_messages", body, body["messages"])
    assert sizing is not None
    assert sizing.walk.checkpoints[-1] is not None

    class Poisoned(dict):  # type: ignore[type-arg]
        """Equal to the message it copies, but unreadable: reading it fails the walk."""

        def get(self, *args: Any) -> Any:
            raise AssertionError("a repeated message was read again")

    repeated = [Poisoned(m) for m in body["messages"]] + [
        {"role": "assistant", "content": "d"},
        {"role": "user", "content": "e"},
    ]
    again = read("anthropic_messages", _a(*repeated), repeated, previous=sizing)
    assert again is not None
    expected = full_path(
        "anthropic_messages", _a(*first, *[{"role": "user", "content": "c"}], *repeated[3:]),
        GuardState(),
    )  # fmt: skip
    assert estimate(again.stats, GuardState()) == expected


def test_long_anthropic_history_resumes_from_a_sparse_checkpoint() -> None:
    """A long Anthropic history keeps a checkpoint after each of its last messages and after
    every few before them: an edit anywhere (far back, or at the end) still gives the reading
    a fresh walk gives, to the token."""
    messages: list[dict[str, Any]] = []
    for i in range(90):
        call = {"type": "tool_use", "id": f"u{i}", "name": "Bash", "input": {"n": i}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "t"}, call]})
        result = {"type": "tool_result", "tool_use_id": f"u{i}", "content": f'o"{i}\n' * i}
        messages.append({"role": "user", "content": [result]})
    messages.insert(0, {"role": "user", "content": "go"})
    first = read("anthropic_messages", _a(*messages), messages)
    assert first is not None
    points = first.walk.checkpoints
    assert points[-1] is not None
    assert points[len(points) // 2 + 1] is None
    assert sum(p is not None for p in points) < len(points) // 2
    for edited in (3, 40, 75, 150, len(messages) - 2, len(messages) - 1):
        changed = [*messages]
        changed[edited] = {**changed[edited], "content": [*changed[edited]["content"]]}
        changed[edited]["content"].append({"type": "text", "text": "edited é\x01"})
        changed.append({"role": "assistant", "content": "ok"})
        changed.append({"role": "user", "content": "next"})
        again = read("anthropic_messages", _a(*changed), changed, previous=first)
        fresh = read("anthropic_messages", _a(*changed), changed)
        assert again is not None, edited
        assert fresh is not None, edited
        assert again.stats == fresh.stats, edited
        expected = full_path("anthropic_messages", _a(*changed), GuardState())
        assert estimate(again.stats, GuardState()) == expected, edited


def test_openai_resumes_only_at_message_boundaries() -> None:
    """OpenAI tool results join the next user message: a reading resumes only where no tool
    result is pending, and gives the full path's estimate."""
    base = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        CALL,
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]
    body = _a(*base)
    first = read("openai_chat", body, body["messages"])
    assert first is not None
    assert first.walk.checkpoints[0] is None
    assert first.walk.checkpoints[-1] is None
    grown = [*base, {"role": "user", "content": "more"}]
    body = _a(*grown)
    again = read("openai_chat", body, grown, previous=first)
    assert again is not None
    assert estimate(again.stats, GuardState()) == full_path("openai_chat", body, GuardState())


_TEXT = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ['a"b\\c', "\x00\x1f\x7f\n\t", "\ud800x\udfff", "é€😀", "\u2028"]
)
_LEAF = st.one_of(
    _TEXT,
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(_TEXT, st.dictionaries(_TEXT, _VALUE, max_size=5), _TEXT | st.none()),
        min_size=1,
        max_size=4,
    )
)
def test_any_tool_call_and_result_read_as_the_full_path_does(
    turns: list[tuple[str, dict[str, Any], str | None]],
) -> None:
    """Tool calls with any arguments (any characters, escapes, control characters, lone
    surrogates, NaN and infinities, deep values) and any result text: the fast reading gives
    the full path's estimate and statistics to the token, in both protocols."""
    history: list[Message] = [Message.user("go")]
    for i, (name, arguments, result) in enumerate(turns):
        call = FunctionCallPart(id=f"c{i}", name=name or "n", arguments=arguments)
        history.append(Message(role="model", parts=(call,)))
        response = FunctionResponsePart(id=f"c{i}", name=name or "n", response=result or "")
        history.append(Message(role="user", parts=(response,)))
    history.append(Message.user("next"))
    bodies = {
        "anthropic_messages": {"model": "m", "messages": to_anthropic_messages(history)},
        "openai_chat": {"model": "m", "messages": to_openai_messages(history, None)},
    }
    for protocol, body in bodies.items():
        body = json.loads(json.dumps(body))  # as decoded from the wire
        expected = full_path(protocol, body, STATES["raised"])
        assert fast_path(protocol, body, STATES["raised"]) == expected, protocol


_AWKWARD = 'a/b "q" \\ é→€ 😀 \x00\x01\x1b\x7f\b\f\r\t\n \u2028 \ud800 end'


def _escaped_slashes(raw: str) -> str:
    """The JSON text with every ``/`` written ``\\/`` (as PHP's encoder does): outside
    strings JSON has no ``/``, so only string contents change."""
    return raw.replace("/", "\\/")


def _long_history(turns: int) -> list[dict[str, Any]]:
    """Anthropic messages of tool calls and results full of characters JSON escapes, the
    pending user message answering the last call with more of them."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go " + _AWKWARD}]
    for i in range(turns):
        call = {
            "type": "tool_use",
            "id": f"u{i}",
            "name": "Read/ é",
            "input": {"path": f"/src/{i}\n.py", "why": _AWKWARD[: i % 40], "n": [i, None]},
        }
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}, call]})
        result = {"type": "tool_result", "tool_use_id": f"u{i}", "content": _AWKWARD * (i % 5)}
        messages.append({"role": "user", "content": [result]})
    return messages


@pytest.mark.parametrize("turns", [3, 70])
def test_clients_escaping_differently_read_the_same(turns: int) -> None:
    """One request as different clients write it (non-ASCII escaped or raw, ``/`` escaped,
    control characters and lone surrogates escaped): the same reading, and the full path's
    estimate and statistics, to the token."""
    body = {"model": "m", "system": "s/ é", "messages": _long_history(turns)}
    texts = {
        "ascii": json.dumps(body),
        "raw": json.dumps(body, ensure_ascii=False),
        "compact": json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        "slashes": _escaped_slashes(json.dumps(body)),
        "raw slashes": _escaped_slashes(json.dumps(body, ensure_ascii=False, indent=1)),
    }
    expected = full_path("anthropic_messages", body, STATES["raised"])
    assert expected is not None
    readings = {}
    for name, text in texts.items():
        decoded = json.loads(text.encode("utf-8", "surrogatepass"))
        assert decoded == body, name
        sizing = read("anthropic_messages", decoded, decoded["messages"])
        assert sizing is not None, name
        readings[name] = sizing.stats
        assert estimate(sizing.stats, STATES["raised"]) == expected, name
    assert len({repr(stats) for stats in readings.values()}) == 1


@pytest.mark.parametrize("protocol", ["anthropic_messages", "openai_chat"])
def test_pending_message_escapes_are_its_own(protocol: str) -> None:
    """What escaping adds to the strings of the pending message (tool results answering the
    last calls) is counted in the pending message's statistics, not the history's, however
    many checkpoints the history spans, read whole or resumed."""
    wire = _long_history(70)
    history = ANTHROPIC_MESSAGES.convert({"messages": wire}, wire).messages
    if protocol == "openai_chat":
        wire = json.loads(json.dumps(to_openai_messages(history, None)))
    converted = PROTOCOLS[protocol].convert({"messages": wire}, wire).messages
    expected_history = sum((m.stats for m in converted[:-1]), CharStats())
    whole = read(protocol, {"messages": wire}, wire)
    assert whole is not None
    assert whole.stats.pending == converted[-1].stats
    assert whole.stats.history == expected_history
    grown = [*wire[:-1], {**wire[-1]}]
    resumed = read(protocol, {"messages": grown}, grown, previous=whole)
    assert resumed is not None
    assert resumed.stats == whole.stats


@pytest.mark.parametrize("state", sorted(STATES))
def test_a_tool_screenshot_is_read_as_the_full_path_counts_it(state: str) -> None:
    """An Anthropic tool result with text, an image and a document: read from the JSON (not
    handed to the full path), at the full path's figures (each one media part)."""
    pdf = {"type": "document", "source": {"type": "url", "url": "https://x/y.pdf"}}
    body = tool_media_request(
        image_block("A" * 9000), pdf, after=({"type": "text", "text": "and now?"},)
    )
    fast = fast_path("anthropic_messages", body, STATES[state])
    assert fast is not None
    assert fast == full_path("anthropic_messages", body, STATES[state])
    assert fast[1].media_parts == 2
