"""Issue 24: ``autocompact serve`` in front of the real llama-server (C++), 8K window.

An agent-shaped conversation of 40 turns goes through the official ``openai`` SDK pointed at the
proxy (its ``base_url``), the proxy's upstream being llama-server behind the suite's recording
proxy. Each turn the "agent" asks for a file, calls a ``read`` tool and sends its output (about
250 tokens, different every turn) for the model's reply (4 tokens: a base model's replies are
not what this is about), so the raw history grows far past the 8K window. The proxy learns the
window from the server (not passed), and must compact (clearing old tool output first; a
summary side query that Gemma 270M fails is bounded by ``summary_target_tokens`` and counted by
the breaker, the guarantee trims) so that the server never rejects or truncates a request.

Checked, by the server's own count (its ``usage.prompt_tokens``, checked against its
``/tokenize`` of its own rendering for the largest prompt): every request the server got, main
turn or side query, fits the window with its output cap; the proxy compacted (its
``X-Autocompact-Compacted`` header); and every later request the proxy substituted carries the
stored replacement byte for byte (the recording proxy keeps the bytes the server got).

Prompt processing dominates the time (one thread, 50-100 tokens a second): the substitution
keeps the prefix stable between compactions, so the server's prompt cache serves it and each
turn costs only its new tokens. The progress goes to ``serve-session.log`` next to the server
logs.

A short stateless Responses conversation goes to llama-server's own ``/v1/responses`` too: what
the proxy writes when it compacts is a form that server accepts. And its ``/v1/messages`` as an
Anthropic upstream, whose window the proxy learns from the server's one rejection; and a trimmed
request goes to ``llama_cpp.server``, which reads text contents only as strings.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import N_CTX, REQUEST_TIMEOUT, Exchange, LlamaServers
from .helpers import turn_text

pytestmark = pytest.mark.usefixtures("no_http_proxy")

TURNS = 40
REPLY_CAP = 4
TOOL_SENTENCES = 9
"""About 250 tokens of tool output a turn: 40 turns are some 11K tokens of raw history."""
SUMMARY_TARGET = 48
"""The summary's cap: Gemma 270M runs on to any cap, so a failed summary stays short."""


def _small_window(upstream: str, tmp_path: Path) -> Any:
    """A proxy's configuration for an OpenAI-compatible ``upstream`` at a 4K window (a
    compaction within a few turns), its state in a fresh SQLite file."""
    from autocompact.serve import ServeConfig

    return ServeConfig(
        upstreams={"openai": upstream},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        context_window=4096,
        summary_target_tokens=SUMMARY_TARGET,
        timeout=REQUEST_TIMEOUT,
        side_query_timeout=REQUEST_TIMEOUT,
    )


def _records(store: Any) -> list[bytes]:
    """Every stored replacement, in the order written."""
    out = []
    for listing in store.list_sessions():
        for entry in store.entries(listing.session_id):
            if entry.turn_id and entry.turn_id.startswith("sub:"):
                text = entry.messages[0].parts[0].text
                out.append(json.loads(text)["replacement"].encode())
    return out


def test_forty_turns_through_the_proxy_never_rejected(
    llama_servers: LlamaServers, tmp_path: Path
) -> None:
    """40 agent turns through the proxy over llama-server: compacted, substituted byte for
    byte, and no request over the 8K window by the server's own count, none rejected."""
    import openai

    from autocompact.serve import ServeApp, ServeConfig
    from autocompact.serve.threaded import serve_in_thread

    server = llama_servers.cpp
    start = time.monotonic()
    progress = server.log.with_name("serve-session.log")
    config = ServeConfig(
        upstreams={"openai": server.base_url},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        summary_target_tokens=SUMMARY_TARGET,
        keep_share=0.7,
        timeout=REQUEST_TIMEOUT,
        side_query_timeout=REQUEST_TIMEOUT,
    )
    app = ServeApp(config)
    mark = server.proxy.mark()
    messages: list[dict[str, Any]] = []
    turns: list[tuple[str, list[Exchange]]] = []  # the proxy's action, the server's exchanges
    try:
        with serve_in_thread(app.asgi) as url:
            client = openai.OpenAI(
                base_url=url + "/v1", api_key="none", max_retries=0, timeout=REQUEST_TIMEOUT
            )
            for i in range(TURNS):
                output = turn_text(i, sentences=TOOL_SENTENCES)
                call = {"id": f"call_{i}", "type": "function"}
                call["function"] = {"name": "read", "arguments": json.dumps({"path": f"f{i}.txt"})}
                messages += [
                    {"role": "user", "content": f"Turn {i}: read f{i}.txt, then say one word."},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"call_{i}", "content": output},
                ]
                before = server.proxy.mark()
                raw = client.chat.completions.with_raw_response.create(
                    model=server.model, messages=messages, max_tokens=REPLY_CAP
                )
                reply = raw.parse()
                action = raw.headers["x-autocompact-action"]
                turns.append((action, server.proxy.since(before)))
                messages.append(
                    {"role": "assistant", "content": reply.choices[0].message.content or "."}
                )
                with progress.open("a") as log:
                    log.write(
                        f"turn {i}: {action} compacted={raw.headers['x-autocompact-compacted']} "
                        f"tier={raw.headers.get('x-autocompact-tier')} "
                        f"side_queries={raw.headers.get('x-autocompact-side-queries', '0')} "
                        f"prompt={reply.usage.prompt_tokens if reply.usage else '?'} "
                        f"t={time.monotonic() - start:.0f}s\n"
                    )
        records = _records(app.store)
    finally:
        app.store.close()
    exchanges = [e for e in server.proxy.since(mark) if e.is_chat]

    # Never rejected, never over the window (prompt and output cap) by the server's own count.
    assert [e.status for e in exchanges] == [200] * len(exchanges)
    counts = []
    for exchange in exchanges:
        prompt = exchange.usage_prompt_tokens()
        assert prompt is not None
        cap = int(exchange.request.get("max_tokens") or 0)
        assert cap > 0
        assert prompt + cap <= N_CTX, (prompt, cap)
        counts.append(prompt)
    largest = exchanges[counts.index(max(counts))]
    assert server.count(largest.request) == max(counts)  # usage is the server's own count

    # The raw history grew far past the window; the proxy compacted and replayed.
    raw_tokens = server.count({"messages": messages})
    assert raw_tokens > 1.25 * N_CTX, raw_tokens
    actions = [action for action, _ in turns]
    assert "compacted" in actions, actions
    assert records, "no compaction was stored"
    first = actions.index("compacted")
    later = [(a, ex) for a, ex in turns[first + 1 :] if a == "substituted"]
    assert later, actions
    for _, seen in later:
        sent = [e for e in seen if e.is_chat][-1]  # the main request (side queries come first)
        assert any(r[1:-1] in sent.raw for r in records)  # the stored bytes, spliced verbatim
    # A new compaction is sent with its own record's bytes too.
    for action, seen in turns:
        if action == "compacted":
            assert any(r[1:-1] in [e for e in seen if e.is_chat][-1].raw for r in records)
    with progress.open("a") as log:
        log.write(f"done in {time.monotonic() - start:.0f}s, raw {raw_tokens} tokens; {actions}\n")


def test_responses_compacted_request_is_accepted(
    llama_servers: LlamaServers, tmp_path: Path
) -> None:
    """A stateless Responses conversation through the proxy to llama-server's /v1/responses
    (a 4K window given, so it compacts within a few turns): the compacted request and the
    substituted ones after it are accepted. llama-server refuses an assistant message item
    without ``"type": "message"`` and a reasoning item without its ``content``, which is how
    the proxy used to write the ones it rewrote."""
    import openai

    from autocompact.serve import ServeApp
    from autocompact.serve.threaded import serve_in_thread

    server = llama_servers.cpp
    app = ServeApp(_small_window(server.base_url, tmp_path))
    items: list[dict[str, Any]] = []
    seen: list[tuple[int, str]] = []
    try:
        with serve_in_thread(app.asgi) as url:
            client = openai.OpenAI(
                base_url=url + "/v1", api_key="none", max_retries=0, timeout=REQUEST_TIMEOUT
            )
            for i in range(12):
                items += [
                    {"type": "message", "role": "user", "content": f"Turn {i}: read f{i}.txt"},
                    # as llama-server writes a reasoning model's thinking
                    {"id": f"rs_{i}", "summary": [], "type": "reasoning",
                     "content": [{"text": f"I read f{i}.txt.", "type": "reasoning_text"}],
                     "encrypted_content": "", "status": "completed"},
                    {"type": "function_call", "call_id": f"call_{i}", "name": "read",
                     "arguments": json.dumps({"path": f"f{i}.txt"})},
                    {"type": "function_call_output", "call_id": f"call_{i}",
                     "output": turn_text(i, sentences=TOOL_SENTENCES)},
                ]  # fmt: skip
                try:
                    raw = client.responses.with_raw_response.create(
                        model=server.model,
                        input=items,  # type: ignore[arg-type]
                        max_output_tokens=REPLY_CAP,
                    )
                except openai.APIStatusError as exc:
                    seen.append(
                        (exc.status_code, str(exc.response.headers.get("x-autocompact-action")))
                    )
                    break
                seen.append((raw.http_response.status_code, raw.headers["x-autocompact-action"]))
                text = raw.parse().output_text or "."
                items.append(
                    {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": text}]}
                )  # fmt: skip
    finally:
        app.store.close()
    assert all(status == 200 for status, _ in seen), seen
    actions = [action for _, action in seen]
    assert "compacted" in actions, actions
    assert "substituted" in actions[actions.index("compacted") :], actions


def test_window_stated_in_a_rejection_is_learned(
    llama_servers: LlamaServers, tmp_path: Path
) -> None:
    """llama-server's Anthropic endpoint behind the proxy: the proxy does not ask an Anthropic
    upstream for its window and assumes 32,768; a request over the server's 8,192 is rejected
    with its ``n_ctx``, which the proxy believes from then on: the request is planned again on
    it and accepted (trimmed under it), and the next one is never rejected."""
    import anthropic

    from autocompact.serve import ServeApp, ServeConfig
    from autocompact.serve.threaded import serve_in_thread

    server = llama_servers.cpp
    config = ServeConfig(
        upstreams={"anthropic": f"http://127.0.0.1:{server.proxy.port}"},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        summary_target_tokens=SUMMARY_TARGET,
        timeout=REQUEST_TIMEOUT,
        side_query_timeout=REQUEST_TIMEOUT,
    )
    app = ServeApp(config)
    mark = server.proxy.mark()
    messages: list[dict[str, Any]] = []
    for i in range(30):
        messages += [
            {"role": "user", "content": turn_text(i, sentences=12)},
            {"role": "assistant", "content": "ok"},
        ]
    actions = []
    try:
        with serve_in_thread(app.asgi) as url:
            client = anthropic.Anthropic(
                base_url=url, api_key="none", max_retries=0, timeout=REQUEST_TIMEOUT
            )
            for last in ("Now answer.", "And again."):
                messages.append({"role": "user", "content": last})
                raw = client.messages.with_raw_response.create(
                    model=server.model, messages=messages, max_tokens=REPLY_CAP
                )
                actions.append(raw.headers["x-autocompact-action"])
                messages.append({"role": "assistant", "content": "ok"})
    finally:
        app.store.close()
    statuses = [e.status for e in server.proxy.since(mark) if e.path.startswith("/v1/messages")]
    assert statuses.count(400) == 1, (statuses, actions)  # the one rejection it learnt from
    assert app.windows.stated("anthropic", server.model) == N_CTX


def test_trimmed_request_is_accepted_by_llama_cpp_server(
    llama_servers: LlamaServers, tmp_path: Path
) -> None:
    """A request the proxy trims (a 4K window given; Gemma's summary fails at its small cap)
    goes to llama_cpp.server, which takes a text content only as a string: the note of what
    was left out, written as an assistant message of two text parts, went as a list and the
    server answered 500."""
    import openai

    from autocompact.serve import ServeApp
    from autocompact.serve.threaded import serve_in_thread

    server = llama_servers.python
    app = ServeApp(_small_window(server.base_url, tmp_path))
    messages: list[dict[str, Any]] = []
    for i in range(10):
        messages += [
            {"role": "user", "content": turn_text(i, sentences=12)},
            {"role": "assistant", "content": "ok"},
        ]
    messages.append({"role": "user", "content": "Now answer."})
    try:
        with serve_in_thread(app.asgi) as url:
            client = openai.OpenAI(
                base_url=url + "/v1", api_key="none", max_retries=0, timeout=REQUEST_TIMEOUT
            )
            raw = client.chat.completions.with_raw_response.create(
                model=server.model, messages=messages, max_tokens=REPLY_CAP
            )
    finally:
        app.store.close()
    assert raw.headers["x-autocompact-action"] in ("trimmed", "compacted")
    sent = [e for e in server.proxy.exchanges if e.is_chat][-1]
    assert sent.status == 200
    assert all(isinstance(m["content"], str) for m in sent.request["messages"])
