"""Test doubles for code that uses autocompact: the scripted :class:`FakeProvider`."""

from __future__ import annotations

from autocompact.providers.fake import (
    FakeProvider,
    FakeReply,
    FakeTokenizer,
    estimate_request_tokens,
)

__all__ = ["FakeProvider", "FakeReply", "FakeTokenizer", "estimate_request_tokens"]
