"""The ledger's speed work (issue 22): the same ledger however memory is reused, linear time."""

from __future__ import annotations

from autocompact.compaction.ledger.extract import _Subjects
from autocompact.compaction.ledger.model import Entry


def test_a_superseded_entry_is_held_so_a_new_entry_never_takes_its_id() -> None:
    """An entry marked superseded and then let go (a replaced rule) does not make an entry
    created after it count as superseded: CPython gives a freed entry's memory, and so its id,
    to the next one made."""
    subjects = _Subjects()
    taken = []
    for n in range(200):
        old = Entry(f"Only deploy the exporter on day {n}.", 3.0, 2 * n, f"rule:{n}")
        subjects.drop(old)
        del old
        new = Entry(f"Only deploy the exporter on night {n}.", 3.0, 2 * n + 1, f"rule:{n}")
        if id(new) in subjects.gone:
            taken.append(new.text)
    assert taken == []
