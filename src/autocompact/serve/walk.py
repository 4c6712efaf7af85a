"""What the fast reading of a request keeps while it walks the messages (module
:mod:`autocompact.serve.fastpath`), and how it measures a tool call and a tool result. Pure.

A tool call is measured as the content model measures a function call part
(``17 + json_length(name) + json_length(arguments)``: its JSON form
``{"name":…,"args":…}`` counted, not built), a tool result as a function response part
(``21 + json_length(name) + json_length(response)``).

A string's JSON length is its length, two quotes and what escaping adds. The walk adds the
first two as it goes and keeps the string; what escaping adds is counted for all the strings
kept at once, at the next checkpoint (one C pass over their UTF-8, not a call per string: it is
additive, see :func:`~autocompact.jsonsize.utf8_escape_extra`). A walk that only bounds the
request (``exact=False``) keeps every string, and each checkpoint where the strings of the
history and of the last message end, without counting what escaping adds (the request's size
bounds it: :func:`escape_bound`); :meth:`Walk.make_exact` counts it later, one pass over the
strings, and gives the walk the exact one would have given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autocompact.content import NAME_LENGTHS, CharStats, json_length
from autocompact.jsonsize import utf8_escape_extra
from autocompact.providers.base import ToolSpec

__all__ = [
    "DENSE_TAIL",
    "RESULT_OVERHEAD",
    "STRIDE",
    "Added",
    "Checkpoint",
    "Unread",
    "Walk",
    "WireStats",
    "call_chars",
    "escape_bound",
    "escape_extra",
    "media_ok",
    "need_str",
    "result_blocks",
    "result_chars",
    "result_content",
    "string_lengths",
    "text_blocks",
]

RESULT_OVERHEAD = 21  # len('{"name":,"response":}'): a function response's JSON around its values
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


class Unread(Exception):
    """Something the walk does not read exactly as the converter does: take the full path."""


Checkpoint = tuple[Any, ...]
# A message as read: text, JSON and media statistics (without what escaping adds to its
# strings), tool results, tool calls, whether a model message, where its strings end.
Added = tuple[int, int, int, Sequence[str], Sequence[str], bool, int]
# Where a later request may resume: after each of the last DENSE_TAIL wire messages (an agent
# resends the history and changes at most its last few), and after every STRIDE-th one before
# them (an edit further back re-reads at most STRIDE messages more); an OpenAI request's only
# where no tool result waits for the next user message.
DENSE_TAIL = 16
STRIDE = 32


class Walk:
    """Content-model messages as they are completed: their statistics summed, their tool
    calls and results paired as :func:`autocompact.validation.scan_history` pairs the history
    the guard is given (every message but the pending one, which is not checked; calls the last
    history message left open allowed when it is a model message); after some wire messages
    (:data:`DENSE_TAIL`, :data:`STRIDE`), a checkpoint a later request of the conversation
    resumes from. The OpenAI reader queues the messages between two checkpoints, settled at
    the second (its per-message work is one tuple appended); the Anthropic reader sums and
    pairs them as it reads and gives its state at each checkpoint (:meth:`keep`)."""

    __slots__ = (
        "checkpoints", "count", "exact", "json", "last", "media", "names", "open", "pairs",
        "prev_model", "queue", "seg", "span", "started", "strings", "systems", "text",
    )  # fmt: skip

    def __init__(self, exact: bool = True) -> None:
        # ``exact``: what escaping adds to the strings is counted at each checkpoint; else
        # later (:meth:`make_exact`): the strings are all kept, and with each checkpoint (two
        # more members) ``span``, where the history's strings and the last message's end.
        self.exact = exact
        self.seg = 0  # not exact: where the strings read since the last settle begin
        self.span = (0, 0)
        self.text = self.json = self.media = self.count = 0
        # The last message, not yet history: (text, json, media, results, calls, is model,
        # where its strings end in ``strings``).
        self.last: Added = (0, 0, 0, (), (), False, 0)
        self.prev_model = False  # whether the last history message is a model message
        self.open: dict[str, int] = {}  # open call id -> the history message that made it
        self.names: dict[str, str] = {}
        self.pairs: list[tuple[str, str]] = []  # every (call id, name), in order
        self.checkpoints: list[Checkpoint | None] = []
        self.started = False  # OpenAI: past the leading system messages
        self.systems: list[str] = []
        # The messages read since the last checkpoint, as :meth:`add` takes them (a reader
        # may append to it directly), and their strings whose escapes are not counted yet
        # (appended to by the readers; both are emptied in place, the strings of a walk that
        # is not exact only by make_exact).
        self.queue: list[Added] = []
        self.strings: list[str] = []

    def resume(self, previous: Walk, start: int) -> None:
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

    def mark(self, clean: bool) -> None:
        """A checkpoint after one more wire message (``clean``: a content-model message
        boundary, nothing pending; else no checkpoint there)."""
        if not clean:
            self.checkpoints.append(None)
            return
        self.settle()
        opened = tuple(self.open.items()) if self.open else ()
        point = (self.count, self.text, self.json, self.media, self.last, self.prev_model,
                 len(self.pairs), opened)  # fmt: skip
        self.checkpoints.append(point if self.exact else (*point, *self.span))

    def make_exact(self) -> None:
        """Count what escaping adds to a bounded walk's strings, at each checkpoint and at its
        end (the history's and the last message's apart): the walk is then the exact one."""
        if self.exact:
            return
        strings, points = self.strings, self.checkpoints
        counted = history = 0  # the history's strings counted so far, and what they add

        def upto(end: int) -> int:
            nonlocal counted, history
            if end > counted:
                history += escape_extra(strings[counted:end])
                counted = end
            return history

        for index, point in enumerate(points):
            if point is None:
                continue
            cut, end = point[8], point[9]
            last = point[4]
            own = escape_extra(strings[cut:end]) if end > cut else 0
            last = (last[0], last[1] + own, *last[2:])
            points[index] = (*point[:2], point[2] + upto(cut), point[3], last, *point[5:8])
        cut, end = self.span
        self.json += upto(cut)
        if end > cut:
            self.last = (
                self.last[0],
                self.last[1] + escape_extra(strings[cut:end]),
                *self.last[2:],
            )
        strings.clear()
        self.exact = True

    def keep(
        self, count: int, text: int, json_chars: int, media: int, last: Added, prev_model: bool
    ) -> None:
        """A checkpoint after one more wire message, from a reader that sums and pairs the
        messages itself as it reads them (nothing queued): its state, with what escaping adds
        to their strings already counted (:attr:`strings` emptied)."""
        self.count, self.text, self.json, self.media = count, text, json_chars, media
        self.last, self.prev_model = last, prev_model
        self.mark(True)

    def pair_last(self) -> None:
        """Pair the last message's results and calls (kept by a checkpoint after a pending
        message): a reader that pairs as it reads is about to read the message after it."""
        last = self.last
        if last[3] or last[4]:
            for call_id in last[3]:
                if self.open.pop(call_id, None) is None:
                    raise Unread
            for call_id in last[4]:
                self.open[call_id] = self.count - 1
            self.last = (*last[:3], (), (), *last[5:])

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
        and ``calls`` are kept as given: the caller does not change them afterwards). Its
        strings are the ones appended to :attr:`strings` since the message before it."""
        self.queue.append((text, json_chars, media, results, calls, model, len(self.strings)))

    def settle(self) -> None:
        """Take the messages added since the last checkpoint: each but the last becomes
        history (their sums, their tool calls and results paired), and what escaping adds to
        their strings is counted, to the history's JSON characters and the last message's."""
        queue = self.queue
        if not queue:
            return
        last, prev_model, count = self.last, self.prev_model, self.count
        text, json_chars, media, open_calls = self.text, self.json, self.media, self.open
        for message in queue:
            if last[3] or last[4]:
                index = count - 1
                for call_id in last[3]:  # its results answer earlier calls, then its calls open
                    if open_calls.pop(call_id, None) is None:
                        raise Unread
                for call_id in last[4]:
                    open_calls[call_id] = index
            prev_model = last[5]
            text += last[0]
            json_chars += last[1]
            media += last[2]
            last = message
            count += 1
        strings = self.strings
        if len(strings) > self.seg and last[6] != len(strings):
            raise Unread  # a string of no message added: not read here
        if not self.exact:  # where the last message's strings begin, and end
            cut = queue[-2][6] if len(queue) > 1 else self.seg
            self.span = (cut, len(strings))
            self.seg = len(strings)
        elif strings:
            cut = queue[-2][6] if len(queue) > 1 else 0  # where the last message's begin
            if cut:
                json_chars += escape_extra(strings[:cut])
            if cut < len(strings):
                extra = escape_extra(strings[cut:])
                last = (last[0], last[1] + extra, *last[2:])
            strings.clear()
        queue.clear()
        self.last, self.prev_model, self.count = last, prev_model, count
        self.text, self.json, self.media = text, json_chars, media

    def result(self, system: str | None, tools: tuple[ToolSpec, ...]) -> WireStats:
        self.settle()
        if self.count == 0 or self.last[5]:
            raise Unread  # the pending message must be a user message
        if self.open:
            last_history = self.count - 2
            if not self.prev_model or any(i != last_history for i in self.open.values()):
                raise Unread  # a call never answered
        history = CharStats(text_chars=self.text, json_chars=self.json, media_parts=self.media)
        text, json_chars, media = self.last[:3]
        pending = CharStats(text_chars=text, json_chars=json_chars, media_parts=media)
        return WireStats(history=history, pending=pending, system=system, tools=tools)


def escape_extra(strings: list[str]) -> int:
    """What escaping adds to the JSON strings of ``strings`` (one C pass over their UTF-8)."""
    return utf8_escape_extra(b"".join([s.encode("utf-8", "surrogatepass") for s in strings]))


def string_lengths(strings: list[str]) -> int:
    """The JSON length of ``strings`` without what escaping adds: their lengths, two quotes each."""
    return sum(map(len, strings)) + 2 * len(strings)


def escape_bound(size: int, pushed: int) -> int:
    """An upper bound on what escaping adds to strings read from a JSON text of ``size`` bytes,
    given their JSON length without it (``pushed``; each a distinct string of the text, or a
    string inside one, as tool arguments sent as a JSON string are).

    The text holds each string in at least as many bytes as its JSON form (as the content
    model writes it: ``ensure_ascii=False``) has characters: a character written as itself is
    one or more bytes and one character; a character JSON must escape (the quote, the
    backslash, the control characters) is written as the same escape in both (a backslash and
    a letter, or a backslash and ``u00XX``); any other escape in the text is longer than the
    one character it stands for. So what escaping adds is at most what the text holds beyond
    ``pushed``.
    """
    return max(0, size - pushed)


def call_chars(name: str, arguments: dict[str, Any], push: Callable[[str], None]) -> int:
    """``len(json_form({"name": name, "args": arguments}))`` as the content model measures it
    (``'{"name":' + name + ',"args":' + arguments + '}'``), the arguments counted, not encoded:
    the object's braces, a colon per member and commas between them, each key's and member's
    JSON length. A string member (most of them: paths, commands, file contents) is counted
    without what escaping adds to it: it is given to ``push`` (see :class:`Walk`)."""
    lengths = NAME_LENGTHS
    if not arguments:
        return _CALL_OVERHEAD + 2 + lengths[name]
    total = _CALL_OVERHEAD + 1 + 2 * len(arguments) + lengths[name]
    for key, member in arguments.items():
        if type(member) is str:
            total += lengths[key] + len(member) + 2  # argument names repeat, as tool names do
            push(member)
        elif member is True or member is None:  # flags and counts (a quarter of the members
            total += lengths[key] + 4  # are): their JSON words, without json_length's calls
        elif member is False:
            total += lengths[key] + 5
        elif type(member) is int:
            total += lengths[key] + len(int.__repr__(member))
        else:
            total += lengths[key] + json_length(member)
    return total


def result_chars(name: str, response: Any, push: Callable[[str], None]) -> int:
    """A tool result's JSON characters (a string response without what escaping adds to
    it: it is given to ``push``, see :class:`Walk`)."""
    if type(response) is str:
        push(response)
        return RESULT_OVERHEAD + 2 + NAME_LENGTHS[name] + len(response)
    return RESULT_OVERHEAD + NAME_LENGTHS[name] + json_length(response)


def result_content(result: Any) -> str | list[dict[str, str]]:
    """A tool result's content as the converters keep it: its text, or its text blocks."""
    if result is None:
        return ""
    if type(result) is list:
        return text_blocks(result)
    if type(result) is not str:
        raise Unread
    return result


def result_blocks(result: Any) -> tuple[str | list[dict[str, str]], int]:
    """An Anthropic tool result's content as the converter keeps it, less its images and
    documents, and how many of those it holds (each one media part: ``toolmedia``)."""
    if type(result) is not list:
        return result_content(result), 0
    media = 0
    out = []
    for block in result:
        if type(block) is dict and block.get("type") in ("image", "document"):
            media_ok(block)
            media += 1
        else:
            out.extend(text_blocks([block]))
    return out, media


def text_blocks(content: list[Any]) -> list[dict[str, str]]:
    """A tool result's list of text blocks as the converters keep it (``None``-free)."""
    out = []
    for block in content:
        if type(block) is not dict or block.get("type") != "text":
            raise Unread  # a block no converter keeps as it is, or a malformed one: the full path
        text = block.get("text")
        if type(text) is not str:
            raise Unread
        out.append({"type": "text", "text": text})
    return out


def need_str(block: Mapping[str, Any], key: str) -> str:
    value = block.get(key)
    if type(value) is not str:
        raise Unread
    return value


def media_ok(block: Mapping[str, Any]) -> None:
    """An Anthropic image or document source the converter accepts."""
    source = block.get("source")
    if type(source) is not dict:
        raise Unread
    kind = source.get("type")
    if kind == "base64":
        need_str(source, "media_type")
        need_str(source, "data")
    elif kind == "url":
        need_str(source, "url")
    else:
        raise Unread
