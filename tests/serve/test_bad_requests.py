"""Requests a client may send that the proxy once failed on with a 500 (found by a fuzzer,
2026-12-06): each is now forwarded or answered in the protocol's error shape, and nothing the
client sent is lost."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx
import pytest

from autocompact.content import Message
from autocompact.errors import MalformedResponseError, ProviderTimeoutError
from autocompact.providers.base import ChatRequest
from autocompact.serve import planner as planner_module
from autocompact.serve.anthropic_messages import ANTHROPIC_MESSAGES
from autocompact.serve.openai_chat import OPENAI_CHAT
from autocompact.serve.responses import RESPONSES as RESPONSES_PROTOCOL
from autocompact.serve.upstream import UpstreamProvider

from .conftest import Proxy
from .test_compaction import _long_anthropic, filler

CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
SURROGATE = '{"role": "user", "content": "hi \\ud800"}'  # a JSON escape UTF-8 cannot hold


def _post(proxy: Proxy, path: str, raw: bytes, **headers: Any) -> httpx.Response:
    return httpx.post(f"{proxy.url}{path}", content=raw, headers=headers, timeout=30)


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        (CHAT, '{"model": "m", "messages": [' + SURROGATE + "]}"),
        (MESSAGES, '{"model": "m", "max_tokens": 5, "messages": [' + SURROGATE + "]}"),
        (RESPONSES, '{"model": "m", "input": [' + SURROGATE + "]}"),
        (CHAT, '{"model": "m", "user": "\\udc00", "messages": [{"role": "user", "content": "x"}]}'),
    ],
    ids=["chat", "messages", "responses", "body-id"],
)
def test_a_lone_surrogate_is_forwarded_as_sent(proxy: Proxy, path: str, raw: str) -> None:
    """A lone surrogate escape (valid JSON, not valid Unicode) in a message or an id: the
    request is forwarded byte for byte (it was a 500)."""
    reply = _post(proxy, path, raw.encode())
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-autocompact-action"] in ("forward", "passthrough")
    assert proxy.upstream.received[-1] == raw.encode()


def test_a_lone_surrogate_in_a_compacted_request_is_written_back_as_an_escape(
    proxy: Proxy,
) -> None:
    """At *auto*, a lone surrogate in the pending message and in another field: the request is
    compacted, and what goes out is JSON holding the same surrogate (as an escape)."""
    body = _long_anthropic(18)
    body["messages"][-1]["content"] = "and now \ud800?"
    body["metadata"] = {"note": "\udc01"}
    reply = _post(proxy, MESSAGES, json.dumps(body).encode())
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-autocompact-action"] == "compacted"
    sent = json.loads(proxy.upstream.received[-1])
    assert sent["messages"][-1]["content"] == "and now \ud800?"
    assert sent["metadata"] == {"note": "\udc01"}


def test_a_header_that_is_not_ascii_is_forwarded_as_its_bytes(proxy: Proxy) -> None:
    """A client's UTF-8 header value reaches the upstream as the same bytes (it was a 500)."""
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    reply = httpx.post(
        f"{proxy.url}{CHAT}", content=raw, headers=[(b"x-title", "café".encode())], timeout=30
    )
    assert reply.status_code == 200, reply.text
    # (the upstream's server reads header bytes as Latin-1, as the proxy's does)
    assert proxy.upstream.headers[-1]["x-title"].encode("latin-1") == "café".encode()


@pytest.mark.parametrize(
    ("path", "raw"),
    [(CHAT, b"[" * 100_000), (RESPONSES, b'{"previous_response_id":' + b"[" * 100_000)],
    ids=["chat", "responses-stateful"],
)
def test_a_body_nested_too_deeply_is_a_clear_error(proxy: Proxy, path: str, raw: bytes) -> None:
    """Nesting no parser can follow: a 400 in the protocol's shape that says so (it was a
    500, or a bare "Internal Server Error")."""
    reply = _post(proxy, path, raw)
    assert reply.status_code == 400
    assert "nested too deeply" in reply.json()["error"]["message"]
    assert not proxy.upstream.received


def test_a_message_nested_too_deeply_to_hash_is_forwarded_and_logged_as_the_clients(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool input nested 500 deep beside a cache_control marker cannot be hashed: the request
    goes out as sent, and the log says so at INFO (the client's content, not an operator's
    fault: it was a 500, then an ERROR line)."""
    caplog.set_level(logging.INFO, logger="autocompact")
    nested = "[" * 500 + "]" * 500
    raw = (
        '{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": '
        '"text", "text": "t", "cache_control": {"type": "ephemeral"}}, {"type": "tool_use", '
        '"id": "a", "name": "n", "input": {"x": ' + nested + "}}]}]}"
    ).encode()
    reply = _post(proxy, MESSAGES, raw)
    assert reply.status_code == 200, reply.text
    assert proxy.upstream.received[-1] == raw
    said = [r for r in caplog.records if "nested too deeply" in r.getMessage()]
    assert said
    assert all(r.levelno == logging.INFO for r in said)


def test_a_failure_after_the_lease_was_taken_gives_it_back(
    proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction that fails after the conversation's lease was taken (here: writing the
    request) gives the lease back: the conversation's next request is compacted at once, not
    held for the lease's life and then trimmed."""
    finish = planner_module.finish
    failed: list[bool] = []

    def once(*args: Any) -> Any:
        if not failed:
            failed.append(True)
            raise RuntimeError("scripted failure after the lease")
        return finish(*args)

    monkeypatch.setattr(planner_module, "finish", once)
    headers = {"x-autocompact-conversation": "lease"}
    raw = json.dumps(_long_anthropic(18)).encode()
    assert _post(proxy, MESSAGES, raw, **headers).status_code == 500
    reply = _post(proxy, MESSAGES, raw, **headers)
    assert reply.headers["x-autocompact-action"] == "compacted"


def test_a_responses_turn_ending_with_a_developer_message_keeps_the_users_message(
    proxy: Proxy,
) -> None:
    """A Responses input whose turn ends ``user, developer`` (Codex resumed after its own
    compaction): compacted, both reach the upstream (the user's message was dropped)."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": "You are terse."}]
    for turn in range(24):
        items.append({"role": "user", "content": f"step {turn}: " + filler(turn)})
        items.append(
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": f"d{turn}"}]}
        )  # fmt: skip
    items.append({"role": "user", "content": "NOW FIX BUG 42"})
    items.append({"role": "developer", "content": "DEV NOTE 7"})
    reply = _post(proxy, RESPONSES, json.dumps({"model": "m", "input": items}).encode())
    assert reply.headers["x-autocompact-action"] == "compacted"
    sent = json.loads(proxy.upstream.received[-1])["input"]
    assert sent[-2:] == items[-2:]


# -- the upstream's summary replies ---------------------------------------------------------


def _summary_call(protocol: Any, reply: Any) -> Any:
    """The summary request of ``protocol`` answered by ``reply`` (a response, or a callable
    of the request number that gives one or raises)."""

    async def run() -> Any:
        calls: list[int] = []

        def handler(request: httpx.Request) -> httpx.Response:
            calls.append(1)
            return reply(len(calls)) if callable(reply) else reply

        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            provider = UpstreamProvider(
                protocol=protocol, client=client, url="http://upstream/v1/x",
                headers={"authorization": "Bearer k"}, model="m", timeout=5,
            )  # fmt: skip
            request = ChatRequest(messages=(Message.user("hi"),), max_output_tokens=99)
            return await provider.acomplete(request)

    return anyio.run(run)


def test_a_summary_reply_with_counts_that_are_no_counts_is_read() -> None:
    """Usage of strings and ``incomplete_details`` of a string: the summary is read, the
    counts as not reported (it was a 500 to the client)."""
    chat = {"choices": [{"message": {"role": "assistant", "content": "summary"}}],
            "usage": {"prompt_tokens": "many", "completion_tokens": [1]}}  # fmt: skip
    assert _summary_call(OPENAI_CHAT, httpx.Response(200, json=chat)).text == "summary"
    responses = {"output": [{"type": "message", "content": [{"type": "output_text",
                 "text": "summary"}]}], "usage": {"input_tokens": "x"},
                 "incomplete_details": "cut"}  # fmt: skip
    assert _summary_call(RESPONSES_PROTOCOL, httpx.Response(200, json=responses)).text == "summary"


def test_a_summary_reply_of_another_shape_is_malformed_and_names_the_upstream() -> None:
    reply = httpx.Response(200, json={"type": "message", "content": 5})
    with pytest.raises(MalformedResponseError) as caught:
        _summary_call(ANTHROPIC_MESSAGES, reply)
    assert caught.value.provider == "anthropic"


def test_the_summary_requests_second_try_that_times_out_is_a_timeout() -> None:
    """The retry with max_completion_tokens that times out: the library's timeout error (it
    was a raw httpx error)."""
    refused = {"error": {"message": "Unsupported parameter: 'max_tokens'. Use "
                         "'max_completion_tokens'."}}  # fmt: skip

    def reply(number: int) -> httpx.Response:
        if number == 1:
            return httpx.Response(400, json=refused)
        raise httpx.ReadTimeout("timed out")

    with pytest.raises(ProviderTimeoutError):
        _summary_call(OPENAI_CHAT, reply)


BIG_NUMBER = "1" * 5000  # more digits than Python converts to an int (4,300)


def test_tool_arguments_with_a_number_too_long_to_read_are_forwarded_as_sent(
    proxy: Proxy,
) -> None:
    """Tool-call arguments holding a number Python cannot read (``json.loads`` raises a plain
    ValueError): the request goes out as sent (it was a 500)."""
    arguments = json.dumps('{"a": ' + BIG_NUMBER + "}")
    raw = (
        '{"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", '
        '"content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": '
        '"f", "arguments": ' + arguments + '}}]}, {"role": "tool", "tool_call_id": "c", '
        '"content": "ok"}, {"role": "user", "content": "y"}]}'
    ).encode()
    reply = _post(proxy, CHAT, raw)
    assert reply.status_code == 200, reply.text
    assert proxy.upstream.received[-1] == raw


@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_a_body_number_too_long_to_read_is_a_clear_error(proxy: Proxy, path: str) -> None:
    """The body itself: a 400 that names the number (it named Python's int limit and told the
    client to call sys.set_int_max_str_digits)."""
    raw = ('{"model": "m", "max_tokens": ' + BIG_NUMBER + ', "messages": []}').encode()
    reply = _post(proxy, path, raw)
    assert reply.status_code == 400
    assert "a number has more than 4,300 digits" in reply.text
    assert "set_int_max_str_digits" not in reply.text
    assert not proxy.upstream.received
