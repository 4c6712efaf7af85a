"""A screenshot in a tool result (Claude Code reading an image, a browser tool) through the
proxy: counted as one image, so a request far under the window is forwarded as it came."""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.threaded import serve_in_thread

from .scripted import ScriptedUpstream, image_block, tool_media_request

DATA = base64.b64encode(random.Random(5).randbytes(300_000)).decode()  # a 300 KB screenshot


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[tuple[str, ScriptedUpstream]]:
    """The proxy at a 128K window over an upstream whose own window is not the test."""
    script = ScriptedUpstream(window=10**7)
    with serve_in_thread(script.app()) as url:
        app = ServeApp(
            ServeConfig(
                upstreams={"anthropic": url},
                store=f"sqlite:///{tmp_path / 'serve.db'}",
                context_window=128_000,
            )
        )
        with serve_in_thread(app.asgi) as proxy_url:
            yield proxy_url, script
        app.store.close()


def test_a_tool_screenshot_is_forwarded_as_it_came(proxy: tuple[str, ScriptedUpstream]) -> None:
    """About 2K tokens of conversation and one image: safe, forwarded byte for byte (counted as
    its base64, it was about 200K tokens: over the window, so the request was cut)."""
    url, script = proxy
    body = tool_media_request(image_block(DATA))
    raw = json.dumps(body).encode()
    reply = httpx.post(f"{url}/v1/messages", content=raw, timeout=30)
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-tier"] == "safe"
    assert reply.headers["x-autocompact-compacted"] == "false"
    sent = script.received[-1]
    assert hashlib.sha256(sent).digest() == hashlib.sha256(raw).digest()
