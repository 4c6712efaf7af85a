"""What the client and the log are told when the upstream fails (found probing the proxy,
2026-12-07): a stream that stalls past --timeout names the URL and the option, an answer that
breaks off is not called unreachable, and an exception with no text still says what it was."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from autocompact.errors import ProviderConnectionError, ProviderError, ProviderTimeoutError
from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.failures import (
    CONNECT_SECONDS,
    described,
    stream_broke,
    upstream_failed,
)
from autocompact.serve.openai_chat import OPENAI_CHAT
from autocompact.serve.threaded import serve_in_thread

from .test_bad_requests import _summary_call
from .test_upstream_faults import SMALL, Faulty, running


async def _stalls_mid_stream(request: Request, body: dict[str, Any]) -> Response:
    """A stream that sends its first event, then nothing (until the proxy hangs up)."""

    async def events() -> AsyncIterator[bytes]:
        if request.url.path.endswith("/messages"):
            start = {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 0}}}  # fmt: skip
            yield f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
        else:
            chunk = b'{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",'
            chunk += b' "choices": [{"index": 0, "delta": {"content": "he"}}]}'
            yield b"data: " + chunk + b"\n\n"
        await anyio.sleep_forever()

    return StreamingResponse(events(), media_type="text/event-stream")


def test_a_stream_that_stalls_past_the_timeout_names_the_url_and_the_option(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream that stalls mid-way past --timeout ends with an error event saying it timed
    out, after how long, at which URL and which option sets it; the warning in the log says so
    too and names the conversation (both said 'the upstream stream broke mid-way: ' and
    nothing more: httpx's ReadTimeout has no text)."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    with running(tmp_path, Faulty(answer=_stalls_mid_stream), timeout=0.5) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIError) as caught:
            for _ in client.chat.completions.create(**SMALL, stream=True):
                pass
        chat_url = proxy.app.config.upstreams["openai"] + "/chat/completions"
        assert caught.value.message == (
            f"the openai upstream ({chat_url}) timed out mid-stream: it sent nothing for 0.5 s "
            "(autocompact serve --timeout)"
        )
        sdk = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
        with (
            pytest.raises(anthropic.APIStatusError) as failed,
            sdk.messages.stream(**SMALL, max_tokens=5) as stream,
        ):
            stream.get_final_text()
        messages_url = proxy.app.config.upstreams["anthropic"] + "/v1/messages"
        assert f"({messages_url}) timed out mid-stream" in str(failed.value)
        assert "--timeout" in str(failed.value)
    warnings = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("the upstream stream")
    ]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("the upstream stream broke: conversation=serve:openai_chat:")
    assert warnings[0].endswith(f"({chat_url}) timed out mid-stream: it sent nothing for 0.5 s "
                                "(autocompact serve --timeout)")  # fmt: skip


@contextmanager
def _answers_with(raw: bytes) -> Iterator[str]:
    """An upstream on 127.0.0.1 that reads each request and answers it with ``raw`` (the
    bytes of an HTTP response, as broken as the test wants them), then closes the
    connection; yields its base URL."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def handle(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(raw)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


SHORT = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
SHORT += b'{"id": "x",'


def test_an_answer_that_breaks_off_is_not_called_unreachable(tmp_path: Path) -> None:
    """An upstream that announces 1,000 bytes, sends 10 and closes: a 502 saying it broke off
    its answer, with httpx's reason (it said the upstream 'could not be reached' and to check
    that it runs, which it does)."""
    with _answers_with(SHORT) as upstream:
        config = ServeConfig(
            upstreams={"openai": upstream + "/v1"},
            store=f"sqlite:///{tmp_path / 's.db'}",
            context_window=8000,
        )
        app = ServeApp(config)
        try:
            with serve_in_thread(app.asgi) as proxy:
                client = openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0)
                with pytest.raises(openai.APIStatusError) as caught:
                    client.chat.completions.create(**SMALL)
        finally:
            app.store.close()
    assert caught.value.status_code == 502
    message = caught.value.message
    assert (
        f" - the openai upstream ({upstream}/v1/chat/completions) broke off its answer before "
        "its end: RemoteProtocolError: peer closed connection without sending complete message "
        "body (received 11 bytes, expected 1000)"
    ) in message, message
    assert "could not be reached" not in message


def test_an_upstream_that_closes_without_an_answer_was_reached(tmp_path: Path) -> None:
    """An upstream that reads the request and closes the connection without a word: a 502
    saying it was reached and gave no answer."""
    with _answers_with(b"") as upstream:
        config = ServeConfig(
            upstreams={"anthropic": upstream}, store=f"sqlite:///{tmp_path / 's.db'}"
        )
        app = ServeApp(config)
        try:
            with serve_in_thread(app.asgi) as proxy:
                reply = httpx.post(f"{proxy}/v1/messages/count_tokens", json=SMALL)
        finally:
            app.store.close()
    assert reply.status_code == 502
    assert reply.json()["error"]["message"].startswith(
        f"the anthropic upstream ({upstream}/v1/messages/count_tokens) was reached but gave no "
        "answer: RemoteProtocolError: "
    )


@pytest.mark.parametrize(
    ("exc", "answered", "status", "says"),
    [
        (httpx.ConnectError(""), False, 502, "could not be reached: ConnectError (check that"),
        (httpx.ConnectTimeout(""), False, 504, "could not be reached: it accepted no connection"),
        (
            httpx.ReadTimeout(""),
            False,
            504,
            "timed out; it did not answer: it sent nothing for 7 s",
        ),
        (
            httpx.ReadTimeout(""),
            True,
            504,
            "timed out; its answer stopped: it sent nothing for 7 s",
        ),
        (httpx.ReadError(""), True, 502, "broke off its answer before its end: ReadError"),
        (httpx.RemoteProtocolError(""), False, 502, "was reached but gave no answer: Remote"),
        (httpx.DecodingError("bad gzip"), True, 502, "cannot be decoded: DecodingError: bad gzip"),
    ],
    ids=["refused", "connect-timeout", "no-answer", "stalled", "broke", "closed", "coding"],
)
def test_each_failure_says_what_happened(
    exc: httpx.HTTPError, answered: bool, status: int, says: str
) -> None:
    """Connecting failed, no answer came, or the answer broke off: each is said as such, with
    the URL (no password) and, for a timeout, --timeout; an exception without text is named by
    its type (the message ended in a colon)."""
    url = "http://user:pw@127.0.0.1:9/v1/chat/completions"
    failure = upstream_failed("openai", url, exc, timeout=7, answered=answered)
    assert failure.status == status
    assert failure.message.startswith("the openai upstream (http://127.0.0.1:9/v1/chat/")
    assert says in failure.message
    assert not failure.message.rstrip(")").endswith(":")
    assert ("--timeout" in failure.message) == isinstance(exc, httpx.ReadTimeout)
    broke = stream_broke("openai", url, exc, timeout=7)
    assert "pw" not in failure.message + broke
    assert described(exc) in broke or "sent nothing for 7 s" in broke


def test_an_exception_without_text_is_named_by_its_type() -> None:
    """``described``: the type and the text, or the type alone."""
    assert described(RuntimeError()) == "RuntimeError"
    assert described(RuntimeError("  ")) == "RuntimeError"
    assert described(ValueError("bad")) == "ValueError: bad"


def _raises(exc: httpx.HTTPError) -> Any:
    def reply(number: int) -> httpx.Response:
        raise exc

    return reply


def test_a_summary_request_that_fails_says_how_even_without_text() -> None:
    """A summary request that cannot connect says so; one that broke off once there says that
    instead (both said 'could not reach the upstream'); an httpx error without text is named
    by its type."""
    with pytest.raises(ProviderConnectionError) as refused:
        _summary_call(OPENAI_CHAT, _raises(httpx.ConnectError("")))
    assert str(refused.value).startswith(
        "the summary request could not reach the openai upstream (http://upstream/v1/x): "
        "ConnectError (check that it is running and that autocompact serve --upstream "
        "openai=URL names it)"
    )
    with pytest.raises(ProviderConnectionError) as broke:
        _summary_call(OPENAI_CHAT, _raises(httpx.ReadError("")))
    assert str(broke.value).startswith(
        "the summary request failed after reaching the upstream: ReadError ("
    )


@contextmanager
def _never_accepts() -> Iterator[str]:
    """A port of 127.0.0.1 that accepts no connection (its queue of connections not yet
    accepted is full: the kernel drops each new one's first packet, as a firewall does);
    yields its base URL."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        queued = [socket.socket() for _ in range(3)]
        try:
            for waiting in queued:
                waiting.setblocking(False)
                waiting.connect_ex(("127.0.0.1", port))
            yield f"http://127.0.0.1:{port}"
        finally:
            for waiting in queued:
                waiting.close()


@contextmanager
def _never_answers() -> Iterator[str]:
    """A port of 127.0.0.1 whose connections are accepted (by the kernel) and never answered;
    yields its base URL."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def _summary_to(url: str, *, run: str, timeout: float) -> Exception:
    """What the summary request to ``url`` raised, sent the async way (the proxy's client,
    httpx's real transport) or the sync way (:meth:`UpstreamProvider.complete`)."""
    from autocompact.content import Message
    from autocompact.providers.base import ChatRequest
    from autocompact.serve.upstream import UpstreamProvider

    request = ChatRequest(messages=(Message.user("hi"),), max_output_tokens=9)

    def provider(client: Any) -> UpstreamProvider:
        return UpstreamProvider(protocol=OPENAI_CHAT, client=client, url=url, headers={},
                                model="m", timeout=timeout)  # fmt: skip

    async def sent() -> None:
        async with httpx.AsyncClient() as client:
            await provider(client).acomplete(request)

    with pytest.raises(ProviderError) as caught:
        anyio.run(sent) if run == "async" else provider(None).complete(request)
    return caught.value


@pytest.mark.parametrize("run", ["async", "sync"])
def test_a_summary_request_to_an_upstream_that_accepts_no_connection_says_it_was_not_reached(
    run: str,
) -> None:
    """An upstream that accepts no connection (down behind a firewall, a wrong host): the
    summary request says it could not reach it, names its URL and what to check, as the main
    request's 504 does (it said 'the summary request timed out after 300 s', pointing at
    --side-query-timeout; the sync way, that it 'failed after reaching the upstream')."""
    with _never_accepts() as upstream:
        url = upstream + "/v1/chat/completions"
        error = _summary_to(url, run=run, timeout=1)  # (half of it to connect)
    assert isinstance(error, ProviderConnectionError)
    assert str(error).startswith(
        f"the summary request could not reach the openai upstream ({url}): it accepted no "
        "connection within 0.5 s (check that it is running and that autocompact serve "
        "--upstream openai=URL names it)"
    ), error
    assert "side-query-timeout" not in str(error)


@pytest.mark.parametrize("run", ["async", "sync"])
def test_a_summary_request_that_gets_no_answer_times_out_naming_the_option(run: str) -> None:
    """An upstream that takes the connection and never answers: the summary request timed
    out, after --side-query-timeout, which the message names (the sync way said it 'failed
    after reaching the upstream: ReadTimeout')."""
    with _never_answers() as upstream:
        error = _summary_to(upstream + "/v1/chat/completions", run=run, timeout=0.5)
    assert isinstance(error, ProviderTimeoutError)
    assert str(error).startswith(
        "the summary request timed out after 0.5 s (autocompact serve --side-query-timeout)"
    ), error


def test_the_summary_request_waits_for_a_connection_as_long_as_the_main_request() -> None:
    """The summary request waits CONNECT_SECONDS for the upstream to accept a connection, then
    --side-query-timeout for the rest (its connection waited the whole --side-query-timeout,
    300 s, before the main request waited 10 s more to be told the upstream is down)."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(dict(request.extensions["timeout"]))
        message = {"role": "assistant", "content": "summary"}
        return httpx.Response(200, json={"choices": [{"message": message}]})

    async def run() -> None:
        from autocompact.content import Message
        from autocompact.providers.base import ChatRequest
        from autocompact.serve.upstream import UpstreamProvider

        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            provider = UpstreamProvider(protocol=OPENAI_CHAT, client=client, url="http://u/v1",
                                        headers={}, model="m", timeout=300)  # fmt: skip
            request = ChatRequest(messages=(Message.user("hi"),), max_output_tokens=9)
            await provider.acomplete(request)

    anyio.run(run)
    assert sent == [{"connect": CONNECT_SECONDS, "read": 300, "write": 300, "pool": 300}]
