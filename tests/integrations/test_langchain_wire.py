"""The summary side query through real LangChain chat model classes (ChatAnthropic, ChatOpenAI)
against a local server on 127.0.0.1: thinking off and the 20K cap as each provider spells them,
and each provider's "too long" error recognized as an overflow."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_openai")

import langchain_anthropic as anthropic_chat
import langchain_openai as openai_chat

from autocompact.content import Message
from autocompact.errors import ContextOverflowError
from autocompact.integrations.langchain import LangChainProvider
from autocompact.providers.base import ChatRequest

ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "<state_snapshot>goal</state_snapshot>"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 120, "output_tokens": 9},
}
OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-5",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "<state_snapshot>goal</state_snapshot>"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
}


class Server:
    """A local HTTP server that records each path and JSON body and answers from a script
    (``replies``, in order), else with ``reply(path, body)`` and status 200."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.replies: list[tuple[int, dict[str, Any]]] = []
        self.reply: Callable[[str, dict[str, Any]], dict[str, Any]] = lambda path, body: {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                sent = json.loads(self.rfile.read(length) or b"{}")
                outer.bodies.append((self.path, sent))
                status, body = (
                    outer.replies.pop(0) if outer.replies else (200, outer.reply(self.path, sent))
                )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    """A recording server on 127.0.0.1, shut down after the test."""
    srv = Server()
    yield srv
    srv.close()


def side_query() -> ChatRequest:
    """The engine's summary request shape: thinking off, the 20K output cap."""
    return ChatRequest(
        messages=(Message.user("summarize this"),),
        system_instruction="You compress conversations.",
        max_output_tokens=20_000,
        thinking=False,
        purpose="side_query",
    )


def test_chat_anthropic_summary_has_thinking_disabled_and_max_tokens_20k(server: Server) -> None:
    """ChatAnthropic with thinking on and a 64K cap sends the summary with thinking disabled and
    max_tokens 20000; the agent's model object keeps its settings."""
    model = anthropic_chat.ChatAnthropic(
        model="claude-sonnet-4-5",
        base_url=server.url,
        api_key="test-key",
        max_tokens=64_000,
        thinking={"type": "enabled", "budget_tokens": 8_000},
        max_retries=0,
    )
    server.replies.append((200, ANTHROPIC_REPLY))
    completion = LangChainProvider(model).complete(side_query())
    path, body = server.bodies[0]
    assert path.endswith("/messages")
    assert body["max_tokens"] == 20_000
    assert body["thinking"] == {"type": "disabled"}
    assert completion.text == "<state_snapshot>goal</state_snapshot>"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 120
    assert model.max_tokens == 64_000
    assert model.thinking == {"type": "enabled", "budget_tokens": 8_000}


@pytest.mark.parametrize("effort", [None, "high"], ids=["no-effort", "user-effort-high"])
@pytest.mark.parametrize(
    ("model", "thinking", "sent_effort", "cap"),
    [
        # Refuses "disabled" and thinks only when asked: the field is left out, no effort.
        ("claude-opus-4-7", None, None, 20_000),
        # Cannot turn thinking off: the lowest effort, and room for the thinking.
        ("claude-fable-5-2", None, "low", 28_192),
        # Refuses "disabled"; "between_tools" turns thinking off.
        ("claude-sonnet-5-5", {"type": "between_tools"}, None, 20_000),
    ],
    ids=["opus-4.7", "fable-5.2", "sonnet-5.5"],
)
def test_chat_anthropic_summary_on_models_that_refuse_disabled(
    server: Server,
    effort: str | None,
    model: str,
    thinking: dict[str, Any] | None,
    sent_effort: str | None,
    cap: int,
) -> None:
    """Models that refuse thinking "disabled" with a 400 get the summary request the Anthropic
    adapter sends them, through the real ChatAnthropic, whatever effort the user set."""
    chat = anthropic_chat.ChatAnthropic(
        model=model,
        base_url=server.url,
        api_key="test-key",
        max_tokens=64_000,
        max_retries=0,
        **({"reasoning_effort": effort} if effort else {}),
    )
    server.replies.append((200, ANTHROPIC_REPLY))
    completion = LangChainProvider(chat).complete(side_query())
    _, body = server.bodies[0]
    assert body["max_tokens"] == cap
    assert body.get("thinking") == thinking
    # The user's effort is lowered (xhigh and max are refused with thinking off on some).
    expected = "low" if effort and model != "claude-opus-4-7" else sent_effort
    assert (body.get("output_config") or {}).get("effort") == expected
    assert completion.text == "<state_snapshot>goal</state_snapshot>"
    assert chat.max_tokens == 64_000  # the agent's model is unchanged


def test_chat_openai_summary_has_the_cap_and_low_effort(server: Server) -> None:
    """ChatOpenAI sends the summary with max_completion_tokens 20000 and the lowest effort."""
    model = openai_chat.ChatOpenAI(
        model="gpt-5",
        base_url=server.url,
        api_key="test-key",
        reasoning_effort="high",
        max_retries=0,
    )
    server.replies.append((200, OPENAI_REPLY))
    LangChainProvider(model).complete(side_query())
    path, body = server.bodies[0]
    assert path.endswith("/chat/completions")
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 20_000
    assert body["reasoning_effort"] == "low"


@pytest.mark.parametrize(
    ("make", "status", "error"),
    [
        pytest.param(
            lambda url: anthropic_chat.ChatAnthropic(
                model="claude-sonnet-4-5", base_url=url, api_key="k", max_retries=0
            ),
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
            id="anthropic",
        ),
        pytest.param(
            lambda url: openai_chat.ChatOpenAI(
                model="gpt-5", base_url=url, api_key="k", max_retries=0
            ),
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
            id="openai",
        ),
    ],
)
def test_provider_too_long_errors_are_overflows(
    server: Server, make: Any, status: int, error: dict[str, Any]
) -> None:
    """Each provider's "too long" rejection becomes autocompact's ContextOverflowError."""
    server.replies.append((status, error))
    with pytest.raises(ContextOverflowError):
        LangChainProvider(make(server.url)).complete(side_query())
