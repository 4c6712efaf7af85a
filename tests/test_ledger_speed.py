"""The ledger's speed work (issue 22): the same ledger however memory is reused, linear time."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from autocompact.compaction.ledger.model import Entry
from autocompact.compaction.ledger.subjects import Subjects


def test_a_superseded_entry_is_held_so_a_new_entry_never_takes_its_id() -> None:
    """An entry marked superseded and then let go (a replaced rule) does not make an entry
    created after it count as superseded: CPython gives a freed entry's memory, and so its id,
    to the next one made."""
    subjects = Subjects()
    taken = []
    for n in range(200):
        old = Entry(f"Only deploy the exporter on day {n}.", 3.0, 2 * n, f"rule:{n}")
        subjects.drop(old)
        del old
        new = Entry(f"Only deploy the exporter on night {n}.", 3.0, 2 * n + 1, f"rule:{n}")
        if id(new) in subjects.gone:
            taken.append(new.text)
    assert taken == []


@pytest.mark.skipif(
    importlib.util.find_spec("langchain_core") is None,
    reason="benchmark extra not installed: pip install -e '.[bench]'",
)
def test_speed_benchmark_fails_a_quadratic_control() -> None:
    """benchmarks/extractive_speed.py --control quadratic (a compaction that rereads the whole
    history every 10 requests) misses the linear-time target: FAILED on chat, exit status 1,
    with the load average printed next to the verdicts."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "extractive_speed.py"
    args = ["--rounds", "1", "--counts", "20", "160", "--max-seconds", "1000"]
    run = subprocess.run(
        [sys.executable, str(script), *args, "--control", "quadratic"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stderr
    assert "CONTROL: 'quadratic'" in run.stdout
    chat = next(line for line in run.stdout.splitlines() if line.startswith("- chat: time per"))
    assert chat.endswith("FAILED")
    assert "load average at the end:" in run.stdout
