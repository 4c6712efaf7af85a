"""Helpers shared by the real-server tests."""

from __future__ import annotations

from typing import Any

from autocompact.providers.base import Provider
from autocompact.providers.registry import get_provider

from .conftest import REQUEST_TIMEOUT, LlamaServer

MAIN_CAP = 4
"""Output cap of main turns: a base model's replies are not what these tests are about."""


def provider_for(server: LlamaServer, **options: Any) -> Provider:
    """The ``llamacpp:`` profile pointed at ``server`` through its recording proxy."""
    return get_provider(
        f"llamacpp:{server.model}",
        base_url=server.base_url,
        max_retries=0,
        timeout=REQUEST_TIMEOUT,
        **options,
    )


FILLER_TOPICS = (
    "the billing service rounds invoice totals twice, once per line and once per order",
    "the nightly export job writes CSV files with a trailing comma on every row",
    "the login page keeps a session cookie for thirty days unless the user signs out",
    "the search index is rebuilt every Sunday and takes about forty minutes",
    "the mobile app caches product images for a week on the device",
    "the payment gateway retries a declined card once after ten seconds",
    "the support inbox tags messages by language before they reach an agent",
    "the warehouse scanner sends stock counts every five minutes over a queue",
)


def turn_text(i: int, sentences: int = 12) -> str:
    """A user message of about ``sentences`` * 25 tokens, different for every ``i``."""
    lines = [f"Note {i}."]
    for k in range(sentences):
        topic = FILLER_TOPICS[(i + k) % len(FILLER_TOPICS)]
        lines.append(f"Item {i}.{k}: {topic}; ticket {1000 + 37 * i + k} tracks it.")
    lines.append("Reply with one short sentence.")
    return " ".join(lines)
