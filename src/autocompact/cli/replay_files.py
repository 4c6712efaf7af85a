"""The files ``autocompact replay`` reads: those named, and a folder's transcripts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autocompact.errors import ConfigError

__all__ = ["transcript_paths"]

_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


def transcript_paths(names: Sequence[str]) -> tuple[list[tuple[Path, bool]], bool]:
    """The files to replay, each with whether it was named (else found in a folder: one that is
    no transcript is then skipped with a warning, not an error), and whether a folder was
    named. A folder stands for the files in it and its subfolders named like a transcript
    (``*.jsonl``, ``*.json``, gzip'd or not; Claude Code keeps a session's subagents in a
    subfolder), in name order.

    Raises:
        ConfigError: a name that is neither a file nor a folder, or a folder that holds no file
            named like a transcript.
    """
    paths: list[tuple[Path, bool]] = []
    found = False
    for name in names:
        path = Path(name)
        if path.is_dir():
            inside = sorted(
                (p for p in path.rglob("*") if p.name.endswith(_SUFFIXES) and p.is_file()),
                key=str,  # as a shell lists them: a session's log before its folder
            )
            if not inside:
                raise ConfigError(
                    f"{path}: a folder with no transcript in it (no *.jsonl or *.json file, "
                    "gzip'd or not, in it or its subfolders)",
                    key="FILE",
                )
            paths += [(p, False) for p in inside]
            found = True
        elif path.is_file():
            paths.append((path, True))
        else:
            raise ConfigError(f"{path}: no such file or folder", key="FILE")
    return paths, found
