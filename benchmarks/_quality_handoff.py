"""The handoff checklist on recorded Claude Code sessions, for ``quality.py`` (part 2).

At each of Claude Code's own compactions (or, in a session without one, at its end) the part is
the messages since the previous compaction. autocompact's offline summary of that part
(``CompressionService`` with ``extractive_summary``, ``keep_share=0``, its target the size of
Claude Code's summary at 4 characters a token, the engine's default when there is none) is scored
next to Claude Code's own summary (the ``isCompactSummary`` user entry) by the same checks, each
one a reader could run by hand on the part and the summary (matches as in ``_quality_score``:
normalised, whole tokens):

- **goal**: the first user request of the part (harness text left out) — the summary names one
  of its identifiers (a token holding ``-``, ``_``, ``.``, ``/`` or a digit), or, if it has none,
  half of its words of six letters or more;
- **status**: what the part shows done — the ids closed by a successful ``bd close``, the
  completed TodoWrite items, and ``commit`` when a ``git commit`` succeeded — the share named (an
  id also counts without its project prefix: ``gqc.4`` names ``spotter-gqc.4``; the commit is
  named by a word of its family, ``commit``, ``commits`` or ``committed``, or by the short hash
  the commit's output printed — the same rule for both summaries: "Committed and pushed" names
  it as "committed abc1234" does);
- **files**: the files edited or written (Edit, MultiEdit, Write, NotebookEdit), the share whose
  base name the summary names;
- **errors**: each tool error (a result flagged as an error; the tool-rejection and interruption
  boilerplate is not an error) is *fixed* when a later call with the same signature succeeds (for
  a shell command its program and first argument after any ``cd …&&``; for other tools the tool
  and the file's base name). The summary *calls an error open* when one of its lines names the
  signature with an error word (error, fail, failed, exit code, not found, rejected) and no word
  of resolution (fixed, resolved, succeeded, success, passed, passes, works, worked, solved,
  clean, then, after, now); counted: fixed errors called open (must be 0) and open errors named;
- **last test**: the last test command of the part (pytest, mix test, npm/yarn/pnpm test, cargo
  test, go test, jest, vitest, rspec, make test) — the summary names its count (the number
  before ``tests`` or ``passed``);
- **next step**: the latest user request of the part — the summary names it (as for the goal);
  a request is text of three words or more, or with an identifier (``continue`` is none), and a
  user message holding harness text is no request (a task notification ends with a sentence of
  its own after the tag);
- **harness-free**: the summary holds no harness text (``<task-notification>``,
  ``<system-reminder>``, ``[Request interrupted``, ``STOP what you are doing``, the tool-rejection
  sentence, ``<command-name>``, a ``local-command-`` tag, the local-command caveat's "DO NOT
  respond to these messages").

Queued prompts (``queue-operation`` lines) are not read by ``autocompact.transcripts`` today, so
a request made that way is not in the part for either summary's checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _quality_score import kept, message_text, normalise
from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import FunctionCallPart, Message
from autocompact.errors import AutocompactError
from autocompact.transcripts import read_transcript

__all__ = ["default_sessions_dir", "print_handoff", "recorded_handoff"]

_ROOT = Path(__file__).resolve().parents[1]


def default_sessions_dir() -> Path:
    """``shared/data/claude-code-sessions`` next to the checkout (or next to its worktree dir)."""
    for base in (_ROOT.parent, _ROOT.parent.parent):
        candidate = base / "shared" / "data" / "claude-code-sessions"
        if candidate.is_dir():
            return candidate
    return _ROOT.parent / "shared" / "data" / "claude-code-sessions"


HARNESS = (
    "<task-notification",
    "<system-reminder",
    "[request interrupted",
    "stop what you are doing",
    "doesn't want to proceed with this tool use",
    "<command-name>",
    "local-command-",
    "do not respond to these messages",  # the caveat Claude Code writes before a local command
)
_TAGGED = re.compile(
    r"<(task-notification|system-reminder|command-[\w-]+|local-command-[\w-]+)>.*?</\1>", re.S
)
_IDENT = re.compile(r"`([^`\n]{2,80})`|([\w./@-]*[-_./\d][\w./@-]*\w)")
_LONG_WORD = re.compile(r"[A-Za-z]{6,}")
_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_TEST = re.compile(
    r"\b(pytest|mix test|(?:npm|yarn|pnpm) (?:run )?test|cargo test|go test|jest|vitest|rspec|"
    r"make test)\b"
)
_COUNT = re.compile(r"(\d[\d,]*) (?:tests?|passed)\b")
_ERROR_WORDS = re.compile(r"\b(error|errors|fail|failed|failing|exit code|not found|rejected)\b")
_FIX_WORDS = re.compile(
    r"\b(fixed|resolved|succeeded|success|successful|passed|passes|works|worked|solved|clean|"
    r"then|after|now)\b"
)


def _request(message: Message) -> str | None:
    """A user message's own text (harness blocks removed), or None when nothing is left."""
    if message.role != "user" or message.function_responses:
        return None
    if any(h in message.text.lower() for h in HARNESS):  # a notification's tail is harness too
        return None
    text = _TAGGED.sub("", message.text).strip()
    low = text.lower()
    if not text or any(low.startswith(h) for h in ("caveat:", "this session is being")):
        return None
    return text


def _substantial(request: str) -> bool:
    """A request that asks for something: three words or more, or an identifier."""
    return len(request.split()) >= 3 or bool(_IDENT.search(request))


def _names_request(summary: str, request: str) -> bool:
    idents = [a or b for a, b in _IDENT.findall(request)]
    idents = [i for i in idents if not i.isdigit() or len(i) >= 3]
    if idents:
        return any(kept(summary, i) for i in idents)
    words = {w.lower() for w in _LONG_WORD.findall(request)}
    return bool(words) and sum(kept(summary, w) for w in words) * 2 >= len(words)


def _names_id(summary: str, ident: str) -> bool:
    """An id named whole, or without its project prefix (``gqc.4`` for ``spotter-gqc.4``)."""
    tail = ident.split("-", 1)[-1]
    return kept(summary, ident) or (
        tail != ident and len(tail) >= 4 and bool(re.search(r"[.\d]", tail)) and kept(summary, tail)
    )


_COMMIT_WORD = re.compile(r"(?<![a-z0-9])commit(?:s|ted)?(?![a-z0-9])")


def _names_done(summary: str, item: str, facts: dict[str, Any]) -> bool:
    """A finished item named: the commit by a word of its family or one of its hashes, an id
    as :func:`_names_id` reads it."""
    if item == "commit":
        hashes = facts["commit_hashes"]
        return bool(_COMMIT_WORD.search(summary)) or any(kept(summary, h) for h in hashes)
    return _names_id(summary, item)


def _signature(call: FunctionCallPart) -> str:
    command = call.arguments.get("command")
    if isinstance(command, str):
        command = command.split("&&")[-1].strip() if command.lstrip().startswith("cd ") else command
        words = [w for w in command.split() if "=" not in w or w.startswith("-")]
        return " ".join(words[:2])
    path = call.arguments.get("file_path") or call.arguments.get("path")
    return f"{call.name} {Path(path).name}" if isinstance(path, str) else call.name


def _facts(part: Sequence[Message]) -> dict[str, Any]:
    """What the checks need from the part, found without the summarizer."""
    calls: dict[str, FunctionCallPart] = {}
    results: list[tuple[FunctionCallPart, str, bool]] = []
    for message in part:
        for call in message.function_calls:
            calls[call.id] = call
        for response in message.function_responses:
            called = calls.get(response.id)
            if called is not None:
                results.append((called, str(response.response), response.is_error))
    requests = [r for r in map(_request, part) if r and _substantial(r)]
    files = sorted(
        {
            Path(str(c.arguments.get("file_path") or c.arguments.get("notebook_path"))).name
            for c, _, error in results
            if c.name in _EDIT_TOOLS and not error
        }
    )
    done: set[str] = set()
    hashes: list[str] = []
    errors: list[tuple[str, bool]] = []
    last_test: str | None = None
    for index, (call, text, error) in enumerate(results):
        command = str(call.arguments.get("command", ""))
        if not error and re.search(r"\bbd close\b", command):
            ids = re.split(r"\s--|&&|;|\||\n", command.split("bd close", 1)[1])[0]
            done |= set(re.findall(r"\b[a-z]+-[a-z0-9]+(?:\.\d+)*\b", ids))
        if not error and re.search(r"\bgit commit\b", command):
            done.add("commit")
            hashes += re.findall(r"^\[[^\]\n]*?\b([0-9a-f]{7,40})\]", text, re.M)
        if call.name == "TodoWrite":
            for todo in call.arguments.get("todos") or []:
                if isinstance(todo, dict) and todo.get("status") == "completed":
                    done.add(str(todo.get("content", "")))
        if _TEST.search(command):
            count = _COUNT.search(text)
            last_test = count.group(1).replace(",", "") if count else None
        boilerplate = any(h in text.lower() for h in HARNESS)
        if error and not boilerplate:
            sig = _signature(call)
            fixed = any(_signature(c) == sig and not e for c, _, e in results[index + 1 :])
            errors.append((sig, fixed))
    return {
        "goal": requests[0] if requests else None,
        "next": requests[-1] if requests else None,
        "files": files,
        "done": sorted(d for d in done if d),
        "commit_hashes": hashes,
        "errors": errors,
        "last_test": last_test,
    }


def checklist(facts: dict[str, Any], summary: str) -> dict[str, Any]:
    """The checklist of one summary against the part's facts."""
    normal = normalise(summary)
    lines = [normalise(line) for line in re.split(r"\n|(?<=[.;])\s", summary) if line.strip()]

    def called_open(sig: str) -> bool:
        s = normalise(sig)
        return any(
            s in line and _ERROR_WORDS.search(line) and not _FIX_WORDS.search(line)
            for line in lines
        )

    errors = facts["errors"]
    fixed = [sig for sig, ok in errors if ok]
    still_open = [sig for sig, ok in errors if not ok]
    return {
        "tokens": len(summary) // 4,
        "goal": None if facts["goal"] is None else _names_request(normal, facts["goal"]),
        "status": [sum(_names_done(normal, d, facts) for d in facts["done"]), len(facts["done"])],
        "files": [sum(kept(normal, f) for f in facts["files"]), len(facts["files"])],
        "fixed_called_open": [sum(map(called_open, fixed)), len(fixed)],
        "open_named": [sum(kept(normal, s) for s in still_open), len(still_open)],
        "last_test": None if facts["last_test"] is None else kept(normal, facts["last_test"]),
        "next_step": None if facts["next"] is None else _names_request(normal, facts["next"]),
        "harness_free": not any(h in summary.lower() for h in HARNESS),
    }


def _ours(part: Sequence[Message], target: int | None) -> str:
    service = CompressionService(None, summarizer=extractive_summary)
    options = CompressOptions(
        context_window=10_000_000,
        force=True,
        keep_share=0.0,
        summary_target_tokens=target,
        clear_tool_outputs=False,
        trigger=CompressionTrigger.MANUAL,
    )
    result = service.compress(part, options)
    if result.info.status is not CompressionStatus.COMPRESSED:
        return f"(no summary: {result.info.status.value}: {result.info.error})"
    return result.info.summary or ""


def recorded_handoff(directory: Path | None = None) -> list[dict[str, Any]] | None:
    """One row per compaction point and summarizer; None when the sessions are absent."""
    directory = directory or default_sessions_dir()
    paths = sorted(directory.glob("*.jsonl.gz")) if directory.is_dir() else []
    if not paths:
        return None
    rows: list[dict[str, Any]] = []
    for path in paths:
        try:
            transcript = read_transcript(path)
        except AutocompactError as exc:
            rows.append({"session": path.name, "error": str(exc)})
            continue
        messages, summaries = transcript.messages, sorted(transcript.summary_positions)
        cuts = [m.position for m in transcript.compactions] or [len(messages)]
        start = 0
        for cut in cuts:
            cc_index = (
                next((i for i in summaries if i >= cut), None) if transcript.compactions else None
            )
            part = list(messages[start:cut])
            truth = [m for i, m in enumerate(part, start) if i not in transcript.summary_positions]
            facts = _facts(truth)
            cc = messages[cc_index].text if cc_index is not None else None
            ours = _ours(part, max(256, len(cc) // 4) if cc else None)
            where = f"{path.name.split('.')[0][:8]} @{cut}" + (
                "" if cc else " (end, no CC summary)"
            )
            size = sum(len(message_text(m)) for m in truth) // 4
            if cc is not None:
                rows.append(
                    {
                        "point": where,
                        "part_tokens": size,
                        "by": "Claude Code",
                        **checklist(facts, cc),
                    }
                )
            rows.append(
                {"point": where, "part_tokens": size, "by": "autocompact", **checklist(facts, ours)}
            )
            start = cut
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, list):
        return "n/a" if value[1] == 0 else f"{value[0]} of {value[1]}"
    return str(value)


def print_handoff(rows: list[dict[str, Any]] | None) -> None:
    """Part 2's table, as Markdown (a message when the sessions are absent)."""
    print("## Handoff checklist on the recorded sessions\n")
    if rows is None:
        print(f"(recorded sessions not found at {default_sessions_dir()}: part skipped)\n")
        return
    keys = ("goal", "status", "files", "fixed_called_open", "open_named", "last_test", "next_step")
    print(
        "| point | summary by | tokens | goal | status done named | files named "
        "| fixed errors called open | open errors named | last test | next step | harness-free |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "error" in row:
            print(f"| {row['session']} | unreadable: {row['error']} |")
            continue
        cells = [_cell(row[k]) for k in keys]
        print(
            f"| {row['point']} | {row['by']} | {row['tokens']:,} | "
            + " | ".join(cells)
            + f" | {_cell(row['harness_free'])} |"
        )
    print()
