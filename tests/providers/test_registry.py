"""Provider selection: names, aliases, keys from a passed env, errors, and lazy SDK imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autocompact.errors import ConfigError
from autocompact.providers import get_provider
from autocompact.providers.anthropic import AnthropicProvider
from autocompact.providers.fake import FakeProvider
from autocompact.providers.gemini import GeminiProvider
from autocompact.providers.openai import OpenAIProvider
from autocompact.providers.registry import PROVIDER_NAMES, parse_provider_spec

from .conftest import RealHostError


@pytest.mark.parametrize(
    ("spec", "env", "cls", "name"),
    [
        ("openai:gpt-4.1", {"OPENAI_API_KEY": "k"}, OpenAIProvider, "openai"),
        ("anthropic:claude-sonnet-4-5", {"ANTHROPIC_API_KEY": "k"}, AnthropicProvider, "anthropic"),
        ("gemini:gemini-2.5-flash", {"GEMINI_API_KEY": "k"}, GeminiProvider, "gemini"),
        ("google:gemini-2.5-flash", {"GOOGLE_API_KEY": "k"}, GeminiProvider, "gemini"),
        ("qwen:qwen-plus", {"DASHSCOPE_API_KEY": "k"}, OpenAIProvider, "qwen"),
        ("vllm:Qwen/Qwen3-8B", {}, OpenAIProvider, "vllm"),
        ("ollama:qwen3:8b", {}, OpenAIProvider, "ollama"),
        ("lmstudio:local", {}, OpenAIProvider, "lmstudio"),
        ("llamacpp:any", {}, OpenAIProvider, "llamacpp"),
        ("openai-compatible:m", {}, OpenAIProvider, "openai-compatible"),
        ("fake:demo", {}, FakeProvider, "fake"),
    ],
)
def test_specs_build_the_right_adapter(
    spec: str, env: dict[str, str], cls: type, name: str
) -> None:
    """Each provider name (and alias) builds its adapter with the model after the first colon,
    named after the profile the user chose."""
    provider = get_provider(spec, env=env)
    assert isinstance(provider, cls)
    assert provider.name == name
    assert provider.model == spec.split(":", 1)[1]


def test_ollama_model_keeps_its_tag_and_default_base_url() -> None:
    """'ollama:qwen3:8b' keeps the ':8b' tag and points at Ollama's local address."""
    provider = get_provider("ollama:qwen3:8b")
    assert isinstance(provider, OpenAIProvider)
    assert provider.model == "qwen3:8b"
    assert provider.profile.base_url == "http://127.0.0.1:11434/v1"
    assert provider.profile.cap_field == "max_tokens"


def test_qwen_region_and_cap_field_options() -> None:
    """qwen accepts region and cap_field options."""
    provider = get_provider(
        "qwen:qwen3-max",
        env={"DASHSCOPE_API_KEY": "k"},
        region="cn",
        cap_field="max_completion_tokens",
    )
    assert isinstance(provider, OpenAIProvider)
    assert provider.profile.base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert provider.profile.cap_field == "max_completion_tokens"


def test_unknown_provider_lists_the_valid_ones() -> None:
    """An unknown provider is a ConfigError listing every valid name."""
    with pytest.raises(ConfigError) as info:
        get_provider("mistral:large", env={})
    for name in PROVIDER_NAMES:
        assert name in str(info.value)


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-pro", "GEMINI_API_KEY"),
        ("qwen:qwen-plus", "DASHSCOPE_API_KEY"),
    ],
)
def test_missing_key_names_the_variable(spec: str, variable: str) -> None:
    """A missing key is a ConfigError naming the environment variable to set."""
    with pytest.raises(ConfigError, match=variable):
        get_provider(spec, env={})


def test_the_process_environment_is_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key present only in os.environ is not used: the caller passes env explicitly."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-os-environ")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_provider("anthropic:claude-sonnet-4-5")


def test_explicit_key_and_base_url_win() -> None:
    """api_key and base_url arguments override env and profile defaults."""
    provider = get_provider("vllm:m", base_url="http://127.0.0.1:9999/v1", api_key="explicit")
    assert isinstance(provider, OpenAIProvider)
    assert provider.profile.base_url == "http://127.0.0.1:9999/v1"


@pytest.mark.parametrize("spec", ["openai", "openai:", ":gpt-4.1", ""])
def test_malformed_specs(spec: str) -> None:
    """A spec without provider:model form is a ConfigError showing the expected form."""
    with pytest.raises(ConfigError, match="provider:model"):
        parse_provider_spec(spec)


def test_anthropic_default_cap_comes_from_limits() -> None:
    """The Anthropic adapter's default max_tokens is the model's max output, bounded to 16K."""
    haiku = get_provider("anthropic:claude-3-5-haiku", env={"ANTHROPIC_API_KEY": "k"})
    sonnet = get_provider("anthropic:claude-sonnet-4-5", env={"ANTHROPIC_API_KEY": "k"})
    assert isinstance(haiku, AnthropicProvider)
    assert isinstance(sonnet, AnthropicProvider)
    assert (haiku.default_max_tokens, sonnet.default_max_tokens) == (8192, 16384)


def test_import_autocompact_imports_no_sdk() -> None:
    """Importing autocompact and its providers package loads no provider SDK."""
    code = (
        "import sys, autocompact, autocompact.providers, autocompact.limits, autocompact.convert\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'openai', 'anthropic', 'google', 'httpx', 'httpx2'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_guard_stops_requests_to_real_hosts() -> None:
    """The provider-test guard fails a request that would leave the machine."""
    from autocompact.content import Message
    from autocompact.providers.base import ChatRequest

    provider = get_provider("openai:gpt-4.1", env={"OPENAI_API_KEY": "k"}, max_retries=0)
    with pytest.raises(RealHostError, match=r"api\.openai\.com"):
        provider.complete(ChatRequest(messages=(Message.user("x"),)))


@pytest.mark.parametrize(
    ("spec", "blocked", "hint"),
    [
        ("openai:gpt-4.1", "openai", 'pip install "autocompact[openai]"'),
        ("anthropic:claude-sonnet-4-5", "anthropic", 'pip install "autocompact[anthropic]"'),
        ("gemini:gemini-2.5-flash", "google.genai", 'pip install "autocompact[gemini]"'),
    ],
)
def test_missing_sdk_gives_the_exact_install_hint(
    monkeypatch: pytest.MonkeyPatch, spec: str, blocked: str, hint: str
) -> None:
    """Without the SDK installed, building the adapter fails with the pip hint for its extra."""
    from autocompact.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, blocked, None)
    with pytest.raises(MissingDependencyError) as info:
        get_provider(spec, api_key="k")
    assert hint in str(info.value)
