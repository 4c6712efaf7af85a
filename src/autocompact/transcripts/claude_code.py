"""Reader for Claude Code session logs (``~/.claude/projects/*/<session>.jsonl``). Pure.

One JSON object a line. Only ``user`` and ``assistant`` lines are conversation; ``progress``,
``system``, ``file-history-snapshot`` and ``queue-operation`` lines are not, except the
``system`` line with ``subtype: "compact_boundary"`` that marks a compaction (``compactMetadata``
holds ``trigger`` and ``preTokens``); the ``user`` line after it, flagged ``isCompactSummary``,
holds the summary the model saw from then on.

* One API response is streamed over several ``assistant`` lines sharing ``message.id``: their
  blocks are merged into one message and the call is counted once. Its prompt size is
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``.
* ``toolUseResult`` is the UI's copy of a tool's output; the model saw the ``tool_result``
  block instead, so only that is read.
* ``isVisibleInTranscriptOnly`` is a UI flag (the compact summary carries it and the model does
  see the summary): it does not exclude a line. Assistant lines from the ``<synthetic>`` model
  (client-made error notices) are not API calls.
* ``queue-operation`` lines with ``operation: "enqueue"`` hold a prompt the user typed while
  the agent was working (Claude Code hands it to the model mid-turn): it is kept as user text in
  its place, with the next tool result when a call is waiting for one (so calls and results
  stay paired), else as a user message of its own. Harness text queued the same way (task
  notifications) is kept too; the summarizer knows it for what it is.
* ``isSidechain`` lines belong to a sub-agent: they are skipped in a main session, and read
  when every conversation line of the file is one (a ``subagents/agent-*.jsonl`` file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autocompact.codec import decoded_message
from autocompact.content import Message, TextPart
from autocompact.convert.anthropic_messages import from_anthropic_message
from autocompact.errors import ContentError, TranscriptFormatError
from autocompact.transcripts._base import (
    CompactionMarker,
    RecordedCall,
    Transcript,
    int_field,
    iter_json_lines,
    usage_field,
)

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "claude-code"

# Tuples, compared with ==: a ``type`` that is a list or an object is no kind (a set would fail
# to hash it).
_ONLY_HERE = ("progress", "file-history-snapshot", "queue-operation", "summary")
_SYNTHETIC_MODEL = "<synthetic>"
# The kinds of line read(): any other is passed over. A tuple, compared with ==, as read() does.
_READ = ("user", "assistant", "queue-operation", "system")


def looks_like(head: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the first JSON lines of a JSONL file are a Claude Code log.

    A line of a type only Claude Code writes, or a conversation line whose ``message`` is an
    Anthropic message (``content``, not Gemini's ``parts``).
    """
    for obj in head:
        kind = obj.get("type")
        if kind in _ONLY_HERE:
            return True
        message = obj.get("message")
        if kind in ("user", "assistant") and isinstance(message, Mapping):
            return "content" in message and "parts" not in message
    return False


def read(path: Path, data: bytes | None = None) -> Transcript:
    """Read a Claude Code session log (``data``: the file's content, when already read).

    Raises:
        TranscriptFormatError: a line is not JSON, or a conversation line has no usable
            ``message`` (the error names the file and line).
    """
    # Every line is read (a damaged one is an error wherever it is); only the kinds read below
    # are kept (progress lines, most of a log, are let go as soon as they are read).
    lines = [line for line in iter_json_lines(path, data) if line[1].get("type") in _READ]
    conversation = [obj for _, obj in lines if obj.get("type") in ("user", "assistant")]
    sidechain_file = bool(conversation) and all(obj.get("isSidechain") for obj in conversation)

    messages: list[Message] = []
    # Each call's fields (index, preceding, context_start, prompt, output, model, line), made a
    # RecordedCall at the end: a response split over lines raises its output as it is read.
    calls: list[list[Any]] = []
    compactions: list[CompactionMarker] = []
    summaries: set[int] = set()
    by_id: dict[str, tuple[int, int]] = {}  # message.id -> (message index, call index)
    tool_names: dict[str, str] = {}
    context_start = 0
    queued: list[str] = []  # prompts waiting for the tool result they arrive with

    for number, obj in lines:
        kind = obj.get("type")
        if kind == "queue-operation":
            text = _queued_text(obj)
            if text is None or (obj.get("isSidechain") and not sidechain_file):
                continue
            if messages and messages[-1].role == "model" and messages[-1].function_calls:
                queued.append(text)
            else:
                messages.append(Message.user(text))
            continue
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            meta = obj.get("compactMetadata")
            meta = meta if isinstance(meta, Mapping) else {}
            pre = meta.get("preTokens")
            context_start = len(messages)
            compactions.append(
                CompactionMarker(
                    position=context_start,
                    trigger=str(meta.get("trigger", "unknown")),
                    pre_tokens=int_field(pre) if pre is not None else None,
                    line=number,
                )
            )
            continue
        if kind not in ("user", "assistant"):
            continue
        if obj.get("isSidechain") and not sidechain_file:
            continue
        raw = obj.get("message")
        if not isinstance(raw, dict):  # (parsed JSON: a Mapping is a dict)
            raise TranscriptFormatError(
                f"a {kind} line without a 'message' object", path=str(path), line=number
            )
        if kind == "user":
            message = _convert(raw, "user", len(messages), tool_names, path, number)
            if queued:
                message = Message(
                    role="user", parts=(*message.parts, *(TextPart(text=t) for t in queued))
                )
                queued = []
            if obj.get("isCompactSummary"):
                summaries.add(len(messages))
            messages.append(message)
            continue
        message = _convert(raw, "assistant", len(messages), tool_names, path, number)
        message_id = raw.get("id")
        usage = raw.get("usage")
        model = raw.get("model")
        if isinstance(message_id, str) and message_id in by_id:
            position, call_index = by_id[message_id]
            merged = messages[position].parts + message.parts
            # Two model messages this reader built: their parts are checked already.
            messages[position] = decoded_message("model", merged)
            if isinstance(usage, dict):
                fields = calls[call_index]
                fields[4] = max(fields[4], usage_field(usage, "output_tokens", path, number))
            continue
        if model == _SYNTHETIC_MODEL or not isinstance(usage, dict):
            messages.append(message)
            continue
        prompt = (
            usage_field(usage, "input_tokens", path, number)
            + usage_field(usage, "cache_creation_input_tokens", path, number)
            + usage_field(usage, "cache_read_input_tokens", path, number)
        )
        output = usage_field(usage, "output_tokens", path, number)
        if isinstance(message_id, str):
            by_id[message_id] = (len(messages), len(calls))
        calls.append(
            [
                len(calls),
                len(messages),
                context_start,
                prompt,
                output,
                model if isinstance(model, str) else None,
                number,
            ]
        )
        messages.append(message)

    messages.extend(Message.user(text) for text in queued)
    recorded = [
        RecordedCall(
            index=index,
            preceding=preceding,
            context_start=start,
            prompt_tokens=prompt,
            output_tokens=output,
            model=model,
            line=line,
        )
        for index, preceding, start, prompt, output, model, line in calls
    ]
    return Transcript(
        path=str(path),
        format=FORMAT,
        messages=tuple(messages),
        calls=tuple(recorded),
        compactions=tuple(_with_post_tokens(compactions, recorded)),
        summary_positions=frozenset(summaries),
    )


def _queued_text(obj: Mapping[str, Any]) -> str | None:
    """The prompt an ``enqueue`` line holds (text, or the text blocks of a block list)."""
    if obj.get("operation") != "enqueue":
        return None
    content = obj.get("content")
    if isinstance(content, list):
        content = "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return content if isinstance(content, str) and content.strip() else None


def _convert(
    raw: Mapping[str, Any],
    role: str,
    index: int,
    tool_names: dict[str, str],
    path: Path,
    line: int,
) -> Message:
    content = raw.get("content")
    if content is None:
        raise TranscriptFormatError(
            f"a {role} message without 'content'", path=str(path), line=line
        )
    try:
        return from_anthropic_message(
            {"role": role, "content": content}, index=index, tool_names=tool_names
        )
    except ContentError as exc:
        raise TranscriptFormatError(str(exc), path=str(path), line=line) from exc


def _with_post_tokens(
    compactions: list[CompactionMarker], calls: list[RecordedCall]
) -> list[CompactionMarker]:
    """Each marker with the first reported size after it (what the compaction left)."""
    out = []
    for marker in compactions:
        after = next((c for c in calls if c.context_start == marker.position), None)
        out.append(
            CompactionMarker(
                position=marker.position,
                trigger=marker.trigger,
                pre_tokens=marker.pre_tokens,
                post_tokens=after.prompt_tokens if after else None,
                line=marker.line,
            )
        )
    return out
