"""Where the CLI keeps its files (``$AUTOCOMPACT_HOME`` or the user data dir, the settings
files) and which environment values must never be written to them."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from autocompact.errors import SessionFileError

__all__ = [
    "data_dir",
    "not_blank",
    "secrets_in_env",
    "settings_paths",
    "write_export",
    "write_private",
]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where sessions and user settings live: ``$AUTOCOMPACT_HOME`` or the user data dir."""
    env = os.environ if env is None else env
    home = env.get("AUTOCOMPACT_HOME")
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("autocompact", appauthor=False))


def settings_paths(home: Path, cwd: Path) -> list[Path]:
    """The settings files, in merge order: the user's, then the project's."""
    return [home / "settings.json", cwd / ".autocompact" / "settings.json"]


def secrets_in_env(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables that look like credentials (to keep out of files)."""
    env = os.environ if env is None else env
    from autocompact.providers.registry import API_KEY_VARIABLES

    names = {n for names in API_KEY_VARIABLES.values() for n in names}
    return [v for k, v in env.items() if (k in names or _SECRET_NAME.search(k)) and len(v) >= 8]


def write_private(path: Path, text: str) -> None:
    """Write an export readable by its owner only (0600): it holds the whole conversation."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
            with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as f:
                f.write(text)
        finally:
            os.close(fd)
    except OSError as exc:
        raise SessionFileError(
            f"cannot write the export: {exc.strerror or exc}", path=str(path)
        ) from exc


def write_export(path: Path, text: str, sessions: Path | None) -> None:
    """:func:`write_private`, refusing a file in ``sessions`` (the JSONL session directory):
    an export written over a session file would replace the session with a lossy copy."""
    if sessions is not None and sessions.resolve() in path.resolve().parents:
        raise SessionFileError(
            f"will not write the export into the sessions directory {sessions}: a file there "
            "is (or would be read as) a saved session; give -o a path outside it",
            path=str(path),
        )
    write_private(path, text)


def not_blank(expected: str) -> Callable[[str], str]:
    """An argparse ``type`` that takes any text but an empty or blank one (an unset shell
    variable), refused as "expected <expected>, got ''"."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return text

    return parse
