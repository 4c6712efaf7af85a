"""The ledger as a handoff on the recorded Claude Code sessions (issue 22), when present."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.ledger import build_ledger
from autocompact.content import FunctionCallPart, Message
from autocompact.transcripts import read_transcript

# The repository's sibling ``shared/`` (a checkout at /work/main), or its parent's (a worktree).
SESSIONS = next(
    (
        root / "shared" / "data" / "claude-code-sessions"
        for root in Path(__file__).resolve().parents[2:4]
        if (root / "shared" / "data" / "claude-code-sessions").is_dir()
    ),
    Path(__file__).resolve().parents[2] / "shared" / "data" / "claude-code-sessions",
)
FILES = sorted(SESSIONS.glob("*.jsonl.gz")) if SESSIONS.is_dir() else []
HARNESS = ("<task-notification", "[Request interrupted", "STOP what you are doing", "<system-")

pytestmark = pytest.mark.skipif(not FILES, reason=f"recorded sessions not present at {SESSIONS}")


def parts_before_each_compaction(path: Path) -> list[list[Message]]:
    """The conversation before each of Claude Code's compactions, and the whole of it."""
    transcript = read_transcript(path)
    cuts = [m.position for m in transcript.compactions] + [len(transcript.messages)]
    return [list(transcript.messages[:cut]) for cut in cuts if cut > 0]


def _head(command: str) -> str:
    """The first two words of a command past ``cd …`` and variables (the test's own reading)."""
    words = command.split()
    while words and (words[0] == "cd" or "=" in words[0] or words[0] in ("&&", ";")):
        words = words[2:] if words[0] == "cd" else words[1:]
    return " ".join(words[:2])


def fixed_later(messages: list[Message]) -> set[str]:
    """Commands that failed and later, in the same part, ran again with success."""
    calls: dict[str, FunctionCallPart] = {}
    failed: set[str] = set()
    fixed: set[str] = set()
    for message in messages:
        for call in message.function_calls:
            calls[call.id] = call
        for result in message.function_responses:
            call = calls.get(result.id)
            command = call.arguments.get("command") if call else None
            if not isinstance(command, str):
                continue
            head = _head(" ".join(command.split()))
            if result.is_error:
                failed.add(head)
            elif head in failed:
                fixed.add(head)
    return fixed


@pytest.mark.parametrize("path", FILES, ids=[p.name.split(".")[0][:8] for p in FILES])
def test_the_handoff_is_never_harness_and_no_fixed_error_is_open(path: Path) -> None:
    """At each compaction point: a goal, a next step that is not harness text, and no error
    whose command later succeeded in the part reported as open."""
    for part in parts_before_each_compaction(path):
        ledger = build_ledger(part)
        assert ledger.goal is not None
        if ledger.next_step is not None:
            assert not any(mark in ledger.next_step.text for mark in HARNESS)
        for entry in ledger.errors:
            assert "STOP what you are doing" not in entry.text
        fixed = fixed_later(part)
        summary = extractive_summary(part, max_tokens=20_000)
        for line in summary.splitlines():
            ran = re.match(r"- \[open\] \S+ `([^`]+)` failed", line)
            if ran:
                assert _head(ran.group(1)) not in fixed, line
