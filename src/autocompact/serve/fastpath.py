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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autocompact.content import NAME_LENGTHS, CharStats, json_length
from autocompact.convert import UNKNOWN_TOOL_NAME
from autocompact.estimation import (
    BYTES_PER_TOKEN_JSON,
    applied_factor,
    calibrated_estimate,
    estimate_stats_tokens,
    estimate_text_tokens,
)
from autocompact.guard import GuardState
from autocompact.serve.anthropic_messages import anthropic_tools
from autocompact.serve.openai_chat import openai_tools
from autocompact.serve.walk import (
    DENSE_TAIL,
    RESULT_OVERHEAD,
    STRIDE,
    Unread,
    Walk,
    WireStats,
    call_chars,
    escape_bound,
    escape_extra,
    media_ok,
    need_str,
    result_blocks,
    result_chars,
    result_content,
    string_lengths,
)
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

__all__ = ["Sizing", "WireStats", "bounds", "estimate", "read", "wire_stats"]

# -- Anthropic Messages ------------------------------------------------------------------------


def _anthropic(
    body: Mapping[str, Any], messages: Sequence[Any], walk: Walk, start: int
) -> WireStats:
    system = body.get("system")
    if system is not None and type(system) is not str:
        if type(system) is not list:
            raise Unread
        texts = []
        for block in system:
            if type(block) is not dict or block.get("type") != "text":
                raise Unread
            texts.append(str(block.get("text", "")))
        system = "\n\n".join(texts)
    names, pairs, lengths, strings = walk.names, walk.pairs, NAME_LENGTHS, walk.strings
    points, push, open_calls = walk.checkpoints, strings.append, walk.open
    pop = open_calls.pop
    final = len(messages) - 1  # the pending message: its calls and results are not paired
    dense = len(messages) - DENSE_TAIL  # checkpoints: every message from here, sparse before
    # Each wire message is one content-model message, taken as it is read (no queue, unlike
    # the OpenAI reader): its statistics added to running sums of all messages read (the last
    # one's own taken out at a checkpoint: it is not history yet), its results and calls paired
    # as its blocks come (results answer earlier messages' calls, so pairing in block order is
    # :func:`~autocompact.validation.scan_history`'s results-then-calls; a result answering a
    # call of its own message is not read here). The pending message is not paired: its
    # results and calls are kept for a later request that resumes after it.
    here = walk.count  # the message's index among the content-model messages
    if start <= final:
        walk.pair_last()
    resumed = walk.last  # the last message of the resumed walk (none: a user's, empty)
    text = walk.text + resumed[0]
    json_chars = walk.json + resumed[1]
    media = walk.media + resumed[2]
    results: list[str] = []  # the pending message's (paired when a later request resumes)
    calls: list[str] = []
    for index in range(start, len(messages)):
        message = messages[index]
        if type(message) is not dict:
            raise Unread
        role = message.get("role")
        content = message.get("content")
        if role != "user" and role != "assistant":
            raise Unread
        point = index >= dense or not index % STRIDE  # a checkpoint after it
        if point:  # the sums before it, where its strings begin
            before = (text, json_chars, media, len(strings))
        if type(content) is str:
            text += len(content)
        elif type(content) is not list:
            raise Unread
        else:
            for block in content:
                if type(block) is not dict:
                    raise Unread
                kind = block.get("type")
                if kind == "text":
                    value = block.get("text")
                    if type(value) is not str:
                        raise Unread
                    text += len(value)
                elif kind == "tool_result":
                    call_id = block.get("tool_use_id")
                    if type(call_id) is not str:
                        raise Unread
                    result = block.get("content")
                    answered = names.get(call_id, UNKNOWN_TOOL_NAME)
                    if type(result) is str:  # as result_chars counts it, without the call
                        json_chars += RESULT_OVERHEAD + 2 + lengths[answered] + len(result)
                        push(result)
                    else:  # (an image or document in it: one media part, as toolmedia says)
                        content, found = result_blocks(result)
                        json_chars += result_chars(answered, content, push)
                        media += found
                    if index == final:
                        results.append(call_id)
                    elif pop(call_id, here) >= here:  # no earlier message's call it answers
                        raise Unread
                elif kind == "tool_use":
                    call_id = block.get("id")
                    name = block.get("name")
                    if type(call_id) is not str or type(name) is not str:
                        raise Unread
                    arguments = block.get("input", {})
                    if type(arguments) is not dict:
                        raise Unread
                    names[call_id] = name  # its results are measured with its name
                    pairs.append((call_id, name))
                    json_chars += call_chars(name, arguments, push)
                    if index == final:
                        calls.append(call_id)
                    else:
                        open_calls[call_id] = here
                elif kind == "thinking":
                    text += len(need_str(block, "thinking"))
                    signature = block.get("signature")
                    if signature is not None and type(signature) is not str:
                        raise Unread
                elif kind == "redacted_thinking":
                    need_str(block, "data")
                elif kind == "image" or kind == "document":
                    media_ok(block)
                    media += 1
                else:
                    raise Unread
        here += 1
        if not point:
            points.append(None)
            continue
        text_before, json_before, media_before, begin = before
        own_json = json_chars - json_before
        if not walk.exact:  # counted later: where the history's strings and its own end
            walk.span = (begin, len(strings))
        elif strings:  # what escaping adds: to the history's strings, to the last message's
            if begin:
                json_before += escape_extra(strings[:begin])
            if begin < len(strings):
                own_json += escape_extra(strings[begin:])
            strings.clear()
            json_chars = json_before + own_json
        prev_model = messages[index - 1]["role"] == "assistant" if index > start else resumed[5]
        model = role == "assistant"
        own = (text - text_before, own_json, media - media_before)
        kept = (results, calls) if index == final else ((), ())  # others' are paired
        walk.keep(here, text_before, json_before, media_before, (*own, *kept, model, 0), prev_model)
    if type(messages[-1]) is not dict or messages[-1].get("role") != "user":
        raise Unread
    return walk.result(system, anthropic_tools(body))


# -- OpenAI Chat Completions --------------------------------------------------------------------


def _openai_text(content: Any) -> str:
    if type(content) is str:
        return content
    if type(content) is not list:
        raise Unread
    texts = []
    for block in content:
        if type(block) is not dict or block.get("type") != "text":
            raise Unread
        texts.append(need_str(block, "text"))
    return "".join(texts)


def _openai_user(content: Any) -> tuple[int, int]:
    """(text characters, media parts) of a user message's content."""
    if type(content) is str:
        return len(content), 0
    if type(content) is not list:
        raise Unread
    text = media = 0
    for block in content:
        if type(block) is not dict:
            raise Unread
        kind = block.get("type")
        if kind == "text":
            text += len(need_str(block, "text"))
        elif kind == "image_url":
            image = block.get("image_url")
            if type(image) is not dict:
                raise Unread
            need_str(image, "url")
            media += 1
        else:
            raise Unread  # files and unknown parts: the full path
    return text, media


# json.loads's scanner: the C one, with its default decoder's settings (typeshed omits it).
_SCAN: Callable[[str, int], tuple[Any, int]]
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads(text)``: its scanner called directly when the value fills the text (as tool
    arguments do), skipping json.loads's two Python calls (a third of its cost on arguments);
    json.loads itself otherwise (whitespace around the value, an error)."""
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _openai_assistant(
    message: Mapping[str, Any],
    names: dict[str, str],
    pairs: list[tuple[str, str]],
    push: Callable[[str], None],
) -> tuple[int, int, list[str]]:
    """An assistant message's text and JSON characters and its calls (their names taken)."""
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
                raise Unread
            kind = block.get("type")
            if kind == "text":
                text += len(need_str(block, "text"))
            elif kind == "refusal":
                text += len(need_str(block, "refusal"))
            else:
                raise Unread
    elif content is not None:
        raise Unread
    refusal = message.get("refusal")
    if type(refusal) is str and content is None:
        text += len(refusal)
    tool_calls = message.get("tool_calls") or ()
    if type(tool_calls) is not list and tool_calls != ():
        raise Unread
    for call in tool_calls:
        if type(call) is not dict or call.get("type", "function") != "function":
            raise Unread
        function = call.get("function")
        if type(function) is not dict:
            raise Unread
        name = function.get("name")
        call_id = call.get("id")
        if type(name) is not str or type(call_id) is not str:
            raise Unread
        arguments = function.get("arguments") or "{}"
        if type(arguments) is str:
            try:
                arguments = _loads(arguments)
            except ValueError:
                raise Unread from None
        if type(arguments) is not dict:
            raise Unread
        names[call_id] = name  # its results are measured with its name
        pairs.append((call_id, name))
        json_chars += call_chars(name, arguments, push)
        calls.append(call_id)
    return text, json_chars, calls


def _openai(body: Mapping[str, Any], messages: Sequence[Any], walk: Walk, start: int) -> WireStats:
    systems, names, pairs, lengths = walk.systems, walk.names, walk.pairs, NAME_LENGTHS
    strings, points, mark = walk.strings, walk.checkpoints, walk.mark
    add, push = walk.queue.append, strings.append  # add: walk.add, inline
    dense = len(messages) - DENSE_TAIL  # checkpoints: every message from here, sparse before
    started = walk.started
    group = -1  # an open user turn of tool results: its JSON characters (-1: none open)
    results: list[str] = []
    for index in range(start, len(messages)):
        message = messages[index]
        if type(message) is not dict:
            raise Unread
        role = message.get("role")
        if role == "system" or role == "developer":
            if started:
                raise Unread
            systems.append(_openai_text(message.get("content")))
            points.append(None)  # walk.mark(False)
            continue
        started = walk.started = True
        if role == "tool":
            call_id = message.get("tool_call_id")
            if type(call_id) is not str:
                raise Unread
            answered = names.get(call_id, UNKNOWN_TOOL_NAME)
            result = message.get("content")
            if group < 0:
                group, results = 0, []
            if type(result) is str:  # as result_chars counts it
                group += RESULT_OVERHEAD + 2 + lengths[answered] + len(result)
                push(result)
            else:
                group += result_chars(answered, result_content(result), push)
            results.append(call_id)
            points.append(None)  # no checkpoint while tool results wait for the user's turn
            continue
        if role == "assistant":
            if group >= 0:
                add((0, group, 0, results, (), False, len(strings)))
                group = -1
            text, json_chars, calls = _openai_assistant(message, names, pairs, push)
            add((text, json_chars, 0, (), calls, True, len(strings)))
        elif role == "user":
            text, media = _openai_user(message.get("content"))
            if group >= 0:
                add((text, group, media, results, (), False, len(strings)))
                group = -1
            else:
                add((text, 0, media, (), (), False, len(strings)))
        else:
            raise Unread
        if index < dense and index % STRIDE:
            points.append(None)
        else:
            mark(True)
    if group >= 0:
        add((0, group, 0, results, (), False, len(strings)))
    elif type(messages[-1]) is not dict or messages[-1].get("role") != "user":
        raise Unread  # the last content-model message must be the pending user turn
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
    walk: Walk


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
    exact: bool = True,
) -> Sizing | None:
    """The request's statistics read from its decoded JSON (``None``: take the full path).

    Args:
        protocol: the wire protocol's name (Responses requests always take the full path).
        body: the decoded body.
        messages: its whole message array (system messages included).
        previous: the reading of the conversation's last request: the messages this one
            repeats unchanged (compared as decoded values) are not read again.
        weight: the request's size in bytes (kept on the reading; a bounded reading's bound).
        exact: count what JSON escaping adds to the strings; ``False``: only bound it by
            ``weight`` (:func:`bounds`; the statistics then lack it, the reading resumes from
            none and is resumed from only once :meth:`Walk.make_exact` counted it).
    """
    reader = _READERS.get(protocol)
    if reader is None or not messages:
        return None
    walk = Walk(exact)
    start = 0
    if previous is not None and previous.protocol == protocol and exact and previous.walk.exact:
        same = _same_prefix(previous.messages, messages)
        points = previous.walk.checkpoints
        start = same
        while start > 0 and points[start - 1] is None:
            start -= 1
        if start > 0:
            walk.resume(previous.walk, start)
    try:
        stats = reader(body, messages, walk, start)
    except (Unread, RecursionError, ValueError, TypeError):
        return None
    return Sizing(protocol=protocol, messages=messages, stats=stats, weight=weight, walk=walk)


def wire_stats(protocol: str, body: Mapping[str, Any], messages: Sequence[Any]) -> WireStats | None:
    """The request's statistics read from its decoded JSON (``None``: take the full path)."""
    sizing = read(protocol, body, messages)
    return None if sizing is None else sizing.stats


def bounds(
    sizing: Sizing,
    state: GuardState,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> tuple[int, int] | None:
    """The lowest and the highest estimate (:func:`estimate`) a bounded reading allows: its
    statistics, and the same with as many JSON characters more, in the history and in the
    pending message each, as escaping can add (:func:`~autocompact.serve.walk.escape_bound`).
    ``None`` once the calibration applies a learned factor: that estimate is not monotone in
    the JSON characters (the learned mix)."""
    if applied_factor(state.calibration) is not None:
        return None
    stats = sizing.stats
    pushed = string_lengths(sizing.walk.strings)  # (none left once made exact: the size)
    more = CharStats(json_chars=escape_bound(sizing.weight, pushed))
    high = replace(stats, history=stats.history + more, pending=stats.pending + more)
    return (
        estimate(stats, state, image_token_estimate=image_token_estimate)[0],
        estimate(high, state, image_token_estimate=image_token_estimate)[0],
    )


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
