"""The JSONL store across processes: real subprocesses racing on the same session files.

Every call holds the session's lock file (fcntl.flock), so idempotent appends, the compaction
lease and the compare-and-swap hold between processes of one machine, not only threads.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

from autocompact.content import Message
from autocompact.sessions.stores import JsonlStore

from . import jsonl_racer

PROCESSES = 6


def race(target: Any, *args: Any) -> list[tuple[str, int, Any]]:
    """Run ``target(*args, me, ..., barrier, queue)`` in PROCESSES spawned processes."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(args[0], me, *args[1:], barrier, out))
        for me in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_processes_appending_the_same_turn_ids_store_each_turn_once(tmp_path: Path) -> None:
    """Six processes append the same 15 turn ids at once: each turn is in the file once."""
    root = str(tmp_path / "sessions")
    results = race(jsonl_racer.append_race, root, 15)
    won = sorted(i for _, _, fresh in results for i in fresh)
    assert won == list(range(15))  # exactly one process appended each turn
    store = JsonlStore(root)
    snap = store.load("shared")
    texts = [m.text for m in snap.history]
    assert len(texts) == 30
    assert sorted(t for t in texts if t.startswith("question")) == sorted(
        f"question {i}" for i in range(15)
    )
    for i in range(15):  # a turn's two messages stay together
        at = texts.index(f"question {i}")
        assert texts[at + 1] == f"answer {i}"
    stored = store.get_turn("shared", "t7")
    assert stored is not None
    assert [m.text for m in stored.messages] == ["question 7", "answer 7"]


def test_one_process_wins_each_lease(tmp_path: Path) -> None:
    """Six processes take the leases of ten sessions at once: one holder per session."""
    root = str(tmp_path / "sessions")
    setup = JsonlStore(root)
    for s in range(10):
        setup.ensure(f"lease-{s}", jsonl_racer.META)
    results = race(jsonl_racer.lease_race, root, 10)
    winners = sorted(s for _, _, won in results for s in won)
    assert winners == list(range(10))
    lease = setup.acquire_lease("lease-0", "late-comer")
    assert lease is None  # the winner's lease is still held, seen from another process


def test_one_summary_wins_the_compare_and_swap(tmp_path: Path) -> None:
    """Six processes commit a summary of the same snapshot: one commits, five are superseded."""
    root = str(tmp_path / "sessions")
    setup = JsonlStore(root)
    setup.ensure("cas", jsonl_racer.META)
    setup.append_turn("cas", "t0", (Message.user("q"), Message.model("a")))
    results = race(jsonl_racer.commit_race, root)
    assert sorted(committed for _, _, committed in results) == [False] * 5 + [True]
    statuses = [a.status for a in setup.attempts("cas")]
    assert sorted(statuses) == ["compressed"] + ["superseded"] * 5
    history = setup.load("cas").history
    assert len(history) == 1
    assert history[0].text.startswith("summary by p")


def test_a_lease_is_released_across_processes(tmp_path: Path) -> None:
    """A lease written by one store object is seen, then released, by another."""
    root = tmp_path / "sessions"
    a, b = JsonlStore(root), JsonlStore(root)
    a.ensure("s", jsonl_racer.META)
    lease = a.acquire_lease("s", "A")
    assert lease is not None
    assert b.acquire_lease("s", "B") is None
    a.release_lease(lease)
    assert b.acquire_lease("s", "B") is not None
