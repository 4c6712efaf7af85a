"""Names a module offers but imports only when first asked for. Standard library only.

A package re-exports a function that few of its users need (the OpenAI conversion for a replay
of Claude Code logs, a summarizer's helpers nothing in the package calls): importing its module
on every start costs those users milliseconds. :func:`lazy_names` gives the package a module
``__getattr__`` (PEP 562) that imports the module the first time one of the names is looked up
and then sets the names as plain attributes, so later lookups cost nothing extra and
``from package import name`` works as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(module: str, source: str, names: tuple[str, ...]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module`` that takes ``names`` from ``source`` on first use.

    Args:
        module: the module offering the names (its ``__name__``).
        source: the module they come from, imported at the first lookup of one of them.
        names: the names offered.
    """
    offered = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name not in offered:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        imported = import_module(source)
        target = sys.modules[module]
        for each in offered:  # all of them at once: the module is imported now anyway
            setattr(target, each, getattr(imported, each))
        return getattr(imported, name)

    return __getattr__
