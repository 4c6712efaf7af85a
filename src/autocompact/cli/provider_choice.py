"""Which provider ``autocompact chat`` talks to: the choice the command line and the settings
make, the defaults, and the provider built from it (with its window and where that came from)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autocompact.cli.fake_script import ScriptedFake, load_fake_script
from autocompact.context_report import WindowSource
from autocompact.errors import ConfigError
from autocompact.providers.base import Provider

__all__ = ["ASSUMED_WINDOW", "DEFAULT_MODELS", "SERVER_KINDS", "Choice", "build_provider"]

ASSUMED_WINDOW = 128_000
"""The fake provider's window when none is given (real models use ``autocompact.limits``)."""

DEFAULT_MODELS = {
    "openai": "gpt-6-luna",
    "anthropic": "claude-sonnet-4-6",
    "gemini": "gemini-3.8-flash",
    "google": "gemini-3.8-flash",
    "qwen": "qwen-plus",
    "dashscope": "qwen-plus",
    "fake": "fake-model",
}
"""The model used when none is given (local servers have no default: pass --model)."""

SERVER_KINDS = {"vllm", "ollama", "llamacpp", "lmstudio", "openai-compatible", "compatible"}
"""Provider names that are local servers, asked for the model's window at start-up."""


@dataclass(frozen=True, kw_only=True)
class Choice:
    """What the command line and the settings chose: provider, model, address, window."""

    provider: str
    model: str | None
    base_url: str | None
    window: int | None
    window_source: WindowSource
    system: str | None
    provider_origin: str = "--provider"
    """Where ``provider`` was given, as an error names it."""


def build_provider(
    choice: Choice, env: Mapping[str, str]
) -> tuple[Provider, int, WindowSource, str | None]:
    """The provider for a choice, its window, where that came from, and any warning about it."""
    if choice.provider == "fake":
        window = choice.window or ASSUMED_WINDOW
        source: WindowSource = choice.window_source if choice.window else "assumed"
        fake = ScriptedFake(choice.model or "fake-model", context_window=choice.window or None)
        script = env.get("AUTOCOMPACT_FAKE_SCRIPT")
        if script:
            for reply, purpose in load_fake_script(Path(script)):
                fake.enqueue(reply, purpose=purpose)
        return fake, window, source, None
    from autocompact.limits import query_server_limits, resolve_limits
    from autocompact.providers import get_provider
    from autocompact.providers.registry import PROVIDER_NAMES

    if choice.provider not in PROVIDER_NAMES:
        raise ConfigError(
            f"{choice.provider_origin}: unknown provider {choice.provider!r:.40}: use one of "
            f"{', '.join(PROVIDER_NAMES)}",
            key=choice.provider_origin,
        )
    model = choice.model or DEFAULT_MODELS.get(choice.provider)
    if model is None:
        raise ConfigError(
            f"--provider {choice.provider} needs --model (the name the server knows the model by, "
            "e.g. --model llama3.1), or model.name in a settings file",
            key="--model",
        )
    provider: Provider = get_provider(
        f"{choice.provider}:{model}", base_url=choice.base_url, env=env
    )
    server = None
    if choice.window is None and choice.provider in SERVER_KINDS:
        base_url = choice.base_url or getattr(getattr(provider, "profile", None), "base_url", None)
        kind = choice.provider if choice.provider in _SERVER_QUERIES else "openai-compatible"
        if base_url:
            server = query_server_limits(base_url, model, kind=kind)  # type: ignore[arg-type]
    limits = resolve_limits(model, configured_window=choice.window, server=server)
    warning = limits.warning
    if choice.window is None and choice.provider in SERVER_KINDS and server is None:
        # A local server runs with the context size it was started with, whatever the model's
        # published window: a guess here is often wrong, so it is never silent.
        where = f"the server at {base_url}" if base_url else "the server (no base URL given)"
        warning = (
            f"{where} could not be asked for the context window of {model!r}; using "
            f"{limits.context_window:,} tokens ({limits.source}), which may not be the window "
            "the server runs with: pass --window N with the server's context size (llama-server "
            "-c N, vLLM --max-model-len N, Ollama num_ctx)"
        )
    return provider, limits.context_window, limits.source, warning


_SERVER_QUERIES = ("vllm", "ollama", "llamacpp", "lmstudio")
