"""Room bought on the recorded sessions, for ``quality.py --room`` (the recorded part of the
script before the issue-22 rewrite, kept unchanged in what it measures).

On every file in ``shared/data/claude-code-sessions``: at every call, a forced compaction of the
live context must not be a NOOP for lack of a cut; at the 70 % point of a 200K window (the first
call whose context reaches 140K estimated tokens, else the largest), the conversation after a
default compaction and after one with ``keep_share=0`` over the conversation before (system
prompt and tools not counted); and at each of Claude Code's own compactions, the share of files
touched before the cut that the summary names, ours (the same cut: everything before it,
``keep_share=0``) next to Claude Code's own summary. Sizes are the engine's estimates.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from _quality_handoff import default_sessions_dir
from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import Message
from autocompact.estimation import estimate_content_tokens
from autocompact.transcripts import read_transcript

__all__ = ["recorded"]

MANUAL = CompressionTrigger.MANUAL


def _files_touched(messages: Sequence[Message]) -> set[str]:
    out = set()
    for message in messages:
        for call in message.function_calls:
            path = call.arguments.get("file_path") or call.arguments.get("path")
            if isinstance(path, str) and "." in posixpath.basename(path):
                out.add(posixpath.basename(path))
    return out


def _named(files: set[str], summary: str) -> float:
    return sum(1 for f in files if f in summary) / len(files) if files else 1.0


def recorded() -> None:
    """Print the room tables (a message when the sessions are absent)."""
    data = default_sessions_dir()
    paths = sorted(data.glob("*.jsonl.gz")) if data.is_dir() else []
    if not paths:
        print(f"(recorded sessions not found at {data})")
        return
    service = CompressionService(None, summarizer=extractive_summary)
    print("## Recorded sessions\n")
    print(
        "| session | calls | NOOP for lack of a cut | at 70 % of 200K: before "
        "| after (keep 0.3) | after (keep 0) |"
    )
    print("|---|---|---|---|---|---|")
    cc_rows = []
    for path in paths:
        transcript = read_transcript(path)
        noops = 0
        point = None
        for call in transcript.calls:
            context = transcript.context_before(call)
            if len(context) < 2 or context[0].function_responses:
                continue
            result = service.compress(
                context, CompressOptions(context_window=200_000, force=True, trigger=MANUAL)
            )
            if result.info.status is CompressionStatus.NOOP:
                noops += 1
            size = estimate_content_tokens(context)
            if (
                point is None
                or (size >= 140_000 > estimate_content_tokens(point))
                or (
                    estimate_content_tokens(point) < 140_000
                    and size > estimate_content_tokens(point)
                )
            ):
                point = context
        cells = ["–", "–", "–"]
        if point is not None:
            before = estimate_content_tokens(point)
            ratios = []
            for keep in (0.3, 0.0):
                options = CompressOptions(
                    context_window=200_000, force=True, keep_share=keep, trigger=MANUAL
                )
                after = service.compress(point, options)
                ratios.append(estimate_content_tokens(after.history) / before)
            cells = [f"{before:,}", f"{100 * ratios[0]:.1f} %", f"{100 * ratios[1]:.1f} %"]
        print(
            f"| {path.name.split('.')[0][:8]} | {len(transcript.calls)} | {noops} | "
            + " | ".join(cells)
            + " |"
        )
        for marker in transcript.compactions:
            position = marker.position
            summary_index = next(
                (i for i in sorted(transcript.summary_positions) if i >= position), None
            )
            if summary_index is None:
                continue
            start = max(
                (m.position for m in transcript.compactions if m.position < position), default=0
            )
            before_cut = [
                m
                for i, m in enumerate(transcript.messages[start:position], start)
                if i not in transcript.summary_positions
            ]
            files = _files_touched(before_cut)
            cc_summary = transcript.messages[summary_index].text
            live = transcript.messages[start:position]
            if not live or live[0].function_responses:
                continue
            ours = service.compress(
                live,
                CompressOptions(context_window=200_000, force=True, keep_share=0.0, trigger=MANUAL),
            )
            summary = ours.info.summary or ""
            cc_rows.append(
                (
                    path.name.split(".")[0][:8],
                    position,
                    len(files),
                    _named(files, cc_summary),
                    _named(files, summary),
                    len(cc_summary) // 4,
                    len(summary) // 4,
                )
            )
    print("\n### Files named by the summary at Claude Code's own compactions (same cut)\n")
    print(
        "| session | cut at message | files touched before | Claude Code names | ours names "
        "| CC summary tokens | ours tokens |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, position, n, cc, ours_share, cc_tokens, ours_tokens in cc_rows:
        print(
            f"| {name} | {position} | {n} | {100 * cc:.0f} % | {100 * ours_share:.0f} % "
            f"| {cc_tokens:,} | {ours_tokens:,} |"
        )
