"""Smoke test of ``benchmarks/integrations_side_by_side.py`` on its base condition: the control
loses turns (so the benchmark can fail) and autocompact loses none."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("agents")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "integrations_side_by_side.py"


@pytest.fixture(scope="module")
def bench() -> dict[str, Any]:
    """The benchmark's functions, loaded without running it."""
    return runpy.run_path(str(BENCH), run_name="bench")


@pytest.mark.parametrize("runner", ["run", "run_agents"])
def test_base_condition_control_fails_and_autocompact_keeps_every_turn(
    bench: dict[str, Any], runner: str
) -> None:
    """On the base workload the framework alone has requests rejected and turns lost;
    autocompact sends nothing over the limit and loses no turn."""
    base = bench["CONDITIONS"][0]
    configs = bench["CONFIGS"] if runner == "run" else bench["AGENTS_CONFIGS"]
    control = bench[runner](base, configs[0])
    ours = bench[runner](base, "Autocompact")
    assert control.over > 0
    assert control.rejected_turns > 0
    assert ours.over == 0
    assert ours.rejected_turns == 0
    assert ours.peak <= base.limit < control.peak
