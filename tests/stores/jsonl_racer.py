"""One process of the JSONL cross-process races (started by test_jsonl_processes.py).

Each function opens its own :class:`JsonlStore` on the shared directory, waits at the barrier
so every process starts the race together, and puts what it saw on the queue.
"""

from __future__ import annotations

import random
from typing import Any

from autocompact.content import Message
from autocompact.sessions.stores import JsonlStore

META = {"provider": "fake", "model": "m", "context_window": 10_000}
COMPRESSED = {"status": "compressed", "trigger": "auto", "new_token_count": 3}


def append_race(root: str, me: int, turns: int, barrier: Any, out: Any) -> None:
    """Append turns t0..t{turns-1} (the same ids in every process, each in its own order)."""
    store = JsonlStore(root)
    store.ensure("shared", META)
    order = list(range(turns))
    random.Random(me).shuffle(order)
    barrier.wait()
    fresh = []
    for i in order:
        pair = (Message.user(f"question {i}"), Message.model(f"answer {i}"))
        if not store.append_turn("shared", f"t{i}", pair, owner=f"p{me}").duplicate:
            fresh.append(i)
    out.put(("appended", me, fresh))


def lease_race(root: str, me: int, sessions: int, barrier: Any, out: Any) -> None:
    """Try to take the lease of every session (all processes at once)."""
    store = JsonlStore(root)
    barrier.wait()
    won = [s for s in range(sessions) if store.acquire_lease(f"lease-{s}", f"p{me}") is not None]
    out.put(("leases", me, won))


def commit_race(root: str, me: int, barrier: Any, out: Any) -> None:
    """Compact the same snapshot as every other process: one summary may win."""
    store = JsonlStore(root)
    base = store.load("cas")
    barrier.wait()
    result = store.commit_compaction(base, (Message.user(f"summary by p{me}"),), COMPRESSED)
    out.put(("committed", me, result.committed))
