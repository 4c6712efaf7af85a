"""Session-store throughput: turns per second with 1, 2, 4 and 8 worker processes per backend,
and the latency the store adds to one turn (p50 / p99).

Each worker process runs ``ChatSession(store=…, session_id=…)`` turns on its own conversations
(the fake provider answers at once, so the store is what is measured: reading the session
again before the turn, the idempotency check, the append committed to disk). The latency added
is, turn by turn, the send's time with the store minus the same turn's time on an in-memory
session of the same history; throughput is all workers' turns over the wall time from the
common start to the last worker's end. The JSONL files (one process) are the baseline.

    python benchmarks/stores.py                      # SQLite, and PostgreSQL when
                                                     # AUTOCOMPACT_TEST_POSTGRES_DSN is set
    eval "$(.ci/postgres.sh start)"; python benchmarks/stores.py --docs docs/benchmarks.md
                                                     # (PostgreSQL twice: ChatSession on the
                                                     # sync store, AsyncChatSession on the
                                                     # async driver)
    python benchmarks/stores.py --quick              # smoke run
    python benchmarks/stores.py --growth             # per-turn cost at 10, 100, 1,000 and
                                                     # 2,400 turns (exit 1 when it grows)

Targets (printed as met / not met; a benchmark never fails the test suite): SQLite adds no more
per turn than the JSONL files the CLI used so far; PostgreSQL at most twice what SQLite adds;
with 8 workers each backend moves at least as many turns per second as with 1 (no collapse
under contention).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.sessions.stores import open_async_store, open_store
from autocompact.testing import FakeProvider

USER = "u" * 2_000
WINDOW = 1_000_000
MARK_START = "<!-- stores-benchmark:start -->"
MARK_END = "<!-- stores-benchmark:end -->"


def _worker(address: str, run: str, wid: int, turns: int, convs: int, barrier: Any, out: Any):
    if address.startswith("async+"):
        asyncio.run(_async_worker(address[6:], run, wid, turns, convs, barrier, out))
        return
    store = open_store(address)
    provider = FakeProvider()
    ids = [f"{run}-w{wid}-c{c}" for c in range(convs)]
    stored = [ChatSession(provider, context_window=WINDOW, store=store, session_id=i) for i in ids]
    plain = [ChatSession(provider, context_window=WINDOW) for _ in ids]
    barrier.wait()
    start = time.time()
    with_store = []
    for i in range(turns):
        t = time.perf_counter()
        stored[i % convs].send(USER, turn_id=f"t{i}")
        with_store.append(time.perf_counter() - t)
    end = time.time()
    without = []
    for i in range(turns):
        t = time.perf_counter()
        plain[i % convs].send(USER)
        without.append(time.perf_counter() - t)
    store.close()
    out.put((start, end, [a - b for a, b in zip(with_store, without, strict=True)]))


async def _async_worker(
    address: str, run: str, wid: int, turns: int, convs: int, barrier: Any, out: Any
) -> None:
    """The same turns through AsyncChatSession on the asyncio store (awaited driver)."""
    store = open_async_store(address)
    provider = FakeProvider()
    ids = [f"{run}-w{wid}-c{c}" for c in range(convs)]
    stored = [
        AsyncChatSession(provider, context_window=WINDOW, store=store, session_id=i) for i in ids
    ]
    plain = [AsyncChatSession(provider, context_window=WINDOW) for _ in ids]
    for session in stored:  # an asyncio store is read on the first send: open it before timing
        await session.send("open", turn_id="open")
    barrier.wait()
    start = time.time()
    with_store = []
    for i in range(turns):
        t = time.perf_counter()
        await stored[i % convs].send(USER, turn_id=f"t{i}")
        with_store.append(time.perf_counter() - t)
    end = time.time()
    without = []
    for i in range(turns):
        t = time.perf_counter()
        await plain[i % convs].send(USER)
        without.append(time.perf_counter() - t)
    await store.close()
    out.put((start, end, [a - b for a, b in zip(with_store, without, strict=True)]))


def measure(address: str, workers: int, turns: int, convs: int) -> dict[str, float]:
    """One configuration: turns/s and the added latency's p50 / p99 in ms."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    run = f"bench{os.getpid()}-{time.monotonic_ns()}-{workers}"
    procs = [
        ctx.Process(target=_worker, args=(address, run, w, turns, convs, barrier, out))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    added = sorted(x for r in results for x in r[2])
    return {
        "turns_per_s": workers * turns / (end - start),
        "p50_ms": 1000 * statistics.median(added),
        "p99_ms": 1000 * added[min(len(added) - 1, int(0.99 * len(added)))],
    }


GROWTH_AT = (10, 100, 1_000, 2_400)
GROWTH_WINDOW = 20  # the turns up to each mark whose median is reported
GROWTH_LIMIT = 3.0  # the cost at the last mark may be at most this multiple of the first's
GROWTH_FLOOR_MS = 0.2  # a first mark cheaper than this counts as this much (timer noise)
GROWTH_USER = "g" * 400


class _TimedProvider(FakeProvider):
    """The fake model, keeping the time spent in it (its token count walks the whole request,
    so it grows with the conversation: it is taken out of the store's cost)."""

    spent = (0.0, 0.0)

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return super().complete(*args, **kwargs)
        finally:
            w, c = self.spent
            self.spent = (w + time.perf_counter() - wall, c + time.process_time() - cpu)


def _overhead(session: ChatSession, provider: _TimedProvider, **kw: Any) -> tuple[float, float]:
    """One send's wall and CPU time outside the model (seconds)."""
    before, wall, cpu = provider.spent, time.perf_counter(), time.process_time()
    session.send(GROWTH_USER, **kw)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall - (provider.spent[0] - before[0]), cpu - (provider.spent[1] - before[1])


def growth_costs(address: str, marks: tuple[int, ...]) -> dict[int, tuple[float, float]]:
    """A store's cost of one turn as one conversation grows: ``{mark: (wall ms, CPU ms)}``, the
    medians over the ``GROWTH_WINDOW`` turns up to each mark of the send's time outside the
    model with the store minus the same on an in-memory session of the same history.

    The wall time includes the durable commit (an ``fsync``, whose time varies with what else
    the disk does); the CPU time is this process's own work (reading, decoding, comparing):
    what grows when a turn re-reads the conversation."""
    store = open_store(address)
    sid = f"growth{os.getpid()}-{time.monotonic_ns()}"
    p1, p2 = _TimedProvider(), _TimedProvider()
    stored = ChatSession(p1, context_window=10 * WINDOW, store=store, session_id=sid)
    plain = ChatSession(p2, context_window=10 * WINDOW)
    costs: dict[int, tuple[float, float]] = {}
    walls: list[float] = []
    cpus: list[float] = []
    for turn in range(1, max(marks) + 1):
        wall, cpu = _overhead(stored, p1, turn_id=f"t{turn}")
        base_wall, base_cpu = _overhead(plain, p2)
        walls.append(wall - base_wall)
        cpus.append(cpu - base_cpu)
        if turn in marks:
            costs[turn] = (
                1000 * statistics.median(walls[-GROWTH_WINDOW:]),
                1000 * statistics.median(cpus[-GROWTH_WINDOW:]),
            )
            print(
                f"{address.split(':')[0]}: {turn} turns: {costs[turn][0]:.2f} ms wall, "
                f"{costs[turn][1]:.2f} ms CPU",
                file=sys.stderr,
            )
    store.close()
    return costs


def growth_main(marks: tuple[int, ...], only: str) -> int:
    """Per-turn store cost as a conversation grows; 1 when any backend's grows over the limit."""
    tmp = Path(tempfile.mkdtemp(prefix="autocompact-growth-"))
    backends = [("JSONL files", f"jsonl://{tmp / 'jsonl'}"), ("SQLite", f"sqlite://{tmp}/g.db")]
    dsn = os.environ.get("AUTOCOMPACT_TEST_POSTGRES_DSN")
    if "postgresql" not in only:
        pass
    elif dsn:
        backends.append(("PostgreSQL", dsn))
    else:
        print("PostgreSQL skipped: set AUTOCOMPACT_TEST_POSTGRES_DSN", file=sys.stderr)
    head = " | ".join(f"{m:,} turns" for m in marks)
    lines = [f"| backend | {head} | last / first |", "| --- |" + " ---: |" * (len(marks) + 1)]
    failed = []
    for name, address in backends:
        if address.split(":")[0] not in only:
            continue
        costs = growth_costs(address, marks)
        for i, what in ((0, "wall"), (1, "CPU")):
            ratio = costs[marks[-1]][i] / max(costs[marks[0]][i], GROWTH_FLOOR_MS)
            cells = " | ".join(f"{costs[m][i]:.2f}" for m in marks)
            lines.append(f"| {name}, {what} | {cells} | {ratio:.1f}× |")
            if what == "CPU" and ratio > GROWTH_LIMIT:
                failed.append(f"{name}: CPU {ratio:.1f}× (limit {GROWTH_LIMIT:.0f}×)")
    print(
        f"Per-turn store cost (ms, median of {GROWTH_WINDOW} turns up to each mark; "
        f"{len(GROWTH_USER)}-character messages; the verdict is on the CPU time, the wall "
        "time adds the fsync):\n"
    )
    print("\n".join(lines))
    if failed:
        print("FAIL: the per-turn cost grows with the conversation: " + "; ".join(failed))
        return 1
    print(f"ok: no backend's per-turn CPU cost grew more than {GROWTH_LIMIT:.0f}×")
    return 0


def main() -> int:
    """Run every configuration and print (or write) the report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="few turns (smoke run)")
    ap.add_argument("--docs", type=Path, help="replace the stores section of this file")
    ap.add_argument("--growth", action="store_true", help="per-turn cost as a session grows")
    ap.add_argument(
        "--marks",
        default=",".join(map(str, GROWTH_AT)),
        help="with --growth: the turn counts to report (default 10,100,1000,2400)",
    )
    ap.add_argument(
        "--only", default="jsonl,sqlite,postgresql", help="with --growth: the backends to run"
    )
    args = ap.parse_args()
    if args.growth:
        return growth_main(tuple(int(m) for m in args.marks.split(",")), args.only)
    turns, convs = (20, 2) if args.quick else (200, 4)
    tmp = Path(tempfile.mkdtemp(prefix="autocompact-bench-"))
    backends = [("JSONL files (baseline)", f"jsonl://{tmp / 'jsonl'}", (1,))]
    backends.append(("SQLite (WAL)", f"sqlite://{tmp / 'bench.db'}", (1, 2, 4, 8)))
    dsn = os.environ.get("AUTOCOMPACT_TEST_POSTGRES_DSN")
    if dsn:
        backends.append(("PostgreSQL 15", dsn, (1, 2, 4, 8)))
        backends.append(("PostgreSQL 15, async driver", f"async+{dsn}", (1, 8)))
    else:
        print("PostgreSQL skipped: set AUTOCOMPACT_TEST_POSTGRES_DSN", file=sys.stderr)
    rows = []
    table: dict[tuple[str, int], dict[str, float]] = {}
    for name, address, counts in backends:
        for n in counts:
            r = measure(address, n, turns, convs)
            table[(name, n)] = r
            rows.append(
                f"| {name} | {n} | {r['turns_per_s']:,.0f} | {r['p50_ms']:.2f} | "
                f"{r['p99_ms']:.2f} |"
            )
            print(rows[-1], file=sys.stderr)
    targets = []
    jsonl = table[("JSONL files (baseline)", 1)]["p50_ms"]
    sqlite = table[("SQLite (WAL)", 1)]["p50_ms"]
    targets.append(
        f"| SQLite adds no more per turn than the JSONL files (p50, 1 worker) | "
        f"{_met(sqlite <= jsonl)}: {sqlite:.2f} vs {jsonl:.2f} ms |"
    )
    if ("PostgreSQL 15", 1) in table:
        pg = table[("PostgreSQL 15", 1)]["p50_ms"]
        targets.append(
            f"| PostgreSQL adds at most 2× what SQLite adds (p50, 1 worker) | "
            f"{_met(pg <= 2 * sqlite)}: {pg / sqlite:.2f}× |"
        )
    if ("PostgreSQL 15, async driver", 1) in table:
        apg = table[("PostgreSQL 15, async driver", 1)]["p50_ms"]
        pg = table[("PostgreSQL 15", 1)]["p50_ms"]
        targets.append(
            f"| PostgreSQL: the async driver adds at most 1.5× what the sync one adds (p50, "
            f"1 worker) | {_met(apg <= 1.5 * pg)}: {apg / pg:.2f}× |"
        )
    for name in ("SQLite (WAL)", "PostgreSQL 15", "PostgreSQL 15, async driver"):
        if (name, 8) in table:
            ratio = table[(name, 8)]["turns_per_s"] / table[(name, 1)]["turns_per_s"]
            targets.append(
                f"| {name}: 8 workers move at least as many turns/s as 1 | "
                f"{_met(ratio >= 1)}: {ratio:.2f}× |"
            )
    report = "\n".join(
        [
            MARK_START,
            f"Latest run: {turns} turns per worker over {convs} conversations each, "
            f"{len(USER):,}-character messages, `python benchmarks/stores.py`, 2 shared cores.",
            "",
            "| backend | workers | turns/s | added p50 (ms) | added p99 (ms) |",
            "| --- | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            "| target | result |",
            "| --- | --- |",
            *targets,
            MARK_END,
        ]
    )
    print(report)
    if args.docs:
        text = args.docs.read_text(encoding="utf-8")
        if MARK_START in text:
            head, _, rest = text.partition(MARK_START)
            _, _, tail = rest.partition(MARK_END)
            text = head + report + tail
        else:
            text = text.rstrip("\n") + "\n\n## Session stores\n\n" + report + "\n"
        args.docs.write_text(text, encoding="utf-8")
    return 0


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


if __name__ == "__main__":
    raise SystemExit(main())
