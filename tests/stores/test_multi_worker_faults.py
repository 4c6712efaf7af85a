"""Eight worker processes, SIGKILLed at random points, share 20 conversations of 100 turns.

Afterwards, from the store alone (plus the workers' side-query log): every acknowledged turn is
there exactly once, each conversation is one linear history, each committed summary was
requested by exactly one worker (the one that committed it) and no two commits share a base,
and the breaker count of every conversation is the one its recorded attempts add up to.
"""

from __future__ import annotations

import json
import random
import re
import selectors
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autocompact.sessions.stores import SessionStore, open_store

from .conftest import fresh_postgres_schema

WORKERS = 8
CONVERSATIONS = 20
TURNS = 100
IN_FLIGHT = 2  # turns of one conversation in flight at once (a user typing ahead)
SEED = 14
KILL = {  # per step, the chance a worker SIGKILLs itself there
    "append:written": 0.004,  # inside the append's transaction, before it commits
    "commit:written": 0.06,  # inside the compare-and-swap commit, before it commits
    "attempt:written": 0.03,  # inside the recording of a failed attempt
    "side_query": 0.04,  # while the side query is out
    "before_turn": 0.002,
}
EXTERNAL_KILLS = 20  # SIGKILLs sent from outside to a busy worker, at random acknowledgements
WORKER = Path(__file__).with_name("fault_worker.py")


@dataclass
class Worker:
    """A worker process and the task it is on."""

    name: str
    proc: subprocess.Popen[str]
    busy: dict[str, str] = field(default_factory=dict)  # turn_id -> conv


def run_workers(address: str, log: Path) -> tuple[set[str], int, Counter[str]]:
    """Drive every turn to an acknowledgement; return (acked ids, restarts, exits by code)."""
    rng = random.Random(SEED)
    pending = {f"c{c:02d}": 0 for c in range(CONVERSATIONS)}  # next turn to hand out
    retry: list[tuple[str, int]] = []
    in_flight: Counter[str] = Counter()
    acked: set[str] = set()
    exits: Counter[str] = Counter()
    sel = selectors.DefaultSelector()
    workers: dict[str, Worker] = {}
    incarnations = Counter[str]()

    def spawn(slot: str) -> None:
        incarnations[slot] += 1
        name = f"{slot}.{incarnations[slot]}"
        proc = subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "--store",
                address,
                "--worker",
                name,
                "--seed",
                str(SEED * 1000 + len(incarnations) * 100 + incarnations[slot]),
                "--log",
                str(log),
                "--kill",
                json.dumps(KILL),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        workers[slot] = Worker(name, proc)
        assert proc.stdout is not None
        sel.register(proc.stdout, selectors.EVENT_READ, slot)

    for i in range(WORKERS):
        spawn(f"w{i}")

    def dispatch() -> None:
        idle = [s for s, w in workers.items() if not w.busy]
        rng.shuffle(idle)
        for slot in idle:
            task = None
            if retry:
                task = retry.pop(0)
            else:
                ready = [c for c, t in pending.items() if t < TURNS and in_flight[c] < IN_FLIGHT]
                if ready:
                    conv = rng.choice(ready)
                    task = (conv, pending[conv])
                    pending[conv] += 1
            if task is None:
                return
            conv, turn = task
            turn_id = f"{conv}-t{turn:03d}"
            in_flight[conv] += 1
            workers[slot].busy[turn_id] = conv
            line = json.dumps({"conv": conv, "turn": turn, "turn_id": turn_id}) + "\n"
            assert workers[slot].proc.stdin is not None
            try:
                workers[slot].proc.stdin.write(line)
                workers[slot].proc.stdin.flush()
            except BrokenPipeError:
                # Killed after its last acknowledgement, its end not read yet: the turn stays
                # on it and goes to another worker when its end is read, as for any death.
                pass

    dispatch()
    # Kills from outside land wherever the chosen worker is; counted in acknowledgements (not
    # seconds), so a slow machine gets the same number of them.
    kill_at = set(rng.sample(range(50, CONVERSATIONS * TURNS), EXTERNAL_KILLS))
    external = 0
    while len(acked) < CONVERSATIONS * TURNS:
        events = sel.select(timeout=60)
        assert events, "no worker answered for 60 s"
        for key, _ in events:
            slot = key.data
            worker = workers[slot]
            line = key.fileobj.readline()  # type: ignore[union-attr]
            if line:
                turn_id = json.loads(line)["ack"]
                conv = worker.busy.pop(turn_id)
                in_flight[conv] -= 1
                acked.add(turn_id)
                if len(acked) in kill_at:
                    kill_at.discard(len(acked))
                    busy = sorted(x for x, w in workers.items() if w.busy and x != slot)
                    if busy:
                        workers[rng.choice(busy)].proc.send_signal(signal.SIGKILL)
                        external += 1
                continue
            # The worker died: its turn goes to another worker, under the same turn id.
            sel.unregister(key.fileobj)
            code = worker.proc.wait()
            err = worker.proc.stderr.read() if worker.proc.stderr else ""
            exits[str(code)] += 1
            assert code == -9, f"worker {worker.name} exited {code}, not by SIGKILL:\n{err}"
            for turn_id, conv in worker.busy.items():
                in_flight[conv] -= 1
                retry.append((conv, int(turn_id.rsplit("-t", 1)[1])))
            spawn(slot)
        dispatch()
    for worker in workers.values():
        assert worker.proc.stdin is not None
        worker.proc.stdin.close()
        worker.proc.wait(timeout=30)
    exits["external"] = external
    return acked, sum(incarnations.values()) - WORKERS, exits


def check_store(store: SessionStore, acked: set[str], log: Path) -> Counter[str]:
    """Assert the invariants; return the counts to print."""
    counts: Counter[str] = Counter()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    requested = Counter(r["nonce"] for r in records if r["event"] == "side_query")
    requester = {r["nonce"]: r["worker"] for r in records if r["event"] == "side_query"}
    counts["side queries answered"] = sum(requested.values())
    counts["side queries failed"] = sum(1 for r in records if r["event"] == "side_query_failed")
    for r in records:
        if r["event"] == "kill":
            counts[f"killed {r['step']}"] += 1
    for c in range(CONVERSATIONS):
        sid = f"c{c:02d}"
        entries = store.entries(sid)
        # Every acknowledged turn exactly once (and nothing that was never sent).
        turn_ids = [e.turn_id for e in entries if e.kind == "turn"]
        assert len(turn_ids) == len(set(turn_ids)), f"{sid}: a turn was stored twice"
        mine = {t for t in acked if t.startswith(sid + "-")}
        assert set(turn_ids) == mine, f"{sid}: stored turns differ from acknowledged ones"
        counts["turns stored"] += len(turn_ids)
        # One linear history: replaying the entries in order, each summary replaces exactly
        # the live entries up to its position (the previous summary among them), never more.
        live: dict[int, int] = {}  # seq -> pos
        for e in entries:
            if e.kind == "turn":
                live[e.seq] = e.pos
                continue
            covered = {s for s, p in live.items() if s <= e.pos}
            replaced = {x.seq for x in entries if x.replaced_by == e.seq}
            assert replaced == covered, f"{sid}: summary {e.seq} forked the history"
            for s in covered:
                del live[s]
            live[e.seq] = e.pos
        snapshot = store.load(sid)
        assert [e.seq for e in snapshot.entries] == sorted(live, key=lambda s: (live[s], s))
        assert all(e.replaced_by is None for e in snapshot.entries)
        # Each committed summary was requested by exactly one worker: the one that committed.
        attempts = store.attempts(sid)
        summaries = [e for e in entries if e.kind == "summary"]
        for s in summaries:
            text = " ".join(m.text for m in s.messages)
            nonces = set(re.findall(r"nonce-[\w.]+-\d+", text))
            assert len(nonces) == 1, f"{sid}: summary {s.seq} holds {nonces}"
            nonce = nonces.pop()
            assert requested[nonce] == 1, f"{sid}: summary {s.seq} requested {requested[nonce]}x"
            assert requester[nonce] == s.owner
        committed = [a for a in attempts if a.status == "compressed"]
        assert len(committed) == len(summaries)
        bases = Counter(a.epoch for a in committed)
        assert all(n == 1 for n in bases.values()), f"{sid}: two commits from one base"
        counts["summaries committed"] += len(summaries)
        counts["summaries superseded"] += sum(1 for a in attempts if a.status == "superseded")
        counts["attempts failed"] += sum(
            1 for a in attempts if a.status.startswith("compression_failed")
        )
        # Breaker counts consistent with the recorded attempts.
        failures = 0
        for a in attempts:
            if a.reset:
                failures = 0
            elif a.counted:
                failures += 1
            assert a.failures_after == failures, f"{sid}: attempt {a.seq} breaker count"
        assert snapshot.consecutive_failures == failures
    return counts


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_eight_killed_workers_keep_every_conversation_whole(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """8 workers, 20 conversations × 100 turns, SIGKILLs and 30 % failing side queries."""
    address = f"sqlite://{tmp_path / 'shared.db'}" if kind == "sqlite" else fresh_postgres_schema()
    store = open_store(address)
    store.ensure("warm-up", {"provider": "fake"})  # create the schema before the workers race
    log = tmp_path / "side-queries.log"
    acked, restarts, exits = run_workers(address, log)
    counts = check_store(store, acked, log)
    counts["turns acknowledged"] = len(acked)
    counts["worker restarts"] = restarts
    counts["workers SIGKILLed"] = exits["-9"]
    counts["killed from outside"] = exits["external"]
    with capsys.disabled():  # the counts belong in the CI log
        print(f"\n{kind}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    assert len(acked) == CONVERSATIONS * TURNS
    assert counts["turns stored"] == CONVERSATIONS * TURNS
    assert restarts > 0
    assert counts["summaries committed"] > 0
    assert counts["side queries failed"] > 0
    store.close()
