"""Compact once, replay the same bytes: the stored substitutions of a conversation. Pure.

A **record** says: the conversation whose first ``prefix_len`` messages (after any leading
system messages) hash to ``prefix_hash`` has them replaced by ``replacement``, a JSON array
serialized once when the compaction ran and kept as bytes. Every later request that carries
the same prefix gets those bytes in its place (:func:`autocompact.serve.wire.splice_body`).
Records are written once and never changed; the longest matching one wins.

A record the upstream refused (it rejected the request the record rewrote, and took, or
rejected only as too long, the client's own) is **refused**: a turn ``refused:<prefix_hash>``
marks it, and no request uses it again (:func:`usable_records`), so a conversation does not pay
a rejection and a second request on every later turn.

A conversation whose **trimmed** requests the upstream refused (a request the guarantee only
trimmed, no substitution or compaction in it, rejected while the client's own was taken or
rejected only as too long) holds a turn :data:`TRIMS_REFUSED_ID`: its later requests the
guarantee would trim go out as the client sent them (:func:`trims_refused`).

In the store a record is one turn of the conversation's session whose id is
``sub:<prefix_hash>`` (the store's append is idempotent under it) and whose single message holds
the record as JSON text: the store's own protocol, no schema of ours.

The replacement is written from the engine's new history: the messages the compaction wrote
(the summary) in the protocol's form, then the kept recent messages **as the client sent them**
wherever they are unchanged (found by matching the content model back to the wire, so the kept
part keeps unknown fields and signed blocks byte for byte), and where only old tool output was
cleared, as the client sent them with that output changed (:mod:`autocompact.serve.verbatim`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from autocompact.content import Message, TextPart
from autocompact.errors import ContentError
from autocompact.serve.protocol import WireProtocol
from autocompact.serve.verbatim import kept_tail
from autocompact.serve.wire import chain_hashes, dump
from autocompact.sessions.stores.base import Entry

__all__ = [
    "RECORD_PREFIX",
    "REFUSED_PREFIX",
    "TRIMS_REFUSED_ID",
    "PrefixChain",
    "Record",
    "best_record",
    "build_replacement",
    "record_from_entry",
    "record_messages",
    "refusal_messages",
    "trims_refused",
    "trims_refused_turn",
    "usable_records",
]

RECORD_PREFIX = "sub:"
REFUSED_PREFIX = "refused:"
TRIMS_REFUSED_ID = "refused-trims"
"""The turn that marks a conversation whose trimmed requests the upstream refuses."""
_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Record:
    """One stored substitution (see the module docstring).

    Attributes:
        prefix_len: how many client messages it replaces (after leading system messages).
        prefix_hash: the chain hash of those messages.
        replacement: the replacement messages as a JSON array, bytes as stored.
        state: the engine's state after the compaction (``GuardState.to_dict()``).
        tokens_before, tokens_after: the estimate before and after.
    """

    prefix_len: int
    prefix_hash: str
    replacement: bytes
    state: dict[str, Any] = field(default_factory=dict)
    tokens_before: int = 0
    tokens_after: int = 0

    @property
    def turn_id(self) -> str:
        """Its id in the store."""
        return RECORD_PREFIX + self.prefix_hash

    @property
    def refused_id(self) -> str:
        """The id in the store of the turn that marks it refused."""
        return REFUSED_PREFIX + self.prefix_hash


def record_messages(record: Record) -> tuple[Message, ...]:
    """The record as the one message a store turn holds."""
    payload = {
        "autocompact_serve_record": _VERSION,
        "prefix_len": record.prefix_len,
        "prefix_hash": record.prefix_hash,
        "replacement": record.replacement.decode("utf-8"),
        "state": record.state,
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
    }
    return (Message(role="user", parts=(TextPart(text=json.dumps(payload)),)),)


def refusal_messages(record: Record, status: int) -> tuple[Message, ...]:
    """The mark of a refused record as the one message a store turn holds (``status``: the
    upstream's answer to the request it rewrote)."""
    payload = {"autocompact_serve_refused": _VERSION, "prefix_len": record.prefix_len}
    payload["status"] = status
    return (Message(role="user", parts=(TextPart(text=json.dumps(payload)),)),)


def trims_refused_turn(status: int) -> tuple[str, tuple[Message, ...]]:
    """The turn id and the one message of the store turn that marks a conversation whose
    trimmed requests the upstream refuses (``status``: the upstream's answer to the client's
    own request sent then)."""
    payload = {"autocompact_serve_trims_refused": _VERSION, "status": status}
    return TRIMS_REFUSED_ID, (Message(role="user", parts=(TextPart(text=json.dumps(payload)),)),)


def trims_refused(entries: Sequence[Entry]) -> bool:
    """Whether a session's entries mark its trimmed requests refused."""
    return any(e.turn_id == TRIMS_REFUSED_ID for e in entries)


def usable_records(entries: Sequence[Entry]) -> list[Record]:
    """The records a session's entries hold, those marked refused left out."""
    refused = {e.turn_id for e in entries if (e.turn_id or "").startswith(REFUSED_PREFIX)}
    found = (record_from_entry(e.turn_id, e.messages) for e in entries)
    return [r for r in found if r is not None and r.refused_id not in refused]


def record_from_entry(turn_id: str | None, messages: Sequence[Message]) -> Record | None:
    """The record a store turn holds (``None``: not a record of this version)."""
    if turn_id is None or not turn_id.startswith(RECORD_PREFIX) or len(messages) != 1:
        return None
    parts = messages[0].parts
    if len(parts) != 1 or not isinstance(parts[0], TextPart):
        return None
    try:
        data = json.loads(parts[0].text)
        if data.get("autocompact_serve_record") != _VERSION:
            return None
        return Record(
            prefix_len=int(data["prefix_len"]),
            prefix_hash=str(data["prefix_hash"]),
            replacement=str(data["replacement"]).encode("utf-8"),
            state=dict(data.get("state") or {}),
            tokens_before=int(data.get("tokens_before", 0)),
            tokens_after=int(data.get("tokens_after", 0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def best_record(records: Sequence[Record], hashes: Sequence[str], limit: int) -> Record | None:
    """The longest record whose prefix the request carries, replacing at most ``limit``
    messages (never the pending message)."""
    best: Record | None = None
    for record in records:
        n = record.prefix_len
        matches = 0 < n <= min(limit, len(hashes)) and hashes[n - 1] == record.prefix_hash
        if matches and (best is None or n > best.prefix_len):
            best = record
    return best


def _tail_match(protocol: WireProtocol, history: Sequence[Message], source: Sequence[Any]) -> int:
    """The start in ``source`` of the longest wire suffix that converts to the end of
    ``history`` unchanged (``len(source)``: none)."""
    best = len(source)
    matched = 0
    for start in range(len(source) - 1, -1, -1):
        try:
            converted = protocol.convert({}, source[start:]).messages
        except ContentError:
            continue
        n = len(converted)
        if n > len(history):
            break
        if n and tuple(history[len(history) - n :]) == tuple(converted):
            best, matched = start, n
        elif n > matched + 1:
            break
    return best


def _reads_back(protocol: WireProtocol, wire: list[Any], tail: Sequence[Message]) -> bool:
    """Whether ``wire`` reads as messages that end with ``tail``."""
    if not tail:
        return True
    try:
        messages = protocol.convert({}, wire).messages
    except ContentError:
        return False
    return tuple(messages[len(messages) - len(tail) :]) == tuple(tail)


def build_replacement(
    protocol: WireProtocol, history: Sequence[Message], source: Sequence[Any]
) -> bytes:
    """The replacement bytes for ``history`` (the engine's new history without the pending
    message), reusing the client's own messages from ``source`` for its unchanged tail
    (:func:`~autocompact.serve.verbatim.kept_tail`: tool outputs the clearing replaced
    written into them; when ``source`` cannot be matched so, or what that writes does not read
    back as ``history``, its longest unchanged suffix).

    Raises:
        ContentError: the history cannot be written in the protocol's form.
    """
    matched = kept_tail(protocol, history, source)
    if matched is not None:
        count, kept = matched
        written = protocol.to_wire(history[: len(history) - count], source)
        if _reads_back(protocol, written + kept, history[len(history) - count :]):
            return dump(written + kept)
    start = _tail_match(protocol, history, source)
    kept = list(source[start:])
    written_count = len(history) - (len(protocol.convert({}, kept).messages) if kept else 0)
    written = protocol.to_wire(history[:written_count], source)
    return dump(written + kept)


class PrefixChain:
    """A request's chain hashes, computed only as far as a stored record needs them (a
    conversation with no record hashes nothing)."""

    def __init__(self, conv: Sequence[Any]) -> None:
        self.conv = conv
        self.hashes: list[str] = []

    def upto(self, records: Sequence[Record], limit: int) -> list[str]:
        """The hashes of the first messages, as many as the longest record (at most ``limit``)
        needs."""
        need = min(max((r.prefix_len for r in records), default=0), limit, len(self.conv))
        if need > len(self.hashes):
            self.hashes = chain_hashes(self.conv[:need])
        return self.hashes
