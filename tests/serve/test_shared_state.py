"""The conversation's calibration and breaker live in the store: two proxy instances (two
workers) over one store (SQLite; PostgreSQL when ``AUTOCOMPACT_TEST_POSTGRES_DSN`` is set) learn
and count together."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from autocompact.serve import ServeApp, ServeConfig

from .scripted import ScriptedUpstream, running
from .test_compaction import _long_anthropic
from .test_workers import _dsn

HEADERS = {"x-autocompact-conversation": "shared-state"}


@pytest.fixture(params=["sqlite", "postgresql"])
def two_workers(
    request: pytest.FixtureRequest, tmp_path: Path, upstream: tuple[ScriptedUpstream, str]
) -> Iterator[tuple[ScriptedUpstream, str, str, str]]:
    """Two proxies (workers A and B) over one store and the scripted upstream."""
    script, url = upstream
    store = f"sqlite:///{tmp_path / 'serve.db'}" if request.param == "sqlite" else _dsn()
    config = ServeConfig(
        upstreams={"anthropic": url},
        store=store,
        context_window=script.window,
        lease_wait=5.0,
    )
    apps = [ServeApp(config), ServeApp(config)]
    with running(apps[0].asgi) as a, running(apps[1].asgi) as b:
        yield script, url, a, b
    for app in apps:
        app.store.close()


def _send(url: str, body: dict[str, Any]) -> httpx.Response:
    reply = httpx.post(f"{url}/v1/messages", json=body, headers=HEADERS, timeout=30)
    assert reply.status_code == 200
    return reply


def test_calibration_learnt_on_one_worker_is_used_on_another(
    two_workers: tuple[ScriptedUpstream, str, str, str], tmp_path: Path
) -> None:
    """The upstream's count reported to worker A (bytes/3, above the cold estimate) makes
    worker B compact a request the cold estimate puts below auto. Control: a proxy over a
    fresh store forwards that request."""
    script, upstream, a, b = two_workers
    assert _send(a, _long_anthropic(12)).headers["x-autocompact-action"] == "forward"
    body = _long_anthropic(13)
    assert _send(b, body).headers["x-autocompact-action"] == "compacted"
    assert script.rejected == 0
    config = ServeConfig(
        upstreams={"anthropic": upstream},
        store=f"sqlite:///{tmp_path / 'fresh.db'}",
        context_window=script.window,
    )
    fresh = ServeApp(config)
    with running(fresh.asgi) as url:
        control = _send(url, body)
    fresh.store.close()
    assert control.headers["x-autocompact-action"] == "forward"


def test_failures_on_one_worker_count_on_another(
    two_workers: tuple[ScriptedUpstream, str, str, str],
) -> None:
    """Summaries that fail on workers A, B, A (empty replies) open the breaker for the
    conversation on both: B's next request at auto makes no side query and is trimmed under
    the window. Per-worker counts (1 on B) would have let it try again."""
    script, _, a, b = two_workers
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
    with running(app.asgi) as proxy:
        reply = _send(proxy, _long_anthropic(25))
    app.store.close()
    assert reply.headers["x-autocompact-action"] == "trimmed"
    assert script.rejected == 0
