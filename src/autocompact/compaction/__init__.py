"""Compaction: where to cut, what to send the summarizer, and how to apply its answer."""

from __future__ import annotations

from autocompact.compaction.plan import (
    CompressionInfo,
    CompressionResult,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
    Summarizer,
    build_side_query,
    compress_flow,
)
from autocompact.compaction.service import CompressionService
from autocompact.compaction.split import find_split_point, validate_history

__all__ = [
    "CompressOptions",
    "CompressionInfo",
    "CompressionResult",
    "CompressionService",
    "CompressionStatus",
    "CompressionTrigger",
    "Summarizer",
    "build_side_query",
    "compress_flow",
    "find_split_point",
    "validate_history",
]
