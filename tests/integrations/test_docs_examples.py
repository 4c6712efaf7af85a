"""The examples in docs/integrations.md run exactly as written (pydantic-ai, Agents SDK)."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.mark.parametrize("name", ["pydantic-ai", "openai-agents"])
def test_example_runs_as_written(
    name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    doc_example: Callable[[str, str], str],
) -> None:
    """The example runs, passes its own assertion and prints its figure."""
    script = tmp_path / "example.py"
    script.write_text(doc_example("integrations.md", name))
    runpy.run_path(str(script), run_name="__main__")
    assert "largest request:" in capsys.readouterr().out


def test_store_example_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc_example: Callable[[str, str], str]
) -> None:
    """The two-worker store example runs and passes its own assertion (the retry is answered
    from the store)."""
    script = tmp_path / "example.py"
    script.write_text(doc_example("integrations.md", "store"))
    runpy.run_path(str(script), run_name="__main__")
    assert "I have seen 2 messages | I have seen 2 messages" in capsys.readouterr().out
