"""``autocompact serve --workers N`` on PostgreSQL: concurrent requests of one conversation.

Needs ``AUTOCOMPACT_TEST_POSTGRES_DSN`` (``eval "$(.ci/postgres.sh start)"``); skipped without
it (failed under ``CI=true``), as the store tests are.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from autocompact.serve.threaded import serve_in_thread

from .processes import stop, wait_until_serving
from .scripted import ScriptedUpstream
from .test_compaction import _long_anthropic

DSN_ENV = "AUTOCOMPACT_TEST_POSTGRES_DSN"


def _dsn() -> str:
    dsn = os.environ.get(DSN_ENV, "")
    if not dsn:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but no PostgreSQL server: set {DSN_ENV}")
        pytest.skip(f'no PostgreSQL server: set {DSN_ENV} (eval "$(.ci/postgres.sh start)")')
    import psycopg

    schema = "serve_" + secrets.token_hex(6)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options=-csearch_path%3D{schema}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def workers(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[ScriptedUpstream, str, str, subprocess.Popen[bytes]]]:
    """Eight proxy workers on one PostgreSQL store over the scripted upstream."""
    store = _dsn()
    script = ScriptedUpstream(summary_delay=getattr(request, "param", 0.5))
    with serve_in_thread(script.app()) as upstream:
        script.url = upstream
        port = _free_port()
        command = [
            sys.executable, "-m", "autocompact.cli.main", "serve",
            "--upstream", f"anthropic={upstream}", "--port", str(port), "--workers", "8",
            "--context-window", "8000", "--lease-seconds", "3",
        ]  # fmt: skip
        env = {**os.environ, "AUTOCOMPACT_STORE": store}
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(process, url, 90)
        try:
            yield script, url, store, process
        finally:
            stop(process, 20)


def test_eight_workers_one_side_query_per_compaction(
    workers: tuple[ScriptedUpstream, str, str, subprocess.Popen[bytes]],
) -> None:
    """Six concurrent requests of one conversation over eight workers make the side queries of
    one compaction; all are answered, one stores the record, the others substitute it."""
    script, url, store, _ = workers
    body = _long_anthropic(18)
    replies: list[httpx.Response] = []

    def send() -> None:
        replies.append(
            httpx.post(
                url + "/v1/messages",
                json=body,
                timeout=60,
                headers={"x-autocompact-conversation": "shared"},
            )
        )

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in replies] == [200] * 6
    side = [int(r.headers.get("x-autocompact-side-queries", 0)) for r in replies]
    assert script.summaries == max(side) > 0
    actions = sorted(r.headers["x-autocompact-action"] for r in replies)
    assert actions == ["compacted"] + ["substituted"] * 5
    sent = {b for b in script.received if b"structured state snapshot" not in b}
    assert len(sent) == 1  # every request went out with the very same bytes

    from autocompact.sessions.stores import open_store

    opened = open_store(store)
    try:
        records = [
            e
            for s in opened.list_sessions()
            for e in opened.entries(s.session_id)
            if (e.turn_id or "").startswith("sub:")
        ]
    finally:
        opened.close()
    assert len(records) == 1
    assert json.loads(records[0].messages[0].parts[0].text)["prefix_len"] > 0  # type: ignore[union-attr]


def _records(store: str) -> list[object]:
    from autocompact.sessions.stores import open_store

    opened = open_store(store)
    try:
        return [
            e
            for s in opened.list_sessions()
            for e in opened.entries(s.session_id)
            if (e.turn_id or "").startswith("sub:")
        ]
    finally:
        opened.close()


@pytest.mark.parametrize("workers", [30.0], indirect=True)
def test_sigkill_mid_compaction_leaves_no_half_state(
    workers: tuple[ScriptedUpstream, str, str, subprocess.Popen[bytes]],
) -> None:
    """Every worker SIGKILLed while the side query runs: nothing is stored; a new proxy on the
    same store waits out the dead worker's lease, compacts once and stores one record."""
    from autocompact.serve import ServeApp, ServeConfig

    script, url, store, process = workers
    body = _long_anthropic(18)
    headers = {"x-autocompact-conversation": "killed"}
    thread = threading.Thread(
        target=lambda: _swallow(url, body, headers), daemon=True
    )  # fmt: skip
    thread.start()
    deadline = time.monotonic() + 30
    while script.summaries_started == 0:
        assert time.monotonic() < deadline, "no side query started"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert _records(store) == []
    script.summary_delay = 0.0
    app = ServeApp(
        ServeConfig(
            upstreams={"anthropic": script.url},
            store=store,
            context_window=8000,
            lease_wait=10.0,
            lease_seconds=3.0,
        )
    )
    try:
        with serve_in_thread(app.asgi) as again:
            reply = httpx.post(again + "/v1/messages", json=body, headers=headers, timeout=60)
    finally:
        app.store.close()
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert len(_records(store)) == 1


def _swallow(url: str, body: object, headers: dict[str, str]) -> None:
    # The worker is killed: the client sees the connection drop.
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=60)


def test_cli_single_worker_serves(tmp_path: object, upstream: tuple[ScriptedUpstream, str]) -> None:
    """`autocompact serve` with one worker on SQLite answers /healthz and forwards a request."""
    _script, up = upstream
    port = _free_port()
    command = [
        sys.executable, "-m", "autocompact.cli.main", "serve", "--upstream", f"openai={up}/v1",
        "--port", str(port), "--store", f"sqlite:///{tmp_path}/cli.db",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.2)
        body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(url + "/v1/chat/completions", json=body, headers={"x-api-key": "k1"})
        assert reply.status_code == 200
        assert reply.headers["x-autocompact-action"] == "forward"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
    assert b"action=forward" in err
    assert b"k1" not in err
