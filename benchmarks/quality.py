"""Compaction quality, offline: planted items through five rounds, and the recorded sessions.

    .venv/bin/python benchmarks/quality.py                    # seeds 101-105, budgets 10/20/30 %
    .venv/bin/python benchmarks/quality.py --seeds 7 8 9      # other seeds
    .venv/bin/python benchmarks/quality.py --sessions-only    # only the recorded-session part

Part 1 (synthetic). From a seed, generate a coding-agent session with tool traffic (reads, edits,
commands, failures) and plant typed items in it: rules, constraints, facts (one of them updated
later: only the latest value counts), goals and a goal change, preferences, file paths (edited
files) and errors (the line that says what failed). Compact with the engine's own flow
(``CompressionService`` with the extractive summarizer, ``keep_share=0``, the summary target =
the budget) at 10, 20 and 30 % of the original size; then four more rounds, each adding fresh
tool traffic (no new items) and compacting the previous result at the same budget. Reported per
type and per round: the share of planted items whose marker text is still in the history, and
whether every compacted history was within its budget. The oracle is a plain substring search,
not the summarizer's code. The test suite uses seeds 1-99; the reported run uses 101-105.

Part 2 (recorded). On every file in ``../shared/data/claude-code-sessions``: at every call, a
forced compaction of the live context must not be a NOOP for lack of a cut; at the 70 % point of
a 200K window (the first call whose context reaches 140K estimated tokens, else the largest),
the conversation after a default compaction and after one with ``keep_share=0`` over the
conversation before (system prompt and tools not counted); and at each of Claude Code's own
compactions, the share of files touched before the cut that the summary names, ours (the same
cut: everything before it, ``keep_share=0``) next to Claude Code's own summary.

The summarizer's time on long histories is measured by ``benchmarks/extractive_speed.py``.
"""

from __future__ import annotations

import argparse
import posixpath
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.estimation import estimate_content_tokens
from autocompact.transcripts import read_transcript

MANUAL = CompressionTrigger.MANUAL
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"
BUDGETS = (0.10, 0.20, 0.30)
ROUNDS = 5

_NOUNS = ("cache", "queue", "parser", "billing", "report", "auth", "scheduler", "exporter")
_VERBS = ("refactor", "fix", "speed up", "document", "test", "port", "harden")


@dataclass(frozen=True)
class Planted:
    """One planted item: its type and the marker text that must survive."""

    kind: str
    marker: str


def _tool_step(rng: random.Random, n: int, root: str) -> list[Message]:
    kind = rng.choice(("read", "read", "bash", "edit", "grep"))
    cid = f"t{n}"
    if kind == "read":
        path = f"{root}/src/{rng.choice(_NOUNS)}/mod_{rng.randrange(60)}.py"
        call = FunctionCallPart(id=cid, name="Read", arguments={"file_path": path})
        out = "\n".join(f"def f{k}(x):\n    return x * {k}" for k in range(rng.randrange(20, 120)))
    elif kind == "bash":
        command = rng.choice(("pytest -q", "ruff check .", "mypy src", "git status"))
        call = FunctionCallPart(id=cid, name="Bash", arguments={"command": command})
        out = "\n".join(f"collected {k} items ... ok" for k in range(rng.randrange(10, 80)))
    elif kind == "edit":
        path = f"{root}/src/{rng.choice(_NOUNS)}/mod_{rng.randrange(60)}.py"
        call = FunctionCallPart(
            id=cid,
            name="Edit",
            arguments={"file_path": path, "old_string": "x", "new_string": "y" * 200},
        )
        out = "The file has been updated."
    else:
        call = FunctionCallPart(id=cid, name="Grep", arguments={"pattern": rng.choice(_NOUNS)})
        out = "\n".join(f"src/x/{k}.py:{k}: match" for k in range(rng.randrange(5, 60)))
    thought = f"Checking the {rng.choice(_NOUNS)} next. " * rng.randrange(1, 4)
    return [
        Message.model(thought, call),
        Message.user(FunctionResponsePart(id=cid, name=call.name, response=out)),
    ]


def generate(seed: int, steps: int = 160, per_type: int = 4) -> tuple[list[Message], list[Planted]]:
    """A session with tool traffic, chatty requests and ``per_type`` planted items of each type."""
    rng = random.Random(seed)
    root = f"/home/dev{seed}/project"

    def tag() -> str:
        return f"{rng.choice(_NOUNS)}{rng.randrange(1000, 9999)}"

    goal = f"{rng.choice(_VERBS).capitalize()} the {tag()} module so it handles retries"
    planted = [Planted("goal", goal)]
    events: dict[int, list[Message]] = {}

    def at(position: int, *messages: Message) -> None:
        events.setdefault(position, []).extend(messages)

    chatter = (
        "Thanks, that looks reasonable so far and I appreciate the detail in the last answer. ",
        "Let me think about this a little more while you carry on with the work. ",
        "Good progress; keep going in the same direction as before. ",
    )
    for k in range(per_type):
        slot = lambda: rng.randrange(1, steps - 10)  # noqa: E731
        rule = f"never commit generated files under build_{tag()}"
        constraint = f"the {tag()} job must finish in under {rng.randrange(3, 15)} minutes"
        pref = f"I prefer {tag()} fixtures over setUp methods"
        key = f"{tag()} staging port"
        old, new = rng.randrange(1000, 5000), rng.randrange(5001, 9999)
        version = f"the {tag()} API version is {rng.randrange(2, 9)}.{rng.randrange(0, 20)}"
        edited = f"src/{rng.choice(_NOUNS)}/planted_{tag()}.py"
        error = f"ModuleNotFoundError: No module named '{tag()}_helpers'"
        planted += [
            Planted("rule", rule),
            Planted("constraint", constraint),
            Planted("preference", pref),
            Planted("fact", f"{key} is now {new}"),
            Planted("fact", version),
            Planted("file", edited),
            Planted("error", error),
        ]
        first = slot()
        at(
            first,
            Message.user(
                rng.choice(chatter)
                + f"You must {rule}. "
                + rng.choice(chatter)
                + f"Note that {constraint}. The {key} is {old}."
            ),
            Message.model("Noted."),
        )
        at(
            slot(),
            Message.user(rng.choice(chatter) + f"{pref}. Also {version}."),
            Message.model("OK."),
        )
        at(
            slot(),
            Message.model(
                "Running the tests.",
                FunctionCallPart(id=f"err{k}", name="Bash", arguments={"command": "pytest -x"}),
            ),
            Message.user(
                FunctionResponsePart(
                    id=f"err{k}",
                    name="Bash",
                    response=f"collecting ...\n{error}\nExit code 2",
                    is_error=True,
                )
            ),
        )
        at(
            rng.randrange(first + 1, steps - 5),
            Message.user(f"Update: the {key} is now {new}."),
            Message.model("Understood."),
        )
        at(
            slot(),
            Message.model(
                "Editing.",
                FunctionCallPart(
                    id=f"ed{k}",
                    name="Edit",
                    arguments={
                        "file_path": f"{root}/{edited}",
                        "old_string": "a",
                        "new_string": "b",
                    },
                ),
            ),
            Message.user(FunctionResponsePart(id=f"ed{k}", name="Edit", response="updated")),
        )
    new_goal = f"focus on the {tag()} exporter"
    planted.append(Planted("goal change", new_goal))
    at(3 * steps // 4, Message.user(f"Change of plan: {new_goal} instead."), Message.model("OK."))
    history = [Message.user(f"{goal}. " + " ".join(chatter))]
    for n in range(steps):
        history += events.get(n, [])
        history += _tool_step(rng, n, root)
    history.append(Message.model("Done with this part."))
    return history, planted


def _present(history: Sequence[Message], item: Planted) -> bool:
    text = "\n".join(m.text for m in history) + "\n".join(
        str(c.arguments) for m in history for c in m.function_calls
    )
    text += "\n".join(str(r.response) for m in history for r in m.function_responses)
    return item.marker.lower() in text.lower()


def _compact(history: Sequence[Message], target: int) -> tuple[tuple[Message, ...], int]:
    service = CompressionService(None, summarizer=extractive_summary)
    options = CompressOptions(
        context_window=1_000_000,
        force=True,
        keep_share=0.0,
        summary_target_tokens=max(64, target),
        clear_tool_outputs=False,
    )
    result = service.compress(history, options)
    if result.info.status is not CompressionStatus.COMPRESSED:
        raise SystemExit(f"compaction failed: {result.info.status}: {result.info.error}")
    return result.history, estimate_content_tokens(result.history)


def synthetic(seeds: Sequence[int], budgets: Sequence[float] = BUDGETS) -> None:
    print("## Planted items through five rounds (extractive summarizer, keep_share=0)\n")
    print(f"Seeds {', '.join(map(str, seeds))}; budget = share of the original session's size.\n")
    for budget in budgets:
        per_round: list[list[float]] = [[] for _ in range(ROUNDS)]
        per_kind: dict[str, list[list[bool]]] = {}
        within = True
        sizes = []
        for seed in seeds:
            history, planted = generate(seed)
            original = estimate_content_tokens(history)
            allowed = int(budget * original)
            current: tuple[Message, ...] = tuple(history)
            rng = random.Random(seed + 7_777)
            for round_index in range(ROUNDS):
                if round_index:
                    extra: list[Message] = [Message.user("Carry on.")]
                    for n in range(40):
                        extra += _tool_step(
                            rng, 10_000 * round_index + n, f"/home/dev{seed}/project"
                        )
                    extra.append(Message.model("Continuing."))
                    current = (*current, *extra)
                # The summary's target leaves room for the framing (preamble + acknowledgement).
                current, size = _compact(current, allowed - 40)
                within = within and size <= allowed
                sizes.append(size / original)
                hits = [_present(current, item) for item in planted]
                per_round[round_index].append(sum(hits) / len(hits))
                for item, hit in zip(planted, hits, strict=True):
                    rounds = per_kind.setdefault(item.kind, [[] for _ in range(ROUNDS)])
                    rounds[round_index].append(hit)
        print(f"### Budget {100 * budget:g} %\n")
        print("| round | " + " | ".join(str(r + 1) for r in range(ROUNDS)) + " |")
        print("|---|" + "---|" * ROUNDS)
        print(
            "| all items | "
            + " | ".join(f"{100 * sum(v) / len(v):.0f} %" for v in per_round)
            + " |"
        )
        for kind, rounds in per_kind.items():
            print(
                f"| {kind} | " + " | ".join(f"{100 * sum(v) / len(v):.0f} %" for v in rounds) + " |"
            )
        print(
            f"\nEvery compaction within its budget: {'yes' if within else 'NO'} "
            f"(largest {100 * max(sizes):.1f} % of the original).\n"
        )


_PATH = re.compile(r"[\w.-]+\.\w{1,6}")


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
    paths = sorted(DATA.glob("*.jsonl.gz")) if DATA.is_dir() else []
    if not paths:
        print(f"(recorded sessions not found at {DATA})")
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103, 104, 105])
    parser.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS))
    parser.add_argument("--sessions-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.sessions_only:
        synthetic(args.seeds, args.budgets)
    recorded()
    return 0


if __name__ == "__main__":
    sys.exit(main())
