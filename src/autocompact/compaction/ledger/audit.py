"""The retention audit: what a model's summary dropped of the ledger, put back verbatim. Pure.

Every constraint, preference and latest fact of the ledger is looked for in the summary by a
normalised match on its value (a fact's value; a constraint's text, or every specific token and
longer word of it); what is missing is appended in a section of its own
(``<retained_from_history>``), verbatim, so a model that drops a user's rule cannot make it
vanish. :func:`missing` alone tells how many items a summary lacks (the extractive summarizer's
own shortfall under a binding budget).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autocompact.compaction.ledger.model import Entry, Ledger
from autocompact.compaction.ledger.render import CLOSE
from autocompact.compaction.ledger.text import FILLER, each_specific_token, norm

__all__ = ["Audit", "audit_summary", "missing"]

_WORD = re.compile(r"[a-z][a-z'-]{4,}")
RESTORED_TAG = "retained_from_history"


@dataclass(frozen=True, kw_only=True)
class Audit:
    """The summary after the audit, and what the audit did.

    Attributes:
        summary: the summary, with the restored items appended (unchanged when none were).
        audited: how many constraints, preferences and facts were checked.
        restored: how many of them the summary lacked and were appended.
    """

    summary: str
    audited: int
    restored: int


_MARKUP = str.maketrans(dict.fromkeys("`*_\"'“”‘’", " "))  # quotes and emphasis: blanks


def _folded(text: str) -> str:
    return " ".join(text.lower().translate(_MARKUP).split())


def _holds(folded: str, entry: Entry) -> bool:
    wanted = entry.value or entry.text
    if _folded(norm(wanted)) in folded:
        return True
    # Every anchor is in the summary, and there is one: the first one missing tells (the
    # longer words are read only when every specific token is there).
    anchored = False
    for token in each_specific_token(wanted):
        if token.strip():
            if _folded(token.lower()) not in folded:
                return False
            anchored = True
    if not entry.value:
        for word in _WORD.findall(wanted.lower()):
            if word not in FILLER:
                if _folded(word) not in folded:
                    return False
                anchored = True
    return anchored


def missing(summary: str, ledger: Ledger) -> list[Entry]:
    """The constraints, preferences and latest facts of ``ledger`` that ``summary`` lacks."""
    folded = _folded(summary)
    return [entry for entry in ledger.retained if not _holds(folded, entry)]


def audit_summary(summary: str, ledger: Ledger) -> Audit:
    """``summary`` with every retained item it lacks appended verbatim (see the module)."""
    lost = missing(summary, ledger)
    audited = len(ledger.retained)
    if not lost:
        return Audit(summary=summary, audited=audited, restored=0)
    block = "\n".join(
        [f"<{RESTORED_TAG}>", *(f"- {entry.text}" for entry in lost), f"</{RESTORED_TAG}>"]
    )
    at = summary.rfind(CLOSE)
    if at >= 0:
        text = summary[:at].rstrip() + "\n" + block + "\n" + summary[at:]
    else:
        text = summary.rstrip() + "\n\n" + block
    return Audit(summary=text, audited=audited, restored=len(lost))
