"""The ladder against the legacy 70 % rule on every recorded session (issue 10).

    .venv/bin/python benchmarks/replay_policies.py                   # 64K, 128K, 200K; both tables
    .venv/bin/python benchmarks/replay_policies.py --report-only     # print, never exit 1
    .venv/bin/python benchmarks/replay_policies.py --data DIR        # another folder of sessions

Replays every ``*.jsonl.gz`` under ``../shared/data/claude-code-sessions`` (sub-agent
transcripts included) through ``autocompact.replay`` at three windows, with summaries that work
and with every summary failing, and prints the two Markdown tables of ``docs/benchmarks.md``:
sums per window and policy, and each session at each window.

Exits 1 (unless ``--report-only``) when the ladder misses what issue 10 asks of it: a request
over the window, a tool result sent without its call, two compactions fewer than 5 calls apart
that nobody was told about, or more side queries than legacy in total at a window; a session
with more side queries than legacy is listed under the tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autocompact.replay.policies import simulate_policy
from autocompact.replay.records import PolicyName, PolicyResult, ReplayOptions
from autocompact.transcripts import read_transcript

WINDOWS = (64_000, 128_000, 200_000)
POLICIES: tuple[PolicyName, ...] = ("ladder", "legacy")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "claude-code-sessions"


@dataclass
class _Sums:
    """One policy's metrics summed over the sessions at one window."""

    compactions: int = 0
    side_queries: int = 0
    ineffective: int = 0
    outgrown: int = 0
    no_room: int = 0
    close: int = 0
    over: int = 0
    orphaned: int = 0
    cache_write: int = 0
    cache_read: int = 0
    min_gaps: list[int] = field(default_factory=list)
    mean_gaps: list[float] = field(default_factory=list)

    def add(self, result: PolicyResult) -> None:
        self.compactions += result.compactions
        self.side_queries += result.side_queries
        self.ineffective += result.ineffective_compactions
        self.outgrown += result.outgrown_compactions
        self.no_room += result.no_room_skips
        self.close += result.close_compactions
        self.over += result.oversized_requests
        self.orphaned += result.orphaned_pairs
        self.cache_write += result.cache_write_tokens
        self.cache_read += result.cache_read_tokens
        gaps = result.calls_between_compactions
        if gaps:
            self.min_gaps.append(min(gaps))
            self.mean_gaps.append(statistics.fmean(gaps))


def _k(tokens: int) -> str:
    return f"{tokens / 1e6:.2f}M" if tokens >= 1_000_000 else f"{tokens / 1e3:.0f}K"


def _gaps(result: PolicyResult) -> str:
    gaps = result.calls_between_compactions
    return f"{min(gaps)} / {statistics.fmean(gaps):.1f}" if gaps else "– / –"


def _name(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    stem = rel.name.removesuffix(".jsonl.gz")
    short = stem[:8] if len(stem) > 20 else stem  # a session id: its first 8 characters
    return short if len(rel.parts) == 1 else f"{rel.parts[0][:8]}…/{stem[:20]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of sessions")
    parser.add_argument("--report-only", action="store_true", help="never exit 1")
    args = parser.parse_args(argv)
    paths = sorted(args.data.rglob("*.jsonl.gz")) if args.data.is_dir() else []
    if not paths:
        print(f"no recorded sessions (*.jsonl.gz) under {args.data}", file=sys.stderr)
        return 2
    transcripts = {path: read_transcript(path) for path in paths}
    totals: list[str] = []
    sessions: list[tuple[str, int, str]] = []
    misses: list[str] = []
    above_legacy: list[str] = []
    for failure_rate in (0.0, 1.0):
        for window in WINDOWS:
            label = f"{window // 1000}K" + (", every summary failing" if failure_rate else "")
            sums = {name: _Sums() for name in POLICIES}
            for path, transcript in transcripts.items():
                options = ReplayOptions(window=window, failure_rate=failure_rate)
                results = {name: simulate_policy(name, transcript, options) for name in POLICIES}
                for name, result in results.items():
                    sums[name].add(result)
                ladder, legacy = results["ladder"], results["legacy"]
                if ladder.side_queries > legacy.side_queries:
                    above_legacy.append(
                        f"{_name(path, args.data)} at {label}: {ladder.side_queries} side "
                        f"queries, legacy {legacy.side_queries}"
                    )
                if failure_rate == 0.0:
                    sessions.append(
                        (
                            _name(path, args.data),
                            window,
                            f"{ladder.side_queries} / {legacy.side_queries} | "
                            f"{ladder.compactions} / {legacy.compactions} | "
                            f"{ladder.ineffective_compactions} / {ladder.outgrown_compactions} / "
                            f"{ladder.no_room_skips} | {_gaps(ladder)} | {_gaps(legacy)} | "
                            f"{_k(ladder.cache_write_tokens)} / {_k(legacy.cache_write_tokens)} | "
                            f"{_k(ladder.cache_read_tokens)} / {_k(legacy.cache_read_tokens)}",
                        )
                    )
            for name, s in sums.items():
                gaps = (
                    f"{min(s.min_gaps)} / {statistics.fmean(s.mean_gaps):.1f}"
                    if s.min_gaps
                    else "–"
                )
                totals.append(
                    f"| {label} | {name} | {s.compactions} | {s.side_queries} | {s.ineffective} "
                    f"| {s.outgrown} | {s.no_room} | {gaps} | {s.close} | {s.over} | "
                    f"{s.orphaned} | {_k(s.cache_write)} | {_k(s.cache_read)} |"
                )
            ladder_sums, legacy_sums = sums["ladder"], sums["legacy"]
            for what, value in (
                ("requests over the window", ladder_sums.over),
                ("orphaned tool results", ladder_sums.orphaned),
                ("unexplained close pairs", ladder_sums.close),
            ):
                if value:
                    misses.append(f"{label}: {value} {what}")
            if ladder_sums.side_queries > legacy_sums.side_queries:
                misses.append(
                    f"{label}: {ladder_sums.side_queries} side queries, legacy "
                    f"{legacy_sums.side_queries}"
                )
    print(f"{len(paths)} recorded sessions under {args.data}\n")
    print(
        "| window | policy | compactions | side queries | ineffective | outgrown | "
        "skipped, no room | min / mean calls between | < 5 calls apart, unexplained | "
        "over the window | orphaned | cache write | cache read |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(totals))
    print()
    print(
        "| session | window | side queries ladder / legacy | compactions ladder / legacy | "
        "ineffective / outgrown / skipped, no room (ladder) | min / mean calls between, ladder "
        "| min / mean, legacy | cache write ladder / legacy | cache read ladder / legacy |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for session, window, cells in sorted(sessions):
        print(f"| {session} | {window // 1000}K | {cells} |")
    print()
    for line in above_legacy:
        print(f"more side queries than legacy: {line}")
    for line in misses:
        print(f"NOT met: {line}")
    if not misses:
        print("met: no request over the window, no orphan, no unexplained close pair, no more")
        print("side queries than legacy in total at any window")
    return 1 if misses and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
