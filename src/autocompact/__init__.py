"""autocompact: automatic context-window compaction for LLM agents.

The public API is re-exported here; everything else is private to the package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autocompact.chat import AsyncChatSession, ChatSession
    from autocompact.compaction import (
        CompressionInfo,
        CompressionResult,
        CompressionService,
        CompressionStatus,
        CompressionTrigger,
        CompressOptions,
        find_split_point,
    )
    from autocompact.compaction.clearing import ClearingResult, clear_tool_outputs
    from autocompact.compaction.extractive import extractive_summary
    from autocompact.content import (
        DocumentPart,
        FunctionCallPart,
        FunctionResponsePart,
        ImagePart,
        Message,
        OpaquePart,
        Part,
        TextPart,
        ThinkingPart,
        Usage,
    )
    from autocompact.context_report import ContextReport, build_context_report
    from autocompact.engine import CarriedState, ConversationState, Engine, EngineConfig
    from autocompact.errors import (
        AuthenticationError,
        AutocompactError,
        CompactionError,
        ConfigError,
        ContentError,
        ContextOverflowError,
        MalformedResponseError,
        MessageTooLargeError,
        MissingDependencyError,
        ProviderConnectionError,
        ProviderError,
        ProviderTimeoutError,
        RateLimitError,
        SessionFileError,
        SessionInUseError,
        SessionStoreError,
        TranscriptFormatError,
    )
    from autocompact.estimation import (
        estimate_content_chars,
        estimate_content_tokens,
        estimate_prompt_tokens,
    )
    from autocompact.events import (
        BreakerClosed,
        BreakerOpened,
        CompactionCancelled,
        CompactionFailed,
        CompactionOutgrown,
        CompactionSkipped,
        CompactionStarted,
        CompactionSucceeded,
        Event,
        Hook,
        RequestTrimmed,
        ThresholdCrossed,
        WindowLearned,
    )
    from autocompact.guard import ContextGuard, GuardResult, GuardState
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
    from autocompact.sessions.stores import SessionStore, open_store
    from autocompact.settings import Settings, load_settings
    from autocompact.thresholds import (
        AUTOCOMPACT_BUFFER,
        COMPACT_MAX_OUTPUT_TOKENS,
        DEFAULT_IMAGE_TOKEN_ESTIMATE,
        DEFAULT_PCT,
        HARD_BUFFER,
        MAX_CONSECUTIVE_FAILURES,
        SUMMARY_RESERVE,
        WARN_BUFFER,
        WARN_PCT_OFFSET,
        CompactionThresholds,
        Tier,
        compute_thresholds,
        parse_window,
        tier_of,
    )
    from autocompact.tips import Tip, select_tip

# The public names are imported when first used (PEP 562), not with the package: the command
# line and a program that needs one module do not pay for the engine, the providers and the
# stores (issue 25: ``autocompact --help`` imported all of them). ``name -> module``:
_LAZY: dict[str, str] = {
    "AUTOCOMPACT_BUFFER": "autocompact.thresholds",
    "AsyncChatSession": "autocompact.chat",
    "AuthenticationError": "autocompact.errors",
    "AutocompactError": "autocompact.errors",
    "BreakerClosed": "autocompact.events",
    "BreakerOpened": "autocompact.events",
    "COMPACT_MAX_OUTPUT_TOKENS": "autocompact.thresholds",
    "CarriedState": "autocompact.engine",
    "ChatRequest": "autocompact.providers.base",
    "ChatSession": "autocompact.chat",
    "ClearingResult": "autocompact.compaction.clearing",
    "CompactionCancelled": "autocompact.events",
    "CompactionError": "autocompact.errors",
    "CompactionFailed": "autocompact.events",
    "CompactionOutgrown": "autocompact.events",
    "CompactionSkipped": "autocompact.events",
    "CompactionStarted": "autocompact.events",
    "CompactionSucceeded": "autocompact.events",
    "CompactionThresholds": "autocompact.thresholds",
    "Completion": "autocompact.providers.base",
    "CompressOptions": "autocompact.compaction",
    "CompressionInfo": "autocompact.compaction",
    "CompressionResult": "autocompact.compaction",
    "CompressionService": "autocompact.compaction",
    "CompressionStatus": "autocompact.compaction",
    "CompressionTrigger": "autocompact.compaction",
    "ConfigError": "autocompact.errors",
    "ContentError": "autocompact.errors",
    "ContextGuard": "autocompact.guard",
    "ContextOverflowError": "autocompact.errors",
    "ContextReport": "autocompact.context_report",
    "ConversationState": "autocompact.engine",
    "DEFAULT_IMAGE_TOKEN_ESTIMATE": "autocompact.thresholds",
    "Engine": "autocompact.engine",
    "EngineConfig": "autocompact.engine",
    "DEFAULT_PCT": "autocompact.thresholds",
    "DocumentPart": "autocompact.content",
    "Event": "autocompact.events",
    "FinishReason": "autocompact.providers.base",
    "FunctionCallPart": "autocompact.content",
    "FunctionResponsePart": "autocompact.content",
    "GuardResult": "autocompact.guard",
    "GuardState": "autocompact.guard",
    "HARD_BUFFER": "autocompact.thresholds",
    "Hook": "autocompact.events",
    "ImagePart": "autocompact.content",
    "MAX_CONSECUTIVE_FAILURES": "autocompact.thresholds",
    "MalformedResponseError": "autocompact.errors",
    "Message": "autocompact.content",
    "MessageTooLargeError": "autocompact.errors",
    "MissingDependencyError": "autocompact.errors",
    "OpaquePart": "autocompact.content",
    "Part": "autocompact.content",
    "Provider": "autocompact.providers.base",
    "ProviderConnectionError": "autocompact.errors",
    "ProviderError": "autocompact.errors",
    "ProviderTimeoutError": "autocompact.errors",
    "RateLimitError": "autocompact.errors",
    "RequestTrimmed": "autocompact.events",
    "SUMMARY_RESERVE": "autocompact.thresholds",
    "SessionFileError": "autocompact.errors",
    "SessionInUseError": "autocompact.errors",
    "SessionStore": "autocompact.sessions.stores",
    "SessionStoreError": "autocompact.errors",
    "Settings": "autocompact.settings",
    "StreamDone": "autocompact.providers.base",
    "StreamEvent": "autocompact.providers.base",
    "TextDelta": "autocompact.providers.base",
    "TextPart": "autocompact.content",
    "ThinkingDelta": "autocompact.providers.base",
    "ThinkingPart": "autocompact.content",
    "ThresholdCrossed": "autocompact.events",
    "Tier": "autocompact.thresholds",
    "Tip": "autocompact.tips",
    "ToolSpec": "autocompact.providers.base",
    "TranscriptFormatError": "autocompact.errors",
    "Usage": "autocompact.content",
    "WARN_BUFFER": "autocompact.thresholds",
    "WARN_PCT_OFFSET": "autocompact.thresholds",
    "WindowLearned": "autocompact.events",
    "build_context_report": "autocompact.context_report",
    "clear_tool_outputs": "autocompact.compaction.clearing",
    "compute_thresholds": "autocompact.thresholds",
    "estimate_content_chars": "autocompact.estimation",
    "estimate_content_tokens": "autocompact.estimation",
    "estimate_prompt_tokens": "autocompact.estimation",
    "extractive_summary": "autocompact.compaction.extractive",
    "find_split_point": "autocompact.compaction",
    "load_settings": "autocompact.settings",
    "open_store": "autocompact.sessions.stores",
    "parse_window": "autocompact.thresholds",
    "select_tip": "autocompact.tips",
    "tier_of": "autocompact.thresholds",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        # A submodule reached as an attribute (``autocompact.chat``), as when the package
        # imported them all.
        if name.startswith("_"):
            raise AttributeError(f"module 'autocompact' has no attribute {name!r}")
        try:
            return importlib.import_module(f"autocompact.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"autocompact.{name}":
                raise
            raise AttributeError(f"module 'autocompact' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "AUTOCOMPACT_BUFFER",
    "COMPACT_MAX_OUTPUT_TOKENS",
    "DEFAULT_IMAGE_TOKEN_ESTIMATE",
    "DEFAULT_PCT",
    "HARD_BUFFER",
    "MAX_CONSECUTIVE_FAILURES",
    "SUMMARY_RESERVE",
    "WARN_BUFFER",
    "WARN_PCT_OFFSET",
    "AsyncChatSession",
    "AuthenticationError",
    "AutocompactError",
    "BreakerClosed",
    "BreakerOpened",
    "CarriedState",
    "ChatRequest",
    "ChatSession",
    "ClearingResult",
    "CompactionCancelled",
    "CompactionError",
    "CompactionFailed",
    "CompactionOutgrown",
    "CompactionSkipped",
    "CompactionStarted",
    "CompactionSucceeded",
    "CompactionThresholds",
    "Completion",
    "CompressOptions",
    "CompressionInfo",
    "CompressionResult",
    "CompressionService",
    "CompressionStatus",
    "CompressionTrigger",
    "ConfigError",
    "ContentError",
    "ContextGuard",
    "ContextOverflowError",
    "ContextReport",
    "ConversationState",
    "DocumentPart",
    "Engine",
    "EngineConfig",
    "Event",
    "FinishReason",
    "FunctionCallPart",
    "FunctionResponsePart",
    "GuardResult",
    "GuardState",
    "Hook",
    "ImagePart",
    "MalformedResponseError",
    "Message",
    "MessageTooLargeError",
    "MissingDependencyError",
    "OpaquePart",
    "Part",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RequestTrimmed",
    "SessionFileError",
    "SessionInUseError",
    "SessionStore",
    "SessionStoreError",
    "Settings",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "TextPart",
    "ThinkingDelta",
    "ThinkingPart",
    "ThresholdCrossed",
    "Tier",
    "Tip",
    "ToolSpec",
    "TranscriptFormatError",
    "Usage",
    "WindowLearned",
    "__version__",
    "build_context_report",
    "clear_tool_outputs",
    "compute_thresholds",
    "estimate_content_chars",
    "estimate_content_tokens",
    "estimate_prompt_tokens",
    "extractive_summary",
    "find_split_point",
    "load_settings",
    "open_store",
    "parse_window",
    "select_tip",
    "tier_of",
]
