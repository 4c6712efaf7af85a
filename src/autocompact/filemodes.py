"""Private directories: everything autocompact creates is 0700 (files 0600), whatever the umask.

``Path.mkdir(mode=0o700, parents=True)`` gives only the last directory that mode: the parents
it creates get ``0o777 & ~umask`` (0755, or 0777 under ``umask 000``), and the last one's mode
is masked by the umask too. :func:`make_private_dirs` creates each missing directory itself
and sets 0700 on it after creation; directories that already exist keep their mode (issue 27).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "make_private_dirs"]

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dirs(directory: str | os.PathLike[str]) -> None:
    """Create ``directory`` and its missing parents, each 0700 (existing ones are untouched).

    Raises:
        OSError: a directory cannot be created (the caller names it in its own error).
    """
    path = Path(directory)
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for created in reversed(missing):
        try:
            created.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:  # made meanwhile by another process: leave its mode
            continue
        os.chmod(created, PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask
