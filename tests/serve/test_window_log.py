"""What the proxy logs about a model's window: once per (upstream, model) and what it learned,
again only when that changes (the lookup's reasons were logged on every lookup, one line per
place asked)."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from .test_upstream_edges import behind_props


def _window_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The log's lines about a context window (not the requests' own lines)."""
    return [
        r.getMessage()
        for r in caplog.records
        if "window" in r.getMessage() and "action=" not in r.getMessage()
    ]


def test_a_window_lookup_is_logged_once_per_fact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server asked again and again while it says no window (llama_cpp.server has no
    /props) adds one line in all, naming what was asked and why it said none; the window it
    then reports adds one more; later requests add none."""
    caplog.set_level(logging.DEBUG, logger="autocompact")
    small = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with behind_props(tmp_path) as (props, clock, url, proxy_url):

        def send() -> None:
            reply = httpx.post(f"{proxy_url}/v1/chat/completions", json=small, timeout=30)
            assert reply.status_code == 200

        for _ in range(5):
            send()
            clock.now += 3600  # past the wait: the server is asked again
        assert props.asked == 5
        (said,) = _window_lines(caplog)
        assert said.startswith("the window of 'm' behind the openai upstream is 32768")
        assert f"the server at {url}/v1 did not report it" in said
        assert "/props: HTTP Error 503" in said
        assert "/v1/models, /api/show, /api/v0/models: HTTP Error 404" in said
        props.window = 4000
        for _ in range(3):
            send()
            clock.now += 3600
        assert props.asked == 6  # a window found is kept
    assert _window_lines(caplog)[1:] == [
        f"the window of 'm' behind the openai upstream is 4000 tokens (reported by the server "
        f"at {url}/v1)"
    ]
