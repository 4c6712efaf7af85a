"""Which provider ``autocompact chat`` talks to: the choice the command line, a resumed
session and the settings make, the defaults, and the provider built from it (with its window
and where that came from).

Resolution order for each setting: the command line, then the resumed session's header (a JSONL
session file's, or the meta a session store keeps), then the settings files (user, then
project), then the environment (which provider has a key set).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autocompact.cli.fake_script import ScriptedFake, load_fake_script
from autocompact.context_report import WindowSource
from autocompact.errors import ConfigError
from autocompact.providers.base import Provider
from autocompact.sessions import SessionHeader
from autocompact.settings import Settings
from autocompact.thresholds import SMALLEST_WINDOW, parse_window

__all__ = [
    "ASSUMED_WINDOW",
    "DEFAULT_MODELS",
    "NO_PROVIDER_HELP",
    "SERVER_KINDS",
    "Choice",
    "build_provider",
    "check_api_key",
    "choose",
]

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

NO_PROVIDER_HELP = """no provider is configured. Pick one:
  --provider openai       and set OPENAI_API_KEY
  --provider anthropic    and set ANTHROPIC_API_KEY
  --provider gemini       and set GEMINI_API_KEY (or GOOGLE_API_KEY)
  --provider qwen         and set DASHSCOPE_API_KEY
  --provider openai-compatible --base-url http://localhost:11434/v1 --model llama3.1
                          for a local OpenAI-compatible server (Ollama, vLLM, llama.cpp,
                          LM Studio; or --provider ollama|vllm|llamacpp|lmstudio for their
                          default address); set OPENAI_COMPATIBLE_API_KEY only if it wants a key
  --provider fake         to try autocompact offline
or put {"model": {"provider": ..., "name": ...}} in a settings file (%s)."""


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
    timeout: float | None = None
    """Seconds each request waits for the server (``--timeout``; ``None``: the SDK's)."""


def choose(
    args: argparse.Namespace,
    settings: Settings,
    env: Mapping[str, str],
    home: Path,
    *,
    header: SessionHeader | None = None,
    where: str = "",
) -> Choice:
    """What ``autocompact chat`` runs on: each value from the command line, else the resumed
    session's ``header`` (``where``: the session, as an error names it), else the settings,
    else the first provider whose key is set in ``env``.

    Raises:
        ConfigError: no provider anywhere (the message lists every choice), or a resumed
            session's configured window that cannot be read.
    """
    provider = args.provider or (header and header.provider) or settings.provider
    origin = "--provider"
    if not args.provider and header is not None and header.provider:
        origin = f"{where}: the saved session's provider"
    elif not args.provider and settings.provider:
        origin = "model.provider in " + " or ".join(map(str, settings.sources or ("settings",)))
    if provider is None:
        from autocompact.providers.registry import API_KEY_VARIABLES

        provider = next(
            (
                p
                for p, names in API_KEY_VARIABLES.items()
                if p in DEFAULT_MODELS and any(env.get(n) for n in names)
            ),
            None,
        )
    if provider is None:
        raise ConfigError(NO_PROVIDER_HELP % (home / "settings.json"), key="provider")
    same = header is not None and header.provider == provider
    model = args.model or (header.model if same and header else None) or settings.model
    base_url = args.base_url or (header.base_url if same and header else None) or settings.base_url
    window: int | None = None
    source: WindowSource = "assumed"
    if args.window is not None:
        window, source = (
            parse_window(args.window, name="--window", minimum=SMALLEST_WINDOW),
            "configured",
        )
    elif settings.context_window is not None:
        window, source = settings.context_window, "configured"
    elif header is not None and same and header.window_source == "configured":
        # A window given when the session started stays with it (a known window is looked up
        # again, so a corrected model table applies).
        try:
            window = parse_window(header.context_window, name="context_window", minimum=1)
        except ConfigError as exc:  # a hand-edited header: say where, and the way round it
            raise ConfigError(
                f"{where}: the saved session's {exc}; pass --window N to resume it",
                file=where,
                key="context_window",
            ) from exc
        source = "configured"
    system = args.system if args.system is not None else (header and header.system_instruction)
    return Choice(
        provider=provider,
        model=model,
        base_url=base_url,
        window=window,
        window_source=source,
        system=system or None,
        provider_origin=origin,
        timeout=getattr(args, "timeout", None),
    )


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
        assumed = (
            None
            if choice.window
            else f"no window given: assuming {ASSUMED_WINDOW:,} tokens for the fake provider; "
            "pass --window N (e.g. --window 32k) to try the ladder on another size"
        )
        return fake, window, source, assumed
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
    check_api_key(choice.provider, env)
    provider: Provider = get_provider(
        f"{choice.provider}:{model}", base_url=choice.base_url, env=env, timeout=choice.timeout
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

_CHARACTER_NAMES = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab", " ": "a space"}


def check_api_key(provider: str, env: Mapping[str, str]) -> None:
    """Refuse the API key ``provider`` would read from ``env`` when it cannot be sent: a key
    travels in an HTTP header, which takes visible ASCII only. A line break in it failed the
    first request as "could not reach the server", a non-ASCII letter as a malformed response.

    Raises:
        ConfigError: naming the variable, the first character that cannot be sent and where it
            is (never the key), and what to do.
    """
    from autocompact.providers.registry import api_key_variables

    variable = next((n for n in api_key_variables(provider) if env.get(n)), None)
    if variable is None:
        return
    key = env[variable]
    bad = next((i for i, c in enumerate(key) if not "!" <= c <= "~"), None)
    if bad is None:
        return
    char = key[bad]
    shown = _CHARACTER_NAMES.get(char) or (
        f"the character U+{ord(char):04X}"
        if not char.isprintable()
        else f"{char!r} (U+{ord(char):04X}, not ASCII)"
    )
    raise ConfigError(
        f"{variable} holds {shown} at character {bad + 1} of {len(key)}: an API key is sent in "
        "an HTTP header, which takes printable ASCII without spaces only; set "
        f"{variable} to the key alone, copied again from the provider's console (a key read "
        "from a file often ends in a line break)",
        key=variable,
    )
