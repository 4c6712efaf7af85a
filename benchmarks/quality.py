"""Compaction quality, offline: planted items through repeated compaction, and a handoff checklist.

    .venv/bin/python benchmarks/quality.py                      # seeds 9001-9004, 10/20/30 %
    .venv/bin/python benchmarks/quality.py --seeds 7 8 --rounds 3 --budgets 0.1 0.2
    .venv/bin/python benchmarks/quality.py --json > quality.json --report-only

Part 1 (generated sessions, ``_quality_corpus.py``). Chat sessions (user and assistant prose)
and mixed agent sessions (the same prose with tool calls and results, about 40 % of the text),
each made of rounds of about 40 turns; every round plants items (constraints, preferences,
labelled and prose facts, multi-sentence statements, updates that supersede an earlier value, a
goal and a goal change) among distractors of the same shapes, written without the trigger words
of the summarizer before the ledger rewrite. After each round the whole history is compacted (the
summary of round k is in what round k+1 compacts) with the summary's target at 10, 20 and 30 %
of the part summarized. Scored per item type and round: the share of the items said so far (and
not superseded) whose value is in the summary, the stale values carried, and whether the summary
is within the budget by characters / 4 and by tiktoken ``o200k_base``. Controls in the same run:
a head+tail truncation and random sentences at the same budget (both must score low), and an
oracle that knows the items (it shows the targets fit in the budget). See ``_quality_score.py``
for the compactors, the oracles and the match rule.

Part 2 (recorded sessions, ``_quality_handoff.py``): a handoff checklist for autocompact's offline
summary next to Claude Code's own summary at each of Claude Code's compactions; skipped with a
message when the sessions are absent. ``--room`` adds the room tables of the script before the
rewrite (``_quality_room.py``: no NOOP for lack of a cut, the size after compaction at the 70 %
point, the files touched that each summary names).

Targets, for autocompact on each session kind (exit 1 when one is missed, unless
``--report-only``): at 20 % ≥ 90 % of the items after round 1 and ≥ 85 % after the last round;
at 10 % ≥ 50 % after every round; every compaction within its budget by both oracles; no stale
value carried. The test suite uses seeds below 1000; the reported run uses 9001-9004.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _quality_corpus import new_round, new_state, trigger_words_in
from _quality_score import COMPACTORS, Counter, Record, run_session

KINDS = ("chat", "mixed")
BUDGETS = (0.10, 0.20, 0.30)
SEEDS = (9001, 9002, 9003, 9004)
ITEM_KINDS = (
    "constraint",
    "preference",
    "fact:labelled",
    "fact:prose",
    "multi-sentence",
    "update",
    "goal",
)


def _token_counter() -> tuple[Counter, str]:
    try:
        from _offline_tiktoken import load_o200k

        encoding = load_o200k()
    except ImportError:
        return (lambda text: (len(text) + 3) // 4), "characters / 4 (tiktoken not installed)"
    return (lambda text: len(encoding.encode(text, disallowed_special=()))), "o200k_base"


def check_corpus(seeds: Sequence[int], rounds: int) -> None:
    """Refuse to measure a corpus that uses a trigger word (its wording is the point)."""
    for kind in KINDS:
        for seed in seeds:
            state = new_state(seed, kind)
            for rnd in range(1, rounds + 1):
                for message in new_round(state, rnd):
                    found = trigger_words_in(message.text)
                    if found:
                        raise SystemExit(f"corpus uses trigger words {found}: {message.text!r}")


def _share(pairs: Sequence[Sequence[int]]) -> float | None:
    total = sum(p[1] for p in pairs)
    return sum(p[0] for p in pairs) / total if total else None


def aggregate(records: Sequence[Record]) -> list[dict[str, Any]]:
    """One row per compactor, session kind, budget and round: shares kept, stale, compliance."""
    groups: dict[tuple[str, str, float, int], list[Record]] = {}
    for r in records:
        groups.setdefault((r.compactor, r.kind, r.budget, r.round), []).append(r)
    rows = []
    for (compactor, kind, budget, rnd), group in groups.items():
        per_kind = {
            k: _share([r.kept[k] for r in group if k in r.kept])
            for k in ITEM_KINDS
            if any(k in r.kept for r in group)
        }
        rows.append(
            {
                "compactor": compactor,
                "kind": kind,
                "budget": budget,
                "round": rnd,
                "kept": _share([tally for r in group for tally in r.kept.values()]),
                "kept_by_type": per_kind,
                "stale_carried": sum(r.stale_carried for r in group),
                "stale_total": sum(r.stale_total for r in group),
                "within_budget": sum(r.within_chars and r.within_tokens for r in group),
                "within_chars": sum(r.within_chars for r in group),
                "within_tokens": sum(r.within_tokens for r in group),
                "compactions": len(group),
                "summary_share_chars": max(r.summary_chars / r.part_chars for r in group),
                "summary_share_tokens": max(r.summary_tokens / r.part_tokens for r in group),
                "errors": [r.error for r in group if r.error],
            }
        )
    return rows


def targets(
    rows: Sequence[dict[str, Any]], rounds: int, compactor: str = "autocompact"
) -> list[dict[str, Any]]:
    """The targets for ``compactor`` on each kind, with the measured figure and a verdict."""
    out = []

    def add(name: str, measured: float | None, ok: Callable[[float], bool]) -> None:
        if measured is not None:
            out.append({"target": name, "measured": measured, "met": ok(measured)})

    for kind in KINDS:
        mine = [r for r in rows if r["compactor"] == compactor and r["kind"] == kind]
        if not mine:
            continue
        at = {(r["budget"], r["round"]): r for r in mine}
        if (0.2, 1) in at:
            add(f"{kind}: kept at 20 %, round 1 ≥ 90 %", at[0.2, 1]["kept"], lambda v: v >= 0.9)
        if (0.2, rounds) in at and rounds > 1:
            add(
                f"{kind}: kept at 20 %, round {rounds} ≥ 85 %",
                at[0.2, rounds]["kept"],
                lambda v: v >= 0.85,
            )
        tens = [r["kept"] for r in mine if r["budget"] == 0.1]
        add(
            f"{kind}: kept at 10 %, every round ≥ 50 %", min(tens, default=None), lambda v: v >= 0.5
        )
        add(
            f"{kind}: compactions within budget (both oracles)",
            sum(r["within_budget"] for r in mine) / sum(r["compactions"] for r in mine),
            lambda v: v == 1.0,
        )
        add(
            f"{kind}: stale values carried", sum(r["stale_carried"] for r in mine), lambda v: v == 0
        )
    return out


def sanity(rows: Sequence[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """Checks that the benchmark itself works: the controls score low, the oracle meets every
    target (the targets fit in the budget), and the budget binds (autocompact's summaries and
    the controls' shares grow with it). A failed check means a broken benchmark."""
    out: list[dict[str, Any]] = []
    if not rows:
        return out
    controls = [r for r in rows if r["compactor"] in ("head+tail", "random sentences")]
    worst = max(r["kept"] or 0.0 for r in controls if r["budget"] <= 0.1 + 1e-9 or r["round"] > 1)
    out.append(
        {
            "target": "benchmark: controls keep < 60 % (at 10 %; from round 2 at any budget)",
            "measured": worst,
            "met": worst < 0.6,
        }
    )
    oracle = targets(rows, rounds, "oracle")
    out.append(
        {
            "target": "benchmark: the oracle meets every target (they fit in the budget)",
            "measured": sum(v["met"] for v in oracle) / len(oracle) if oracle else 1.0,
            "met": all(v["met"] for v in oracle),
        }
    )
    budgets = sorted({r["budget"] for r in rows})
    if len(budgets) > 1:
        size = {
            b: sum(r["summary_share_chars"] for r in rows
                   if r["compactor"] == "autocompact" and r["budget"] == b)
            for b in budgets
        }  # fmt: skip
        growth = size[budgets[-1]] / max(size[budgets[0]], 1e-9)
        out.append(
            {
                "target": f"benchmark: the budget binds (autocompact's summaries at "
                f"{100 * budgets[-1]:g} % vs {100 * budgets[0]:g} %, × ≥ 1.5)",
                "measured": growth,
                "met": growth >= 1.5,
            }
        )
    return out


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def print_synthetic(
    rows: Sequence[dict[str, Any]], rounds: int, seeds: Sequence[int], unit: str
) -> None:
    """The tables of part 1, as Markdown."""
    print("## Planted items through repeated compaction\n")
    print(f"Seeds {', '.join(map(str, seeds))}; {rounds} rounds; token oracle {unit}.\n")
    index = {(r["compactor"], r["kind"], r["budget"], r["round"]): r for r in rows}
    budgets = sorted({r["budget"] for r in rows})
    head = "| " + " | ".join(f"round {k}" for k in range(1, rounds + 1)) + " |"
    for kind in KINDS:
        print(f"### {kind} sessions: share of planted items kept\n")
        print(
            "| compactor | budget "
            + head
            + " stale carried | within budget (chars / tokens) | largest summary (chars / tokens) |"
        )
        print("|---|---|" + "---|" * (rounds + 3))
        for name in COMPACTORS:
            for budget in budgets:
                cells = [index.get((name, kind, budget, k)) for k in range(1, rounds + 1)]
                got = [c for c in cells if c]
                if not got:
                    continue
                stale = sum(c["stale_carried"] for c in got), sum(c["stale_total"] for c in got)
                within = [sum(c[k] for c in got) for k in ("within_chars", "within_tokens")]
                total = sum(c["compactions"] for c in got)
                largest = max(c["summary_share_chars"] for c in got)
                largest_tokens = max(c["summary_share_tokens"] for c in got)
                print(
                    f"| {name} | {100 * budget:g} % | "
                    + " | ".join(_pct(c["kept"] if c else None) for c in cells)
                    + f" | {stale[0]} of {stale[1]} | {within[0]} / {within[1]} of {total} "
                    f"| {100 * largest:.1f} % / {100 * largest_tokens:.1f} % |"
                )
        print()
        for budget in budgets:
            print(f"#### autocompact, {kind}, budget {100 * budget:g} %: kept by type\n")
            print("| type " + head)
            print("|---|" + "---|" * rounds)
            for item_kind in ITEM_KINDS:
                cells = [index.get(("autocompact", kind, budget, k)) for k in range(1, rounds + 1)]
                print(
                    f"| {item_kind} | "
                    + " | ".join(
                        _pct(c["kept_by_type"].get(item_kind) if c else None) for c in cells
                    )
                    + " |"
                )
            print()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 1 when a target is missed (unless ``--report-only``)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS))
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--report-only", action="store_true", help="never exit 1")
    parser.add_argument("--sessions-only", action="store_true", help="only the recorded part")
    parser.add_argument("--no-sessions", action="store_true", help="skip the recorded part")
    parser.add_argument(
        "--room",
        action="store_true",
        help="also print the room tables on the recorded sessions (Markdown only)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or not all(0 < b < 1 for b in args.budgets):
        parser.error("--rounds must be ≥ 1 and every --budgets value between 0 and 1")
    from _quality_handoff import print_handoff, recorded_handoff

    tokens, unit = _token_counter()
    rows: list[dict[str, Any]] = []
    records: list[Record] = []
    if not args.sessions_only:
        check_corpus(args.seeds, args.rounds)
        for name in COMPACTORS:
            for kind in KINDS:
                for budget in args.budgets:
                    for seed in args.seeds:
                        records += run_session(name, kind, seed, budget, args.rounds, tokens)
        rows = aggregate(records)
    handoff = None if args.no_sessions else recorded_handoff()
    verdicts = targets(rows, args.rounds) + sanity(rows, args.rounds)
    if args.json:
        out = {
            "seeds": args.seeds,
            "rounds": args.rounds,
            "budgets": args.budgets,
            "token_oracle": unit,
            "rows": rows,
            "records": [r.as_json() for r in records],
            "handoff": handoff,
            "targets": verdicts,
        }
        print(json.dumps(out, indent=1))
    else:
        if rows:
            print_synthetic(rows, args.rounds, args.seeds, unit)
        if not args.no_sessions:
            print_handoff(handoff)
        if args.room:
            from _quality_room import recorded

            recorded()
            print()
        if verdicts:
            print("## Targets (autocompact) and the benchmark's own checks\n")
            print("| target | measured | verdict |\n|---|---|---|")
        for v in verdicts:
            measured = v["measured"]
            shown = f"{100 * measured:.0f} %" if isinstance(measured, float) else str(measured)
            if "×" in v["target"]:
                shown = f"{measured:.2f}×"
            print(f"| {v['target']} | {shown} | {'met' if v['met'] else 'NOT met'} |")
    missed = [v for v in verdicts if not v["met"]]
    return 1 if missed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
