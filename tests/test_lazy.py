"""Names a package offers but imports at first use: same objects, clear errors, nothing early."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import autocompact.compaction.extractive as extractive
import autocompact.convert as convert
from autocompact._lazy import lazy_names


def test_lazy_names_are_the_source_objects() -> None:
    """A lazily offered name is the very object its module defines."""
    from autocompact.compaction.extractive import terms
    from autocompact.convert import openai_chat

    assert convert.from_openai_messages is openai_chat.from_openai_messages
    assert convert.to_openai_messages is openai_chat.to_openai_messages
    assert extractive.key_terms is terms.key_terms
    assert extractive.shorten_middle is terms.shorten_middle


def test_from_import_works() -> None:
    """``from package import name`` takes a lazily offered name as any other."""
    from autocompact.convert import to_openai_messages

    assert callable(to_openai_messages)


def test_unknown_name_raises_attribute_error() -> None:
    """A name the package does not offer raises AttributeError naming the module and name."""
    with pytest.raises(AttributeError, match=r"'autocompact\.convert' has no attribute 'nope'"):
        _ = convert.nope


def test_first_lookup_sets_every_name() -> None:
    """The first lookup imports the source once and sets all its names as plain attributes."""
    module = types.ModuleType("lazy_probe")
    sys.modules["lazy_probe"] = module
    try:
        module.__getattr__ = lazy_names(  # type: ignore[method-assign]
            "lazy_probe", "autocompact.averages", ("fmean", "median")
        )
        from autocompact import averages

        assert module.fmean is averages.fmean
        assert module.__dict__["median"] is averages.median  # set too, not looked up again
        with pytest.raises(AttributeError, match="'lazy_probe' has no attribute 'mode'"):
            _ = module.mode
    finally:
        del sys.modules["lazy_probe"]


def test_importing_the_packages_leaves_the_sources_unimported() -> None:
    """A fresh interpreter importing the packages has not imported the lazy modules yet."""
    code = (
        "import sys\n"
        "import autocompact.convert, autocompact.compaction.extractive\n"
        "print(sorted(m for m in ('autocompact.convert.openai_chat', "
        "'autocompact.compaction.extractive.terms') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
