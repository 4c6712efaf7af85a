"""The complete examples in docs/sessions.md run exactly as written (they used free names such
as ``provider`` and ``conversation_id``, and ``await`` outside a coroutine)."""

from __future__ import annotations

import re
import runpy
from collections.abc import Callable
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "sessions.md"


@pytest.mark.parametrize(
    ("name", "printed"),
    [
        ("store-session", "OK. 2"),
        ("async-store", "['Why did the upload fail?', 'A timeout.']"),
    ],
)
def test_example_runs_as_written(
    name: str,
    printed: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    doc_example: Callable[[str, str], str],
) -> None:
    """The example runs offline, passes its own assertions and prints what it should."""
    script = tmp_path / "example.py"
    script.write_text(doc_example("sessions.md", name))
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip() == printed


def test_every_other_python_block_says_it_is_a_fragment() -> None:
    """A python block that is not a complete, tested example is introduced as a fragment."""
    text = DOC.read_text()
    blocks = [m.start() for m in re.finditer(r"```python\n", text)]
    for start in blocks:
        before = text[:start].rstrip()
        if before.endswith("-->") and "<!-- example:" in before.rsplit("\n", 1)[-1]:
            continue
        paragraph = before.rsplit("\n\n", 1)[-1]
        assert "fragments, not a program" in paragraph, paragraph[-200:]
