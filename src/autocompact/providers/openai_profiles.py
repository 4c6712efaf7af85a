"""The capability profiles of the OpenAI chat-completions adapter (see :mod:`.openai`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from autocompact.convert import ThinkingMode
from autocompact.errors import ConfigError

__all__ = [
    "COMPATIBLE_BASE_URLS",
    "DASHSCOPE_BASE_URLS",
    "CapField",
    "OpenAIProfile",
    "ThinkingControl",
    "compatible_profile",
    "lowest_reasoning_effort",
    "openai_profile",
    "qwen_profile",
]

CapField = Literal["max_completion_tokens", "max_tokens"]
ThinkingControl = Literal["reasoning_effort", "enable_thinking", "none"]

DASHSCOPE_BASE_URLS = {
    "intl": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",  # Singapore
    "cn": "https://dashscope.aliyuncs.com/compatible-mode/v1",  # Beijing
    "us": "https://dashscope-us.aliyuncs.com/compatible-mode/v1",  # Virginia
}
"""DashScope (Alibaba Model Studio) OpenAI-compatible endpoints by region."""

COMPATIBLE_BASE_URLS = {
    "vllm": "http://127.0.0.1:8000/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
"""Default local addresses of the common OpenAI-compatible servers."""


@dataclass(frozen=True, kw_only=True)
class OpenAIProfile:
    """How one family of models or servers wants the generic settings expressed.

    Attributes:
        name: the provider name reported in errors and completions.
        cap_field: the body field that carries ``max_output_tokens``.
        thinking_control: ``reasoning_effort``, ``enable_thinking`` (Qwen) or ``none``.
        lowest_effort: the effort sent when thinking is off (``reasoning_effort`` profiles).
        base_url: the default base URL (``None``: the SDK's, i.e. api.openai.com).
        stream_usage: ask for usage in streams (``stream_options.include_usage``).
        history_thinking: how thinking parts of the history are sent back.
        text_as_string: send a message whose content is only text as one string (its text
            parts joined by blank lines), never as a list of text parts.
    """

    name: str
    cap_field: CapField
    thinking_control: ThinkingControl = "none"
    lowest_effort: str | None = None
    base_url: str | None = None
    stream_usage: bool = True
    history_thinking: ThinkingMode = "drop"
    text_as_string: bool = False


_NO_EFFORT = re.compile(r"^o1-(mini|preview)")
_REASONING = re.compile(r"^(o\d|gpt-([5-9]|\d\d))")
_CHAT_VARIANT = re.compile(r"-chat(-latest)?$|-chat-")
# The GPT-6 models that still turn reasoning off with `none` (they reason at `medium` unless
# told); the others always reason, from `low` up.
_GPT_6_OFF = ("gpt-6-luna", "gpt-6-sol", "gpt-6.1-terra")


def lowest_reasoning_effort(model: str) -> str | None:
    """The lowest ``reasoning_effort`` an OpenAI model accepts, or ``None`` to send none.

    ``none`` from GPT-5.1 on and for GPT-6 Luna, Sol and 6.1 Terra (except Codex models, whose
    floor is ``low``), ``low`` for the GPT-6 models that always reason (Astra, 6.1 Sol, 6.2 and
    later: they refuse ``none``), ``minimal`` for the first GPT-5 models, ``low`` for the
    o-series; o1-mini/o1-preview and the -pro models take no lower value than their default,
    so nothing is sent. After pydantic-ai's live-verified OpenAI profiles.
    """
    name = model.lower().rsplit("/", 1)[-1]
    if _NO_EFFORT.match(name) or not _REASONING.match(name) or _CHAT_VARIANT.search(name):
        return None
    if name.endswith("-pro") or "-pro-" in name:
        return None
    if name.startswith("o"):
        return "low"
    if "codex" in name:
        return "low"
    if re.match(r"^gpt-5(-|$)", name):
        return "minimal"
    if re.match(r"^gpt-(\d\d|[6-9])", name) and not name.startswith(_GPT_6_OFF):
        return "low"  # GPT-6 Astra, 6.1 Sol, 6.2 and later always reason: `none` is refused
    return "none"


def openai_profile(model: str) -> OpenAIProfile:
    """The profile of an OpenAI model: reasoning models get a ``reasoning_effort`` floor."""
    effort = lowest_reasoning_effort(model)
    return OpenAIProfile(
        name="openai",
        cap_field="max_completion_tokens",
        thinking_control="reasoning_effort" if effort is not None else "none",
        lowest_effort=effort,
    )


def qwen_profile(region: str = "intl", *, cap_field: CapField = "max_tokens") -> OpenAIProfile:
    """The Qwen / DashScope compatible-mode profile for a region (``intl``, ``cn``, ``us``)."""
    if region not in DASHSCOPE_BASE_URLS:
        raise ConfigError(
            f"unknown DashScope region {region!r}: use one of {', '.join(DASHSCOPE_BASE_URLS)}",
            key="region",
        )
    return OpenAIProfile(
        name="qwen",
        cap_field=cap_field,
        thinking_control="enable_thinking",
        base_url=DASHSCOPE_BASE_URLS[region],
    )


def compatible_profile(server: str = "vllm", *, base_url: str | None = None) -> OpenAIProfile:
    """A generic OpenAI-compatible server: ``max_tokens``, no reasoning field, and text sent as
    one string (``llama_cpp.server`` rejects or silently drops text sent as a list of parts).

    The profile is named after the server (``llamacpp``, ``ollama``...) so errors name the
    profile the user chose; any other name gives ``openai-compatible``.
    """
    return OpenAIProfile(
        name=server if server in COMPATIBLE_BASE_URLS else "openai-compatible",
        cap_field="max_tokens",
        base_url=base_url or COMPATIBLE_BASE_URLS.get(server, COMPATIBLE_BASE_URLS["vllm"]),
        text_as_string=True,
    )
