"""Model limits: the bundled table, sources and precedence, local server queries on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from autocompact.limits import (
    ASSUMED_CONTEXT_WINDOW,
    ModelLimits,
    ServerKind,
    known_limits,
    load_model_table,
    query_server_limits,
    resolve_limits,
)


@pytest.mark.parametrize(
    ("model", "window", "max_output"),
    [
        ("gpt-4.1", 1_047_576, 32_768),
        ("gpt-4.1-mini-2025-04-14", 1_047_576, 32_768),
        ("gpt-4o", 128_000, 16_384),
        ("gpt-5.1", 400_000, 128_000),
        ("gpt-6-luna", 1_050_000, 128_000),
        ("gpt-5-chat-latest", 128_000, 16_384),
        ("o3", 200_000, 100_000),
        ("o1-mini", 128_000, 65_536),
        ("claude-sonnet-4-5-20250929", 200_000, 64_000),
        ("claude-opus-4-1", 200_000, 32_000),
        ("claude-haiku-4-5", 200_000, 64_000),
        ("gemini-2.5-pro", 1_048_576, 65_536),
        ("gemini-3-pro-preview", 1_048_576, 65_536),
        ("models/gemini-2.5-flash", 1_048_576, 65_536),
        ("qwen3-coder-plus", 1_048_576, 65_536),
        ("qwen-plus", 131_072, 16_384),
        ("qwen-max", 32_768, 8_192),
        ("qwen-turbo-latest", 131_072, 16_384),
        ("qwen3:8b", 131_072, 16_384),
        ("deepseek-chat", 128_000, 8_192),
        ("deepseek-reasoner", 128_000, 65_536),
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072, 4_096),
        ("llama3.1:8b", 131_072, 4_096),
    ],
)
def test_known_models_by_longest_prefix(model: str, window: int, max_output: int) -> None:
    """Each common model resolves to its family's window and output cap, source 'known'."""
    limits = known_limits(model)
    assert limits is not None
    assert (limits.context_window, limits.max_output_tokens) == (window, max_output)
    assert limits.source == "known"


def test_table_is_well_formed() -> None:
    """Every entry has a positive window and the table covers each provider family."""
    table = load_model_table()
    assert all(window > 0 for window, _ in table.values())
    for family in ("gpt-4.1", "gpt-5", "o3", "claude", "gemini-2.5", "qwen3", "deepseek", "llama"):
        assert family in table


def test_unknown_model_is_assumed_with_a_warning() -> None:
    """An unknown model gets the assumed window and a warning naming the setting to use."""
    limits = resolve_limits("my-finetune")
    assert limits.source == "assumed"
    assert limits.context_window == ASSUMED_CONTEXT_WINDOW
    assert limits.warning is not None
    assert "model.contextWindow" in limits.warning


def test_configured_beats_server_beats_known() -> None:
    """Precedence: configured, then server, then the table."""
    server = ModelLimits(model="qwen3:8b", context_window=40_960, source="server", matched="ollama")
    assert resolve_limits("qwen3:8b", configured_window=8_192, server=server).source == "configured"
    assert resolve_limits("qwen3:8b", configured_window=8_192).context_window == 8_192
    via_server = resolve_limits("qwen3:8b", server=server)
    assert (via_server.source, via_server.context_window) == ("server", 40_960)
    assert via_server.max_output_tokens == 16_384  # output cap still from the table
    assert resolve_limits("qwen3:8b").source == "known"
    assert resolve_limits("qwen3:8b", configured_max_output=999).max_output_tokens == 999


# -- local servers -----------------------------------------------------------------------------

Route = Callable[[str, Any], Any]


@pytest.fixture
def server() -> Iterator[Callable[[dict[str, Any]], str]]:
    """Start a JSON server on 127.0.0.1 answering ``{path: payload}``; yields its /v1 base URL."""
    started: list[ThreadingHTTPServer] = []
    seen: list[tuple[str, Any]] = []

    def start(routes: dict[str, Any]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: Any) -> None:
                seen.append((self.path, body))
                payload = routes.get(self.path)
                if payload is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                self._answer(json.loads(self.rfile.read(length)) if length else None)

            def log_message(self, *args: Any) -> None:
                """Silence the server log."""

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    start.seen = seen  # type: ignore[attr-defined]
    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def test_vllm_reports_max_model_len(server: Any) -> None:
    """vLLM's /v1/models max_model_len becomes a server-sourced window."""
    base = server(
        {
            "/v1/models": {
                "data": [
                    {"id": "Qwen/Qwen3-8B", "max_model_len": 40960},
                    {"id": "x", "max_model_len": 1},
                ]
            }
        }
    )
    limits = query_server_limits(base, "Qwen/Qwen3-8B", kind="vllm")
    assert limits is not None
    assert (limits.context_window, limits.source) == (40960, "server")


def test_ollama_uses_num_ctx_when_set(server: Any) -> None:
    """Ollama's /api/show: num_ctx (the served window) wins over the model's native length."""
    base = server(
        {
            "/api/show": {
                "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
                "parameters": "temperature 0.6\nnum_ctx 16384",
            }
        }
    )
    limits = query_server_limits(base, "qwen3:8b", kind="ollama")
    assert limits is not None
    assert limits.context_window == 16384
    assert limits.warning is None
    assert server.seen[-1] == ("/api/show", {"model": "qwen3:8b"})


def test_ollama_without_num_ctx_warns(server: Any) -> None:
    """Without num_ctx Ollama's native length is reported with a visible warning."""
    base = server({"/api/show": {"model_info": {"llama.context_length": 131072}}})
    limits = query_server_limits(base, "llama3.1:8b", kind="ollama")
    assert limits is not None
    assert limits.context_window == 131072
    assert limits.warning is not None
    assert "num_ctx" in limits.warning


def test_llamacpp_and_lmstudio(server: Any) -> None:
    """llama.cpp /props n_ctx and LM Studio's loaded_context_length are read."""
    base = server(
        {
            "/props": {"default_generation_settings": {"n_ctx": 8192}},
            "/api/v0/models/qwen3-8b": {
                "max_context_length": 32768,
                "loaded_context_length": 12000,
            },
        }
    )
    cpp = query_server_limits(base, "any", kind="llamacpp")
    studio = query_server_limits(base, "qwen3-8b", kind="lmstudio")
    assert cpp is not None
    assert studio is not None
    assert (cpp.context_window, studio.context_window) == (8192, 12000)


def test_unreachable_or_silent_server_falls_back_visibly(server: Any) -> None:
    """A server that says nothing (404 or closed port) gives None, and resolution is 'assumed'."""
    base = server({})
    assert query_server_limits(base, "mystery-model", kind="vllm") is None
    assert query_server_limits("http://127.0.0.1:9/v1", "mystery-model", kind="ollama") is None
    fallback = resolve_limits("mystery-model", server=None)
    assert fallback.source == "assumed"
    assert fallback.warning


@pytest.mark.parametrize(
    ("kind", "routes"),
    [
        ("llamacpp", {"/props": {"n_ctx": True}}),
        ("llamacpp", {"/props": {"n_ctx": 10**30}}),
        ("lmstudio", {"/api/v0/models/m": {"loaded_context_length": -5}}),
        ("lmstudio", {"/api/v0/models/m": {"loaded_context_length": 0}}),
        ("lmstudio", {"/api/v0/models/m": {"max_context_length": True}}),
        ("ollama", {"/api/show": {"model_info": {"x.context_length": -7}}}),
        ("vllm", {"/v1/models": {"data": [{"id": "m", "max_model_len": 10**30}]}}),
        ("llamacpp", {"/props": b"[" * 100_000}),
    ],
    ids=["true", "huge", "negative", "zero", "bool", "ollama-negative", "models-huge", "deep"],
)
def test_a_server_window_that_is_no_window_is_not_reported(
    server: Any, kind: ServerKind, routes: dict[str, Any]
) -> None:
    """A window the server reports that is none (true, 0, negative, past 100M) or an answer
    nested too deeply to parse: not reported, as if the server had not said (it was used as
    the window, and every request failed on it; the deep one raised RecursionError)."""
    assert query_server_limits(server(routes), "m", kind=kind) is None


def test_a_server_window_that_is_no_window_is_passed_over_for_the_next_way(server: Any) -> None:
    """Asked every way in turn, a server whose /props says no window is read from /v1/models."""
    base = server(
        {"/props": {"n_ctx": 10**30}, "/v1/models": {"data": [{"id": "m", "max_model_len": 4096}]}}
    )
    limits = query_server_limits(base, "m", kind="openai-compatible")
    assert limits is not None
    assert limits.context_window == 4096


def test_a_server_that_says_no_window_is_logged_in_one_line(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked every way and answered by none: one INFO line that names each place asked and its
    answer (one line per place was logged, three of them the same "HTTP Error 404")."""
    import logging

    caplog.set_level(logging.INFO, logger="autocompact")
    base = server({"/v1/models": {"data": [{"id": "m"}]}})
    assert query_server_limits(base, "m", kind="openai-compatible") is None
    assert [r.getMessage() for r in caplog.records] == [
        f"openai-compatible at {base} did not report a context window for m (/props, "
        "/api/show, /api/v0/models: HTTP Error 404: Not Found; /v1/models: no window)"
    ]
