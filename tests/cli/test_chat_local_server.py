"""``autocompact chat`` against an OpenAI-compatible server on 127.0.0.1 (vLLM-shaped)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from autocompact.sessions import SessionStore

from .conftest import ChatEnv


class _Server(ThreadingHTTPServer):
    requests: list[dict[str, Any]]
    finish: str
    prompt_tokens: int
    usage: bool  # send usage in streams (llama_cpp.server does not)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean."""

    def _json(self, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": "tiny", "max_model_len": 32768}]})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append(body)
        base = {"id": "c1", "created": 0, "model": "tiny"}
        if not body.get("stream"):
            self._json(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "summary"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
                }
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {**base, "object": "chat.completion.chunk"}
        events = [
            {
                **chunk,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}}],
            },
            {**chunk, "choices": [{"index": 0, "delta": {"content": " from the server"}}]},
            {
                **chunk,
                "choices": [{"index": 0, "delta": {}, "finish_reason": self.server.finish}],
            },
            {
                **chunk,
                "choices": [],
                "usage": {
                    "prompt_tokens": self.server.prompt_tokens,
                    "completion_tokens": 4,
                    "total_tokens": self.server.prompt_tokens + 4,
                },
            },
        ]
        for event in events if self.server.usage else events[:-1]:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def server() -> Iterator[_Server]:
    """A vLLM-shaped OpenAI-compatible server on a free port of 127.0.0.1."""
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.requests = []
    srv.finish = "stop"
    srv.prompt_tokens = 321
    srv.usage = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_chat_with_a_local_server(chat_env: ChatEnv, server: _Server) -> None:
    """The window comes from the server, the reply streams in, the count is the server's."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        chat_env.monkeypatch.delenv(name, raising=False)
    chat_env.monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    args = ["chat", "--provider", "vllm", "--model", "tiny", "--base-url", base_url]
    result = chat_env.run([*args, "--system", "be brief"], ["hi there", "/context"])
    assert result.code == 0, result.err
    assert "vllm/tiny · window 32.8K (server)" in result.out
    assert "Hello from the server" in result.out
    # the server's prompt count (321) plus the reply (6 tokens by the estimate, 4 by the server)
    assert "[327 / 32.8K tokens (1%)]" in result.out
    assert "Window            32,768 tokens (reported by the server)" in result.out
    (sent,) = server.requests
    assert sent["model"] == "tiny"
    assert sent["stream"] is True
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi there"},
    ]
    (summary,) = SessionStore(chat_env.sessions).list()
    assert summary.header.base_url == base_url
    assert summary.header.window_source == "server"


def _local(chat_env: ChatEnv, server: _Server) -> list[str]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        chat_env.monkeypatch.delenv(name, raising=False)
    chat_env.monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return ["chat", "--provider", "vllm", "--model", "tiny", "--base-url", base_url]


def test_calibration_is_remembered_for_the_next_chat(chat_env: ChatEnv, server: _Server) -> None:
    """What a chat learned about the tokenizer is kept per provider and model in the data
    directory, and a new chat on the same model starts with it."""
    from autocompact.cli.calibrations import CalibrationMemory

    args = _local(chat_env, server)
    long = "the invoice total is rounded twice in render_total " * 60  # ~3K characters
    server.prompt_tokens = 1_000
    assert chat_env.run(args, [long]).code == 0
    memory = CalibrationMemory(chat_env.home)
    learned = memory.load("vllm", "tiny")
    assert learned is not None
    assert learned.samples == 1
    assert memory.path.stat().st_mode & 0o777 == 0o600
    assert memory.load("vllm", "other") is None
    # The second chat starts calibrated: its first turn teaches a second sample.
    assert chat_env.run(args, [long]).code == 0
    second = memory.load("vllm", "tiny")
    assert second is not None
    assert second.samples == 2


@pytest.mark.parametrize(
    "damage",
    ["{not json", '{"models": ' + "[" * 100_000, '{"n": ' + "1" * 5000 + "}"],
    ids=["not-json", "nested-too-deep", "number-too-long"],
)
def test_damaged_calibration_file_is_ignored(
    chat_env: ChatEnv, server: _Server, damage: str
) -> None:
    """A damaged calibrations.json never stops a chat; it is relearned (nesting past the
    parser was an "unexpected RecursionError")."""
    chat_env.home.mkdir(parents=True, exist_ok=True)
    (chat_env.home / "calibrations.json").write_text(damage)
    result = chat_env.run(_local(chat_env, server), ["hi there"])
    assert result.code == 0, result.err
    assert "Hello from the server" in result.out
    assert "set_int_max_str_digits" not in result.err + result.out


def test_reply_stopped_at_its_length_limit_says_so(chat_env: ChatEnv, server: _Server) -> None:
    """A reply that ends at its length limit carries a notice."""
    server.finish = "length"
    result = chat_env.run(_local(chat_env, server), ["hi there"])
    assert result.code == 0, result.err
    assert "stopped at its length limit" in result.out


def test_unknown_window_warning_names_the_real_flag(chat_env: ChatEnv) -> None:
    """A server that says nothing about its window: the warning names --window."""
    chat_env.monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    args = ["chat", "--provider", "llamacpp", "--model", "gguf", "--base-url"]
    result = chat_env.run([*args, "http://127.0.0.1:9/v1"], [])
    assert result.code == 0, result.err
    assert "pass --window" in result.out
    assert "--context-window" not in result.out


def test_a_server_notice_is_shown_once(
    chat_env: ChatEnv, server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that sends no usage is said once, as a Note (with no logging configured, as in
    a terminal, Python's last-resort handler printed the notice's log record too)."""
    monkeypatch.setattr(logging.root, "handlers", [])  # as outside pytest: nothing configured
    server.usage = False
    result = chat_env.run(_local(chat_env, server), ["hi there", "and again"])
    assert result.code == 0, result.err
    assert "Note: vllm at http://127.0.0.1" in result.out
    assert (result.out + result.err).count("sends no token usage") == 1


@pytest.mark.parametrize(
    ("key", "named"),
    [
        ("sk-bad\nnewline", "a line break at character 7 of 14"),
        ("clé-é", "'é' (U+00E9, not ASCII) at character 3 of 5"),
        ("sk-trailing ", "a space at character 12 of 12"),
    ],
    ids=["newline", "non-ascii", "trailing-space"],
)
def test_a_key_that_cannot_be_sent_is_named_before_anything_is_sent(
    chat_env: ChatEnv, server: _Server, key: str, named: str
) -> None:
    """A key an HTTP header cannot carry is refused at start, naming the variable and the
    character (never the key), exit 2, nothing sent (a line break was reported as "could not
    reach the server", a non-ASCII letter as a malformed response)."""
    chat_env.monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", key)
    result = chat_env.run([*_local(chat_env, server), "--window", "8k"], ["hi there"])
    assert result.code == 2
    assert f"Error: OPENAI_COMPATIBLE_API_KEY holds {named}" in result.err
    assert "printable ASCII" in result.err
    assert key.strip() not in result.err + result.out
    assert server.requests == []


class _Silent(ThreadingHTTPServer):
    """A server that takes every request and answers none until the test ends."""

    daemon_threads = True
    released: threading.Event
    posts: int


class _SilentHandler(BaseHTTPRequestHandler):
    server: _Silent

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean."""

    def do_POST(self) -> None:
        self.server.posts += 1
        self.server.released.wait()


class _AtOnce:
    """A ``threading.Timer`` that runs its function when started (the waiting notice, shown
    without waiting for it)."""

    def __init__(self, interval: float, function: Any) -> None:
        self.function = function
        self.daemon = False

    def start(self) -> None:
        self.function()

    def cancel(self) -> None:
        """Nothing is pending."""


def test_a_server_that_never_answers_is_waited_for_as_long_as_it_says(
    chat_env: ChatEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the server is silent the chat says how long it waits and that Ctrl-C cancels;
    --timeout bounds each try, and after the tries the turn fails and the chat goes on (it
    waited silently for the SDK's 10 minutes, three times over)."""
    from autocompact.cli import repl

    monkeypatch.setattr(repl, "_Timer", _AtOnce)
    srv = _Silent(("127.0.0.1", 0), _SilentHandler)
    srv.released, srv.posts = threading.Event(), 0
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        chat_env.monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        base_url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        args = ["chat", "--provider", "openai-compatible", "--base-url", base_url, "--model", "m"]
        result = chat_env.run([*args, "--window", "8k", "--timeout", "0.2"], ["hi", "/context"])
    finally:
        srv.released.set()
        srv.shutdown()
        srv.server_close()
    assert result.code == 0, result.err
    assert (
        "Still waiting for the server (15 s so far). Each try waits up to 0.2 s (--timeout) and "
        "a request that times out is tried 3 times; Ctrl-C cancels this turn."
    ) in result.out
    assert "Error: the request timed out" in result.out
    assert "The server sent nothing for 0.2 s, 3 times" in result.out
    assert "Your message was not added to the conversation" in result.out
    assert "Current           0 of 8K" in result.out  # the chat went on, the history as it was
    assert srv.posts == 3


def test_timeout_must_be_a_number_of_seconds(chat_env: ChatEnv) -> None:
    """--timeout nan, 0 or text is a usage error that says what to write."""
    for bad in ("nan", "0", "soon"):
        with pytest.raises(SystemExit) as exit_info:
            chat_env.run(["chat", "--provider", "fake", "--timeout", bad])
        assert exit_info.value.code == 2
        assert "expected a number of seconds above 0, e.g. 120" in chat_env.capsys.readouterr().err
