"""Choosing a provider from a ``"provider:model"`` string.

``get_provider("anthropic:claude-sonnet-4-6", env=os.environ)`` builds the adapter. The core never
reads the environment itself: the caller (the CLI) passes it as ``env``. API keys are looked up
there under the usual names; a missing key is a :class:`ConfigError` that names the variable.

========================  ====================================  ================================
provider (aliases)        adapter / profile                     API key variable
========================  ====================================  ================================
``openai``                OpenAI, per-model profile             ``OPENAI_API_KEY``
``openai-responses``      OpenAI Responses API (stateless),     ``OPENAI_API_KEY``
(``responses``)           native compaction
``anthropic``             Anthropic Messages                    ``ANTHROPIC_API_KEY``
``gemini`` (``google``)   google-genai                          ``GEMINI_API_KEY`` or
                                                                ``GOOGLE_API_KEY``
``qwen`` (``dashscope``)  OpenAI SDK, DashScope profile         ``DASHSCOPE_API_KEY``
``openai-compatible``     OpenAI SDK, generic profile; base     optional:
(``vllm``, ``ollama``,    URL from ``base_url`` or the          ``OPENAI_COMPATIBLE_API_KEY``
``lmstudio``,             server's default local address        (``VLLM_API_KEY`` for vLLM)
``llamacpp``)
``fake``                  the scripted offline provider         none
========================  ====================================  ================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autocompact.errors import ConfigError
from autocompact.limits import known_limits
from autocompact.providers.base import Provider

__all__ = [
    "API_KEY_VARIABLES",
    "PROVIDER_NAMES",
    "api_key_variables",
    "get_provider",
    "parse_provider_spec",
]

_ALIASES = {
    "google": "gemini",
    "dashscope": "qwen",
    "vllm": "openai-compatible",
    "ollama": "openai-compatible",
    "lmstudio": "openai-compatible",
    "llamacpp": "openai-compatible",
    "compatible": "openai-compatible",
    "responses": "openai-responses",
}

PROVIDER_NAMES = tuple(
    sorted(
        {
            "anthropic",
            "fake",
            "gemini",
            "openai",
            "openai-compatible",
            "openai-responses",
            "qwen",
            *_ALIASES,
        }
    )
)
"""Every name :func:`get_provider` accepts (aliases included)."""

API_KEY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "qwen": ("DASHSCOPE_API_KEY",),
    "openai-compatible": ("OPENAI_COMPATIBLE_API_KEY",),
    "vllm": ("VLLM_API_KEY", "OPENAI_COMPATIBLE_API_KEY"),
}
"""Where each provider's API key is looked up in ``env``, in order."""

_KEY_OPTIONAL = {"openai-compatible", "fake"}
# Anthropic's SDK refuses non-streaming calls that may exceed 10 minutes; the adapter streams,
# but a chat turn without a cap still should not ask for the model's whole output range.
_ANTHROPIC_DEFAULT_CAP = 16_384


def parse_provider_spec(spec: str) -> tuple[str, str]:
    """Split ``"provider:model"`` into its canonical provider name and the model.

    Raises:
        ConfigError: no colon, an empty part, or an unknown provider (listing the valid ones).
    """
    name, sep, model = spec.partition(":")
    name = name.strip().lower()
    model = model.strip()
    if not sep or not name or not model:
        raise ConfigError(
            f"invalid provider {spec!r}: write it as provider:model, "
            "e.g. anthropic:claude-sonnet-4-6 or ollama:qwen3:8b",
            key="provider",
        )
    if name not in PROVIDER_NAMES:
        raise ConfigError(
            f"unknown provider {name!r}: use one of {', '.join(PROVIDER_NAMES)}", key="provider"
        )
    return name, model


def api_key_variables(name: str) -> tuple[str, ...]:
    """The environment variables the key of provider ``name`` (an alias too) is read from, in
    the order :func:`get_provider` tries them."""
    return tuple(API_KEY_VARIABLES.get(name) or API_KEY_VARIABLES.get(_ALIASES.get(name, name), ()))


def _api_key(name: str, canonical: str, api_key: str | None, env: Mapping[str, str]) -> str | None:
    if api_key:
        return api_key
    variables = api_key_variables(name)
    for variable in variables:
        value = env.get(variable)
        if value:
            return value
    if canonical in _KEY_OPTIONAL:
        return None
    raise ConfigError(
        f"no API key for {name}: set {' or '.join(variables)} (or pass api_key)",
        key=variables[0] if variables else "api_key",
    )


def get_provider(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> Provider:
    """Build the provider named by ``"provider:model"``.

    Args:
        spec: e.g. ``"openai:gpt-4.1"``, ``"anthropic:claude-sonnet-4-6"``,
            ``"gemini:gemini-3.8-flash"``, ``"qwen:qwen-plus"``, ``"ollama:qwen3:8b"``,
            ``"fake:demo"``.
        base_url: another endpoint (required in practice for remote compatible servers).
        api_key: the key; when ``None`` it is read from ``env``.
        env: the environment to read keys from (the CLI passes ``os.environ``); never read here.
        **options: passed to the adapter (``http_client``, ``async_http_client``, ``timeout``,
            ``max_retries``; for ``qwen`` also ``region`` and ``cap_field``).

    Raises:
        ConfigError: an unknown provider (the message lists the valid ones) or a missing key
            (the message names the variable to set).
        MissingDependencyError: the provider's SDK is not installed (with the pip hint).
    """
    name, model = parse_provider_spec(spec)
    canonical = _ALIASES.get(name, name)
    environment: Mapping[str, str] = env if env is not None else {}
    if canonical == "fake":
        from autocompact.providers.fake import FakeProvider

        return FakeProvider(model, **options)
    key = _api_key(name, canonical, api_key, environment)
    if canonical == "anthropic":
        from autocompact.providers.anthropic import AnthropicProvider

        known = known_limits(model)
        cap = min(_ANTHROPIC_DEFAULT_CAP, (known.max_output_tokens if known else None) or 8192)
        options.setdefault("default_max_tokens", cap)
        return AnthropicProvider(model, api_key=key, base_url=base_url, **options)
    if canonical == "openai-responses":
        from autocompact.providers.openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(model, api_key=key, base_url=base_url, **options)
    if canonical == "gemini":
        from autocompact.providers.gemini import GeminiProvider

        return GeminiProvider(model, api_key=key, base_url=base_url, **options)
    from autocompact.providers.openai import (
        OpenAIProvider,
        compatible_profile,
        openai_profile,
        qwen_profile,
    )

    if canonical == "qwen":
        region = options.pop("region", "intl")
        cap_field = options.pop("cap_field", "max_tokens")
        profile = qwen_profile(region, cap_field=cap_field)
    elif canonical == "openai-compatible":
        profile = compatible_profile(name, base_url=base_url)
    else:
        profile = openai_profile(model)
    return OpenAIProvider(model, api_key=key, profile=profile, base_url=base_url, **options)
