"""The conversation's calibration and breaker live in the store: two proxy instances (two
workers) over one store (SQLite; PostgreSQL when ``AUTOCOMPACT_TEST_POSTGRES_DSN`` is set) learn
and count together."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.shared import current_state
from autocompact.serve.threaded import serve_in_thread
from autocompact.sessions.stores import open_store

from .scripted import ScriptedUpstream
from .test_compaction import _long_anthropic
from .test_workers import _dsn

HEADERS = {"x-autocompact-conversation": "shared-state"}


@pytest.fixture(params=["sqlite", "postgresql"])
def two_workers(
    request: pytest.FixtureRequest, tmp_path: Path, upstream: tuple[ScriptedUpstream, str]
) -> Iterator[tuple[ScriptedUpstream, str, str, str, str]]:
    """Two proxies (workers A and B) over one store and the scripted upstream, and the
    store's URL."""
    script, url = upstream
    store = f"sqlite:///{tmp_path / 'serve.db'}" if request.param == "sqlite" else _dsn()
    config = ServeConfig(
        upstreams={"anthropic": url},
        store=store,
        context_window=script.window,
        lease_wait=5.0,
    )
    apps = [ServeApp(config), ServeApp(config)]
    with serve_in_thread(apps[0].asgi) as a, serve_in_thread(apps[1].asgi) as b:
        yield script, url, a, b, store
    for app in apps:
        app.store.close()


def _send(url: str, body: dict[str, Any]) -> httpx.Response:
    reply = httpx.post(f"{url}/v1/messages", json=body, headers=HEADERS, timeout=30)
    assert reply.status_code == 200
    return reply


def _calibrated(store: str) -> bool:
    opened = open_store(store)
    try:
        states = [current_state(opened.entries(s.session_id)) for s in opened.list_sessions()]
    finally:
        opened.close()
    return any(s is not None and s.state["calibration"]["samples"] > 0 for s in states)


def _wait_for_calibration(store: str) -> None:
    """Wait until the worker stored in ``store`` what it learnt from its response: it learns
    once the response ended (a client's next request to another worker may come sooner)."""
    deadline = time.monotonic() + 10
    while not _calibrated(store):
        assert time.monotonic() < deadline, "the calibration was never stored"
        time.sleep(0.01)


def test_calibration_learnt_on_one_worker_is_used_on_another(
    two_workers: tuple[ScriptedUpstream, str, str, str, str], tmp_path: Path
) -> None:
    """The upstream's count reported to worker A (bytes/3, above the cold estimate) makes
    worker B compact a request the cold estimate puts below auto. Control: a proxy over a
    fresh store forwards that request."""
    script, upstream, a, b, store = two_workers
    assert _send(a, _long_anthropic(12)).headers["x-autocompact-action"] == "forward"
    _wait_for_calibration(store)
    body = _long_anthropic(13)
    assert _send(b, body).headers["x-autocompact-action"] == "compacted"
    assert script.rejected == 0
    config = ServeConfig(
        upstreams={"anthropic": upstream},
        store=f"sqlite:///{tmp_path / 'fresh.db'}",
        context_window=script.window,
    )
    fresh = ServeApp(config)
    with serve_in_thread(fresh.asgi) as url:
        control = _send(url, body)
    fresh.store.close()
    assert control.headers["x-autocompact-action"] == "forward"


def test_failures_on_one_worker_count_on_another(
    two_workers: tuple[ScriptedUpstream, str, str, str, str],
) -> None:
    """Summaries that fail on workers A, B, A (empty replies) open the breaker for the
    conversation on both: B's next request at auto makes no side query and is trimmed under
    the window. Per-worker counts (1 on B) would have let it try again."""
    script, _, a, b, _ = two_workers
    script.summary_reply = ""
    tried = []
    for url, turns in ((a, 16), (b, 19), (a, 22)):
        before = script.summaries_started
        reply = _send(url, _long_anthropic(turns))
        assert reply.headers["x-autocompact-compacted"] == "false"
        tried.append(script.summaries_started - before)
    assert all(n > 0 for n in tried), tried  # each worker's compaction asked for a summary
    before = script.summaries_started
    reply = _send(b, _long_anthropic(25))
    assert script.summaries_started == before  # the breaker is open on B too
    assert reply.headers["x-autocompact-action"] == "trimmed"
    assert script.rejected == 0


class _StateWritesFail:
    """A store whose state writes fail (everything else is the real store)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append_turn(self, session_id: str, turn_id: str, *args: Any, **kwargs: Any) -> Any:
        from autocompact.errors import SessionStoreError

        if turn_id.startswith("state:"):
            raise SessionStoreError("the store is down (scripted)", store="scripted")
        return self._store.append_turn(session_id, turn_id, *args, **kwargs)


def test_a_failed_state_write_still_sends_the_guarded_request(
    tmp_path: Path, upstream: tuple[ScriptedUpstream, str]
) -> None:
    """When the breaker's count cannot be stored, the request still goes out as the guard made
    it (trimmed under the window), not as the client sent it (over the window)."""
    from autocompact.sessions.stores import open_store

    script, url = upstream
    script.summary_reply = ""
    config = ServeConfig(
        upstreams={"anthropic": url},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        context_window=script.window,
    )
    app = ServeApp(config, store=_StateWritesFail(open_store(config.store)))  # type: ignore[arg-type]
    with serve_in_thread(app.asgi) as proxy:
        reply = _send(proxy, _long_anthropic(25))
    app.store.close()
    assert reply.headers["x-autocompact-action"] == "trimmed"
    assert script.rejected == 0


def test_calibration_is_written_until_it_can_lower_then_when_it_moves() -> None:
    """A calibration is written back while it has fewer reports than lowering an estimate
    needs, then only when its factor or its JSON share moved."""
    from autocompact.estimation import CALIBRATION_MIN_SAMPLES, Calibration
    from autocompact.serve.shared import calibration_moved

    young = Calibration(factor=0.6, samples=CALIBRATION_MIN_SAMPLES - 1, json_share=0.9)
    same = Calibration(factor=0.6, samples=CALIBRATION_MIN_SAMPLES, json_share=0.9)
    assert calibration_moved(young, same)  # it needs the report to lower the estimate
    grown = Calibration(factor=0.601, samples=CALIBRATION_MIN_SAMPLES + 1, json_share=0.91)
    assert not calibration_moved(same, grown)  # converged: no write per request
    assert calibration_moved(same, Calibration(factor=0.7, samples=9, json_share=0.9))
    assert calibration_moved(same, Calibration(factor=0.6, samples=9, json_share=0.7))
    assert not calibration_moved(same, Calibration())  # nothing learnt


def test_the_state_chain_ignores_a_state_written_from_a_replaced_one() -> None:
    """The current state is the end of the chain: a record resets it, and a state entry based
    on an entry that is no longer the end (written while a record came in) is ignored."""
    import json

    from autocompact.content import Message, TextPart
    from autocompact.serve.shared import current_state, state_messages
    from autocompact.sessions.stores.base import Entry

    def entry(seq: int, turn_id: str, messages: tuple[Message, ...]) -> Entry:
        return Entry(seq=seq, pos=seq, kind="turn", turn_id=turn_id, messages=messages)

    record = {"autocompact_serve_record": 1, "prefix_len": 2, "prefix_hash": "h",
              "replacement": "[]", "state": {"consecutive_failures": 0}}  # fmt: skip
    entries = [
        entry(1, "state:0", state_messages({"consecutive_failures": 1})),
        entry(2, "state:1", state_messages({"consecutive_failures": 2})),
        entry(3, "sub:h", (Message(role="user", parts=(TextPart(text=json.dumps(record)),)),)),
        entry(4, "state:2", state_messages({"consecutive_failures": 3})),  # stale base
    ]
    assert current_state(entries[:2]) is not None
    assert current_state(entries[:2]).state == {"consecutive_failures": 2}  # type: ignore[union-attr]
    end = current_state(entries)
    assert end is not None
    assert end.seq == 3
    assert end.state == {"consecutive_failures": 0}
    entries.append(entry(5, "state:3", state_messages({"consecutive_failures": 1})))
    assert current_state(entries).state == {"consecutive_failures": 1}  # type: ignore[union-attr]


class _StateWritesWait:
    """A store whose state writes wait until ``go`` is set (everything else is the real store)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.go = threading.Event()
        self.writing = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append_turn(self, session_id: str, turn_id: str, *args: Any, **kwargs: Any) -> Any:
        if turn_id.startswith("state:"):
            self.writing.set()
            assert self.go.wait(30), "the test never let the state write go"
        return self._store.append_turn(session_id, turn_id, *args, **kwargs)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_response_does_not_wait_for_its_learning_and_the_next_request_does(
    tmp_path: Path, upstream: tuple[ScriptedUpstream, str], stream: bool
) -> None:
    """What a response's reported usage teaches is stored after the response ended: the client
    has the whole response while that store write is held. The worker's next request of the
    conversation waits for it (the upstream sees nothing meanwhile) and is decided on what it
    learnt: compacted, where the cold estimate forwards it (the control of
    ``test_calibration_learnt_on_one_worker_is_used_on_another``)."""
    script, url = upstream
    store = _StateWritesWait(open_store(f"sqlite:///{tmp_path / 'serve.db'}"))
    config = ServeConfig(
        upstreams={"anthropic": url},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        context_window=script.window,
    )
    app = ServeApp(config, store=store)  # type: ignore[arg-type]
    replies: list[httpx.Response] = []
    with serve_in_thread(app.asgi) as proxy:
        first = _send(proxy, {**_long_anthropic(12), "stream": stream})
        assert first.headers["x-autocompact-action"] == "forward"
        assert first.content  # the whole response, read to its end ...
        assert store.writing.wait(10)  # ... while what it taught is still being stored
        seen = len(script.received)
        second = threading.Thread(target=lambda: replies.append(_send(proxy, _long_anthropic(13))))
        second.start()
        second.join(0.5)
        assert second.is_alive()  # it waits for the learning ...
        assert len(script.received) == seen  # ... before the upstream sees it
        store.go.set()
        second.join(30)
    app.store.close()
    assert replies[0].headers["x-autocompact-action"] == "compacted"
    assert script.rejected == 0


def test_a_request_made_while_a_response_streams_does_not_wait_for_it(
    tmp_path: Path, upstream: tuple[ScriptedUpstream, str]
) -> None:
    """A request of the conversation made while one of its responses still streams (a side
    request under the same id) goes out and comes back meanwhile: only a request made after a
    response ended waits for what it taught."""
    script, url = upstream
    script.stream_pause = 3.0
    config = ServeConfig(
        upstreams={"anthropic": url},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        context_window=script.window,
    )
    app = ServeApp(config)
    streaming: list[httpx.Response] = []
    with serve_in_thread(app.asgi) as proxy:
        body = {**_long_anthropic(4), "stream": True}
        first = threading.Thread(target=lambda: streaming.append(_send(proxy, body)))
        first.start()
        deadline = time.monotonic() + 10
        while not script.received:
            assert time.monotonic() < deadline, "the streamed request never reached the upstream"
            time.sleep(0.01)
        side = _send(proxy, _long_anthropic(4))
        assert first.is_alive()  # the stream has not ended: the side request did not wait for it
        first.join(30)
    app.store.close()
    assert side.headers["x-autocompact-action"] == "forward"
    assert streaming[0].content.endswith(b"\n\n")
