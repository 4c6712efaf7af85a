"""Entry point: builds the argument parser from the command modules and maps errors to exit codes.

Each command lives in its own module under ``autocompact.cli`` and exposes
``register(subparsers) -> None``, which adds its sub-parser and sets ``handler`` (a function
``(args) -> int``) as the parser's default. Add a command by adding its module to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from autocompact import __version__
from autocompact.errors import AutocompactError

COMMANDS = (
    "autocompact.cli.thresholds_cmd",
    "autocompact.cli.demo_cmd",
    "autocompact.cli.chat_cmd",
    "autocompact.cli.sessions_cmd",
    "autocompact.cli.replay_cmd",
    "autocompact.cli.serve_cmd",
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="autocompact",
        description="Automatic context-window compaction for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"autocompact {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show a traceback when something goes wrong"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 failure, 2 bad input)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, before or after the command.
    debug = "--debug" in arguments
    arguments = [a for a in arguments if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(arguments)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = handler(args)
    except AutocompactError as exc:
        if debug:
            traceback.print_exc()
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except OSError as exc:
        if debug:
            traceback.print_exc()
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"Error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:  # a bug: say so in one line; --debug shows where
        if debug:
            traceback.print_exc()
        print(
            f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in autocompact; "
            "run again with --debug for the traceback and report it.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
