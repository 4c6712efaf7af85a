"""Durable writes of the session files: one ``write`` then ``fsync``; whole-file replacement
through a private temporary file and ``os.replace``; the repair of a damaged file. Stdlib only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from autocompact.errors import SessionFileError

__all__ = ["repair", "replace_file", "write_all"]


def _write_fsync(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # one write, looping only on a short one
        written = os.write(fd, view)
        view = view[written:]
    os.fsync(fd)


def write_all(fd: int, data: bytes, path: Path) -> None:
    """One ``write`` (looping only on a short write), then ``fsync``."""
    try:
        _write_fsync(fd, data)
    except OSError as exc:
        raise SessionFileError(f"cannot write: {exc.strerror or exc}", path=str(path)) from exc


def replace_file(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` at once (a 0600 ``<name>.tmp`` written, fsynced, renamed);
    raises :class:`OSError`."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_fsync(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def repair(path: Path, good_lines: int) -> None:
    """Keep a ``.bak`` copy of a damaged file, then rewrite it with its readable lines only."""
    backup = path.with_name(path.name + ".bak")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.bak{n}")
        n += 1
    try:
        shutil.copy2(path, backup)
        os.chmod(backup, 0o600)
        with path.open("rb") as src:
            kept = b"".join(line for _, line in zip(range(good_lines), src, strict=False))
        if not kept.endswith(b"\n"):
            kept += b"\n"
        replace_file(path, kept)
    except OSError as exc:
        raise SessionFileError(
            f"cannot repair the damaged file: {exc.strerror or exc}", path=str(path)
        ) from exc
