"""The files ``autocompact replay`` reads (those named, and a folder's transcripts) and the
chart file it writes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autocompact.errors import ConfigError, TranscriptFormatError
from autocompact.transcripts import detect_format

__all__ = ["is_transcript", "plot_path", "transcript_paths"]

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


def is_transcript(path: Path) -> bool:
    """Whether a file's first lines are those of a transcript format: one that then cannot be
    read (a damaged line, a cut gzip file) is a damaged transcript, not a file that is none."""
    try:
        detect_format(path)
    except TranscriptFormatError:
        return False
    return True


def plot_path(text: str) -> Path:
    """The file ``--plot`` names, checked before the replay: a name without an extension gets
    ``.png`` (as matplotlib adds it, so the message names the file written).

    Raises:
        ConfigError: no name, a directory, a folder that does not exist, or an extension
            matplotlib cannot write.
    """
    from matplotlib.backend_bases import FigureCanvasBase  # (the caller checked it is there)

    path = Path(text)
    if not text.strip():
        raise ConfigError("--plot needs a file name, e.g. --plot chart.png", key="--plot")
    if path.is_dir():
        raise ConfigError(
            f"--plot {path} is a directory: give a file name, e.g. {path / 'chart.png'}",
            key="--plot",
        )
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in kinds:
        raise ConfigError(
            f"--plot {path}: cannot write a {path.suffix} chart; end the name with one of "
            f"{', '.join('.' + kind for kind in sorted(kinds))}",
            key="--plot",
        )
    if not path.parent.is_dir():
        raise ConfigError(
            f"--plot {path}: the folder {path.parent} does not exist; create it or write the "
            "chart elsewhere",
            key="--plot",
        )
    return path
