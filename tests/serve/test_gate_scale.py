"""The proxy compacts at *auto* on the upstream's scale (official SDK, scripted upstream).

The scripted upstream counts a chat request as its JSON bytes / 3, about 1.34 times the
engine's plain estimate; the proxy keeps no running count of its own, so it sizes a
conversation with the calibration it learned from the upstream's reports. The automatic
compaction must judge that same count, not call the request "below auto" on the plain one.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import openai
import pytest

from .conftest import Proxy
from .test_compaction import filler

WINDOW = 100_000  # warn 60,000 · auto 70,000 · hard 77,000


def test_a_conversation_past_auto_on_the_upstreams_count_is_compacted_at_auto(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A conversation that grows into the auto tier on the upstream's count (about 1.34x the
    plain estimate, which is still below auto) is compacted there with a summary request, not
    skipped as "below the auto threshold" and then trimmed."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    proxy.app.config = replace(proxy.app.config, context_window=WINDOW)
    proxy.upstream.window = 4 * WINDOW
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = []
    for turn in range(30):  # about 46,000 tokens on the plain estimate, 61,000 upstream
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn, 6_000)})
        messages.append({"role": "assistant", "content": f"done {turn}"})
    seen: list[tuple[str, str, int]] = []
    for turn in range(30, 42):
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn, 6_000)})
        raw = client.chat.completions.with_raw_response.create(
            model="scripted",
            messages=messages,  # type: ignore[arg-type]
        )
        assert raw.parse().choices[0].message.content.startswith("ok")
        headers = raw.headers
        seen.append(
            (
                headers["x-autocompact-tier"],
                headers["x-autocompact-action"],
                proxy.upstream.summaries,
            )
        )
        if headers["x-autocompact-compacted"] == "true":
            break
        messages.append({"role": "assistant", "content": f"ok {turn}"})
    tiers = [tier for tier, _, _ in seen]
    assert "auto" in tiers, seen
    first_auto = tiers.index("auto")
    assert seen[first_auto][1:] == ("compacted", 1), seen
    assert all(action == "forward" for _, action, _ in seen[:first_auto]), seen
    skipped = [r.getMessage() for r in caplog.records if "compaction skipped" in r.getMessage()]
    assert skipped == []
