"""Settings files: merging, the removed percentage setting, and errors that name file and key."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autocompact import ConfigError
from autocompact.settings import REMOVED_PERCENTAGE_WARNING, Settings, load_settings


def write(path: Path, data: object) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_defaults_when_no_file_exists(tmp_path: Path) -> None:
    """Missing files are skipped and the defaults stand."""
    settings = load_settings([tmp_path / "nope.json"])
    assert settings == Settings()
    assert settings.image_token_estimate == 1_600
    assert settings.tool_output_clearing is True


def test_project_file_overrides_user_file(tmp_path: Path) -> None:
    """Later files win key by key; keys a later file does not set are kept."""
    user = write(
        tmp_path / "user.json",
        {"model": {"provider": "anthropic", "name": "claude-sonnet-4-5", "contextWindow": "200k"}},
    )
    project = write(
        tmp_path / "project.json",
        {"model": {"name": "claude-opus-4-1"}, "chatCompression": {"imageTokenEstimate": 800}},
    )
    settings = load_settings([user, project])
    assert settings.provider == "anthropic"
    assert settings.model == "claude-opus-4-1"
    assert settings.context_window == 200_000
    assert settings.image_token_estimate == 800
    assert settings.sources == (user, project)


def test_removed_percentage_setting_warns_once_and_is_ignored(tmp_path: Path) -> None:
    """contextPercentageThreshold = 0.5 gives the exact notice once, naming every file that
    holds the key (it named none), and changes nothing."""
    a = write(tmp_path / "a.json", {"chatCompression": {"contextPercentageThreshold": 0.5}})
    b = write(tmp_path / "b.json", {"chatCompression": {"contextPercentageThreshold": 0.3}})
    settings = load_settings([a, b])
    assert settings.warnings == (
        f"{REMOVED_PERCENTAGE_WARNING} The value is ignored; remove the key from {a}, {b}.",
    )
    assert REMOVED_PERCENTAGE_WARNING == (
        "chatCompression.contextPercentageThreshold has been removed and is now controlled by "
        "internal thresholds."
    )
    assert not hasattr(settings, "context_percentage_threshold")


def test_tool_output_clearing_can_be_turned_off(tmp_path: Path) -> None:
    """chatCompression.toolOutputClearing: false turns clearing off."""
    path = write(tmp_path / "s.json", {"chatCompression": {"toolOutputClearing": False}})
    assert load_settings([path]).tool_output_clearing is False


def test_unknown_keys_are_reported_not_fatal(tmp_path: Path) -> None:
    """Unknown keys load with a warning naming the file and the key."""
    path = write(tmp_path / "s.json", {"model": {"temperature": 0.2}, "theme": "dark"})
    warnings = load_settings([path]).warnings
    assert any("'model.temperature'" in w and str(path) in w for w in warnings)
    assert any("'theme'" in w for w in warnings)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"model": "gpt-4o"}, "'model' must be a JSON object"),
        ({"model": {"contextWindow": -1}}, "model.contextWindow"),
        ({"model": {"contextWindow": "lots"}}, "model.contextWindow"),
        ({"model": {"name": 42}}, "model.name"),
        ({"chatCompression": {"imageTokenEstimate": "big"}}, "imageTokenEstimate"),
        ({"chatCompression": {"imageTokenEstimate": True}}, "imageTokenEstimate"),
        ({"chatCompression": {"toolOutputClearing": "no"}}, "toolOutputClearing"),
    ],
    ids=[
        "malformed",
        "not-object",
        "section-type",
        "negative-window",
        "word-window",
        "name-type",
        "estimate-type",
        "estimate-bool",
        "clearing-type",
    ],
)
def test_bad_settings_name_the_file_and_key(tmp_path: Path, content: object, needle: str) -> None:
    """Malformed JSON or a wrong type raises ConfigError naming the file and the key."""
    path = write(tmp_path / "settings.json", content)
    with pytest.raises(ConfigError) as caught:
        load_settings([path])
    assert str(path) in str(caught.value)
    assert needle in str(caught.value)
    assert caught.value.file == str(path)


def test_a_byte_order_mark_is_no_content(tmp_path: Path) -> None:
    """A settings file that starts with UTF-8's byte order mark (as some editors write) reads
    as the same file without it (it was refused as "not valid JSON (Unexpected UTF-8 BOM
    (decode using utf-8-sig))")."""
    text = json.dumps({"model": {"provider": "fake", "contextWindow": "64k"}})
    plain = write(tmp_path / "plain.json", text)
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    settings = load_settings([marked])
    assert settings.provider == "fake"
    assert settings.context_window == 64_000
    assert replace(settings, sources=()) == replace(load_settings([plain]), sources=())
