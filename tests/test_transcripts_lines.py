"""How transcript files are cut into lines: the fast reading gives exactly what decoding the whole
text and ``str.splitlines`` give, on crafted content and on the recorded sessions."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from autocompact.errors import TranscriptFormatError
from autocompact.transcripts._base import _text_lines, iter_json_lines, read_text

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
RECORDED = sorted(DATA.rglob("*.jsonl.gz")) if DATA.is_dir() else []

CRAFTED = [
    b"",
    b"\n",
    b"\n\n",
    b'{"a": 1}',
    b'{"a": 1}\n',
    b'{"a": 1}\n\n{"b": 2}\n',
    b'{"a": 1}\r\n{"b": 2}\r\n',
    b'{"a": 1}\r{"b": 2}',
    b'{"a": 1}\x0b{"b": 2}',
    b'{"a": 1}\x0c{"b": 2}\n',
    b'{"a": 1}\x1c\x1d\x1e{"b": 2}\n',
    '{"a": "caf\u00e9"}\n{"b": "\u2014"}\n'.encode(),
    '{"a": "x\u2028y"}\n'.encode(),
    '{"a": "x\u2029y"}\n{"b": 2}\n'.encode(),
    '{"a": "x\x85y"}\n'.encode(),
    '\ufeff{"a": 1}\n'.encode(),
    '{"a": "\U0001f600"}\n'.encode(),
    b"   \n\t\n" + '\u3000\n{"a": 1}\n'.encode(),
]


@pytest.mark.parametrize("content", CRAFTED)
@pytest.mark.parametrize("gz", [False, True])
def test_lines_are_those_of_splitlines(tmp_path: Path, content: bytes, gz: bool) -> None:
    """Every crafted content is cut into the same lines as the whole text's splitlines."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(gzip.compress(content) if gz else content)
    assert _text_lines(path) == read_text(path).splitlines()


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    """A file that is not UTF-8 is refused with the line of the first bad byte."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(TranscriptFormatError, match="not UTF-8") as caught:
        list(iter_json_lines(path))
    assert caught.value.line == 2


@pytest.mark.skipif(not RECORDED, reason="../shared/data is not present")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_sessions_cut_alike(path: Path) -> None:
    """Each recorded session is cut into the same lines both ways."""
    assert _text_lines(path) == read_text(path).splitlines()
