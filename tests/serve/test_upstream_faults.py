"""An upstream that misbehaves (found by fuzzing the upstream side, 2026-12-07): error bodies
that break off, streams it compresses anyway, summaries it trickles out, usage it cannot have.
The client gets the upstream's answer or an error in the protocol's shape, never a 500."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.threaded import serve_in_thread

from .scripted import SNAPSHOT

Answer = Callable[[Request, dict[str, Any]], Awaitable[Response]]


def _chat_reply(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    usage = {"prompt_tokens": 10, "completion_tokens": 1}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}


def _messages_reply(text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    usage = {"input_tokens": 10, "output_tokens": 1}
    return {"type": "message", "role": "assistant", "content": content,
            "stop_reason": "end_turn", "usage": usage}  # fmt: skip


async def _plain(request: Request, body: dict[str, Any]) -> Response:
    """A well-behaved answer: a summary to a summary request, else ``ok``."""
    text = SNAPSHOT if "structured state snapshot" in json.dumps(body) else "ok"
    if request.url.path.endswith("/messages"):
        return JSONResponse(_messages_reply(text))
    return JSONResponse(_chat_reply(text))


@dataclass
class Faulty:
    """An upstream whose chat answers and summary answers are set by the test."""

    answer: Answer = _plain
    summary: Answer = _plain
    summaries: int = 0
    received: list[bytes] = field(default_factory=list)

    def app(self) -> Starlette:
        """The ASGI app: every path answered by ``answer`` (``summary`` for a summary)."""
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST"])])

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        self.received.append(raw)
        body = json.loads(raw) if raw else {}
        if b"structured state snapshot" in raw:
            self.summaries += 1
            return await self.summary(request, body)
        return await self.answer(request, body)


@dataclass
class Running:
    """The proxy over a faulty upstream."""

    url: str
    app: ServeApp
    upstream: Faulty


@contextmanager
def running(tmp_path: Path, upstream: Faulty, **config: Any) -> Iterator[Running]:
    """The proxy over ``upstream`` (window 8,000, its state in a fresh SQLite file)."""
    with serve_in_thread(upstream.app()) as url:
        options: dict[str, Any] = {
            "upstreams": {"openai": url + "/v1", "anthropic": url},
            "store": f"sqlite:///{tmp_path / 'serve.db'}",
            "context_window": 8000,
            "lease_wait": 5.0,
            **config,
        }
        app = ServeApp(ServeConfig(**options))
        try:
            with serve_in_thread(app.asgi) as proxy_url:
                yield Running(url=proxy_url, app=app, upstream=upstream)
        finally:
            app.store.close()


def _long_openai(turns: int) -> dict[str, Any]:
    """A chat request over the 8,000-token window's auto threshold."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        words = " ".join(f"line{turn}_{i} value={i * turn}" for i in range(75))
        messages.append({"role": "user", "content": f"step {turn}: {words}"})
        messages.append({"role": "assistant", "content": f"d{turn}"})
    messages.append({"role": "user", "content": "and now?"})
    return {"model": "m", "messages": messages}


SMALL = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def _forever() -> None:
    """Wait until cancelled (the proxy hung up)."""
    await anyio.sleep_forever()


def _error_body_broken(*, stall: bool) -> Answer:
    """A 400 whose body breaks off (or stalls) after its first bytes."""

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        async def parts() -> AsyncIterator[bytes]:
            yield b'{"error": {"message": "This model\'s maximum context'
            if stall:
                await _forever()
            raise RuntimeError("the upstream broke off its error body")

        return StreamingResponse(parts(), status_code=400, media_type="application/json")

    return answer


def test_an_error_body_that_breaks_off_is_a_502_in_the_protocols_shape(tmp_path: Path) -> None:
    """A 400 whose body the upstream breaks off: a 502 the SDK reads (it was a 500, 'autocompact
    serve failed: RemoteProtocolError', logged as a failure of the proxy)."""
    with running(tmp_path, Faulty(answer=_error_body_broken(stall=False))) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(**SMALL)
        assert caught.value.status_code == 502
        assert "broke off its answer before its end" in caught.value.message
        reply = httpx.post(f"{proxy.url}/v1/messages", json={**SMALL, "max_tokens": 5})
    assert reply.status_code == 502
    assert reply.json()["type"] == "error"


def test_an_error_body_that_stalls_is_a_504(tmp_path: Path) -> None:
    """A 400 whose body stalls past --timeout: a 504 (it was a 500, 'ReadTimeout')."""
    faulty = Faulty(answer=_error_body_broken(stall=True))
    with running(tmp_path, faulty, timeout=0.5) as proxy:
        reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=SMALL, timeout=30)
    assert reply.status_code == 504
    assert reply.json()["error"]["type"] == "timeout_error"


def test_a_usage_count_too_long_to_read_is_no_count() -> None:
    """A reported prompt count with more digits than Python reads (or than any count has) is
    not reported (it raised ValueError after the response, logged as an ASGI failure)."""
    from autocompact.serve.protocol import reported_prompt_tokens

    huge = b"9" * 5000
    assert reported_prompt_tokens(b'{"usage": {"prompt_tokens": ' + huge + b"}}") is None
    assert reported_prompt_tokens(b'{"usage": {"input_tokens": ' + huge + b"}}") is None
    assert reported_prompt_tokens(b'{"usage": {"prompt_tokens": 1' + b"0" * 20 + b"}}") is None
    mixed = b'{"input_tokens": ' + huge + b', "cache_read_input_tokens": 7}'
    assert reported_prompt_tokens(mixed) == 7
    assert reported_prompt_tokens(b'{"usage": {"prompt_tokens": 123456789012}}') == 123456789012


STREAM = b'data: {"choices": [], "usage": {"prompt_tokens": 12}}\n\ndata: [DONE]\n\n'


async def _gzipped_stream(request: Request, body: dict[str, Any]) -> Response:
    """An SSE stream compressed although the proxy asked for ``identity``."""
    headers = {"content-encoding": "gzip"}
    return Response(gzip.compress(STREAM), media_type="text/event-stream", headers=headers)


def test_a_stream_the_upstream_compresses_anyway_reaches_the_client_readable(
    tmp_path: Path,
) -> None:
    """An upstream that gzips its SSE stream despite ``accept-encoding: identity``: the client
    gets the stream's text (it got the compressed bytes without their content-encoding)."""
    with running(tmp_path, Faulty(answer=_gzipped_stream)) as proxy:
        reply = httpx.post(f"{proxy.url}/v1/chat/completions", json={**SMALL, "stream": True})
    assert reply.status_code == 200
    assert reply.content == STREAM


async def _trickled_summary(request: Request, body: dict[str, Any]) -> Response:
    """A summary sent a space every 0.1 s for 3 s before its JSON (each read is quick, the
    whole takes longer than the side query's timeout)."""

    async def parts() -> AsyncIterator[bytes]:
        for _ in range(30):
            yield b" "
            await anyio.sleep(0.1)
        yield json.dumps(_chat_reply(SNAPSHOT)).encode()

    return StreamingResponse(parts(), media_type="application/json")


def test_a_summary_trickled_out_past_the_side_query_timeout_is_a_failed_summary(
    tmp_path: Path,
) -> None:
    """--side-query-timeout bounds the whole summary request, not each read: a reply trickled
    out for longer is a failed summary and the request goes out uncompacted (it waited for the
    whole reply, past the timeout and the lease it sets)."""
    faulty = Faulty(summary=_trickled_summary)
    with running(tmp_path, faulty, side_query_timeout=0.5) as proxy:
        reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=_long_openai(18), timeout=60)
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] in ("trimmed", "compaction-failed")
    assert reply.headers["x-autocompact-side-queries"] == "1"


def _props(payload: bytes) -> Answer:
    """llama-server's ``/props`` answered with ``payload``; chat answered plainly."""

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        if request.url.path == "/props":
            return Response(payload, media_type="application/json")
        if request.method == "GET":
            return JSONResponse({"error": "not found"}, status_code=404)
        return await _plain(request, body)

    return answer


@pytest.mark.parametrize(
    "payload",
    [b'{"n_ctx": true}', b'{"n_ctx": 1' + b"0" * 30 + b"}", b"[" * 100_000],
    ids=["true", "huge", "deep"],
)
def test_a_window_the_server_reports_that_is_no_window_is_passed_over(
    tmp_path: Path, payload: bytes
) -> None:
    """Without --context-window, a server whose /props reports no window (or cannot be parsed)
    is as one that says nothing: requests are read and forwarded on the assumed window (every
    request went out unread, 'error-forwarded', logged at ERROR; the deep answer was a 500)."""
    with running(tmp_path, Faulty(answer=_props(payload)), context_window=None) as proxy:
        reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=SMALL, timeout=30)
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] == "forward"


async def _tool_call_with_counts(request: Request, body: dict[str, Any]) -> Response:
    """An Anthropic reply calling a tool whose input holds usage-named counts (an object, not
    a string as OpenAI's arguments are), before the reply's own usage."""
    tool = {"type": "tool_use", "id": "toolu_1", "name": "cost"}
    tool["input"] = {"prompt_tokens": 4, "input_tokens": 3}
    reply = {**_messages_reply("ok"), "content": [tool], "stop_reason": "tool_use"}
    reply["usage"] = {"input_tokens": 2000, "cache_read_input_tokens": 100, "output_tokens": 9}
    return JSONResponse(reply)


def test_counts_in_a_tool_calls_input_are_not_read_as_the_usage(tmp_path: Path) -> None:
    """A whole (not streamed) reply is read at its own ``usage``: a tool call's input naming
    ``prompt_tokens`` or ``input_tokens`` is not what the calibration learns from (it learned
    4, the first count anywhere in the reply)."""
    learned: list[int | None] = []
    with running(tmp_path, Faulty(answer=_tool_call_with_counts)) as proxy:

        async def learn(decision: Any, prompt_tokens: int | None) -> None:
            learned.append(prompt_tokens)

        proxy.app.planner.learn = learn  # type: ignore[method-assign]
        reply = httpx.post(f"{proxy.url}/v1/messages", json={**SMALL, "max_tokens": 5})
        assert reply.status_code == 200
        # The learning follows the response: the next request of the conversation waits for it.
        httpx.post(f"{proxy.url}/v1/messages", json={**SMALL, "max_tokens": 5})
    assert learned[0] == 2100


def test_a_whole_reply_is_read_at_its_own_usage() -> None:
    """A JSON reply: its top-level ``usage`` only (none: not reported); a body that is no JSON
    object (a stream sent without its content type) is read as a stream."""
    from autocompact.serve.protocol import response_prompt_tokens

    reply = b'{"content": [{"input": {"prompt_tokens": 4}}], "usage": {"input_tokens": 9}}'
    assert response_prompt_tokens(reply) == 9
    assert response_prompt_tokens(b'{"content": [{"input": {"prompt_tokens": 4}}]}') is None
    assert response_prompt_tokens(b'{"usage": "many"}') is None
    assert response_prompt_tokens(b'data: {"usage": {"prompt_tokens": 5}}\n\n') == 5
    assert response_prompt_tokens(b'[{"usage": {"prompt_tokens": 5}}]') == 5
