"""How JSONL transcript files are read: the fast reading (objects read in place in the whole text)
gives exactly what decoding the whole text, cutting it by ``str.splitlines`` and ``json.loads``
of each line give (the same objects, the same errors on the same lines), on crafted content and
on the recorded sessions."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autocompact import jsonsafe
from autocompact.errors import TranscriptFormatError
from autocompact.transcripts._base import iter_json_lines, read_bytes, read_text

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
    b'{"a": 1} \n {"b": 2}\n{"c": 3}\t\n',
    b'{"a": \n1}\n',
    b'{"a": 1}{"b": 2}\n',
    b'{"a": 1}\n[1, 2]\n',
    b'{"a": 1}\n"text"\n',
    b'{"a": 1, "a": 2}\n',
    b'{"a": NaN, "b": -Infinity}\n',
    b'{"a": "tab\there"}\n',
    b'{"a": 1\n',
    b'{"a": [1, 2}\n{"b": 2}\n',
    b'{}\n{"a": {}}\n{"b": []}',
    b'{"a": 1.5e3, "b": -0, "c": 12345678901234567890}\n',
]


def _outcome(read: Iterator[tuple[int, dict[str, Any]]]) -> list[object]:
    """What reading gives, item by item, ending with the error it raises (type, text, line)."""
    out: list[object] = []
    try:
        for item in read:
            out.append(item)
    except (TranscriptFormatError, RecursionError) as exc:
        out.append((type(exc).__name__, str(exc), getattr(exc, "line", None)))
    return out


def _reference(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The plain reading: the whole text cut by splitlines, each line by jsonsafe.loads."""
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = jsonsafe.loads(line)
        except json.JSONDecodeError as exc:
            problem = exc.msg.removesuffix(" at")  # ("Unterminated string starting at")
            raise TranscriptFormatError(
                f"not valid JSON ({problem} at column {exc.colno})", path=str(path), line=number
            ) from None
        if not isinstance(value, dict):
            raise TranscriptFormatError(
                f"expected a JSON object, got {type(value).__name__}", path=str(path), line=number
            )
        yield number, value


@pytest.mark.parametrize("content", CRAFTED)
@pytest.mark.parametrize("gz", [False, True])
def test_reading_is_that_of_splitlines(tmp_path: Path, content: bytes, gz: bool) -> None:
    """Every crafted content reads to the same objects, or the same error, as the plain way."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(gzip.compress(content) if gz else content)
    assert repr(_outcome(iter_json_lines(path))) == repr(_outcome(_reference(path)))


def test_deep_nesting_fails_at_the_same_depth(tmp_path: Path) -> None:
    """The parser runs out of stack at the same nesting read in place or line by line."""
    path = tmp_path / "t.jsonl"

    def outcomes(depth: int) -> tuple[list[object], list[object]]:
        path.write_text('{"a": ' * depth + "1" + "}" * depth + "\n")
        return _outcome(iter_json_lines(path)), _outcome(_reference(path))

    # The deepest nesting read line by line, from here (the limit depends on the stack).
    low, high = 1, 5000
    while low < high:
        middle = (low + high + 1) // 2
        if len(outcomes(middle)[1][0]) == 3:  # (error, text, line), not (line, object)
            high = middle - 1
        else:
            low = middle
    for depth in range(low - 4, low + 5):
        fast, plain = outcomes(depth)
        assert fast == plain, depth


def test_gzip_members_and_padding(tmp_path: Path) -> None:
    """Several gzip members, zero padding between them: read as GzipFile reads them."""
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n') + b"\0\0" + gzip.compress(b'{"b": 2}\n'))
    assert read_bytes(path) == b'{"a": 1}\n{"b": 2}\n'


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-4],  # truncated: no length
        lambda data: data[:20],  # truncated mid-stream
        lambda data: data[:-8] + b"\0\0\0\0" + data[-4:],  # wrong CRC
        lambda data: data + b"garbage",  # not a gzip member after the first
    ],
)
def test_damaged_gzip_fails_as_before(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    """A damaged gzip file fails with the error reading it through GzipFile gives."""
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(damage(gzip.compress(b'{"a": 1}\n' * 1000)))
    with pytest.raises(TranscriptFormatError) as caught:
        read_bytes(path)
    with pytest.raises((OSError, EOFError)) as plain, gzip.open(path, "rb") as handle:
        handle.read()
    assert str(caught.value) == str(
        TranscriptFormatError(f"cannot read the file: {plain.value}", path=str(path))
    )


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    """A file that is not UTF-8 is refused with the line of the first bad byte."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(TranscriptFormatError, match="not UTF-8") as caught:
        list(iter_json_lines(path))
    assert caught.value.line == 2


@pytest.mark.skipif(not RECORDED, reason="../shared/data is not present")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_sessions_read_alike(path: Path) -> None:
    """Each recorded session reads to the same objects both ways."""
    assert list(iter_json_lines(path)) == list(_reference(path))
