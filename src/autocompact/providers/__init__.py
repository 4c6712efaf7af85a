"""Model providers: the protocol, the adapters and the scripted fake.

Adapters import their SDK lazily, so importing this package imports no SDK.
"""

from __future__ import annotations

from autocompact.providers._common import looks_like_overflow
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    Provider,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
)
from autocompact.providers.registry import get_provider

__all__ = [
    "ChatRequest",
    "Completion",
    "FinishReason",
    "Provider",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolSpec",
    "get_provider",
    "looks_like_overflow",
]
