"""The client's own messages in a history the engine rewrote: which go out as sent. Pure.

A compaction, or the guarantee's trimming, gives the engine's new history in the content model;
the replacement is written from it (:func:`~autocompact.serve.substitution.build_replacement`).
A message the engine did not change goes out as the client sent it, unknown fields and signed
blocks included; one whose only change is old tool output the clearing replaced goes out as the
client sent it with only that output changed (the rest of the result, such as its ``is_error``
or ``cache_control``, and every other field of the message are kept).

The wire messages are matched to the content model run by run: a *run* is a stretch of wire
messages of one side (the user's: user messages, tool results; the model's: assistant messages,
calls, reasoning items), and no protocol joins messages of two sides into one content-model
message. From the newest run back, a run whose content-model messages are the end of the new
history (equal, or equal but for outputs the clearing replaced) is kept; the first that is not
ends the kept part, and what comes before it is written anew. One conversion of the whole
history and one of each run: linear in its length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autocompact.content import FunctionResponsePart, Message
from autocompact.errors import ContentError
from autocompact.serve.protocol import WireProtocol

__all__ = ["kept_tail"]

_MODEL_TYPES = frozenset({"function_call", "reasoning"})
"""Responses items of the model's side besides assistant messages."""


def _side(message: Any) -> bool:
    """Whether a wire message is the model's (an assistant message, a call, a reasoning item)."""
    if not isinstance(message, Mapping):
        return False
    return message.get("role") == "assistant" or message.get("type") in _MODEL_TYPES


def _runs(source: Sequence[Any]) -> list[tuple[int, int]]:
    """``(start, end)`` of each stretch of wire messages of one side, oldest first."""
    runs: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(source) + 1):
        if index == len(source) or _side(source[index]) != _side(source[start]):
            runs.append((start, index))
            start = index
    return runs


def _cleared(new: Message, old: Message) -> dict[str, FunctionResponsePart] | None:
    """The tool results of ``old`` whose output ``new`` replaced, by call id, when that is all
    that changed (``None``: something else did)."""
    if new.role != old.role or len(new.parts) != len(old.parts):
        return None
    changed: dict[str, FunctionResponsePart] = {}
    for part, was in zip(new.parts, old.parts, strict=True):
        if part == was:
            continue
        if not (
            isinstance(part, FunctionResponsePart)
            and isinstance(was, FunctionResponsePart)
            and (part.id, part.name, part.is_error) == (was.id, was.name, was.is_error)
            and part.id not in changed
        ):
            return None
        changed[part.id] = part
    return changed


def _result_field(item: Any) -> tuple[str, str] | None:
    """``(call id, field)`` of a tool result in its wire form (an OpenAI ``tool`` message, an
    Anthropic ``tool_result`` block, a Responses ``function_call_output`` item)."""
    if not isinstance(item, Mapping):
        return None
    if item.get("role") == "tool" and isinstance(item.get("tool_call_id"), str):
        return item["tool_call_id"], "content"
    if item.get("type") == "tool_result" and isinstance(item.get("tool_use_id"), str):
        return item["tool_use_id"], "content"
    if item.get("type") == "function_call_output" and isinstance(item.get("call_id"), str):
        return item["call_id"], "output"
    return None


def _outputs(messages: Sequence[Any]) -> dict[str, Any]:
    """The output of each tool result in wire messages, by call id."""
    found: dict[str, Any] = {}
    for message in messages:
        blocks = message.get("content") if isinstance(message, Mapping) else None
        for item in (message, *(blocks if isinstance(blocks, list) else ())):
            slot = _result_field(item)
            if slot is not None:
                found[slot[0]] = item.get(slot[1])
    return found


def _patched(messages: Sequence[Any], outputs: Mapping[str, Any]) -> list[Any] | None:
    """``messages`` with the output of each tool result named in ``outputs`` replaced, every
    other field and message as it was (``None``: a result named there is not in them)."""
    done: set[str] = set()

    def patch(item: Any) -> Any:
        slot = _result_field(item)
        if slot is None or slot[0] not in outputs:
            return item
        done.add(slot[0])
        return {**item, slot[1]: outputs[slot[0]]}

    out = []
    for message in messages:
        message = patch(message)
        blocks = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(blocks, list):
            changed = [patch(block) for block in blocks]
            if any(new is not old for new, old in zip(changed, blocks, strict=True)):
                message = {**message, "content": changed}
        out.append(message)
    return out if done == set(outputs) else None


def _as_sent(
    protocol: WireProtocol,
    new: Sequence[Message],
    old: Sequence[Message],
    run: Sequence[Any],
) -> list[Any] | None:
    """The wire messages ``run`` (read as ``old``) as they go out for ``new``: as the client
    sent them when nothing changed, with the outputs the clearing replaced written in when only
    those did (``None``: something else changed)."""
    changed: dict[str, FunctionResponsePart] = {}
    for message, was in zip(new, old, strict=True):
        cleared = {} if message == was else _cleared(message, was)
        if cleared is None:
            return None
        changed.update(cleared)
    if not changed:
        return list(run)
    written = _outputs(protocol.to_wire(new, run))  # (only its tool outputs are read)
    if not set(changed) <= set(written):
        return None
    return _patched(run, {call: written[call] for call in changed})


def kept_tail(
    protocol: WireProtocol, history: Sequence[Message], source: Sequence[Any]
) -> tuple[int, list[Any]] | None:
    """The wire messages that end ``history`` as the client sent them (see the module
    docstring): how many of ``history``'s last messages they hold, and the messages, with the
    tool outputs the clearing replaced written in. ``None`` when ``source`` cannot be matched
    run by run (it does not read, or a run reads differently alone than in the whole)."""
    runs = _runs(source)
    try:
        whole = protocol.convert({}, source).messages
        counts = [len(protocol.convert({}, source[a:b]).messages) for a, b in runs]
    except ContentError:
        return None
    if sum(counts) != len(whole):
        return None
    left, at = len(history), len(whole)  # history[:left] and whole[:at]: not matched yet
    kept: list[list[Any]] = []
    for (a, b), count in zip(reversed(runs), reversed(counts), strict=True):
        if count > left:
            break
        new, old = history[left - count : left], whole[at - count : at]
        run = _as_sent(protocol, new, old, source[a:b])
        if run is None:
            break
        kept.append(run)
        left, at = left - count, at - count
    return len(history) - left, [message for run in reversed(kept) for message in run]
