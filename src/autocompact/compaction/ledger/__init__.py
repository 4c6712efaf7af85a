"""The state ledger: a typed record of the work that every summary carries (issue 22).

:func:`build_ledger` extracts it from the part being summarized (and from an earlier summary
in it, SPEC §10.5); :func:`render_ledger` writes it within a budget and :func:`parse_ledger`
reads it back; :func:`audit_summary` puts back what a model's summary dropped. Split by concern
(STYLE.md): :mod:`.text` reads one sentence, :mod:`.announcements` tells the model's
announcements of what it will do next, :mod:`.tools` what tools did, :mod:`.status` the
work they show finished, :mod:`.goals` the goal and its changes, :mod:`.subjects` which fact
supersedes which, :mod:`.extract` builds, :mod:`.render` writes and reads, :mod:`.audit`
audits.
"""

from __future__ import annotations

from autocompact.compaction.ledger.audit import Audit, audit_summary, missing
from autocompact.compaction.ledger.extract import build_ledger
from autocompact.compaction.ledger.model import Entry, Ledger
from autocompact.compaction.ledger.render import parse_ledger, render_ledger, required_chars

__all__ = [
    "Audit",
    "Entry",
    "Ledger",
    "audit_summary",
    "build_ledger",
    "missing",
    "parse_ledger",
    "render_ledger",
    "required_chars",
]
