"""Issue 17 items 1 and 2: an overflow answered by the real server itself.

The history is ~8.7K tokens by the servers' count while the session believes a 32K window; the
summary is the offline extractive one (Gemma 3 270M is a base model: asked for a summary it
recites the prompt, which the engine refuses), so these tests are about the error, the learned
window and the retry.
"""

from __future__ import annotations

import pytest

from autocompact.chat import ChatSession
from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.service import CompressionService
from autocompact.content import Message
from autocompact.errors import ContextOverflowError
from autocompact.events import CompactionSucceeded, Event, WindowLearned
from autocompact.providers.base import ChatRequest

from .conftest import N_CTX, LlamaServers
from .helpers import MAIN_CAP, provider_for, turn_text

pytestmark = pytest.mark.usefixtures("no_http_proxy")


def _overflowing_history() -> list[Message]:
    history: list[Message] = []
    for i in range(24):  # ~8.7K tokens by the servers' count, ~8K by the plain estimate
        history += [Message.user(turn_text(i)), Message.model(f"Noted, item {i}.")]
    return history


def test_llama_server_overflow_teaches_the_window(llama_servers: LlamaServers) -> None:
    """Item 1: llama-server's ``exceed_context_size_error`` is a too-long error: the session
    learns ``n_ctx`` as its window, compacts (reactively) and the retry is answered."""
    server = llama_servers.cpp
    events: list[Event] = []
    session = ChatSession(
        provider_for(server),
        context_window=32_768,  # believed, wrong: the server serves 8K
        history=_overflowing_history(),
        max_output_tokens=MAIN_CAP,
        compression_service=CompressionService(None, summarizer=extractive_summary),
        summary_target_tokens=400,
        hooks=(events.append,),
    )
    mark = server.proxy.mark()
    session.send(Message.user("Which item mentioned the warehouse scanner first?"))
    chats = [e for e in server.proxy.since(mark) if e.is_chat]
    assert [e.status for e in chats] == [400, 200]
    error = chats[0].reply()["error"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == N_CTX
    assert error["n_prompt_tokens"] > N_CTX
    assert session.context_window == N_CTX
    learned = [e for e in events if isinstance(e, WindowLearned)]
    assert [(e.previous, e.context_window) for e in learned] == [(32_768, N_CTX)]
    (compaction,) = [e for e in events if isinstance(e, CompactionSucceeded)]
    assert compaction.info.trigger.value == "reactive"
    assert server.count(chats[1].request) + MAIN_CAP <= N_CTX


def test_empty_stream_is_an_error_not_a_reply(llama_servers: LlamaServers) -> None:
    """Item 2: llama_cpp.server answers an oversize streamed request with 200 and no events.
    The adapter asks once more (not streamed, 1 token), gets the overflow error, and the
    session learns the window, compacts and retries; nothing empty is kept."""
    server = llama_servers.python
    events: list[Event] = []
    session = ChatSession(
        provider_for(server),
        context_window=32_768,
        history=_overflowing_history(),
        max_output_tokens=MAIN_CAP,
        compression_service=CompressionService(None, summarizer=extractive_summary),
        summary_target_tokens=400,
        hooks=(events.append,),
    )
    before = len(session.history)
    mark = server.proxy.mark()
    reply = ""
    for event in session.send_stream(Message.user("Which item mentioned the scanner?")):
        reply += getattr(event, "text", "") or ""
    chats = [e for e in server.proxy.since(mark) if e.is_chat]
    empty, probe, retry = chats
    assert (empty.streamed, empty.status, empty.body.strip()) == (True, 200, b"")
    assert (probe.streamed, probe.status, probe.request["max_tokens"]) == (False, 400, 1)
    assert probe.reply()["error"]["code"] == "context_length_exceeded"
    assert retry.streamed
    assert retry.status == 200
    assert retry.text()
    assert session.context_window == N_CTX
    assert any(isinstance(e, WindowLearned) for e in events)
    assert session.history[-1].text == reply
    assert len(session.history) < before  # compacted, then the new turn was added


def test_empty_stream_alone_raises(llama_servers: LlamaServers) -> None:
    """Item 2, the adapter alone: an empty stream is never an empty reply."""
    server = llama_servers.python
    provider = provider_for(server)
    request = ChatRequest(messages=tuple(_overflowing_history()), max_output_tokens=MAIN_CAP)
    with pytest.raises(ContextOverflowError) as raised:
        list(provider.stream(request))
    assert raised.value.context_window == N_CTX
