"""Anthropic's compaction beta as a native summary backend: requests, outcomes, errors.

Checked against the types inside the ``anthropic`` wheel (2.16):

* the request is ``POST /v1/messages`` with ``compaction: {"type": "summarize"}``
  (``BetaCompactionConfigParam``; ``instructions`` *replace* the server's prompt) and the beta
  header ``anthropic-beta: compact-2026-09-04``; it cannot be combined with
  ``context_management``, and parameters that only shape a reply are left out;
* the response holds only a ``compaction`` block (``BetaCompactionBlock``: ``content``,
  ``encrypted_content``, ``signature``, ``tool_changes``) with ``stop_reason: "compaction"``;
  ``content: null`` is a failed compaction the server treats as a no-op;
* its usage is the ``usage.iterations`` entry of type ``compaction``, not the top-level usage;
* errors carry ``error.details.error_code`` (``compaction_unavailable``,
  ``compaction_block_misplaced``, ...), which the SDK exposes as ``APIStatusError.error_code``;
* a later request sends the block first in ``messages``, unchanged, with the same beta header.

The block is stored as the raw JSON the API returned (not a ``model_dump`` of the parsed
model, which would add every unset field as ``null``), so it goes back byte-exact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from autocompact.content import OpaquePart, Usage
from autocompact.providers.base import NativeCompaction, NativeOutcome
from autocompact.usage_check import reported_count

__all__ = [
    "COMPACTION_BETA",
    "anthropic_family",
    "compaction_instructions",
    "error_outcome",
    "response_outcome",
    "supported_by_capabilities",
]

COMPACTION_BETA = "compact-2026-09-04"
"""The beta that enables the ``compaction`` request field and blocks."""

_DATE = re.compile(r"-(\d{8}|latest)$")

# Error codes after which our own summary may still work (the range or the server is the
# problem, not the credentials): write it instead.
_FALLBACK_CODES = {
    "compaction_unavailable": NativeOutcome.UNAVAILABLE,
    "compaction_incomplete_turn": NativeOutcome.UNAVAILABLE,
    "compaction_too_many_tool_references": NativeOutcome.UNAVAILABLE,
    "compaction_block_misplaced": NativeOutcome.UNAVAILABLE,
    "compaction_block_ambiguous": NativeOutcome.UNAVAILABLE,
    "compaction_signature_invalid": NativeOutcome.UNAVAILABLE,
    "compaction_content_mismatch": NativeOutcome.UNAVAILABLE,
    "compaction_tool_changes_mismatch": NativeOutcome.UNAVAILABLE,
    "compaction_nothing_to_summarize": NativeOutcome.EMPTY,
}

_STOPS = {
    "max_tokens": NativeOutcome.TRUNCATED,
    "refusal": NativeOutcome.REFUSED,
    "model_context_window_exceeded": NativeOutcome.TOO_LARGE,
}

_DEFAULT_INSTRUCTIONS = (
    "Summarize this conversation so that the work can continue from the summary alone: the "
    "goal, constraints, key facts, files and code, errors and fixes, recent actions, the "
    "current plan and the next step."
)


def anthropic_family(model: str) -> str:
    """The family an Anthropic compaction block belongs to: the model without its date."""
    return _DATE.sub("", model.strip().lower())


def compaction_instructions(user_instructions: str | None) -> str | None:
    """The ``instructions`` field: absent (the server's own prompt) unless the user gave some.

    The field replaces the server's prompt rather than adding to it, so the user's words are
    sent after a full summary instruction of ours.
    """
    if user_instructions is None or not user_instructions.strip():
        return None
    return f"{_DEFAULT_INSTRUCTIONS}\n\n{user_instructions.strip()}"


def supported_by_capabilities(info: Any) -> bool | None:
    """Whether the Models API's capability data says the model takes ``compaction.summarize``.

    ``None`` when the data does not say (an older server, or no ``compaction`` entry).
    """
    capabilities = getattr(info, "capabilities", None)
    compaction = getattr(capabilities, "compaction", None)
    if compaction is None:
        return None
    summarize = getattr(compaction, "summarize", None)
    supported = getattr(compaction, "supported", None)
    return bool(supported is True) and bool(getattr(summarize, "supported", False) is True)


def _iteration_usage(usage: Mapping[str, Any] | None) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    iterations = usage.get("iterations") or []
    entry = next(
        (i for i in iterations if isinstance(i, Mapping) and i.get("type") == "compaction"), None
    )
    source: Mapping[str, Any] = entry if entry is not None else usage
    read = reported_count(source.get("cache_read_input_tokens"))
    return Usage(
        prompt_tokens=reported_count(source.get("input_tokens"))
        + reported_count(source.get("cache_creation_input_tokens"))
        + read,
        output_tokens=reported_count(source.get("output_tokens")),
        cached_tokens=read,
    )


def response_outcome(raw: Mapping[str, Any], *, family: str) -> NativeCompaction:
    """The outcome of a compaction response, from its raw JSON (every stop reason mapped)."""
    stop = raw.get("stop_reason")
    stop = stop if isinstance(stop, str) else None
    usage = _iteration_usage(raw.get("usage"))
    content = raw.get("content")
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    block = next((b for b in blocks if b.get("type") == "compaction"), None)
    if stop in _STOPS:
        return NativeCompaction(outcome=_STOPS[stop], usage=usage, raw_stop=stop)
    if block is None:
        return NativeCompaction(
            outcome=NativeOutcome.EMPTY,
            usage=usage,
            raw_stop=stop,
            detail=f"the response held no compaction block (stop_reason {stop})",
        )
    summary = block.get("content")
    if not isinstance(summary, str) or not summary.strip():
        return NativeCompaction(
            outcome=NativeOutcome.EMPTY,
            usage=usage,
            raw_stop=stop,
            detail="the compaction block has no summary (content null: a failed compaction)",
        )
    part = OpaquePart(
        provider="anthropic",
        family=family,
        payload=dict(block),
        summary=summary,
        tokens=usage.output_tokens if usage is not None else 0,
    )
    return NativeCompaction(outcome=NativeOutcome.COMPACTED, part=part, usage=usage, raw_stop=stop)


def error_outcome(
    status: int | None, error_code: str | None, message: str, *, overflow: bool
) -> NativeCompaction | None:
    """The outcome an API error stands for, or ``None`` when it is an ordinary provider error.

    ``overflow``: the error says the prompt is too long (the range does not fit the model).
    A clean 400 about compaction or its beta without a compaction error code means the model
    or account cannot compact: ``UNSUPPORTED``, which the adapter remembers.
    """
    if error_code in _FALLBACK_CODES:
        return NativeCompaction(
            outcome=_FALLBACK_CODES[error_code], raw_stop=error_code, detail=message
        )
    if overflow:
        return NativeCompaction(
            outcome=NativeOutcome.TOO_LARGE, raw_stop=error_code, detail=message
        )
    if status == 400 and re.search(r"compact|beta", message, re.IGNORECASE):
        return NativeCompaction(
            outcome=NativeOutcome.UNSUPPORTED, raw_stop=error_code, detail=message
        )
    return None
