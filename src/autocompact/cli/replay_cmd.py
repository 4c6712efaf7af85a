"""``autocompact replay FILE... [--window N] [--failure-rate P] [--seed S] [--json] [--plot PNG]``.

Reads recorded transcripts (any format :mod:`autocompact.transcripts` reads, gzip'd or not; a
folder stands for those in it, :mod:`autocompact.cli.replay_files`), runs
:func:`autocompact.replay.replay` on each and prints, per file, a chart of the prompt size per
call (recorded and as each policy would have had it, with the warn / auto / hard lines and the
compaction points), the estimation table and the policy table; then both tables over all files.
``--json`` prints ``{"files": [...]}`` instead; ``--plot`` also writes the chart as a PNG
(needs the ``plot`` extra: matplotlib).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocompact.cli.replay_files import is_transcript, plot_path, transcript_paths
from autocompact.errors import (
    ConfigError,
    ContentError,
    MissingDependencyError,
    TranscriptFormatError,
)
from autocompact.replay import (
    ESTIMATORS,
    POLICIES,
    CallRow,
    FileReport,
    PolicyResult,
    ReplayOptions,
    replay,
    summarize_errors,
)
from autocompact.textsafe import for_terminal
from autocompact.thresholds import SMALLEST_WINDOW, parse_window
from autocompact.transcripts import Transcript, read_transcript
from autocompact.validation import check_tool_pairs

if TYPE_CHECKING:  # rich is imported where a table or a bar is drawn: not for --json
    from rich.console import Console
    from rich.table import Table

__all__ = ["indented_json", "register", "render_chart", "run"]

DEFAULT_WINDOW = 200_000
_MARKS = {"recorded": "·", "ladder": "●", "legacy": "○"}
_COMPACTION_MARKS = {"ladder": "L", "legacy": "G"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``autocompact replay``."""
    p = subparsers.add_parser(
        "replay",
        help="replay recorded agent sessions: estimate accuracy and compaction policies",
        description=(
            "Replay recorded sessions (Claude Code, qwen-code, gemini-cli, OpenAI JSON, "
            "autocompact sessions; gzip'd or not) through the engine: how far the token "
            "estimates were from the reported prompt sizes, and what the ladder and the legacy "
            "70% rule would have done on the same growth."
        ),
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="transcript files, or folders of them (read with their subfolders)",
    )
    p.add_argument(
        "--window",
        default=str(DEFAULT_WINDOW),
        help=f"context window to simulate, e.g. 200000 or 128k (default {DEFAULT_WINDOW:,})",
    )
    p.add_argument(
        "--failure-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="probability that one summary fails, 0 to 1 (default 0)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed for the failures")
    p.add_argument("--json", action="store_true", help='print {"files": [...]} as JSON')
    p.add_argument("--plot", metavar="PNG", help="also write the size chart as a PNG")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``autocompact replay``."""
    # A replay makes millions of objects (the lines read, the messages, the rows) and leaves a
    # few hundred in reference cycles: the cyclic collector's passes over them cost more than
    # they free. It is paused for the run, and what the process held before (the modules) is
    # left out of its later passes, the one at exit included.
    gc.freeze()
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    options = ReplayOptions(
        window=parse_window(args.window, name="--window", minimum=SMALLEST_WINDOW),
        failure_rate=_rate(args.failure_rate),
        seed=args.seed,
    )
    paths, found = transcript_paths(args.files)
    plot = None
    if args.plot is not None:
        _require_matplotlib()
        plot = plot_path(args.plot)
    unreadable: list[Path] = []  # transcripts found in a folder that could not be read
    reports = _replay_all(
        paths, options, unreadable, show_progress=not args.json and len(paths) > 1
    )
    if found and not reports and not unreadable:
        raise ConfigError(
            f"{', '.join(args.files)}: no file in it is a transcript autocompact reads",
            key="FILE",
        )
    if args.json:
        print(indented_json({"files": [r.as_json() for r in reports]}))
    else:
        from rich.console import Console

        console = Console(highlight=False)
        for report in reports:
            _print_report(console, report)
        if len(reports) > 1:
            _print_totals(console, reports, len(unreadable))
    if plot is not None:
        write_plot(reports, plot)
        if not args.json:
            print(f"Chart written to {plot}", file=sys.stderr)
    if unreadable:
        print(f"{_left_out(len(unreadable))} (named above)", file=sys.stderr)
    return 1 if unreadable else 0


def _left_out(count: int) -> str:
    """What the totals and the last line say of the transcripts that could not be read."""
    if count == 1:
        return "1 transcript could not be read and was left out"
    return f"{count} transcripts could not be read and were left out"


def _rate(value: float) -> float:
    if not 0 <= value <= 1:  # (false for nan too)
        raise ConfigError(
            f"--failure-rate must be a number from 0 to 1, e.g. 0.3 for 30 % of the summaries "
            f"failing, got {value}",
            key="failure_rate",
        )
    return value


def _replay_all(
    paths: Sequence[tuple[Path, bool]],
    options: ReplayOptions,
    unreadable: list[Path],
    *,
    show_progress: bool,
) -> list[FileReport]:
    reports: list[FileReport] = []
    if not show_progress:
        return [r for path, named in paths if (r := _replay_one(path, named, options, unreadable))]
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with progress:
        task = progress.add_task("Replaying", total=len(paths))
        for path, named in paths:
            progress.update(task, description=f"Replaying {path.name}")
            report = _replay_one(path, named, options, unreadable)
            if report is not None:
                reports.append(report)
            progress.advance(task)
    return reports


def _replay_one(
    path: Path, named: bool, options: ReplayOptions, unreadable: list[Path]
) -> FileReport | None:
    """The replay of one file; None for a file found in a folder (not ``named``) that cannot
    be read (a warning says which and why): one that is no transcript is skipped, a transcript
    that cannot be read (a damaged line) is added to ``unreadable``, which the totals and the
    exit status report."""
    try:
        transcript = _read(path)
    except TranscriptFormatError as exc:
        if named:
            raise
        damaged = is_transcript(path)
        if damaged:
            unreadable.append(path)
        note = "a transcript that cannot be read: left out" if damaged else "skipped"
        print(f"Warning: {exc} ({note})", file=sys.stderr)
        return None
    return replay(transcript, options)


def _read(path: Path) -> Transcript:
    """Read a transcript and warn (stderr) about what makes its replay less than it seems."""
    transcript = read_transcript(path)
    if not transcript.calls:
        print(
            f"Warning: {path}: no API call with its token usage was found, so there is nothing "
            "to replay (0 calls). The replay needs the prompt size the provider reported per "
            "call: Claude Code and qwen-code logs record it; in an OpenAI-style JSON list, give "
            'assistant messages a "usage": {"prompt_tokens": N, "completion_tokens": M}.',
            file=sys.stderr,
        )
    try:
        check_tool_pairs(transcript.messages, name="messages")
    except ContentError as exc:
        print(
            f"Warning: {path}: {exc} (the replay goes on; a provider would reject this history "
            "as it stands)",
            file=sys.stderr,
        )
    return transcript


def indented_json(value: Any) -> str:
    """``json.dumps(value, indent=2)``, the same text, made in one recursive pass over plain
    JSON values (dicts with string keys, lists, tuples, strings, numbers, booleans, None) rather
    than through the encoder's chain of generators, which costs about twice as much; any other
    value (a non-string key, an object json cannot encode, a cycle) is left to json.dumps, which
    encodes it or raises as it always did."""
    out: list[str] = []
    try:
        _indented(value, out, "\n")
    except (_NotPlain, RecursionError):
        return json.dumps(value, indent=2)
    return "".join(out)


class _NotPlain(Exception):
    """A value :func:`indented_json` leaves to json.dumps."""


_INFINITY = float("inf")


def _indented(value: Any, out: list[str], newline: str) -> None:
    # The tests of json.dumps, in its order: a str subclass is a string, an int subclass (bool
    # aside) a number, a float by its repr (NaN and the infinities as json writes them).
    if isinstance(value, str):
        out.append(encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (_INFINITY, -_INFINITY):
            out.append(json.dumps(value))
        else:
            out.append(float.__repr__(value))
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            out.append(separator)
            separator = "," + inner
            _indented(item, out, inner)
        out.append(newline + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotPlain
            out.append(separator)
            separator = "," + inner
            out.append(encode_basestring_ascii(key))
            out.append(": ")
            _indented(item, out, inner)
        out.append(newline + "}")
    else:
        raise _NotPlain


# -- terminal report -----------------------------------------------------------------------------


def _sized_calls(result: PolicyResult) -> list[tuple[int, int]]:
    """(call, size) of every request a policy sent: a refused call has no size, so the sizes
    are matched to their calls, not to their positions."""
    calls = result.size_calls or tuple(range(1, len(result.sizes) + 1))
    return list(zip(calls, result.sizes, strict=True))


def _k(tokens: float) -> str:
    return f"{tokens / 1000:,.1f}K" if tokens >= 1000 else f"{tokens:,.0f}"


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value * 100:+.1f}%" if signed else f"{value * 100:.1f}%"


def render_chart(report: FileReport, *, width: int = 72, height: int = 14) -> list[str]:
    """The size-per-call chart as text lines.

    ``·`` recorded size, ``●`` the ladder, ``○`` legacy; ``L``/``G`` mark a compaction by the
    ladder/legacy; the warn, auto and hard lines are labelled on the right, ``window`` at the top.
    """
    rows = report.rows
    if not rows:
        return ["(no recorded calls)"]
    series: dict[str, Sequence[tuple[int, int]]] = {
        "recorded": [(row.call, row.reported) for row in rows],
        **{name: _sized_calls(report.policies[name]) for name in POLICIES},
    }
    top = max(report.window, *(max(t for _, t in s) for s in series.values() if s))
    columns = min(width, len(rows))

    def col(call: int) -> int:
        return min(columns - 1, max(0, (call - 1) * columns // len(rows)))

    def line_of(tokens: float) -> int:
        return min(height - 1, int(tokens / top * (height - 1) + 0.5))

    grid = [[" "] * columns for _ in range(height)]
    # Every threshold is named on the row nearest its value; thresholds on one row share it
    # (on a collapsed ladder hard equals auto: "hard = auto 22.4K").
    labels: dict[int, list[tuple[str, float]]] = {}
    for name, value in (
        ("window", report.window),
        ("hard", report.thresholds.hard),
        ("auto", report.thresholds.auto),
        ("warn", report.thresholds.warn),
    ):
        same = labels.setdefault(line_of(value), [])
        if same and same[-1][1] == value:
            same[-1] = (f"{same[-1][0]} = {name}", value)
        else:
            same.append((name, value))
    for level in labels:
        grid[level] = ["-"] * columns
    for name in ("recorded", "legacy", "ladder"):
        for call, tokens in series[name]:
            grid[line_of(tokens)][col(call)] = _MARKS[name]
    for name in POLICIES:
        for event in report.policies[name].events:
            if event.kind == "compacted":
                grid[line_of(event.tokens_after)][col(event.call)] = _COMPACTION_MARKS[name]
    out = []
    for level in range(height - 1, -1, -1):
        axis = _k(top * level / (height - 1)).rjust(7)
        named = labels.get(level, [])
        label = (" " + ", ".join(f"{name} {_k(value)}" for name, value in named)) if named else ""
        out.append(f"{axis} |{''.join(grid[level])}{label}")
    out.append(" " * 8 + "+" + "-" * columns)
    out.append(" " * 9 + f"call 1 … {len(rows)}   · recorded  ● ladder  ○ legacy  L/G compaction")
    return out


_ESTIMATOR_LABELS = {"calibrated_applied": "applied (both ways)"}


def estimation_table(title: str, rows: Sequence[CallRow]) -> Table:
    """The estimation table over some rows (the first call of each file excluded by caller)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for column in ("estimate", "calls", "mean", "median", "p95 |err|", "±10%", "±30%"):
        table.add_column(column, justify="left" if column == "estimate" else "right")
    for name in ESTIMATORS:
        summary = summarize_errors([(row.estimate(name), row.reported) for row in rows])
        label = _ESTIMATOR_LABELS.get(name, name)
        table.add_row(
            label,
            str(summary.count),
            _pct(summary.mean_error, signed=True),
            _pct(summary.median_error, signed=True),
            _pct(summary.p95_abs_error),
            _pct(summary.within_10pct),
            _pct(summary.within_30pct),
        )
    return table


_POLICY_METRICS = (
    ("compactions", "compactions"),
    ("failed_attempts", "failed attempts"),
    ("side_queries", "side queries"),
    ("oversized_requests", "requests over the window"),
    ("refused_requests", "refused (cannot fit the window)"),
    ("peak_prompt_tokens", "peak prompt"),
    ("prompt_tokens_sent", "prompt tokens sent"),
    ("mean_fill_at_compaction", "mean fill at compaction"),
    ("ineffective_compactions", "ineffective compactions"),
    ("outgrown_compactions", "outgrown (needed again < 5 calls)"),
    ("no_room_skips", "skipped: no summary could buy room"),
    ("mean_calls_between_compactions", "mean calls between"),
    ("min_calls_between_compactions", "min calls between"),
    ("close_compactions", "< 5 calls apart (unexplained)"),
    ("orphaned_pairs", "orphaned tool results sent"),
    ("cache_write_tokens", "cache-write tokens"),
    ("cache_read_tokens", "cache-read tokens"),
)


def policy_table(title: str, results: Mapping[str, Sequence[PolicyResult]]) -> Table:
    """The policy table: one column per policy, metrics summed over files (peak: the max)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    table.add_column("metric")
    for name in POLICIES:
        table.add_column(name, justify="right")
    for key, label in _POLICY_METRICS:
        cells = []
        for name in POLICIES:
            values = [r.as_json()[key] for r in results[name]]
            cells.append(_metric(key, values))
        table.add_row(label, *cells)
    return table


def _metric(key: str, values: Sequence[Any]) -> str:
    if key == "mean_fill_at_compaction":
        present = [v for v in values if v is not None]
        return _pct(sum(present) / len(present)) if present else "–"
    if key == "peak_prompt_tokens":
        return f"{max(values, default=0):,}"
    if key == "mean_calls_between_compactions":
        present = [v for v in values if v is not None]
        return f"{sum(present) / len(present):.1f}" if present else "–"
    if key == "min_calls_between_compactions":
        present = [v for v in values if v is not None]
        return f"{min(present)}" if present else "–"
    return f"{sum(values):,}"


def _print_report(console: Console, report: FileReport) -> None:
    from rich.text import Text

    console.rule(Text(for_terminal(report.file)), align="left")  # a name is no markup
    recorded = (
        f", recorded compactions before call {', '.join(map(str, report.recorded_compactions))}"
        if report.recorded_compactions
        else ""
    )
    console.print(
        f"{report.format}, {len(report.rows)} calls, window {report.window:,} "
        f"(warn {_k(report.thresholds.warn)}, auto {_k(report.thresholds.auto)}, "
        f"hard {_k(report.thresholds.hard)}), baseline {report.baseline_tokens:,} tokens, "
        f"calibration {report.calibration.text_chars_per_token:.2f} chars/token text, "
        f"{report.calibration.json_chars_per_token:.2f} JSON{recorded}",
        markup=False,
    )
    for line in render_chart(report, width=min(100, max(30, console.width - 25))):
        console.print(line, markup=False)
    console.print()
    console.print(
        estimation_table("Estimation vs reported (calls after the first)", report.rows[1:])
    )
    console.print()
    console.print(
        policy_table(
            "Policies on the recorded growth",
            {name: [report.policies[name]] for name in POLICIES},
        )
    )
    console.print()


def _print_totals(console: Console, reports: Sequence[FileReport], unreadable: int) -> None:
    left_out = f" ({_left_out(unreadable)})" if unreadable else ""
    console.rule(f"All {len(reports)} files{left_out}", align="left")
    rows = [row for report in reports for row in report.rows[1:]]
    console.print(estimation_table("Estimation vs reported (calls after each file's first)", rows))
    console.print()
    results: dict[str, Sequence[PolicyResult]] = {
        name: [report.policies[name] for report in reports] for name in POLICIES
    }
    console.print(policy_table("Policies (sums; peak is the largest)", results))


# -- PNG -----------------------------------------------------------------------------------------


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependencyError("matplotlib", "plot") from None


def write_plot(reports: Sequence[FileReport], path: Path) -> None:
    """Write the size-per-call chart of every report as one PNG (one panel per file).

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``plot`` extra).
    """
    _require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        len(reports), 1, figsize=(10, 3.2 * len(reports)), squeeze=False, layout="constrained"
    )
    for axis, report in zip(axes[:, 0], reports, strict=True):
        calls = [row.call for row in report.rows]
        marker = "." if len(calls) < 20 else None
        axis.plot(
            calls,
            [row.reported for row in report.rows],
            color="0.6",
            marker=marker,
            label="recorded",
        )
        for name, color in (("ladder", "tab:blue"), ("legacy", "tab:orange")):
            result = report.policies[name]
            sized = _sized_calls(result)
            axis.plot(
                [call for call, _ in sized],
                [tokens for _, tokens in sized],
                color=color,
                marker=marker,
                label=name,
            )
            points = [e for e in result.events if e.kind == "compacted"]
            axis.scatter(
                [e.call for e in points],
                [e.tokens_after for e in points],
                color=color,
                marker="v",
                zorder=3,
            )
        for value, label, style in (
            (report.thresholds.warn, "warn", ":"),
            (report.thresholds.auto, "auto", "--"),
            (report.thresholds.hard, "hard", "-."),
            (report.window, "window", "-"),
        ):
            axis.axhline(value, color="tab:red", linestyle=style, linewidth=0.8)
            axis.annotate(label, (calls[-1] if calls else 0, value), fontsize=7, va="bottom")
        axis.set_title(Path(report.file).name, fontsize=9)
        axis.set_xlabel("call")
        axis.set_ylabel("prompt tokens")
        axis.legend(fontsize=7, loc="upper left")
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:
        raise ConfigError(f"cannot write the chart to {path}: {exc}", key="--plot") from exc
    except (ValueError, RuntimeError) as exc:  # a format matplotlib has no writer for here
        raise ConfigError(
            f"cannot write the chart to {path}: {exc}; write a .png or .svg instead", key="--plot"
        ) from exc
    finally:
        plt.close(figure)
