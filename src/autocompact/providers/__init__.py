"""Model providers: the protocol, the adapters and the scripted fake.

Adapters import their SDK lazily, so importing this package imports no SDK. The registry
(:func:`get_provider`, with the model limits it reads) and :func:`looks_like_overflow` are
imported on first use too: the engine's own modules import ``autocompact.providers.base``, which
runs this file, and a command that never builds a provider (``autocompact replay``) starts
faster without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from autocompact.providers._common import looks_like_overflow
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

_LAZY = {
    "get_provider": "autocompact.providers.registry",
    "looks_like_overflow": "autocompact.providers._common",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
