"""An upstream at the edges of HTTP (found by fault-fuzzing the upstream side): a stream's
content type written in capitals, with parameters or not at all; a body in a content coding
although the proxy asked for none. The client gets what the upstream sent, as it comes, in a
form it can read."""

from __future__ import annotations

import gzip
import importlib.util
import json
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from autocompact.errors import MalformedResponseError
from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.openai_chat import OPENAI_CHAT
from autocompact.serve.threaded import serve_in_thread

from .scripted import SNAPSHOT
from .test_bad_requests import _summary_call
from .test_shared_state import _calibrated
from .test_upstream_faults import SMALL, Answer, Faulty, _chat_reply, _long_openai, running

GATE_SECONDS = 20.0
"""How long a gated stream waits for the client to say it got the first event (a guard
against a proxy that buffers; the test passes as soon as the client says so)."""
PINGS = 400
"""A gated stream sends a comment line (as a server's keep-alive) each ``GATE_SECONDS /
PINGS`` while it waits (``pings=False``: none, one long silence)."""


def _chat_chunk(text: str) -> bytes:
    delta = {"role": "assistant", "content": text}
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _chat_events(released: bool) -> list[bytes]:
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    choice = {"index": 0, "delta": {}, "finish_reason": "stop"}
    end = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "choices": [choice], "usage": usage}  # fmt: skip
    return [_chat_chunk(f" released={released}"), f"data: {json.dumps(end)}\n\n".encode(),
            b"data: [DONE]\n\n"]  # fmt: skip


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _messages_first(input_tokens: int = 10) -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": input_tokens, "output_tokens": 1}}  # fmt: skip
    start = _event("message_start", {"type": "message_start", "message": message})
    block = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}}  # fmt: skip
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "first"}}  # fmt: skip
    return start + _event("content_block_start", block) + _event("content_block_delta", delta)


def _messages_events(released: bool) -> list[bytes]:
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": f" released={released}"}}  # fmt: skip
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 2}}  # fmt: skip
    return [
        _event("content_block_delta", delta),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event("message_delta", stop),
        _event("message_stop", {"type": "message_stop"}),
    ]


def _gated_stream(content_type: str | None, gate: threading.Event, *, pings: bool = True) -> Answer:
    """A stream whose first event goes out at once and whose rest waits for ``gate`` (set by
    the client when the first event reached it; keep-alive comments meanwhile unless
    ``pings`` is false), saying whether the gate was opened."""

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        anthropic_side = request.url.path.endswith("/messages")

        async def events() -> AsyncIterator[bytes]:
            yield _messages_first() if anthropic_side else _chat_chunk("first")
            released = False
            waits = PINGS if pings else 1
            for _ in range(waits):
                released = await anyio.to_thread.run_sync(gate.wait, GATE_SECONDS / waits)
                if released:
                    break
                yield b": ping\n\n"
            for event in (_messages_events if anthropic_side else _chat_events)(released):
                yield event

        headers = {} if content_type is None else {"content-type": content_type}
        return StreamingResponse(events(), headers=headers)  # no media type of its own

    return answer


@pytest.mark.parametrize(
    "content_type",
    ["Text/Event-Stream; charset=utf-8", "TEXT/EVENT-STREAM", None],
    ids=["capitals-and-charset", "capitals", "missing"],
)
def test_a_stream_whatever_its_content_type_says_is_streamed_through_openai(
    tmp_path: Path, content_type: str | None
) -> None:
    """A stream whose media type is in capitals or has parameters (RFC 9110: case does not
    matter), or that has no content type while the request asked for a stream, reaches the
    OpenAI SDK event by event (it was buffered whole: the client saw nothing until the
    upstream's last byte)."""
    gate = threading.Event()
    with running(tmp_path, Faulty(answer=_gated_stream(content_type, gate))) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
        texts: list[str] = []
        for chunk in client.chat.completions.create(**SMALL, stream=True):
            gate.set()
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
    assert "".join(texts) == "first released=True"


@pytest.mark.parametrize(
    "content_type",
    ["text/event-stream;charset=UTF-8", "Text/Event-Stream", None],
    ids=["charset", "capitals", "missing"],
)
def test_a_stream_whatever_its_content_type_says_is_streamed_through_anthropic(
    tmp_path: Path, content_type: str | None
) -> None:
    """As for OpenAI, through the Anthropic SDK."""
    gate = threading.Event()
    with running(tmp_path, Faulty(answer=_gated_stream(content_type, gate))) as proxy:
        client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
        texts: list[str] = []
        with client.messages.stream(**SMALL, max_tokens=5) as stream:
            for text in stream.text_stream:
                gate.set()
                texts.append(text)
    assert "".join(texts) == "first released=True"


@pytest.mark.parametrize("side", ["openai", "anthropic"])
def test_an_event_followed_by_silence_reaches_the_client_at_once(tmp_path: Path, side: str) -> None:
    """An event the upstream sends before a long silence (a model thinking before its next
    token, no keep-alive) reaches the client before the silence ends. The proxy held each chunk
    back until the next one came, so the client saw the first event only when the upstream
    spoke again (here after 20 s, with ``released=False``)."""
    gate = threading.Event()
    answer = _gated_stream("text/event-stream", gate, pings=False)
    with running(tmp_path, Faulty(answer=answer)) as proxy:
        texts: list[str] = []
        if side == "openai":
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
            for chunk in client.chat.completions.create(**SMALL, stream=True):
                gate.set()
                if chunk.choices and chunk.choices[0].delta.content:
                    texts.append(chunk.choices[0].delta.content)
        else:
            other = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
            with other.messages.stream(**SMALL, max_tokens=5) as stream:
                for text in stream.text_stream:
                    gate.set()
                    texts.append(text)
    assert "".join(texts) == "first released=True"


def _usage_then_silence(done: threading.Event, *, closed: bool) -> Answer:
    """A Messages stream that reports its usage (a prompt of one token per two bytes of the
    request, above any estimate: something to learn), then is silent until ``done`` is set:
    after its closing event (``closed``: an upstream slow to hang up) or before the rest of the
    stream (a model that pauses)."""

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        async def events() -> AsyncIterator[bytes]:
            yield _messages_first(len(json.dumps(body)) // 2)
            if not closed:
                await anyio.to_thread.run_sync(done.wait, GATE_SECONDS)
            for event in _messages_events(True):
                yield event
            if closed:
                await anyio.to_thread.run_sync(done.wait, GATE_SECONDS)

        return StreamingResponse(events(), media_type="text/event-stream")

    return answer


@pytest.mark.parametrize("closed", [True, False], ids=["after-closing-event", "before-it"])
def test_a_client_that_hangs_up_after_the_closing_event_still_teaches(
    tmp_path: Path, closed: bool
) -> None:
    """A client that hangs up as soon as it read the stream's closing event, while the upstream
    has not closed the connection yet: the stream counts as ended well, so its reported usage
    is learned (the conversation's calibration is stored). Control: a client that hangs up
    before the closing event came teaches nothing, even once the upstream sent the rest."""
    done = threading.Event()
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    with running(tmp_path, Faulty(answer=_usage_then_silence(done, closed=closed))) as proxy:
        prompt = [{"role": "user", "content": "a long question " * 500}]
        request = {"model": "m", "messages": prompt, "max_tokens": 5, "stream": True}
        headers = {"x-autocompact-conversation": "hangs-up"}
        last = "event: message_stop" if closed else "event: content_block_delta"
        with (
            httpx.Client(timeout=30) as client,
            client.stream("POST", f"{proxy.url}/v1/messages", json=request, headers=headers) as r,
        ):
            for line in r.iter_lines():
                if line == last:
                    break
        deadline = time.monotonic() + (5 if closed else 1)
        while not _calibrated(store) and time.monotonic() < deadline:
            time.sleep(0.02)
        done.set()  # (the control's upstream now sends the rest, to nobody)
        if not closed:
            time.sleep(0.5)
        learned = _calibrated(store)
    assert learned is closed


REPLY = json.dumps(
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                  "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 1}}
).encode()  # fmt: skip
EVENTS = b'data: {"choices": [], "usage": {"prompt_tokens": 12}}\n\ndata: [DONE]\n\n'


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


BROTLI = _importable("brotli") or _importable("brotlicffi")
ZSTD = _importable("zstandard")


def _encode(coding: str, data: bytes) -> bytes:
    """``data`` in a content coding (one httpx cannot decode here: bytes no one can read)."""
    if coding == "gzip":
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "zstd" and ZSTD:
        import zstandard

        return bytes(zstandard.ZstdCompressor().compress(data))
    if coding == "br" and BROTLI:
        import brotli  # type: ignore[import-not-found,unused-ignore]

        return bytes(brotli.compress(data))
    return b"\x8b\x00 not readable without the " + coding.encode() + b" decoder \xff\xfe"


def _decodable(coding: str) -> bool:
    optional = (coding == "zstd" and ZSTD) or (coding == "br" and BROTLI)
    return coding in ("gzip", "deflate") or optional


def _encoded(coding: str, status: int = 200, seen: list[str] | None = None) -> Answer:
    """Answers in ``coding`` (a stream when asked for one), although asked for ``identity``."""

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        if seen is not None:
            seen.append(request.headers.get("accept-encoding", ""))
        stream = bool(body.get("stream"))
        data = EVENTS if stream else REPLY
        media = "text/event-stream" if stream else "application/json"
        headers = {"content-encoding": coding}
        if status >= 400:
            data = b'{"error": {"message": "bad request", "type": "invalid_request_error"}}'
        return Response(_encode(coding, data), status, headers=headers, media_type=media)

    return answer


CODINGS = ["gzip", "deflate", "zstd", "br", "x-unknown", "gzip, x-unknown"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("coding", CODINGS)
def test_a_body_in_a_content_coding_reaches_the_client_readable(
    tmp_path: Path, coding: str, stream: bool
) -> None:
    """A reply the upstream encodes although asked for ``identity``: one httpx decodes here
    (gzip, deflate; br and zstd when their packages are installed) comes back decoded and
    without its content-encoding; any other comes back as sent, with its content-encoding (it
    came back still encoded without the header, bytes the client could not read)."""
    seen: list[str] = []
    with running(tmp_path, Faulty(answer=_encoded(coding, seen=seen))) as proxy:
        request = {**SMALL, "stream": stream}
        with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=request) as reply:
            raw = b"".join(reply.iter_raw())
            headers = reply.headers
    plain = EVENTS if stream else REPLY
    assert seen == ["identity"]
    assert reply.status_code == 200
    if _decodable(coding):
        assert raw == plain
        assert "content-encoding" not in headers
    else:
        assert raw == _encode(coding, plain)
        assert headers["content-encoding"] == coding


@pytest.mark.parametrize("coding", ["gzip", "x-unknown"])
def test_an_error_in_a_content_coding_reaches_the_client_readable(
    tmp_path: Path, coding: str
) -> None:
    """An upstream error (read whole by the proxy to see whether it says "too long") in a
    content coding comes back decoded, or as sent with its content-encoding."""
    with (
        running(tmp_path, Faulty(answer=_encoded(coding, status=400))) as proxy,
        httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=SMALL) as reply,
    ):
        raw = b"".join(reply.iter_raw())
        headers = reply.headers
    assert reply.status_code == 400
    error = b'{"error": {"message": "bad request", "type": "invalid_request_error"}}'
    if _decodable(coding):
        assert (raw, headers.get("content-encoding")) == (error, None)
    else:
        assert (raw, headers.get("content-encoding")) == (_encode(coding, error), coding)


def test_a_summary_reply_in_a_coding_the_proxy_cannot_decode_is_a_failed_summary() -> None:
    """A summary reply in a content coding httpx cannot decode here is a malformed reply that
    says so (it was "not JSON"); one in gzip is read."""
    chat = {"choices": [{"message": {"role": "assistant", "content": "summary"}}]}
    body = json.dumps(chat).encode()
    gzipped = httpx.Response(200, content=gzip.compress(body), headers={"content-encoding": "gzip"})
    assert _summary_call(OPENAI_CHAT, gzipped).text == "summary"
    unknown = {"content-encoding": "x-unknown"}
    with pytest.raises(MalformedResponseError, match=r"content coding .* cannot decode: x-unknown"):
        _summary_call(OPENAI_CHAT, httpx.Response(200, content=body, headers=unknown))


SENT_TWICE = [(b"set-cookie", b"a=1; Path=/"), (b"set-cookie", b"b=2; Path=/"),
              (b"x-foo", b"one"), (b"x-foo", b"two")]  # fmt: skip


def _with_headers(status: int, lines: list[tuple[bytes, bytes]], seen: list[list[str]]) -> Answer:
    """Answers with the header ``lines`` (a stream when asked for one), noting the ``x-foo``
    headers of each request it gets."""

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        seen.append(request.headers.getlist("x-foo"))
        if body.get("stream"):
            response: Response = StreamingResponse(
                iter([EVENTS]), status, media_type="text/event-stream"
            )
        else:
            response = Response(REPLY, status, media_type="application/json")
        response.raw_headers.extend(lines)
        return response

    return answer


CASES = pytest.mark.parametrize(
    ("status", "stream"),
    [(200, False), (200, True), (400, False)],
    ids=["whole", "stream", "error"],
)


@CASES
def test_headers_sent_twice_are_passed_as_sent(tmp_path: Path, status: int, stream: bool) -> None:
    """Response headers the upstream sends twice (two ``Set-Cookie``) reach the client as two
    header lines, and request headers a client sends twice reach the upstream twice (they were
    merged into one comma-joined line, and only the client's last was sent)."""
    seen: list[list[str]] = []
    with running(tmp_path, Faulty(answer=_with_headers(status, SENT_TWICE, seen))) as proxy:
        reply = httpx.post(
            f"{proxy.url}/v1/chat/completions",
            json={**SMALL, "stream": stream},
            headers=[("x-foo", "1"), ("x-foo", "2")],
        )
    assert reply.status_code == status
    assert seen == [["1", "2"]]
    assert reply.headers.get_list("set-cookie") == ["a=1; Path=/", "b=2; Path=/"]
    assert [(k, v) for k, v in reply.headers.raw if k.lower() == b"x-foo"] == SENT_TWICE[2:]
    assert reply.headers["x-autocompact-action"] == "forward"


@CASES
def test_a_response_header_in_utf8_is_passed_as_its_bytes(
    tmp_path: Path, status: int, stream: bool
) -> None:
    """A response header whose value is UTF-8 reaches the client as the bytes the upstream sent
    (it was a 500: the value, read as UTF-8, could not be written back as Latin-1)."""
    value = "café →".encode()
    lines = [(b"x-utf8", value)]
    with running(tmp_path, Faulty(answer=_with_headers(status, lines, []))) as proxy:
        reply = httpx.post(f"{proxy.url}/v1/chat/completions", json={**SMALL, "stream": stream})
    assert reply.status_code == status
    assert [v for k, v in reply.headers.raw if k.lower() == b"x-utf8"] == [value]


def test_headers_sent_twice_go_with_the_summary_request(tmp_path: Path) -> None:
    """The summary request carries the client's headers as sent, twice when sent twice."""
    seen: list[list[str]] = []

    async def summary(request: Request, body: dict[str, Any]) -> Response:
        seen.append(request.headers.getlist("x-foo"))
        return Response(json.dumps(_chat_reply(SNAPSHOT)).encode(), media_type="application/json")

    with running(tmp_path, Faulty(summary=summary)) as proxy:
        reply = httpx.post(
            f"{proxy.url}/v1/chat/completions",
            json=_long_openai(18),
            headers=[("x-foo", "1"), ("x-foo", "2")],
            timeout=60,
        )
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert seen
    assert all(each == ["1", "2"] for each in seen)


@dataclass
class Props:
    """llama-server's ``/props``: failing (503) until ``window`` is set; every ask counted."""

    window: int | None = None
    asked: int = 0

    async def answer(self, request: Request, body: dict[str, Any]) -> Response:
        if request.url.path == "/props":
            self.asked += 1
            if self.window is None:
                return JSONResponse({"error": "loading model"}, status_code=503)
            return JSONResponse({"default_generation_settings": {"n_ctx": self.window}})
        if request.method == "GET" or request.url.path.startswith("/api/"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse(_chat_reply("ok"))


@dataclass
class Clock:
    """A clock the test moves."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def behind_props(tmp_path: Path) -> Iterator[tuple[Props, Clock, str, str]]:
    """A proxy (its clock the test's, no --context-window) in front of a server whose /props
    the test controls: the props, the clock, the server's URL and the proxy's."""
    props, clock = Props(), Clock()
    with serve_in_thread(Faulty(answer=props.answer).app()) as url:
        config = ServeConfig(
            upstreams={"openai": url + "/v1"}, store=f"sqlite:///{tmp_path / 's.db'}"
        )
        app = ServeApp(config, clock=clock)
        try:
            with serve_in_thread(app.asgi) as proxy_url:
                yield props, clock, url, proxy_url
        finally:
            app.store.close()


def test_a_failed_window_lookup_is_tried_again_later_and_a_found_window_kept(
    tmp_path: Path,
) -> None:
    """Without --context-window, a server that cannot say its window yet (503 while it loads)
    gives the assumed window for now and is asked again after a while, not on every request;
    the window it then reports is used and kept (the first failure was kept for good: the
    assumed window was used until the proxy restarted)."""
    # ~3,000 tokens: safe on the assumed 32K window, far over auto on a 4K one.
    big = {"model": "m", "messages": [{"role": "user", "content": "word " * 3000}]}
    with behind_props(tmp_path) as (props, clock, _, proxy_url):

        def tier() -> str:
            reply = httpx.post(f"{proxy_url}/v1/chat/completions", json=big, timeout=30)
            return reply.headers["x-autocompact-tier"]

        assert (tier(), props.asked) == ("safe", 1)  # the assumed window
        props.window = 4000
        assert (tier(), props.asked) == ("safe", 1)  # not asked again at once
        clock.now += 3600
        assert tier() != "safe"  # asked again: the server's window
        assert props.asked == 2
        clock.now += 10 * 24 * 3600
        assert tier() != "safe"
        assert props.asked == 2  # a window found is kept


def test_window_lookups_back_off_until_one_finds_a_window() -> None:
    """A lookup that finds no window is tried again after 30 s, then twice as long each time
    up to 30 minutes; a found window is kept; a model the table knows, or behind the Anthropic
    upstream, asks nothing."""
    from autocompact.limits import ModelLimits, ServerReport
    from autocompact.serve.windows import RETRY_FIRST, RETRY_LONGEST, ModelWindows

    clock, asked = Clock(), []
    found: list[int | None] = [None]

    def lookup(base: str, model: str) -> ServerReport:
        asked.append(clock.now)
        window = found[0]
        if window is None:
            return ServerReport(limits=None, reason="/props: no window")
        return ServerReport(limits=ModelLimits(model=model, context_window=window, source="server"))

    windows = ModelWindows({"openai": "http://upstream/v1"}, clock=clock, lookup=lookup)

    async def at(delay: float) -> int:
        clock.now += delay
        return await windows.window("openai", "m")

    async def run() -> None:
        assert await at(0) == 32_768
        waits = []
        for _ in range(9):
            before = len(asked)
            while len(asked) == before:
                await at(1)
            waits.append(asked[-1] - asked[-2])
        assert waits == [RETRY_FIRST, 60, 120, 240, 480, 960, RETRY_LONGEST, 1800, 1800]
        found[0] = 5000
        assert await at(RETRY_LONGEST) == 5000
        assert await at(10**9) == 5000
        assert len(asked) == 11
        assert await windows.window("anthropic", "m") == 32_768
        assert await windows.window("openai", "gpt-4o") == 128_000
        assert len(asked) == 11

    anyio.run(run)


HUGE = "9" * 5000  # more digits than Python reads as an int (4,300)


def _huge_usage(text: str, key: str) -> bytes:
    """A reply whose ``key`` count has thousands of digits, in each protocol's shape."""
    chat = {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {}}
    anthropic = {"type": "message", "content": [{"type": "text", "text": text}], "usage": {}}
    output = [{"type": "message", "content": [{"type": "output_text", "text": text}]}]
    reply = {"prompt_tokens": chat, "input_tokens": anthropic, "responses": {"output": output}}
    shape = reply[key]
    name = "input_tokens" if key == "responses" else key
    usage = {**shape, "usage": {name: "HUGE", "output_tokens": 7}}
    return json.dumps(usage).replace('"HUGE"', HUGE).encode()


def test_a_summary_reply_whose_usage_is_no_count_is_read() -> None:
    """A summary reply whose usage count has thousands of digits is read, that count as not
    reported (the reply was "not JSON" and the summary failed)."""
    from autocompact.serve.anthropic_messages import ANTHROPIC_MESSAGES
    from autocompact.serve.responses import RESPONSES

    for protocol, key in (
        (OPENAI_CHAT, "prompt_tokens"),
        (ANTHROPIC_MESSAGES, "input_tokens"),
        (RESPONSES, "responses"),
    ):
        reply = httpx.Response(200, content=_huge_usage("summary", key))
        completion = _summary_call(protocol, reply)
        assert completion.text == "summary"
        assert completion.usage is not None
        assert completion.usage.prompt_tokens == 0


def test_a_summary_whose_usage_is_no_count_compacts(tmp_path: Path) -> None:
    """Through the proxy: the summary is used and the request compacted (it was a failed
    summary, counted by the breaker, and the request went out trimmed)."""

    async def summary(request: Request, body: dict[str, Any]) -> Response:
        return Response(_huge_usage(SNAPSHOT, "prompt_tokens"), media_type="application/json")

    with running(tmp_path, Faulty(summary=summary)) as proxy:
        reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=_long_openai(18), timeout=60)
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] == "compacted"


def test_a_whole_reply_with_a_number_past_the_digit_limit_is_read_at_its_usage() -> None:
    """A whole reply holding a number of thousands of digits (in a tool call's input) is still
    read at its own ``usage`` (it was read as a stream, so a tool input's ``prompt_tokens``
    was taken for the usage)."""
    from autocompact.serve.protocol import response_prompt_tokens

    tool = '{"type": "tool_use", "input": {"prompt_tokens": 4, "n": ' + HUGE + "}}"
    reply = '{"content": [' + tool + '], "usage": {"input_tokens": 9}}'
    assert response_prompt_tokens(reply.encode()) == 9
    assert response_prompt_tokens(b'{"usage": {"input_tokens": ' + HUGE.encode() + b"}}") is None
