"""``autocompact demo [--json]``: the offline demo of the ladder on a scripted session."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from autocompact.context_report import ContextReport
from autocompact.demo import DemoReport, run_demo
from autocompact.tips import format_tokens

TIER_STYLE = {"safe": "green", "warn": "yellow", "auto": "dark_orange", "hard": "bold red"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command."""
    parser = subparsers.add_parser(
        "demo",
        help="run a scripted coding-agent session through the engine, offline",
        description="Run a synthetic coding-agent session (tool calls, large tool outputs, an "
        "image) through the real engine on a scripted offline model with a 100K window, and "
        "show each turn's count and tier, the tips, /context, an automatic compaction, the "
        "breaker opening after three failed summaries, a truncated summary refused, and the "
        "hard-tier rescue that recovers.",
    )
    parser.add_argument("--json", action="store_true", help="print the run as JSON")
    parser.set_defaults(handler=run)


def as_json(report: DemoReport) -> dict[str, Any]:
    """The demo run as JSON-ready data."""
    t = report.thresholds
    return {
        "window": report.window,
        "thresholds": {
            "warn": t.warn,
            "auto": t.auto,
            "hard": t.hard,
            "effective_window": t.effective_window,
        },
        "turns": [
            {
                "turn": turn.number,
                "label": turn.label,
                "tokens_before": turn.tokens_before,
                "tokens_after": turn.tokens_after,
                "tier": turn.tier,
                "events": list(turn.events),
                "tip": None
                if turn.tip is None
                else {"id": turn.tip.id, "message": turn.tip.message},
            }
            for turn in report.turns
        ],
        "context_reports": [
            {"after_turn": after, "lines": [*r.lines, r.summary]}
            for after, r in report.context_reports
        ],
        "compactions": [info.as_dict() for info in report.compactions],
    }


def run(args: argparse.Namespace) -> int:
    """Run the demo and render it."""
    report = run_demo()
    console = Console()
    if args.json:
        console.print_json(json.dumps(as_json(report)))
        return 0
    t = report.thresholds
    console.print(
        f"[bold]autocompact demo[/bold]: window {report.window:,} tokens · "
        f"warn {format_tokens(t.warn)} · auto {format_tokens(t.auto)} · "
        f"hard {format_tokens(t.hard)}"
    )
    reports = dict(report.context_reports)
    table = _new_table()
    for turn in report.turns:
        style = TIER_STYLE[turn.tier]
        table.add_row(
            str(turn.number),
            turn.label,
            format_tokens(turn.tokens_after),
            f"[{style}]{turn.tier}[/{style}]",
            "\n".join(turn.events),
        )
        if turn.tip is not None or turn.number in reports:
            console.print(table)
            table = _new_table()
            if turn.tip is not None:
                console.print(Panel(turn.tip.message, title=f"tip: {turn.tip.id}", expand=False))
            if turn.number in reports:
                _print_context(console, reports[turn.number])
    if table.row_count:
        console.print(table)
    statuses = ", ".join(f"{i.trigger.value}:{i.status.value}" for i in report.compactions)
    console.print(f"[dim]compaction attempts: {statuses}[/dim]")
    return 0


def _new_table() -> Table:
    table = Table(show_header=True, header_style="bold", expand=False, show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("turn")
    table.add_column("tokens", justify="right")
    table.add_column("tier")
    table.add_column("engine events", overflow="fold")
    return table


def _print_context(console: Console, report: ContextReport) -> None:
    console.print(Panel("\n".join([*report.lines, report.summary]), title="/context", expand=False))
