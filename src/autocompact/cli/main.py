"""Entry point: builds the argument parser from the command modules and maps errors to exit codes.

Each command lives in its own module under ``autocompact.cli`` and exposes
``register(subparsers) -> None``, which adds its sub-parser and sets ``handler`` (a function
``(args) -> int``) as the parser's default. Add a command by adding its module to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import codecs
import gc
import importlib
import io
import os
import sys
from collections.abc import Sequence
from typing import Any

from autocompact import __version__
from autocompact.errors import AutocompactError, described

COMMANDS = (
    "autocompact.cli.thresholds_cmd",
    "autocompact.cli.demo_cmd",
    "autocompact.cli.chat_cmd",
    "autocompact.cli.sessions_cmd",
    "autocompact.cli.replay_cmd",
    "autocompact.cli.serve_cmd",
)

# Each command's name and one-line help, as its module registers them: ``autocompact --help``
# lists the commands from here, and only the module of the command being run is imported (its
# SDKs, rich, prompt_toolkit, the engine). tests/test_cli_core.py checks these against the
# modules' own registrations.
SUMMARIES: dict[str, tuple[str, str]] = {
    "autocompact.cli.thresholds_cmd": (
        "thresholds",
        "print the warn / auto / hard ladder for context windows",
    ),
    "autocompact.cli.demo_cmd": (
        "demo",
        "run a scripted coding-agent session through the engine, offline",
    ),
    "autocompact.cli.chat_cmd": (
        "chat",
        "chat with a model; the context compacts itself and the session is saved",
    ),
    "autocompact.cli.sessions_cmd": ("sessions", "list, show or export saved chat sessions"),
    "autocompact.cli.replay_cmd": (
        "replay",
        "replay recorded agent sessions: estimate accuracy and compaction policies",
    ),
    "autocompact.cli.serve_cmd": ("serve", "run the compaction proxy for agents you did not write"),
}

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


_EVERY = "*"


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size().columns`` gives it, without
    importing shutil (and bz2, lzma with it): ``COLUMNS`` when a positive whole number, else the
    width of the terminal on stdout (80 when it reports 0, or stdout is not a terminal)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, measuring the terminal as argparse does (its width less 2)
    through :func:`terminal_columns`: argparse makes a formatter for every argument it adds, and
    its own measure imports shutil, which cost every command's start milliseconds."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        if not args and kwargs.get("width") is None:
            kwargs["width"] = terminal_columns() - 2
        super().__init__(prog, *args, **kwargs)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose help is laid out by :class:`_Formatter` unless told otherwise
    (the commands' sub-parsers are made of this class too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser(command: str | None = _EVERY) -> argparse.ArgumentParser:
    """The top-level parser.

    Args:
        command: the command about to run: only its module is imported and registered, the
            others are listed by name and help (:data:`SUMMARIES`); ``None`` for none (the
            top-level help); by default every command is registered in full.
    """
    parser = _Parser(
        prog="autocompact",
        description="Automatic context-window compaction for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"autocompact {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show a traceback when something goes wrong"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        summary = SUMMARIES.get(module)
        if command == _EVERY or summary is None or summary[0] == command:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(summary[0], help=summary[1])
    return parser


def _command_of(arguments: Sequence[str]) -> str | None:
    """The command named on the line (the first argument that is not an option), if any."""
    for argument in arguments:
        if not argument.startswith("-"):
            return argument
        if argument in ("-h", "--help", "--version"):
            return None
    return None


def _print_traceback() -> None:
    """The traceback of the exception being handled (--debug), on stderr."""
    import traceback  # with linecache and textwrap: only when there is a traceback to show

    traceback.print_exc()


_OUTPUT_ERRORS = "autocompact.output"


def _escape_or_replace(exc: UnicodeError) -> tuple[str | bytes, int]:
    """The output streams' error handler: ``surrogateescape`` where it applies (the bytes of a
    name that is not UTF-8 are written back as they came), else ``replace``."""
    try:
        return codecs.lookup_error("surrogateescape")(exc)
    except UnicodeError:
        return codecs.lookup_error("replace")(exc)


def _tolerant_output() -> None:
    """Make stdout and stderr write what they cannot encode (a lone surrogate a hand-edited
    session file holds, as ``"\\ud800"``) as ``?`` instead of failing the command on it; a
    handler the environment chose (``PYTHONIOENCODING``) is kept."""
    codecs.register_error(_OUTPUT_ERRORS, _escape_or_replace)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors in ("strict", "surrogateescape"):
            stream.reconfigure(errors=_OUTPUT_ERRORS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 failure, 2 bad input)."""
    _tolerant_output()
    arguments = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, before or after the command.
    debug = "--debug" in arguments
    arguments = [a for a in arguments if a != "--debug"]
    command = _command_of(arguments)
    known = {summary[0] for summary in SUMMARIES.values()}
    # The command's modules are imported here: a burst of objects that live as long as the
    # process, in which the cyclic collector's passes find nothing to free.
    collecting = gc.isenabled()
    gc.disable()
    try:
        parser = build_parser(command if command is None or command in known else _EVERY)
    finally:
        if collecting:
            gc.enable()
    args = parser.parse_args(arguments)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = handler(args)
    except AutocompactError as exc:
        if debug:
            _print_traceback()
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except OSError as exc:
        if debug:
            _print_traceback()
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"Error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:  # a bug: say so in one line; --debug shows where
        if debug:
            _print_traceback()
        print(
            f"Error: unexpected {described(exc)}. This is a bug in autocompact; "
            "run again with --debug for the traceback and report it.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
