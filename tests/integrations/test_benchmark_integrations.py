"""Smoke test of ``benchmarks/integrations.py``: it runs through both frameworks and prints its
table (the figures themselves live in docs/integrations.md, never in a test's pass/fail)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "integrations.py"


def test_scripted_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no recorded session the scripted run prints one row per configuration."""
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--sessions", "0"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(BENCH), run_name="__main__")
    assert done.value.code == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| scripted")]
    assert len(rows) == 5
    assert {row.split("|")[3].strip() for row in rows} == {
        "default (no processor)",
        "Autocompact",
        "SQLiteSession (no compaction)",
        "item-count compaction (SDK default decision)",
        "AutocompactSession + input filter",
    }
