"""The ``autocompact`` entry of a thread's agent state, read back: the count, and what the tip
needs to know (the breaker, the hold, whether a forced compaction ran before the last model
call) — facts the engine wrote there, not decided again here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autocompact.compaction.plan import CompressionTrigger
from autocompact.errors import ConfigError
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, CompactionThresholds
from autocompact.tips import Tip, select_tip

__all__ = ["STATE_KEY", "entry_tip", "entry_tokens", "entry_window", "thread_values"]

STATE_KEY = "autocompact"

_FORCED = frozenset({CompressionTrigger.HARD.value, CompressionTrigger.REACTIVE.value})


def thread_values(state: object) -> Mapping[str, Any]:
    """A thread's state values: ``state`` itself, or the ``values`` of the
    ``StateSnapshot`` that ``agent.get_state(config)`` returns.

    Raises:
        ConfigError: anything else (``None``, a list of messages), naming what was given.
    """
    values = getattr(state, "values", None)
    if not isinstance(state, Mapping) and isinstance(values, Mapping):
        return values
    if not isinstance(state, Mapping):
        raise ConfigError(
            "state must be a thread's state: agent.get_state(config) or its .values (a dict "
            f"with 'messages'), got {type(state).__name__} {state!r:.60}",
            key="state",
        )
    return state


def entry_window(state: Mapping[str, Any]) -> int | None:
    """The window of the model the thread's last model call went to (``None``: not known)."""
    window = (state.get(STATE_KEY) or {}).get("window")
    return window if isinstance(window, int) and window > 0 else None


def entry_tokens(state: Mapping[str, Any]) -> int:
    """The count the entry of ``state`` holds (0: none yet)."""
    entry = state.get(STATE_KEY) or {}
    return int(entry.get("tokens", 0))


def entry_tip(
    state: Mapping[str, Any], window: int, thresholds: CompactionThresholds
) -> Tip | None:
    """The tip for the count in the entry of ``state``: paused when the breaker is open or a
    hold stops automatic compaction at that count; a forced compaction said to have run only
    when one (the hard rescue, a reactive one) ran before the last model call."""
    entry = state.get(STATE_KEY) or {}
    tokens = entry_tokens(state)
    hold = entry.get("hold_until")
    compactions = entry.get("compactions") or []
    return select_tip(
        tokens,
        window=window,
        thresholds=thresholds,
        breaker_open=int(entry.get("consecutive_failures", 0)) >= MAX_CONSECUTIVE_FAILURES,
        held=hold is not None and tokens < int(hold),
        rescue_ran=any(isinstance(c, Mapping) and c.get("trigger") in _FORCED for c in compactions),
    )
