"""A stateless Responses request is sized on what the proxy sends: reasoning items included.

The scripted upstream counts bytes of the JSON it received (not the engine's estimate) and
rejects a request over its window by that count.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from .conftest import Proxy
from .test_compaction import filler


def _upstream_tokens(proxy: Proxy, body: dict[str, Any]) -> int:
    parts = [body.get("input"), body.get("instructions"), body.get("tools")]
    size = len(json.dumps(parts, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return size // proxy.upstream.bytes_per_token


def test_reasoning_item_content_is_counted(proxy: Proxy) -> None:
    """A reasoning item's ``content`` (llama-server writes a reasoning model's thinking as
    ``reasoning_text``), ``summary`` and ``encrypted_content`` are sent back as the client sent
    them, so the estimate counts them: the conversation is compacted before it outgrows the
    window and every body the upstream received fits it. The estimate counted only the summary
    text: the conversation was never compacted, the upstream rejected it as too long, the
    reactive compaction's summary request (as long) was rejected too and the client got the 400."""
    proxy.upstream.bytes_per_token = 4  # the engine's own ratio for text: only the JSON differs
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    items: list[dict[str, Any]] = []
    actions = []
    for turn in range(16):
        reasoning = {
            "type": "reasoning", "id": f"rs_{turn}",
            "summary": [{"type": "summary_text", "text": f"Turn {turn}."}],
            "content": [{"type": "reasoning_text", "text": filler(turn, 1400)}],
            "encrypted_content": filler(turn + 100, 400), "status": "completed",
        }  # fmt: skip
        items += [
            {"type": "message", "role": "user", "content": f"Turn {turn}: think it over."},
            reasoning,
            {"type": "message", "role": "assistant", "content": f"thought {turn}"},
            {"type": "message", "role": "user", "content": "go on"},
        ]
        raw = client.responses.with_raw_response.create(model="scripted", input=items)  # type: ignore[arg-type]
        actions.append(raw.headers["x-autocompact-action"])
        items.pop()
    assert "compacted" in actions, actions
    assert proxy.upstream.rejected == 0, actions
    window = proxy.upstream.window
    sizes = [_upstream_tokens(proxy, json.loads(b)) for b in proxy.upstream.received]
    assert max(sizes) <= window, sizes
