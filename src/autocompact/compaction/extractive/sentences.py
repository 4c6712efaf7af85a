"""The sentence splitter, now :mod:`autocompact.compaction.ledger.sentences` (re-exported)."""

from __future__ import annotations

from autocompact.compaction.ledger.sentences import sentence_list, sentences

__all__ = ["sentence_list", "sentences"]
