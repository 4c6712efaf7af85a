"""The engine's estimate of a request read straight from its decoded JSON. Pure.

The proxy meets a whole new history on every request. When the conversation has no stored
substitution, all it needs to know is the engine's estimate (and so the tier): below *auto* the
client's bytes go out unchanged. Converting a 1M-token request to the content model, validating
it and measuring it costs several times what decoding its JSON does (issue 25), so this module
sums the same character statistics from the wire dicts in one pass, building no message
objects:

- text and thinking by their length; a tool call by the length of
  ``{"name": …, "args": …}`` in the counter's JSON form; a tool result by
  ``21 + json_length(name) + json_length(response)``, the result's content read as the
  converters read it; each image or document as one media part. These are the formulas of the
  content model's parts (:mod:`autocompact.content`), applied to the same values.
- the messages grouped as the converters group them (OpenAI tool results and the user message
  after them are one content-model message), the last one being the pending message, whose
  estimate is rounded on its own as the engine rounds it;
- the estimate as :func:`autocompact.engine.sizing.estimate_tokens` makes it (system prompt and
  tool declarations rounded part by part, the conversation's calibration applied).

Anything the walk does not recognise, or a history whose tool calls and results do not pair up
exactly, returns ``None``: the planner then takes its full path (convert, validate, the guard),
which gives the exact same answer, or the error, for every request. A test compares the two on
the recorded sessions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autocompact.content import CharStats, json_length, name_json_length
from autocompact.convert import UNKNOWN_TOOL_NAME
from autocompact.estimation import (
    BYTES_PER_TOKEN_JSON,
    calibrated_estimate,
    estimate_stats_tokens,
    estimate_text_tokens,
)
from autocompact.guard import GuardState
from autocompact.providers.base import ToolSpec
from autocompact.serve.anthropic_messages import anthropic_tools
from autocompact.serve.openai_chat import openai_tools
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

__all__ = ["Sizing", "WireStats", "estimate", "read", "wire_stats"]

_RESULT_OVERHEAD = 21  # len('{"name":,"response":}'): a function response's JSON around its values
_CALL_OVERHEAD = 17  # len('{"name":,"args":}'): a function call's JSON around its values


@dataclass(frozen=True, kw_only=True)
class WireStats:
    """A request's character statistics, as the content model would measure it.

    Attributes:
        history: every conversation message but the pending one.
        pending: the pending message (the last content-model message, a user message).
        system: the system prompt as the converter joins it.
        tools: the tool declarations.
    """

    history: CharStats
    pending: CharStats
    system: str | None
    tools: tuple[ToolSpec, ...]


class _Unread(Exception):
    """Something the walk does not read exactly as the converter does: take the full path."""


_Checkpoint = tuple[Any, ...]
# Where a later request may resume: after each of the last _DENSE_TAIL wire messages (an agent
# resends the history and changes at most its last few), and after every _STRIDE-th one before
# them (an edit further back re-reads at most _STRIDE messages more). Anthropic requests; an
# OpenAI request keeps one after every message.
_DENSE_TAIL = 16
_STRIDE = 32


class _Walk:
    """Content-model messages as they are completed: their statistics summed, their tool
    calls and results paired as :func:`autocompact.validation.scan_history` pairs the history
    the guard is given (every message but the pending one, which is not checked; calls the last
    history message left open allowed when it is a model message); after each wire message, a
    checkpoint a later request of the conversation resumes from."""

    __slots__ = (
        "checkpoints", "count", "json", "last", "media", "names", "open", "pairs",
        "prev_model", "started", "systems", "text",
    )  # fmt: skip

    def __init__(self) -> None:
        self.text = self.json = self.media = self.count = 0
        # The last message, not yet history: (text, json, media, results, calls, is model).
        self.last: tuple[int, int, int, Sequence[str], Sequence[str], bool] = (
            0, 0, 0, (), (), False,
        )  # fmt: skip
        self.prev_model = False  # whether the last history message is a model message
        self.open: dict[str, int] = {}  # open call id -> the history message that made it
        self.names: dict[str, str] = {}
        self.pairs: list[tuple[str, str]] = []  # every (call id, name), in order
        self.checkpoints: list[_Checkpoint | None] = []
        self.started = False  # OpenAI: past the leading system messages
        self.systems: list[str] = []

    def resume(self, previous: _Walk, start: int) -> None:
        """Continue ``previous`` after its first ``start`` wire messages (a checkpoint)."""
        point = previous.checkpoints[start - 1]
        assert point is not None
        (self.count, self.text, self.json, self.media, self.last, self.prev_model, names,
         opened) = point  # fmt: skip
        self.pairs = previous.pairs[:names]
        self.names = dict(self.pairs)
        self.open = dict(opened)
        self.checkpoints = previous.checkpoints[:start]
        self.started = True
        self.systems = previous.systems

    def name(self, call_id: str, name: str) -> None:
        self.names[call_id] = name
        self.pairs.append((call_id, name))

    def mark(self, clean: bool) -> None:
        """A checkpoint after one more wire message (``clean``: a content-model message
        boundary, nothing pending)."""
        if not clean:
            self.checkpoints.append(None)
            return
        opened = tuple(self.open.items()) if self.open else ()
        point = (self.count, self.text, self.json, self.media, self.last, self.prev_model,
                 len(self.pairs), opened)  # fmt: skip
        self.checkpoints.append(point)

    def add(
        self,
        text: int,
        json_chars: int,
        media: int,
        results: Sequence[str],
        calls: Sequence[str],
        model: bool,
    ) -> None:
        """One more content-model message; the one before it becomes history (``results``
        and ``calls`` are kept as given: the caller does not change them afterwards)."""
        last = self.last
        if self.count:
            if last[3] or last[4]:
                index = self.count - 1
                open_calls = self.open
                for call_id in last[3]:  # its results answer earlier calls, then its calls open
                    if open_calls.pop(call_id, None) is None:
                        raise _Unread
                for call_id in last[4]:
                    open_calls[call_id] = index
            self.prev_model = last[5]
            self.text += last[0]
            self.json += last[1]
            self.media += last[2]
        self.last = (text, json_chars, media, results, calls, model)
        self.count += 1

    def result(self, system: str | None, tools: tuple[ToolSpec, ...]) -> WireStats:
        if self.count == 0 or self.last[5]:
            raise _Unread  # the pending message must be a user message
        if self.open:
            last_history = self.count - 2
            if not self.prev_model or any(i != last_history for i in self.open.values()):
                raise _Unread  # a call never answered
        history = CharStats(text_chars=self.text, json_chars=self.json, media_parts=self.media)
        text, json_chars, media = self.last[:3]
        pending = CharStats(text_chars=text, json_chars=json_chars, media_parts=media)
        return WireStats(history=history, pending=pending, system=system, tools=tools)


def _call_chars(name: str, arguments: dict[str, Any]) -> int:
    # len(json_form({"name": name, "args": arguments})) as the content model measures it
    # ('{"name":' + name + ',"args":' + arguments + '}'), the arguments counted, not encoded.
    return _CALL_OVERHEAD + name_json_length(name) + json_length(arguments)


def _result_chars(name: str, response: Any) -> int:
    return _RESULT_OVERHEAD + name_json_length(name) + json_length(response)


def _result_content(result: Any) -> str | list[dict[str, str]]:
    """A tool result's content as the converters keep it: its text, or its text blocks."""
    if result is None:
        return ""
    if type(result) is list:
        return _text_blocks(result)
    if type(result) is not str:
        raise _Unread
    return result


def _text_blocks(content: list[Any]) -> list[dict[str, str]]:
    """A tool result's list of text blocks as the converters keep it (``None``-free)."""
    out = []
    for block in content:
        if type(block) is not dict or block.get("type") != "text":
            raise _Unread  # media in a tool result, or a malformed block: the full path
        text = block.get("text")
        if type(text) is not str:
            raise _Unread
        out.append({"type": "text", "text": text})
    return out


def _str(block: Mapping[str, Any], key: str) -> str:
    value = block.get(key)
    if type(value) is not str:
        raise _Unread
    return value


def _media_ok(block: Mapping[str, Any]) -> None:
    """An Anthropic image or document source the converter accepts."""
    source = block.get("source")
    if type(source) is not dict:
        raise _Unread
    kind = source.get("type")
    if kind == "base64":
        _str(source, "media_type")
        _str(source, "data")
    elif kind == "url":
        _str(source, "url")
    else:
        raise _Unread


# -- Anthropic Messages ------------------------------------------------------------------------


def _anthropic(
    body: Mapping[str, Any], messages: Sequence[Any], walk: _Walk, start: int
) -> WireStats:
    system = body.get("system")
    if system is not None and type(system) is not str:
        if type(system) is not list:
            raise _Unread
        texts = []
        for block in system:
            if type(block) is not dict or block.get("type") != "text":
                raise _Unread
            texts.append(str(block.get("text", "")))
        system = "\n\n".join(texts)
    names = walk.names
    add, mark, points = walk.add, walk.mark, walk.checkpoints
    dense = len(messages) - _DENSE_TAIL  # checkpoints: every message from here, sparse before
    for index in range(start, len(messages)):
        message = messages[index]
        if type(message) is not dict:
            raise _Unread
        role = message.get("role")
        content = message.get("content")
        if role != "user" and role != "assistant":
            raise _Unread
        if type(content) is str:
            add(len(content), 0, 0, (), (), role == "assistant")
            if index < dense and index % _STRIDE:
                points.append(None)
            else:
                mark(True)
            continue
        if type(content) is not list:
            raise _Unread
        text = json_chars = media = 0
        results: list[str] | tuple[()] = ()
        calls: list[str] | tuple[()] = ()
        for block in content:
            if type(block) is not dict:
                raise _Unread
            kind = block.get("type")
            if kind == "text":
                value = block.get("text")
                if type(value) is not str:
                    raise _Unread
                text += len(value)
            elif kind == "tool_result":
                call_id = block.get("tool_use_id")
                if type(call_id) is not str:
                    raise _Unread
                result = block.get("content")
                if type(result) is not str:
                    result = _result_content(result)
                json_chars += _result_chars(names.get(call_id, UNKNOWN_TOOL_NAME), result)
                if results:
                    results.append(call_id)
                else:
                    results = [call_id]
            elif kind == "tool_use":
                call_id = block.get("id")
                name = block.get("name")
                if type(call_id) is not str or type(name) is not str:
                    raise _Unread
                arguments = block.get("input", {})
                if type(arguments) is not dict:
                    raise _Unread
                walk.name(call_id, name)
                json_chars += _call_chars(name, arguments)
                if calls:
                    calls.append(call_id)
                else:
                    calls = [call_id]
            elif kind == "thinking":
                text += len(_str(block, "thinking"))
                signature = block.get("signature")
                if signature is not None and type(signature) is not str:
                    raise _Unread
            elif kind == "redacted_thinking":
                _str(block, "data")
            elif kind == "image" or kind == "document":
                _media_ok(block)
                media += 1
            else:
                raise _Unread
        add(text, json_chars, media, results, calls, role == "assistant")
        if index < dense and index % _STRIDE:
            points.append(None)
        else:
            mark(True)
    if type(messages[-1]) is not dict or messages[-1].get("role") != "user":
        raise _Unread
    return walk.result(system, anthropic_tools(body))


# -- OpenAI Chat Completions --------------------------------------------------------------------


def _openai_text(content: Any) -> str:
    if type(content) is str:
        return content
    if type(content) is not list:
        raise _Unread
    texts = []
    for block in content:
        if type(block) is not dict or block.get("type") != "text":
            raise _Unread
        texts.append(_str(block, "text"))
    return "".join(texts)


def _openai_user(content: Any) -> tuple[int, int]:
    """(text characters, media parts) of a user message's content."""
    if type(content) is str:
        return len(content), 0
    if type(content) is not list:
        raise _Unread
    text = media = 0
    for block in content:
        if type(block) is not dict:
            raise _Unread
        kind = block.get("type")
        if kind == "text":
            text += len(_str(block, "text"))
        elif kind == "image_url":
            image = block.get("image_url")
            if type(image) is not dict:
                raise _Unread
            _str(image, "url")
            media += 1
        else:
            raise _Unread  # files and unknown parts: the full path
    return text, media


def _openai_assistant(message: Mapping[str, Any], walk: _Walk) -> None:
    text = json_chars = 0
    calls: list[str] = []
    reasoning = message.get("reasoning_content")
    if type(reasoning) is str:  # the converter reads reasoning only when it is a string
        text += len(reasoning)
    content = message.get("content")
    if type(content) is str:
        text += len(content)
    elif type(content) is list:
        for block in content:
            if type(block) is not dict:
                raise _Unread
            kind = block.get("type")
            if kind == "text":
                text += len(_str(block, "text"))
            elif kind == "refusal":
                text += len(_str(block, "refusal"))
            else:
                raise _Unread
    elif content is not None:
        raise _Unread
    refusal = message.get("refusal")
    if type(refusal) is str and content is None:
        text += len(refusal)
    tool_calls = message.get("tool_calls") or ()
    if type(tool_calls) is not list and tool_calls != ():
        raise _Unread
    for call in tool_calls:
        if type(call) is not dict or call.get("type", "function") != "function":
            raise _Unread
        function = call.get("function")
        if type(function) is not dict:
            raise _Unread
        name = _str(function, "name")
        arguments = function.get("arguments") or "{}"
        if type(arguments) is str:
            try:
                arguments = json.loads(arguments)
            except ValueError:
                raise _Unread from None
        if type(arguments) is not dict:
            raise _Unread
        call_id = _str(call, "id")
        walk.name(call_id, name)
        json_chars += _call_chars(name, arguments)
        calls.append(call_id)
    walk.add(text, json_chars, 0, [], calls, True)


def _openai(body: Mapping[str, Any], messages: Sequence[Any], walk: _Walk, start: int) -> WireStats:
    systems = walk.systems
    names = walk.names
    group: list[int] | None = None  # an open user turn of tool results: [json chars]
    results: list[str] = []
    for index in range(start, len(messages)):
        message = messages[index]
        if type(message) is not dict:
            raise _Unread
        role = message.get("role")
        if role == "system" or role == "developer":
            if walk.started:
                raise _Unread
            systems.append(_openai_text(message.get("content")))
            walk.mark(False)
            continue
        walk.started = True
        if role == "tool":
            call_id = _str(message, "tool_call_id")
            result = _result_content(message.get("content"))
            if group is None:
                group, results = [0], []
            group[0] += _result_chars(names.get(call_id, UNKNOWN_TOOL_NAME), result)
            results.append(call_id)
        elif role == "user":
            text, media = _openai_user(message.get("content"))
            if group is not None:
                walk.add(text, group[0], media, results, [], False)
                group = None
            else:
                walk.add(text, 0, media, [], [], False)
        elif role == "assistant":
            if group is not None:
                walk.add(0, group[0], 0, results, [], False)
                group = None
            _openai_assistant(message, walk)
        else:
            raise _Unread
        walk.mark(group is None)
    if group is not None:
        walk.add(0, group[0], 0, results, [], False)
    elif type(messages[-1]) is not dict or messages[-1].get("role") != "user":
        raise _Unread  # the last content-model message must be the pending user turn
    system = "\n\n".join(systems) if systems else None
    return walk.result(system, openai_tools(body))


_READERS = {"anthropic_messages": _anthropic, "openai_chat": _openai}


@dataclass(frozen=True, kw_only=True)
class Sizing:
    """One request's reading, kept per conversation so the next request resumes from it.

    Attributes:
        protocol: the wire protocol it was read in.
        messages: the decoded messages (compared with the next request's).
        stats: what was read.
        weight: the request's size in bytes (what a cache of readings is bounded by).
    """

    protocol: str
    messages: Sequence[Any]
    stats: WireStats
    weight: int
    walk: _Walk


_TAIL = 8


def _same_prefix(old: Sequence[Any], new: Sequence[Any]) -> int:
    """How many leading messages of ``new`` equal ``old``'s (decoded JSON compared as values,
    in C). An agent resends the history unchanged, except at most its last few messages (a
    cache_control marker moved): those are compared one by one, the rest in one comparison."""
    n = min(len(old), len(new))
    if n == 0:
        return 0
    if old[n - 1] == new[n - 1]:
        if old[:n] == new[:n]:
            return n
    else:
        low = max(0, n - _TAIL)
        first = n - 1
        for index in range(low, n - 1):
            if old[index] != new[index]:
                first = index
                break
        if old[:low] == new[:low]:
            return first
    for index in range(n):  # an edit further back: found one message at a time
        if old[index] != new[index]:
            return index
    return n


def read(
    protocol: str,
    body: Mapping[str, Any],
    messages: Sequence[Any],
    *,
    previous: Sizing | None = None,
    weight: int = 0,
) -> Sizing | None:
    """The request's statistics read from its decoded JSON (``None``: take the full path).

    Args:
        protocol: the wire protocol's name (Responses requests always take the full path).
        body: the decoded body.
        messages: its whole message array (system messages included).
        previous: the reading of the conversation's last request: the messages this one
            repeats unchanged (compared as decoded values) are not read again.
        weight: the request's size in bytes (kept on the reading).
    """
    reader = _READERS.get(protocol)
    if reader is None or not messages:
        return None
    walk = _Walk()
    start = 0
    if previous is not None and previous.protocol == protocol:
        same = _same_prefix(previous.messages, messages)
        points = previous.walk.checkpoints
        start = same
        while start > 0 and points[start - 1] is None:
            start -= 1
        if start > 0:
            walk.resume(previous.walk, start)
    try:
        stats = reader(body, messages, walk, start)
    except (_Unread, RecursionError, ValueError, TypeError):
        return None
    return Sizing(protocol=protocol, messages=messages, stats=stats, weight=weight, walk=walk)


def wire_stats(protocol: str, body: Mapping[str, Any], messages: Sequence[Any]) -> WireStats | None:
    """The request's statistics read from its decoded JSON (``None``: take the full path)."""
    sizing = read(protocol, body, messages)
    return None if sizing is None else sizing.stats


def estimate(
    stats: WireStats,
    state: GuardState,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> tuple[int, CharStats]:
    """The engine's pre-send estimate of the request and the statistics of what is sent.

    The estimate is :func:`autocompact.engine.sizing.estimate_tokens` on the cold path (no
    provider count): the history, the pending message, the system prompt and the tool
    declarations each rounded up on their own, the calibration ``state`` learned applied.
    The statistics are :func:`autocompact.guard.request_stats` of the request.
    """
    tools_chars = sum(json_length(tool.as_json()) for tool in stats.tools)
    fixed = CharStats(text_chars=len(stats.system or ""), json_chars=tools_chars)
    sent = stats.history + stats.pending + fixed
    plain = (
        estimate_stats_tokens(stats.history, image_token_estimate)
        + estimate_stats_tokens(stats.pending, image_token_estimate)
        + estimate_text_tokens(stats.system)
        + math.ceil(tools_chars / BYTES_PER_TOKEN_JSON)
    )
    if state.calibration.samples == 0:
        return plain, sent
    tokens = calibrated_estimate(
        plain, state.calibration, sent, image_token_estimate=image_token_estimate
    )
    return tokens, sent
