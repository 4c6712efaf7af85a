"""The LangChain example in docs/integrations.md runs exactly as written; the side-by-side
benchmark runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"


def example() -> str:
    """The Python block under the LangChain section's "A complete example" heading."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### A complete example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the example block is missing"
    return match.group(1)


def test_the_documented_example_runs_and_compacts() -> None:
    """The example, run as a script, compacts and reports the ladder from the thread's state."""
    done = subprocess.run(
        [sys.executable, "-c", example()],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "-> summary" in out or "-> clearing" in out
    kept = int(re.search(r"messages in the checkpoint: (\d+)", out).group(1))  # type: ignore[union-attr]
    assert kept < 6 * 9, "the checkpoint holds the compacted history"
    assert "Auto threshold    22.4K" in out


def test_side_by_side_benchmark_prints_both_middlewares() -> None:
    """The benchmark plays a small scripted run through both middlewares and prints a row each."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import langchain_side_by_side as bench
    finally:
        sys.path.pop(0)
    script = bench.synthetic("tiny", 1, 26, 12_000)
    table = bench.table([script])
    rows = [line for line in table.splitlines() if line.startswith("| tiny")]
    assert len(rows) == 2
    assert "Autocompact" in rows[0]
    assert "Summarization" in rows[1]
    auto = bench.play(script, "autocompact")
    assert (auto.requests, auto.over) == (27, 0)
    assert auto.fired_at
