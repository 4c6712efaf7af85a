"""Tool-output clearing: the zero-model tier that runs before a summary. Pure.

Most of a coding agent's context is old tool output (file contents, command logs) that the
model has already acted on. :func:`clear_tool_outputs` replaces the content of old
:class:`~autocompact.content.FunctionResponsePart` objects with a short placeholder that keeps
the tool name, the call id and how big the output was, so the model knows what it did and can
run the tool again if it needs the output back.

What is kept, always:

- every function response of the **latest turn** (see :func:`latest_turn_start`);
- the newest tool output up to ``protect_tokens`` (estimated, JSON at 2 characters a token);
- error results (``is_error=True``): they say what went wrong and are usually small;
- outputs whose placeholder would not be smaller than the output itself.

Older repeated reads of the same file are collapsed to the latest read, wherever they are
(except in the latest turn). Nothing else changes: message count, roles, order, function calls,
response ids and names are kept, so every call/response pair stays intact. Clearing is
idempotent: a placeholder starts with :data:`CLEARED_PREFIX` and is never cleared again.

This module owns the placeholder format, the read-like tool table and the clearing rules; the
chat flow decides when to run it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autocompact.codec import decoded_message, decoded_response
from autocompact.content import (
    CharStats,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    Part,
)
from autocompact.errors import ConfigError
from autocompact.estimation import content_stats, estimate_stats_tokens
from autocompact.jsonsize import name_json_length, str_json_length
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE
from autocompact.validation import check_count, explain_bad_items

__all__ = [
    "CLEARED_PREFIX",
    "DEFAULT_PROTECT_TOKENS",
    "ClearingResult",
    "clear_tool_outputs",
    "is_cleared",
    "latest_turn_start",
    "read_target",
]

CLEARED_PREFIX = "[tool output cleared to save context:"
"""Every placeholder starts with this; :func:`is_cleared` recognises it."""

DEFAULT_PROTECT_TOKENS = 40_000
"""The newest tool output kept by default, in estimated tokens."""

# Tool names are compared after lower-casing and removing everything but letters and digits,
# so "Read", "read_file", "ReadFile" and "read-file" are the same tool.
_READ_TOOLS = frozenset(
    {
        "read",
        "readfile",
        "readtextfile",
        "view",
        "viewfile",
        "cat",
        "openfile",
        "getfile",
        "getfilecontents",
        "readnotebook",
        "notebookread",
        "fsread",
    }
)
# Editor-style tools (Anthropic's text editor, ...) read with a "view" sub-command.
_VIEW_COMMANDS = frozenset({"view", "read"})
_PATH_KEYS = (
    "file_path",
    "path",
    "filename",
    "notebook_path",
    "filepath",
    "file",
    "absolute_path",
    "target_file",
)
# Arguments that select a part of a file: two reads with different ranges are different reads.
_RANGE_KEYS = frozenset(
    {
        "offset",
        "limit",
        "start_line",
        "end_line",
        "line_start",
        "line_end",
        "start",
        "end",
        "view_range",
        "range",
        "lines",
        "pages",
        "page",
    }
)
_NON_ALNUM = re.compile(r"[^a-z0-9]")
_READ_NAMES: dict[str, bool] = {}  # tool name -> whether it is a read-like tool (memo)
_NORMAL_PATHS: dict[str, str] = {}  # path argument -> posixpath.normpath of it (memo)


@dataclass(frozen=True, kw_only=True)
class ClearingResult:
    """What :func:`clear_tool_outputs` produced.

    Attributes:
        history: the new history (same length, roles, order, calls and ids as the input).
        cleared: how many function responses were replaced by a placeholder because they were
            older than the protected budget (repeated reads not included).
        tokens_saved: estimated tokens of the input history minus those of the new one.
        deduplicated: how many function responses were replaced because they were older reads
            of a file that a later read in the history returns again. The total number of
            responses replaced is ``cleared + deduplicated``.
    """

    history: tuple[Message, ...]
    cleared: int = 0
    tokens_saved: int = 0
    deduplicated: int = 0


def is_cleared(part: Part) -> bool:
    """Whether ``part`` is a function response already replaced by a clearing placeholder."""
    return (
        isinstance(part, FunctionResponsePart)
        and isinstance(part.response, str)
        and part.response.startswith(CLEARED_PREFIX)
    )


def latest_turn_start(history: Sequence[Message]) -> int:
    """Index of the first message of the latest turn.

    The latest turn is every message after the last model message that contains at least one
    function call: the responses to the model's most recent batch of calls, and anything after
    them. Its function responses are never cleared. When no model message has a function call,
    the whole history is the latest turn (there is nothing a response could answer, so nothing
    is touched).
    """
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "model" and message.function_calls:
            return index + 1
    return 0


def read_target(call: FunctionCallPart) -> tuple[str, str] | None:
    """The file a read-like call reads, and which part of it, or ``None``.

    Read-like tools are ``Read``, ``read_file``, ``view``, ``cat`` and the like, or an
    editor-style tool called with ``command="view"``. The path is the first string among the
    arguments ``file_path``, ``path``, ``filename``, ``notebook_path`` (and a few synonyms),
    normalised (``a/./b`` is ``a/b``). The part is a canonical string of the range arguments
    (``offset``, ``limit``, ``view_range``, ...), empty for a whole-file read.
    """
    args = call.arguments
    reads = _READ_NAMES.get(call.name)
    if reads is None:
        reads = _NON_ALNUM.sub("", call.name.lower()) in _READ_TOOLS
        if len(_READ_NAMES) < 1024:
            _READ_NAMES[call.name] = reads
    if not reads:
        command = args.get("command")
        if not (isinstance(command, str) and command.lower() in _VIEW_COMMANDS):
            return None
    path = _path_argument(args)
    if path is None:
        return None
    normal = _NORMAL_PATHS.get(path)
    if normal is None:
        normal = posixpath.normpath(path)
        if len(_NORMAL_PATHS) < 4096:
            _NORMAL_PATHS[path] = normal
    keys = _RANGE_KEYS.intersection(args)  # usually none: a whole-file read
    if not keys:
        return normal, ""
    ranges = sorted((k, repr(args[k])) for k in keys if args[k] is not None)
    return normal, repr(ranges) if ranges else ""


def _path_argument(args: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


# One function response and where it lives: (message index, part index, the response, the call
# it answers or None). A plain tuple: one is made per response.
_Slot = tuple[int, int, FunctionResponsePart, FunctionCallPart | None]


def _slots(history: Sequence[Message]) -> list[_Slot]:
    calls: dict[str, FunctionCallPart] = {}
    slots: list[_Slot] = []
    append = slots.append
    for m_index, message in enumerate(history):
        parts = message.parts
        if len(parts) == 1:  # the common case: no enumerate
            part = parts[0]
            if isinstance(part, FunctionResponsePart):
                append((m_index, 0, part, calls.get(part.id)))
            elif isinstance(part, FunctionCallPart):
                calls[part.id] = part
            continue
        for p_index, part in enumerate(parts):
            if isinstance(part, FunctionCallPart):
                calls[part.id] = part
            elif isinstance(part, FunctionResponsePart):
                append((m_index, p_index, part, calls.get(part.id)))
    return slots


def _placeholder(response: FunctionResponsePart, tokens: int, note: str = "") -> str:
    return f"{CLEARED_PREFIX} {response.name} call {response.id} returned {tokens:,} tokens{note}]"


def clear_tool_outputs(
    history: Sequence[Message],
    *,
    protect_tokens: int = DEFAULT_PROTECT_TOKENS,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> ClearingResult:
    """Replace old tool output with short placeholders, without a model call.

    Walking the function responses from newest to oldest, the latest turn's responses (see
    :func:`latest_turn_start`) are always kept and count toward ``protect_tokens``; then each
    older response is kept while the running total stays within ``protect_tokens``. The first
    response that would exceed it, and every response older than that, is cleared, unless it
    is an error result, already a placeholder, or so small that a placeholder would not save
    anything. Independently of the budget, a read of a file is cleared when a later successful
    read in the history returns the same file again (the whole file, or the same range); such
    responses count nothing toward the budget.

    Args:
        history: the conversation; it is not modified.
        protect_tokens: estimated tokens of the newest tool output to keep.
        image_token_estimate: tokens per image or document, for the estimates.

    Returns:
        The new history and what was cleared.

    Raises:
        ConfigError: ``protect_tokens`` or ``image_token_estimate`` is no whole number of 0 or
            more.
    """
    if (
        isinstance(protect_tokens, bool)
        or not isinstance(protect_tokens, int)
        or protect_tokens < 0
    ):
        raise ConfigError(
            f"protect_tokens must be a whole number of 0 or more, got {protect_tokens!r:.60}: "
            "pass how many estimated tokens of the newest tool output to keep",
            key="protect_tokens",
        )
    check_count(image_token_estimate, "image_token_estimate")
    try:
        slots = _slots(history)
    except (AttributeError, TypeError) as exc:
        explain_bad_items(history, "history", exc)
    if not slots:
        return ClearingResult(history=tuple(history))
    latest = latest_turn_start(history)
    media_chars = 4 * image_token_estimate

    def tokens_of(part: Part) -> int:
        # estimate_stats_tokens(part.stats) in integers: ceil(t/4 + j/2 + m*i) is exact either
        # way (quarters of integers are exact floats), and this runs once per response.
        stats = part.stats
        return -(-(stats.text_chars + 2 * stats.json_chars + media_chars * stats.media_parts) // 4)

    replacements: dict[tuple[int, int], FunctionResponsePart] = {}
    deduplicated = 0
    seen_reads: dict[str, set[str]] = {}  # path -> ranges returned by later successful reads
    used = 0
    over_budget = False
    for slot in reversed(slots):
        m_index, _, response, call = slot
        output = response.response
        if isinstance(output, str) and output.startswith(CLEARED_PREFIX):  # is_cleared()
            continue
        target = read_target(call) if call is not None else None
        superseded = False
        if target is not None and not response.is_error:
            path, part_range = target
            later = seen_reads.get(path)
            if later is None:
                later = seen_reads[path] = set()
            superseded = "" in later or part_range in later
            later.add(part_range)
        tokens = tokens_of(response)
        if m_index >= latest:  # the latest turn: protected
            used += tokens
            continue
        if superseded and target is not None:
            note = f"; a later read of the same file ({target[0]}) follows"
            if _replace(replacements, slot, _placeholder(response, tokens, note), tokens):
                deduplicated += 1
                continue
        if not over_budget and used + tokens <= protect_tokens:
            used += tokens
            continue
        over_budget = True
        if not response.is_error:
            _replace(replacements, slot, _placeholder(response, tokens), tokens)
    if not replacements:
        return ClearingResult(history=tuple(history))
    new_history = _apply(history, replacements)
    # The new history's statistics are the old ones with each replaced output's swapped for its
    # placeholder's (sums of integers: exact), so only what was cleared is measured (issue 25).
    before = content_stats(history)
    removed = added = removed_media = 0
    for (m_index, p_index), new in replacements.items():
        old_stats = history[m_index].parts[p_index].stats
        removed += old_stats.json_chars
        removed_media += old_stats.media_parts  # (an image the tool returned goes with it)
        added += new.stats.json_chars
    after = CharStats(
        text_chars=before.text_chars,
        json_chars=before.json_chars - removed + added,
        media_parts=before.media_parts - removed_media,
    )
    saved = estimate_stats_tokens(before, image_token_estimate) - estimate_stats_tokens(
        after, image_token_estimate
    )
    return ClearingResult(
        history=new_history,
        cleared=len(replacements) - deduplicated,
        tokens_saved=saved,
        deduplicated=deduplicated,
    )


def _replace(
    replacements: dict[tuple[int, int], FunctionResponsePart],
    slot: _Slot,
    text: str,
    tokens: int,
) -> bool:
    """Record a placeholder for ``slot`` if it is smaller than the output (``tokens``); say
    whether it was."""
    old = slot[2]
    # Its statistics as FunctionResponsePart measures a str response, counted before the part
    # is built: '{"name":' + name + ',"response":' + text + '}', JSON at 2 characters a token.
    chars = 21 + name_json_length(old.name) + str_json_length(text)
    if (chars + 1) // 2 >= tokens:
        return False
    # The same checked id and name, and a str: built without the constructor's checks.
    new = decoded_response(old.id, old.name, text, old.is_error)
    object.__setattr__(new, "_stats", CharStats(json_chars=chars))
    replacements[slot[0], slot[1]] = new
    return True


def _apply(
    history: Sequence[Message], replacements: Mapping[tuple[int, int], FunctionResponsePart]
) -> tuple[Message, ...]:
    result = list(history)
    for m_index in {m_index for m_index, _ in replacements}:
        message = history[m_index]
        parts: tuple[Part, ...] = (
            (replacements[m_index, 0],)
            if len(message.parts) == 1
            else tuple(
                replacements.get((m_index, p_index), part)
                for p_index, part in enumerate(message.parts)
            )
        )
        # The same role and checked parts, one output swapped: no validation to repeat.
        result[m_index] = decoded_message(message.role, parts)
    return tuple(result)
