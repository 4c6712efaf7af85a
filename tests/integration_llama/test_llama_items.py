"""Issue 17, item by item, against the real llama.cpp servers (the quick ones).

Items 1 and 2 are in ``test_llama_overflow.py``, the CLI in ``test_llama_cli.py``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from autocompact.chat import ChatSession
from autocompact.content import Message, TextPart
from autocompact.errors import ContextOverflowError, ProviderConnectionError
from autocompact.limits import query_server_limits
from autocompact.providers.base import ChatRequest
from autocompact.providers.registry import get_provider

from .conftest import N_CTX, LlamaServer, LlamaServers, _free_port, http_json
from .helpers import MAIN_CAP, provider_for

pytestmark = pytest.mark.usefixtures("no_http_proxy")


def _servers(servers: LlamaServers) -> list[LlamaServer]:
    return servers.all()


@pytest.mark.parametrize("kind", ["cpp", "python"])
def test_our_count_is_the_servers_count(llama_servers: LlamaServers, kind: str) -> None:
    """The suite's measure ("by the server's own count") agrees with the server's usage."""
    server: LlamaServer = getattr(llama_servers, kind)
    provider = provider_for(server)
    mark = server.proxy.mark()
    provider.complete(
        ChatRequest(
            messages=(
                Message.user("The build broke after the upgrade."),
                Message.model("Which step failed?"),
                Message.user("The link step; it cannot find libssl."),
            ),
            system_instruction="Answer in one sentence.",
            max_output_tokens=MAIN_CAP,
        )
    )
    (exchange,) = [e for e in server.proxy.since(mark) if e.is_chat]
    assert exchange.status == 200
    reported = exchange.usage_prompt_tokens()
    assert reported is not None
    assert reported > 20
    assert server.count(exchange.request) == reported


def test_text_is_sent_as_one_string(llama_servers: LlamaServers) -> None:
    """Item 4: text-only content goes as one string, so neither server loses or rejects it.

    The control: what ``llama_cpp.server`` does with lists (a 500 for an assistant message, a
    user message silently dropped), asked directly.
    """
    py = llama_servers.python
    history = (
        Message.user("Remember the code word: PELICAN."),
        Message.model("Noted.", "PELICAN it is."),
    )
    pending = Message.user("What was", "the code word?")
    assert len(pending.parts) == 2
    assert all(isinstance(p, TextPart) for p in pending.parts)
    for server in _servers(llama_servers):
        session = ChatSession(
            provider_for(server),
            context_window=N_CTX,
            history=history,
            max_output_tokens=MAIN_CAP,
        )
        mark = server.proxy.mark()
        session.send(pending)
        (exchange,) = [e for e in server.proxy.since(mark) if e.is_chat]
        assert exchange.status == 200, exchange.body[:300]
        sent = exchange.request["messages"]
        assert [m["content"] for m in sent] == [
            "Remember the code word: PELICAN.",
            "Noted.\n\nPELICAN it is.",
            "What was\n\nthe code word?",
        ]
        prompt = server.render(exchange.request)
        assert "PELICAN it is." in prompt
        assert "the code word?" in prompt
        assert exchange.usage_prompt_tokens() == server.tokenize(prompt)

    as_lists = [
        {"role": "user", "content": "Remember the code word: PELICAN."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        {"role": "user", "content": "What was the code word?"},
    ]
    req = urllib.request.Request(
        py.direct + "/v1/chat/completions",
        data=json.dumps({"messages": as_lists, "max_tokens": 1}).encode(),
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as rejected:
        opener.open(req, timeout=120)
    assert rejected.value.code == 500
    user_list = [{"role": "user", "content": [{"type": "text", "text": "What was the code?"}]}]
    as_string = [{"role": "user", "content": "What was the code?"}]
    dropped = http_json(
        py.direct + "/v1/chat/completions", {"messages": user_list, "max_tokens": 1}
    )
    kept = http_json(py.direct + "/v1/chat/completions", {"messages": as_string, "max_tokens": 1})
    assert dropped["usage"]["prompt_tokens"] < kept["usage"]["prompt_tokens"]


def test_window_discovery_per_server(llama_servers: LlamaServers) -> None:
    """Item 6: llama-server states its window in ``/props``; llama_cpp.server nowhere."""
    cpp, py = llama_servers.cpp, llama_servers.python
    mark = cpp.proxy.mark()
    limits = query_server_limits(cpp.base_url, cpp.model, kind="llamacpp", timeout=30)
    assert limits is not None
    assert (limits.context_window, limits.source) == (N_CTX, "server")
    asked = [(e.method, e.path, e.status) for e in cpp.proxy.since(mark)]
    assert asked[0] == ("GET", "/props", 200)

    mark = py.proxy.mark()
    assert query_server_limits(py.base_url, py.model, kind="llamacpp", timeout=30) is None
    asked = [(e.method, e.path, e.status) for e in py.proxy.since(mark)]
    assert ("GET", "/props", 404) in asked
    models = [e for e in py.proxy.since(mark) if e.path == "/v1/models"]
    assert models
    assert models[0].status == 200
    assert "n_ctx" not in models[0].body.decode()


def test_streams_without_usage_are_counted_by_the_server(llama_servers: LlamaServers) -> None:
    """Item 8: llama_cpp.server ignores ``stream_options``: the adapter says so once and counts
    the prompt with the server's tokenize endpoint; llama-server's streams carry usage."""
    for server in _servers(llama_servers):
        provider = provider_for(server)
        session = ChatSession(provider, context_window=N_CTX, max_output_tokens=MAIN_CAP)
        mark = server.proxy.mark()
        for text in ("The deploy failed on step three.", "It was the database migration."):
            list(session.send_stream(Message.user(text)))
        exchanges = server.proxy.since(mark)
        chats = [e for e in exchanges if e.is_chat]
        assert [e.status for e in chats] == [200, 200]
        assert all(e.request["stream_options"] == {"include_usage": True} for e in chats)
        tokenize = [e for e in exchanges if "tokenize" in e.path]
        notices = provider.take_notices()  # type: ignore[attr-defined]
        server_count = server.count(chats[-1].request)
        if server.kind == "llama-server":
            assert chats[-1].usage_prompt_tokens() == server_count
            assert tokenize == []
            assert notices == []
        else:
            assert chats[-1].usage_prompt_tokens() is None  # the server sent no usage
            assert {e.path for e in tokenize} == {"/extras/tokenize/count"}
            assert len(notices) == 1, notices
            assert "sends no token usage in streamed replies" in notices[0]
            assert "/extras/tokenize/count" in notices[0]
            # the adapter's count errs on the safe side of the server's own, and not by much
            assert server_count <= session.last_prompt_token_count <= server_count + 30


def test_errors_name_the_profile_and_the_url(llama_servers: LlamaServers) -> None:
    """Item 9: a connection error names the URL tried, errors name ``llamacpp``; an overflow
    is a ContextOverflowError with the server's window and count."""
    closed = f"http://127.0.0.1:{_free_port()}/v1"
    dead = get_provider("llamacpp:gemma3-270m", base_url=closed, max_retries=0, timeout=30)
    with pytest.raises(ProviderConnectionError) as refused:
        dead.complete(ChatRequest(messages=(Message.user("hi"),), max_output_tokens=1))
    assert closed in str(refused.value)
    assert "llamacpp" in str(refused.value)

    big = " ".join(f"word{i}" for i in range(9000))
    for server in _servers(llama_servers):
        with pytest.raises(ContextOverflowError) as too_long:
            provider_for(server).complete(
                ChatRequest(messages=(Message.user(big),), max_output_tokens=1)
            )
        assert too_long.value.context_window == N_CTX
        assert too_long.value.prompt_tokens is not None
        assert too_long.value.prompt_tokens > N_CTX
        assert "llamacpp" in str(too_long.value)
