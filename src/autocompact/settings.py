"""Settings files (SPEC §8): user and project ``settings.json``, merged in order.

Shape (every key optional)::

    {
      "chatCompression": {"imageTokenEstimate": 1600, "toolOutputClearing": true,
                          "nativeCompaction": true},
      "model": {"provider": "anthropic", "name": "claude-sonnet-4-6",
                "contextWindow": 200000, "baseUrl": "http://localhost:8000/v1"}
    }

``chatCompression.contextPercentageThreshold`` was removed: a file that still has it loads, the
value is ignored, and :attr:`Settings.warnings` carries the one-line notice the CLI prints once to
stderr (SPEC §8's sentence, then the files that hold the key). The ladder has no other knob: no
environment variable overrides it.

This module reads only the paths it is given; the CLI decides where they are.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autocompact import jsonsafe
from autocompact.errors import ConfigError
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE, SMALLEST_WINDOW, parse_window

__all__ = [
    "REMOVED_PERCENTAGE_WARNING",
    "Settings",
    "check_base_url",
    "load_settings",
    "parse_settings",
]

logger = logging.getLogger("autocompact.notices")
"""Notices also handed to the caller (:attr:`Settings.warnings`): a program that shows those
(the CLI) keeps this child of the ``autocompact`` logger quiet."""

REMOVED_PERCENTAGE_WARNING = (
    "chatCompression.contextPercentageThreshold has been removed and is now controlled by "
    "internal thresholds."
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The merged settings.

    Attributes:
        image_token_estimate: tokens counted per image or document.
        tool_output_clearing: clear old tool output before summarizing (issue 6; default on).
        native_compaction: let a provider with native compaction write the summary where it
            supports it (issue 15; default on).
        provider, model, context_window, base_url: model selection defaults (``None``: unset).
        sources: the files that were read, in order.
        warnings: notices for the user (deprecated or unknown keys), each once.
    """

    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
    tool_output_clearing: bool = True
    native_compaction: bool = True
    provider: str | None = None
    model: str | None = None
    context_window: int | None = None
    base_url: str | None = None
    sources: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = ()


_KNOWN = {
    "chatCompression": {
        "imageTokenEstimate",
        "contextPercentageThreshold",
        "toolOutputClearing",
        "nativeCompaction",
    },
    "model": {"provider", "name", "contextWindow", "baseUrl"},
}


def load_settings(paths: Sequence[Path], *, base: Settings | None = None) -> Settings:
    """Read and merge settings files; later files win. Missing files are skipped.

    Raises:
        ConfigError: a file is not valid JSON or a key has the wrong type (names file and key).
    """
    settings = base or Settings()
    for path in paths:
        if not path.is_file():
            if path.exists():  # a directory (or a device) where the settings file goes
                raise ConfigError(
                    f"{path}: a settings file must be a JSON file, but this is a "
                    f"{'directory' if path.is_dir() else 'special file'}; remove or rename it",
                    file=str(path),
                )
            continue
        try:
            # "utf-8-sig": a byte order mark (as some editors write) is no content.
            data = jsonsafe.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{path}: cannot read the settings file: {exc}", file=str(path)
            ) from exc
        except json.JSONDecodeError as exc:
            problem = exc.msg.removesuffix(" at")  # "Unterminated string starting at": the
            raise ConfigError(  # place is the line and column before it
                f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({problem}); fix the file or "
                "remove it",
                file=str(path),
            ) from exc
        settings = parse_settings(data, file=str(path), base=settings)
        settings = replace(settings, sources=(*settings.sources, path))
    return settings


def parse_settings(
    data: object, *, file: str = "<settings>", base: Settings | None = None
) -> Settings:
    """Apply one parsed settings object on top of ``base``."""
    settings = base or Settings()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{file}: the settings must be a JSON object", file=file)
    warnings = list(settings.warnings)

    def warn(text: str) -> None:
        if text not in warnings:
            warnings.append(text)
            logger.warning(text)

    for section, value in data.items():
        if section not in _KNOWN:
            warn(f"{file}: unknown settings key {section!r} ignored")
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(f"{file}: {section!r} must be a JSON object", file=file, key=section)
        for key in value:
            if key not in _KNOWN[section]:
                warn(f"{file}: unknown settings key '{section}.{key}' ignored")

    compression = data.get("chatCompression", {})
    if "contextPercentageThreshold" in compression:
        _removed_percentage(warnings, file)
    if "imageTokenEstimate" in compression:
        settings = replace(
            settings,
            image_token_estimate=_int(
                compression["imageTokenEstimate"], file, "chatCompression.imageTokenEstimate"
            ),
        )
    for key, field_name in (
        ("toolOutputClearing", "tool_output_clearing"),
        ("nativeCompaction", "native_compaction"),
    ):
        if key in compression:
            flag = compression[key]
            if not isinstance(flag, bool):
                raise ConfigError(
                    f"{file}: chatCompression.{key} must be true or false, got {flag!r}",
                    file=file,
                    key=f"chatCompression.{key}",
                )
            flags: dict[str, Any] = {field_name: flag}
            settings = replace(settings, **flags)
    model = data.get("model", {})
    updates: dict[str, Any] = {}
    for key, field_name in (("provider", "provider"), ("name", "model"), ("baseUrl", "base_url")):
        if key in model:
            updates[field_name] = _str(model[key], file, f"model.{key}")
    if "base_url" in updates:
        try:
            check_base_url(updates["base_url"], "model.baseUrl")
        except ConfigError as exc:
            raise ConfigError(f"{file}: {exc}", file=file, key="model.baseUrl") from exc
    if "contextWindow" in model:
        try:
            updates["context_window"] = parse_window(
                model["contextWindow"], name="model.contextWindow", minimum=SMALLEST_WINDOW
            )
        except ConfigError as exc:
            raise ConfigError(f"{file}: {exc}", file=file, key="model.contextWindow") from exc
    return replace(settings, warnings=tuple(warnings), **updates)


def _removed_percentage(warnings: list[str], file: str) -> None:
    """The removed key's notice: its one sentence, then the files that hold it, once however
    many do."""
    for i, text in enumerate(warnings):
        if text.startswith(REMOVED_PERCENTAGE_WARNING):
            warnings[i] = f"{text.removesuffix('.')}, {file}."
            return
    text = f"{REMOVED_PERCENTAGE_WARNING} The value is ignored; remove the key from {file}."
    warnings.append(text)
    logger.warning(text)


def check_base_url(value: str, name: str) -> str:
    """A server's base URL: ``http://`` or ``https://``, a host, no space or control character.

    Raises:
        ConfigError: anything else, naming ``name`` and saying how to write one (a control
            character failed the first request with the HTTP client's raw ``InvalidURL``, and
            an address without a scheme was sent as a relative path).
    """
    import urllib.parse  # only when there is an address to check

    try:
        parts = urllib.parse.urlsplit(value)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (read to check it: one past 65535 raises ValueError)
    except ValueError:  # a bracket left open, a port that is no number
        ok = False
    if not ok or any(ch <= " " or ch == "\x7f" for ch in value):
        raise ConfigError(
            f"{name} {value!r:.80} is not a server address: write it like http://localhost:8000/v1",
            key=name,
        )
    return value


def _int(value: object, file: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"{file}: {key} must be a whole number of 0 or more, got {value!r}", file=file, key=key
        )
    return value


def _str(value: object, file: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():  # "  ": as --model "  " is refused
        raise ConfigError(
            f"{file}: {key} must be a non-empty string, got {value!r}", file=file, key=key
        )
    return value
