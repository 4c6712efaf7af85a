"""An optional package that is installed but too old says so, with the version it needs."""

from __future__ import annotations

from importlib import metadata

import pytest

from autocompact.errors import MissingDependencyError


def test_a_missing_package_says_it_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not installed: the message says so and gives the extra's install line."""

    def absent(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", absent)
    error = MissingDependencyError("pydantic-ai-slim", "pydantic-ai")
    assert "is not installed" in str(error)
    assert 'pip install "autocompact[pydantic-ai]"' in str(error)


def test_a_too_old_package_names_its_version_and_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Installed at 2.62 (as pydantic-ai-harness pins it): the message names 2.62.0 and the
    extra's requirement instead of claiming the package is not installed."""
    monkeypatch.setattr(metadata, "version", lambda name: "2.62.0")
    monkeypatch.setattr(
        metadata,
        "requires",
        lambda name: [
            "rich>=13",
            'pydantic-ai-slim<3,>=2.64; extra == "pydantic-ai"',
            'openai<4,>=3.0; extra == "openai"',
        ],
    )
    text = str(MissingDependencyError("pydantic-ai-slim", "pydantic-ai"))
    assert "not installed" not in text
    assert "installed at version 2.62.0" in text
    assert 'pip install "pydantic-ai-slim<3,>=2.64"' in text
