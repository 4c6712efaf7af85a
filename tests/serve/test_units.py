"""The proxy's pure parts: identity signals, hashing and splicing, signed blocks, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autocompact.content import Message, TextPart, ThinkingPart
from autocompact.serve.anthropic_messages import ANTHROPIC_MESSAGES, THINKING_OMITTED
from autocompact.serve.identity import identify
from autocompact.serve.openai_chat import OPENAI_CHAT, pending_start
from autocompact.serve.responses import RESPONSES
from autocompact.serve.substitution import Record, best_record, build_replacement
from autocompact.serve.wire import chain_hashes, splice_body

FIRST = [{"role": "user", "content": "project instructions"}]
OTHER_FIRST = [{"role": "user", "content": "sub-agent task"}]


@pytest.mark.parametrize(
    ("headers", "body", "signal"),
    [
        ({"x-autocompact-conversation": "c1", "x-claude-code-session-id": "s"}, {}, "header"),
        ({"x-claude-code-session-id": "s", "session_id": "t"}, {}, "claude-code"),
        ({"session_id": "t"}, {"metadata": {"user_id": "u"}}, "codex"),
        ({"session-id": "t"}, {}, "codex"),
        ({"conversation_id": "t"}, {}, "codex"),
        ({}, {"metadata": {"user_id": "u"}, "prompt_cache_key": "k"}, "metadata.user_id"),
        ({}, {"prompt_cache_key": "k", "conversation": "c"}, "prompt_cache_key"),
        ({}, {"conversation": {"id": "conv_1"}}, "conversation"),
        ({}, {"user": "someone"}, "user"),
        ({}, {}, "content"),
    ],
    ids=["explicit", "claude-code", "codex", "codex-dash", "codex-conv", "user_id", "cache-key",
         "conversation", "user", "content"],
)  # fmt: skip
def test_identity_signal_order(
    headers: dict[str, str], body: dict[str, object], signal: str
) -> None:
    """Each signal names the conversation, in the documented order."""
    assert identify(headers, body, FIRST, "p").signal == signal


def test_sub_agents_are_conversations_of_their_own() -> None:
    """Two requests with one agent session id but different first messages (a sub-agent) are
    two conversations; the explicit header is used as given."""
    headers = {"x-claude-code-session-id": "secret-session-uuid"}
    assert identify(headers, {}, FIRST, "p") != identify(headers, {}, OTHER_FIRST, "p")
    explicit = {"x-autocompact-conversation": "c"}
    assert identify(explicit, {}, FIRST, "p") == identify(explicit, {}, OTHER_FIRST, "p")
    assert "secret-session-uuid" not in identify(headers, {}, FIRST, "p").session_id


def test_chain_ignores_cache_control_and_key_order() -> None:
    """The hash chain ignores moving cache_control markers and key order, not content."""
    a = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    b = [{"content": [{"text": "x", "type": "text", "cache_control": {"type": "ephemeral"}}],
          "role": "user"}]  # fmt: skip
    assert chain_hashes(a) == chain_hashes(b)
    assert chain_hashes(a) != chain_hashes([{"role": "user", "content": "y"}])
    longer = chain_hashes(a + FIRST)
    assert longer[0] == chain_hashes(a)[0]


def test_splice_writes_stored_bytes_verbatim() -> None:
    """The stored replacement's bytes appear as stored; the result is the same every time."""
    stored = b'[{"role": "user",   "content": "summary"}]'
    body = {"model": "m", "messages": [], "stream": True}
    head = [{"role": "system", "content": "s"}]
    rest = [{"role": "user", "content": "now"}]
    out = splice_body(body, "messages", stored, rest, head=head)
    assert b'{"role": "user",   "content": "summary"}' in out
    assert json.loads(out)["messages"] == [head[0], {"role": "user", "content": "summary"}, rest[0]]
    assert list(json.loads(out)) == ["model", "messages", "stream"]
    assert out == splice_body(body, "messages", stored, rest, head=head)


def test_best_record_is_the_longest_matching_prefix() -> None:
    """The longest record whose prefix hash matches wins; none replaces the pending message."""
    msgs = [{"role": "user", "content": str(i)} for i in range(6)]
    hashes = chain_hashes(msgs)
    short = Record(prefix_len=2, prefix_hash=hashes[1], replacement=b"[]")
    long = Record(prefix_len=4, prefix_hash=hashes[3], replacement=b"[]")
    wrong = Record(prefix_len=5, prefix_hash="0" * 32, replacement=b"[]")
    assert best_record([short, long, wrong], hashes, limit=5) is long
    assert best_record([short, long], hashes, limit=3) is short
    assert best_record([long], chain_hashes(msgs[:3]), limit=5) is None


def test_openai_pending_start() -> None:
    """The pending turn is the last user message with the tool results before it."""
    call = {"role": "assistant", "tool_calls": [{"id": "a"}]}
    tool = {"role": "tool", "tool_call_id": "a", "content": "r"}
    user = {"role": "user", "content": "u"}
    assert pending_start([user, call, tool, tool, user]) == 2
    assert pending_start([user, call, tool]) == 2
    assert pending_start([user, {"role": "assistant", "content": "x"}, user]) == 2


def test_signed_thinking_kept_only_when_unchanged() -> None:
    """A thinking block the client sent unchanged keeps its signature; one the client never
    sent so (changed text) is dropped; redacted thinking is kept only as sent."""
    source = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "sig1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "a"},
        ]},
    ]  # fmt: skip
    history = [
        Message(role="user", parts=(TextPart(text="summary"),)),
        Message(role="model", parts=(
            ThinkingPart(text="plan", signature="sig1"),
            ThinkingPart(text="", signature="opaque", redacted=True),
            ThinkingPart(text="plan (edited)", signature="sig1"),
            TextPart(text="a"),
        )),
        Message(role="model", parts=(ThinkingPart(text="other", signature="sig2"),)),
    ]  # fmt: skip
    wire = ANTHROPIC_MESSAGES.to_wire(history, source)
    blocks = wire[1]["content"]
    assert {"type": "thinking", "thinking": "plan", "signature": "sig1"} in blocks
    assert {"type": "redacted_thinking", "data": "opaque"} in blocks
    assert all(b.get("thinking") != "plan (edited)" for b in blocks)
    assert wire[2]["content"] == [{"type": "text", "text": THINKING_OMITTED}]


def test_replacement_reuses_the_clients_tail_bytes() -> None:
    """The kept recent messages are the client's own dicts (unknown fields kept)."""
    source = [
        {"role": "user", "content": "old " * 50},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "recent", "x_field": 1},
        {"role": "assistant", "content": "recent answer", "x_other": [1]},
    ]
    _, converted = OPENAI_CHAT.convert({}, source).system, OPENAI_CHAT.convert({}, source)
    history = [Message(role="user", parts=(TextPart(text="summary"),)),
               Message(role="model", parts=(TextPart(text="ok"),)),
               *converted.messages[2:]]  # fmt: skip
    replacement = json.loads(build_replacement(OPENAI_CHAT, history, source))
    assert replacement[-2:] == source[-2:]
    assert replacement[0]["content"] == "summary" or "summary" in json.dumps(replacement[0])


def test_import_autocompact_does_not_load_the_proxy() -> None:
    """`import autocompact` loads neither autocompact.serve nor its server libraries."""
    code = (
        "import sys, autocompact, autocompact.guard, autocompact.providers\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn')"
        " or m.startswith('autocompact.serve')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_refuses_without_upstream() -> None:
    """`autocompact serve` with no upstream exits 2 with what to give."""
    from autocompact.cli.main import main

    assert main(["serve"]) == 2


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--port", "99999"], "argument --port: expected a port from 1 to 65535"),
        (["--port", "65536"], "argument --port: expected a port from 1 to 65535"),
        (["--log-level", "bogus"], "argument --log-level: expected one of critical"),
        (["--log-level", ""], "argument --log-level: expected one of critical"),
        (["--log-level", "5"], "argument --log-level: expected one of critical"),
        (["--host", ""], "argument --host: '' is not an address to listen on"),
    ],
)
def test_cli_refuses_a_bad_port_or_log_level(
    tmp_path: Path,
    started: list[int],
    capsys: pytest.CaptureFixture[str],
    option: list[str],
    named: str,
) -> None:
    """A port past 65535 or an unknown log level is a usage error naming the option, before
    anything starts (they were "unexpected OverflowError" from the socket's bind and
    "unexpected ValueError" from logging)."""
    from autocompact.cli.main import main

    args = ["serve", "--upstream", "openai=http://127.0.0.1:9/v1"]
    args += ["--store", f"sqlite:///{tmp_path / 'serve.db'}", *option]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    assert named in capsys.readouterr().err
    assert started == []


def test_cli_refuses_a_host_that_does_not_resolve(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    started: list[int],
) -> None:
    """A --host the resolver does not know is a usage error naming --host (uvicorn exited 3
    with "[Errno -2] Name or service not known", naming no option). The resolver is stood in
    for: tests make no name lookups."""
    import socket

    from autocompact.cli.main import main

    def unknown(host: str, *args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    args = ["serve", "--upstream", "openai=http://127.0.0.1:9/v1", "--host", "not a host"]
    with pytest.raises(SystemExit) as info:
        main([*args, "--store", f"sqlite:///{tmp_path / 'serve.db'}"])
    assert info.value.code == 2
    assert "argument --host: 'not a host' is not an address to listen on" in (
        capsys.readouterr().err
    )
    assert started == []


def test_cli_banner_writes_an_ipv6_address_in_brackets(
    tmp_path: Path, started: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--host ::`` is announced as a URL a browser or client takes (``http://[::]:8787``; it
    said ``http://:::8787``)."""
    from autocompact.cli.main import main

    args = ["serve", "--upstream", "openai=http://127.0.0.1:9/v1", "--host", "::"]
    assert main([*args, "--store", f"sqlite:///{tmp_path / 'serve.db'}"]) == 0
    assert "autocompact serve on http://[::]:8787 " in capsys.readouterr().err
    assert len(started) == 1


@pytest.mark.parametrize("store", ["", "  "], ids=["empty", "blank"])
def test_cli_refuses_an_empty_store(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    started: list[int],
    store: str,
) -> None:
    """`serve --store ""` is an error naming --store before anything starts (it served on the
    default serve.db, or $AUTOCOMPACT_STORE, as if --store were not given)."""
    from autocompact.cli.main import main

    monkeypatch.setenv("AUTOCOMPACT_STORE", "sqlite:///never-opened.db")
    args = ["serve", "--upstream", "openai=http://127.0.0.1:9/v1", "--store", store]
    assert main(args) == 2
    assert "--store is empty" in capsys.readouterr().err
    assert started == []


async def test_side_query_retries_with_max_completion_tokens() -> None:
    """An OpenAI upstream that refuses max_tokens gets the summary request once more with
    max_completion_tokens; the client's headers go with both."""
    import httpx

    from autocompact.providers.base import ChatRequest
    from autocompact.serve.upstream import UpstreamProvider

    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append({"body": body, "auth": request.headers.get("authorization")})
        if "max_tokens" in body:
            error = {"message": "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens'."}
            return httpx.Response(400, json={"error": error})
        message = {"role": "assistant", "content": "summary"}
        return httpx.Response(
            200, json={"choices": [{"message": message, "finish_reason": "stop"}]}
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        provider = UpstreamProvider(
            protocol=OPENAI_CHAT, client=client, url="http://upstream/v1/chat/completions",
            headers={"authorization": "Bearer k"}, model="m", timeout=5,
        )  # fmt: skip
        request = ChatRequest(
            messages=(Message(role="user", parts=(TextPart(text="hi"),)),), max_output_tokens=99
        )
        completion = await provider.acomplete(request)
    assert completion.text == "summary"
    assert [s["auth"] for s in seen] == ["Bearer k", "Bearer k"]
    assert seen[1]["body"]["max_completion_tokens"] == 99  # type: ignore[index]


def test_reported_prompt_tokens() -> None:
    """The prompt size is read from each protocol's usage, streams included."""
    from autocompact.serve.protocol import reported_prompt_tokens

    assert reported_prompt_tokens(b'{"usage":{"prompt_tokens": 12,"completion_tokens":3}}') == 12
    anthropic = (
        b'event: message_start\ndata: {"message":{"usage":{"input_tokens":5,'
        b'"cache_creation_input_tokens":7,"cache_read_input_tokens":100}}}\n\n'
        b'event: message_delta\ndata: {"usage":{"output_tokens":3,"input_tokens":5}}\n\n'
    )
    assert reported_prompt_tokens(anthropic) == 112
    assert reported_prompt_tokens(b'{"usage":{"input_tokens":40,"output_tokens":2}}') == 40
    assert reported_prompt_tokens(b"data: [DONE]") is None


def _sse(event: str | None, data: object) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


_TEXT_NAMING_ENDS = "event: message_stop\ndata: [DONE]\nevent: response.completed"


@pytest.mark.parametrize(
    ("protocol", "tail", "ended"),
    [
        (ANTHROPIC_MESSAGES, _sse("message_stop", {"type": "message_stop"}), True),
        (ANTHROPIC_MESSAGES, _sse(None, {"type": "message_stop"}), True),
        (ANTHROPIC_MESSAGES, _sse("error", {"type": "error"}).replace(b"\n", b"\r\n"), True),
        (ANTHROPIC_MESSAGES, _sse("message_delta", {"type": "message_delta"}), False),
        (OPENAI_CHAT, b'data: {"choices": []}\n\ndata: [DONE]\n\n', True),
        (OPENAI_CHAT, b'data: {"choices": []}\n\n', False),
        (RESPONSES, _sse("response.completed", {"type": "response.completed"}), True),
        (RESPONSES, _sse(None, {"type": "response.incomplete"}), True),
        (RESPONSES, _sse("response.output_text.delta", {"type": "x"}), False),
    ],
)
def test_a_streams_closing_event_is_read_from_its_last_bytes(
    protocol: Any, tail: bytes, ended: bool
) -> None:
    """The proxy counts a stream as ended well once its last bytes hold the closing event (a
    client may hang up right after it, before the upstream closes the connection); text that
    names a closing event inside a JSON string is no closing event."""
    assert protocol.stream_ended(tail) is ended
    for event in ("content_block_delta", "response.output_text.delta", None):
        quoted = _sse(event, {"type": "delta", "text": _TEXT_NAMING_ENDS})
        assert protocol.stream_ended(quoted) is False


@pytest.mark.parametrize(
    ("body", "window"),
    [
        (
            b'{"error":{"code":400,"message":"request (9274 tokens) exceeds the available context '
            b'size (8192 tokens), try increasing it","type":"exceed_context_size_error",'
            b'"n_prompt_tokens":9274,"n_ctx":8192}}',
            8192,
        ),
        (
            b'{"error":{"message":"request (9274 tokens) exceeds the available context size (8192 '
            b'tokens)"}}',
            8192,
        ),
        (
            b'{"error":{"message":"This model\'s maximum context length is 128,000 tokens. '
            b'However, your messages resulted in 130000 tokens."}}',
            128000,
        ),
        (
            b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too '
            b'long: 208459 tokens > 200000 maximum"}}',
            200000,
        ),
        (b'{"error":{"message":"Your input exceeds the context window (12345 tokens)."}}', None),
        (b'{"error":{"message":"too long","n_ctx":true}}', None),
        (b"not json", None),
    ],
    ids=["llama-n_ctx", "llama-message", "openai", "anthropic", "size-not-window", "odd", "text"],
)
def test_the_window_an_overflow_error_states(body: bytes, window: int | None) -> None:
    """The window an upstream's "too long" error states is read from llama-server's n_ctx or
    the message; a number that is the request's size, not the window, is not read as one."""
    from autocompact.serve.protocol import stated_window

    assert stated_window(body) == window


@pytest.mark.parametrize(
    ("tokens", "window", "below"),
    [(9_000, 100_000, 8_181), (9_000, 8_000, None), (0, 100_000, None), (1, 100, None)],
    ids=["below-estimate", "window-smaller", "no-estimate", "nothing-left"],
)
def test_the_window_a_too_long_rejection_implies(
    tokens: int, window: int, below: int | None
) -> None:
    """A "too long" rejection says the window is below what the rejected request measured: the
    engine's estimate less the margin, when smaller than the window in use."""
    from autocompact.serve.rejections import window_below

    assert window_below(tokens, window) == below


def test_a_skipped_compaction_is_logged_at_info_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The proxy's engine log says why a started compaction did nothing (at info level: it is
    no failure), so the started compaction does not end silently in the log either."""
    import logging

    from autocompact.compaction import CompressionInfo, CompressionStatus, CompressionTrigger
    from autocompact.events import CompactionSkipped
    from autocompact.serve.engine_log import engine_log

    info = CompressionInfo(
        status=CompressionStatus.NOOP,
        trigger=CompressionTrigger.HARD,
        original_token_count=7_000,
        new_token_count=7_000,
        error="the history is empty",
    )
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    engine_log("c1")(CompactionSkipped(info=info))
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "conversation=c1 compaction skipped (trigger=hard): the history is empty")
    ]
