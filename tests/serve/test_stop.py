"""``autocompact serve`` told to stop (Ctrl-C, SIGTERM) while requests are open (found probing
the proxy, 2026-12-07): it says how many and how long they get, ends them with an error their
clients read, and exits without a traceback, however long the upstream stalls."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.stopping import STOPPED
from autocompact.serve.threaded import serve_in_thread

from .processes import spawn_proxy, stop, wait_until_serving
from .scripted import SNAPSHOT
from .test_upstream_faults import SMALL, Faulty, _chat_reply, _long_openai

START_SECONDS = 90.0
"""How long the proxy process may take to answer ``/healthz``."""
EXIT_SECONDS = 60.0
"""A generous bound on the stop (the grace is 5 s): past it the proxy hangs."""


async def _stalls(request: Request, body: dict[str, Any]) -> Response:
    """A stream sends its first chunk, then nothing; any other request gets no answer."""
    if not body.get("stream"):
        await anyio.sleep_forever()

    async def events() -> AsyncIterator[bytes]:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "he"}}]}  # fmt: skip
        yield f"data: {json.dumps(chunk)}\n\n".encode()
        await anyio.sleep_forever()

    return StreamingResponse(events(), media_type="text/event-stream")


def _in_thread(work: Callable[[], Any], outcome: list[Any]) -> threading.Thread:
    """``work`` run in a thread; what it returned or raised is appended to ``outcome``."""

    def run() -> None:
        try:
            outcome.append(work())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class _Reading(threading.Event):
    """A process's stderr, read in a thread (a read that blocks cannot hang the test); set
    once a line starts with the awaited text."""

    def __init__(self, process: subprocess.Popen[bytes], awaited: str) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.ended = threading.Event()

        def read() -> None:
            for raw in process.stderr:  # type: ignore[union-attr]
                line = raw.decode()
                self.lines.append(line)
                if line.startswith(awaited):
                    self.set()
            self.ended.set()

        threading.Thread(target=read, daemon=True).start()

    def text(self) -> str:
        """What was read, once the stream ended."""
        self.ended.wait(EXIT_SECONDS)
        return "".join(self.lines)


@pytest.mark.parametrize(
    ("sent", "signals"),
    [(signal.SIGINT, 1), (signal.SIGINT, 2), (signal.SIGTERM, 1), (signal.SIGTERM, 2)],
    ids=["ctrl-c", "ctrl-c-twice", "sigterm", "sigterm-twice"],
)
def test_ctrl_c_with_a_stalled_stream_open_stops_and_says_so(
    tmp_path: Path, sent: signal.Signals, signals: int
) -> None:
    """Ctrl-C (or SIGTERM: kill, docker stop, systemd) while a stream stalls and another
    request waits for its answer (--timeout 600): the proxy says it waits up to 5 s for the 2
    open requests, then (or at a second Ctrl-C or SIGTERM) ends them: the stream with the
    protocol's error event, the other with a 503, each saying the proxy stopped; it says it
    stopped and exits 0 with no traceback (it stayed alive, silent, until --timeout, and a
    second Ctrl-C printed tracebacks of CancelledError; SIGTERM stopped as cleanly, then
    killed the process by the signal uvicorn sent again, status -15, and a second one did not
    end the wait)."""
    faulty = Faulty(answer=_stalls)
    with serve_in_thread(faulty.app()) as upstream:
        process, url = spawn_proxy(upstream, tmp_path / "s.db", "--context-window", "8000")
        try:
            wait_until_serving(process, url, START_SECONDS)
            client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
            first = threading.Event()

            def streamed() -> str:
                text = ""
                for chunk in client.chat.completions.create(**SMALL, stream=True):
                    text += chunk.choices[0].delta.content or ""
                    first.set()
                return text

            outcomes: list[Any] = []
            threads = [
                _in_thread(streamed, outcomes),
                _in_thread(lambda: client.chat.completions.create(**SMALL), outcomes),
            ]
            assert first.wait(START_SECONDS)
            deadline = time.monotonic() + START_SECONDS
            while len(faulty.received) < 2:  # both went upstream: both are open
                assert time.monotonic() < deadline, faulty.received
                time.sleep(0.05)
            process.send_signal(sent)
            said = _Reading(process, "Stopping:")
            assert said.wait(EXIT_SECONDS), "the proxy did not say it is stopping"
            began = time.monotonic()
            if signals == 2:
                process.send_signal(sent)
            returncode = process.wait(timeout=EXIT_SECONDS)
            took = time.monotonic() - began
        finally:
            stop(process, 30)
        for thread in threads:
            thread.join(timeout=30)
    err = said.text()
    assert returncode == 0, err
    again = "Ctrl-C" if sent == signal.SIGINT else "SIGTERM"
    assert f"Stopping: waiting up to 5 s for 2 open requests to end ({again} again to end " \
        "them now)\n" in err  # fmt: skip
    assert "Ending 2 open requests: each client is told that the proxy stopped\n" in err
    assert err.endswith("autocompact serve stopped\n"), err
    assert (took < 4) == (signals == 2), took  # the grace is 5 s; a second signal ends it
    assert "Traceback" not in err, err
    assert "ERROR" not in err, err
    errors = sorted((type(e).__name__, getattr(e, "status_code", None),
                     e.message.removeprefix("Error code: 503 - "))
                    for e in outcomes if isinstance(e, openai.APIError))  # fmt: skip
    assert errors == [("APIError", None, STOPPED), ("InternalServerError", 503, STOPPED)], outcomes


def test_a_request_the_stop_ends_is_a_503_and_gives_its_lease_back(tmp_path: Path) -> None:
    """A request compacted (its lease held until the upstream takes it) and waiting for the
    upstream's answer when the app is stopped: a 503 in the protocol's shape saying the proxy
    stopped, and the conversation's lease given back (it stayed held until it lapsed, so that
    after a restart the conversation's requests waited for it, then went out trimmed)."""
    reached = anyio.Event()

    async def upstream(request: httpx.Request) -> httpx.Response:
        if b"structured state snapshot" in request.content:
            return httpx.Response(200, json=_chat_reply(SNAPSHOT))
        reached.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    config = ServeConfig(
        upstreams={"openai": "http://upstream/v1"},
        store=f"sqlite:///{tmp_path / 's.db'}",
        context_window=8000,
    )
    app = ServeApp(config, transport=httpx.MockTransport(upstream))
    replies: list[httpx.Response] = []

    async def run() -> None:
        proxy = httpx.AsyncClient(transport=httpx.ASGITransport(app.asgi), base_url="http://p")
        async with proxy, anyio.create_task_group() as group:

            async def call() -> None:
                replies.append(await proxy.post("/v1/chat/completions", json=_long_openai(18)))

            group.start_soon(call)
            await reached.wait()
            app.stop()

    try:
        anyio.run(run)
        (reply,) = replies
        assert reply.status_code == 503
        assert reply.json()["error"]["message"] == STOPPED
        sessions = app.store.list_sessions()
        assert sessions
        for listing in sessions:
            assert app.store.acquire_lease(listing.session_id, "another worker", 60) is not None
    finally:
        app.store.close()


@pytest.mark.parametrize(
    "group", [True, False], ids=["ctrl-c-to-the-group", "sigterm-to-the-parent"]
)
def test_ctrl_c_stops_workers_with_a_stalled_stream_open(tmp_path: Path, group: bool) -> None:
    """With --workers 2, Ctrl-C (to the process group, as a terminal sends it) or SIGTERM to
    the parent (docker stop) while a stream stalls: each worker gives it 5 s, then uvicorn ends
    it, said in one line; the proxy says it stopped and exits 0 with no traceback and no ERROR
    line (the workers waited until --timeout, and the parent for them; then uvicorn's 'ERROR:
    Cancel 1 running task(s), timeout graceful shutdown exceeded')."""
    with serve_in_thread(Faulty(answer=_stalls).app()) as upstream:
        process, url = spawn_proxy(
            upstream, tmp_path / "s.db", "--context-window", "8000", "--workers", "2"
        )
        try:
            wait_until_serving(process, url, START_SECONDS)
            with httpx.stream("POST", url + "/v1/chat/completions", json={**SMALL, "stream": True},
                              timeout=EXIT_SECONDS) as reply:  # fmt: skip
                chunks = reply.iter_bytes()
                next(chunks)  # the stream is open, and stalls
                if group:
                    os.killpg(process.pid, signal.SIGINT)
                else:
                    process.send_signal(signal.SIGTERM)
                returncode = process.wait(timeout=EXIT_SECONDS)
                with pytest.raises(httpx.RemoteProtocolError):  # (ended by uvicorn)
                    next(chunks)
        finally:
            stop(process, 30)
    err = process.stderr.read().decode()  # type: ignore[union-attr]
    assert returncode == 0, err
    assert "Traceback" not in err, err
    assert "ERROR" not in err, err
    ended = re.findall(r"^Ending 1 open request of worker \d+ after 5 s: its client sees the "
                       r"connection close$", err, re.MULTILINE)  # fmt: skip
    assert len(ended) == 1, err
    assert err.endswith("autocompact serve stopped\n"), err


def test_sigterm_with_no_request_open_stops_at_once_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM (kill, docker stop, systemd) with no request open: the proxy stops at once,
    says so in one line and exits 0, as on Ctrl-C (it was killed by the signal uvicorn sent
    again once it had stopped: status -15, 143 in a shell, nothing said)."""
    with serve_in_thread(Faulty(answer=_stalls).app()) as upstream:
        process, url = spawn_proxy(upstream, tmp_path / "s.db", "--context-window", "8000")
        try:
            wait_until_serving(process, url, START_SECONDS)
            process.send_signal(signal.SIGTERM)
            returncode = process.wait(timeout=EXIT_SECONDS)
        finally:
            stop(process, 30)
    err = process.stderr.read().decode()  # type: ignore[union-attr]
    assert returncode == 0, err
    assert err.endswith("\nautocompact serve stopped\n"), err
    assert "Stopping" not in err, err
    assert "Traceback" not in err, err
