"""What the proxy does when the upstream rejects what it sent (official SDKs, scripted upstream).

The scripted upstream counts tokens as bytes/3 and rejects a request over its 8,000 tokens as
too long; here its error states no window, and the proxy sizes on a larger one (100,000), so
only the rejection tells it the request was too long.
"""

from __future__ import annotations

import json
from dataclasses import replace

import anthropic
import pytest

from .conftest import Proxy
from .scripted import count_tokens
from .test_compaction import _long_anthropic, filler


def _unstated(proxy: Proxy) -> anthropic.Anthropic:
    """A client of the proxy sized on 100,000 tokens over the 8,000 upstream that says "too
    long" without its window."""
    proxy.app.config = replace(proxy.app.config, context_window=100_000)
    proxy.upstream.states_window = False
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)


def _main_bodies(proxy: Proxy) -> list[bytes]:
    """The bodies the upstream received, summary requests left out."""
    return [
        raw
        for raw in proxy.upstream.received
        if "structured state snapshot" not in str(json.loads(raw).get("system"))
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_too_long_rejection_stating_no_window_is_retried_smaller(
    proxy: Proxy, stream: bool
) -> None:
    """A request rejected as too long by an upstream that does not say its window goes out
    again smaller than the rejected one, sized under what the rejected one measured: the
    window is at most that. The reactive compaction was sized on the proxy's window, its
    summary request (most of the request) was rejected too, the request went out again
    unchanged and the client got the 400."""
    client = _unstated(proxy)
    body = _long_anthropic(24)
    if stream:
        with client.messages.stream(**body) as events:
            assert events.get_final_message().content[0].text.startswith("ok")  # type: ignore[union-attr]
            action = events.response.headers["x-autocompact-action"]
    else:
        raw = client.messages.with_raw_response.create(**body)
        action = raw.headers["x-autocompact-action"]
        assert raw.parse().content[0].text.startswith("ok")  # type: ignore[union-attr]
    assert action in ("compacted", "trimmed")
    rejected, retried = _main_bodies(proxy)
    assert count_tokens(json.loads(rejected)) > proxy.upstream.window
    assert count_tokens(json.loads(retried)) <= proxy.upstream.window


@pytest.mark.parametrize("states", [False, True], ids=["no-window", "window"])
def test_a_too_long_rejection_that_cannot_be_shrunk_is_passed_back(
    proxy: Proxy, states: bool
) -> None:
    """A request rejected as too long that the proxy cannot make smaller (one message, no
    history to compact or leave out), whether the error states the window or not, is not sent
    again: the client gets the upstream's own error. The proxy sent the same bytes once more,
    certain to be rejected again."""
    client = _unstated(proxy)
    proxy.upstream.states_window = states
    body = {
        "model": "scripted",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": filler(1, 30_000)}],
    }
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**body)  # type: ignore[arg-type]
    assert caught.value.status_code == 400
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long")
    assert caught.value.response.headers["x-autocompact-action"] != "error"
    assert len(proxy.upstream.received) == 1
    assert proxy.upstream.rejected == 1
