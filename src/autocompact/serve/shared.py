"""The conversation's carried state in the store, shared by every worker. Pure.

What the engine carries between requests (:class:`~autocompact.guard.GuardState`: the breaker's
count and hold, the calibration reported usage teaches, the growth log) belongs to the
conversation, not to the worker a request happens to reach. It is kept in the conversation's
session in the store, beside the records, through the store's own protocol:

- a record (``sub:<hash>``, :mod:`autocompact.serve.substitution`) carries the state its
  compaction left;
- a **state entry** is a turn whose id is ``state:<base>`` and whose one message holds
  ``GuardState.to_dict()`` as JSON, where ``<base>`` is the store ``seq`` of the state-bearing
  entry (record or state entry) it was computed from (``0``: none).

The current state is the end of that chain: walking the entries in write order, a record sets
it, and a state entry sets it only when its base is the entry that set it last. The store's
append is idempotent per turn id, so two workers that read the same state and both write get
one entry: the second sees its append was a duplicate and reads again (a compare-and-swap with
no schema of ours). A state entry written from a state a record has since replaced is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autocompact.content import Message, TextPart
from autocompact.estimation import CALIBRATION_MIN_SAMPLES, Calibration
from autocompact.serve.substitution import record_from_entry
from autocompact.sessions.stores.base import Entry

__all__ = [
    "CALIBRATION_TOLERANCE",
    "SHARE_TOLERANCE",
    "STATE_PREFIX",
    "SharedState",
    "calibration_moved",
    "current_state",
    "state_messages",
    "state_turn_id",
]

STATE_PREFIX = "state:"
_VERSION = 1
CALIBRATION_TOLERANCE = 0.02
"""A learnt calibration is written back when its factor moved by more than this share (or it
was the first sample): a converged calibration costs no store write per request."""
SHARE_TOLERANCE = 0.05
"""A learnt calibration is written back when the JSON share it was learnt on moved by more."""


@dataclass(frozen=True, kw_only=True)
class SharedState:
    """The conversation's current carried state and where it came from.

    Attributes:
        state: ``GuardState.to_dict()``.
        seq: the store ``seq`` of the entry that holds it (the base of the next state entry).
    """

    state: dict[str, Any]
    seq: int


def state_turn_id(base: int) -> str:
    """The turn id of the state entry computed from the entry at ``base`` (``0``: none)."""
    return f"{STATE_PREFIX}{base}"


def state_messages(state: dict[str, Any]) -> tuple[Message, ...]:
    """The state as the one message a store turn holds."""
    payload = {"autocompact_serve_state": _VERSION, "state": state}
    return (Message(role="user", parts=(TextPart(text=json.dumps(payload)),)),)


def _state_from_entry(entry: Entry) -> dict[str, Any] | None:
    if len(entry.messages) != 1 or len(entry.messages[0].parts) != 1:
        return None
    part = entry.messages[0].parts[0]
    if not isinstance(part, TextPart):
        return None
    try:
        data = json.loads(part.text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("autocompact_serve_state") != _VERSION:
        return None
    state = data.get("state")
    return state if isinstance(state, dict) else None


def current_state(entries: Sequence[Entry]) -> SharedState | None:
    """The end of the state chain of a session's entries (``None``: no state stored)."""
    current: SharedState | None = None
    for entry in entries:
        turn_id = entry.turn_id or ""
        if turn_id.startswith(STATE_PREFIX):
            base = current.seq if current is not None else 0
            if turn_id == state_turn_id(base):
                state = _state_from_entry(entry)
                if state is not None:
                    current = SharedState(state=state, seq=entry.seq)
            continue
        record = record_from_entry(entry.turn_id, entry.messages)
        if record is not None:
            current = SharedState(state=record.state, seq=entry.seq)
    return current


def calibration_moved(old: Calibration, new: Calibration) -> bool:
    """Whether ``new`` is worth writing over ``old``: until the calibration has the
    :data:`~autocompact.estimation.CALIBRATION_MIN_SAMPLES` reports it needs to lower an
    estimate, always; then when its factor moved by more than :data:`CALIBRATION_TOLERANCE` or
    the JSON share of the content it was learnt on by more than :data:`SHARE_TOLERANCE` (a
    factor is applied only to content of the mix it was learnt on)."""
    if new.samples == 0:
        return False
    if old.samples < CALIBRATION_MIN_SAMPLES:
        return True
    if (old.json_share is None) != (new.json_share is None):
        return True
    if (
        old.json_share is not None
        and new.json_share is not None
        and abs(new.json_share - old.json_share) > SHARE_TOLERANCE
    ):
        return True
    return abs(new.factor - old.factor) > CALIBRATION_TOLERANCE * old.factor
