"""Interleaved timing and the report's Markdown tables.

These machines are shared and noisy, so no figure is an absolute time taken alone: every
contender of a comparison runs once per *round*, in an order that rotates from round to round,
and a ratio is the median over rounds of the ratio measured within the same round. Work that is
not being measured (building fresh objects, converting messages) happens in ``prepare``, outside
the timed region. The garbage collector is paused while a contender runs, as ``timeit`` does.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Contender", "Report", "fmt_bytes", "fmt_ratio", "fmt_time", "median_ratio", "rounds"]


@dataclass
class Contender:
    """One thing being timed.

    Attributes:
        name: its label in the results.
        run: the timed work; receives what ``prepare`` returned.
        prepare: untimed set-up for one round (fresh objects, a batch of pending messages).
        ops: how many operations one ``run`` performs (times are reported per operation).
    """

    name: str
    run: Callable[[Any], object]
    prepare: Callable[[], Any] = lambda: None
    ops: int = 1


def rounds(
    contenders: Sequence[Contender],
    n_rounds: int,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Seconds per operation of each contender, one entry per round, rotating the order.

    With ``cpu``, it also receives each contender's CPU seconds per operation from the same
    runs (``time.process_time``: every thread of this process, as tiktoken encodes a batch on a
    thread pool). On a shared machine a contender descheduled part-way is not charged there for
    other processes' work (a short contender fits a time slice more often than a long one,
    which skews wall-time ratios under load).
    """
    times: dict[str, list[float]] = {c.name: [] for c in contenders}
    if cpu is not None:
        cpu.update({c.name: [] for c in contenders})
    n = len(contenders)
    for r in range(n_rounds):
        for c in [*contenders[r % n :], *contenders[: r % n]]:
            arg = c.prepare()
            gc.collect()
            gc.disable()
            try:
                start_cpu = time.process_time()
                start = time.perf_counter()
                c.run(arg)
                elapsed = time.perf_counter() - start
                elapsed_cpu = time.process_time() - start_cpu
            finally:
                gc.enable()
            times[c.name].append(elapsed / c.ops)
            if cpu is not None:
                cpu[c.name].append(elapsed_cpu / c.ops)
    return times


def median_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """Median over rounds of numerator / denominator (same-round pairs)."""
    return statistics.median(a / b for a, b in zip(numerator, denominator, strict=True) if b > 0)


def fmt_time(seconds: float | None) -> str:
    """A duration with a readable unit."""
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_ratio(ratio: float | None) -> str:
    """A ratio as ``12.3×``."""
    if ratio is None:
        return "n/a"
    if ratio >= 100:
        return f"{ratio:,.0f}×"
    return f"{ratio:.3g}×"


def fmt_bytes(n: float) -> str:
    """A byte count in KiB / MiB."""
    if abs(n) >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    return f"{n / 1024:.1f} KiB"


class Report:
    """The report as Markdown: printed as it is built, and kept for ``--output``."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.lines: list[str] = []
        self._echo = echo

    def line(self, text: str = "") -> None:
        """Add a line of text."""
        self.lines.append(text)
        self._echo(text)

    def heading(self, text: str) -> None:
        """Add a section heading."""
        self.line()
        self.line(f"## {text}")
        self.line()

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """Add a Markdown table with aligned columns."""
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]

        def fmt(cells: Sequence[str]) -> str:
            return (
                "| "
                + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True))
                + " |"
            )

        self.line(fmt(header))
        self.line("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in rows:
            self.line(fmt(row))
