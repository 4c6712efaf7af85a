"""The extractive summarizer's time on long chat-heavy histories (issue 10, item 6).

    .venv/bin/python benchmarks/extractive_speed.py                # 500 to 4,000 requests
    .venv/bin/python benchmarks/extractive_speed.py --rounds 9     # more rounds, steadier medians
    .venv/bin/python benchmarks/extractive_speed.py --report-only  # print, never fail

Three kinds of session, each request about 3,000 characters with one reply:

- **one long sentence**: ``Request n: please <verb> `` and 400 words like ``cache12`` (the shape
  issue 10 measured: 0.27 s at 250 requests, 2.85 s at 300, 21.5 s at 2,000);
- **chat**: prose of 6-25 common words a sentence (about 40 sentences a request, one in twenty a
  rule or a limit, some with a fact, a path, an identifier or a version; 300-character replies
  of the same prose). Every sentence is classified, and about one in six holds a constraint
  word of everyday speech ("only", "never") and is kept as an item;
- **code and tracebacks**: a sentence or two of prose, then pasted Python code and tracebacks
  (paths, line numbers, identifiers on every line: every line is specific), issue 22's case.

Side by side in one process, on the same messages, each round in a rotating order (see
``_timing.py``; fresh message objects every round, built outside the timed region):

- ``extractive_summary(history, max_tokens=20_000)``;
- LangChain's ``trim_messages(strategy="last", max_tokens=20_000,
  token_counter=count_tokens_approximately)`` on the same messages as LangChain objects: what
  people use to fit a history without a model (it drops whole messages, it summarizes nothing);
- a plain truncation: the last 80,000 characters of the history's text joined.

Prints the median CPU time of each (the process's, so other load on a shared machine counts
less than in wall time, which is shown for the summarizer too), the time per request, the
within-round ratio to ``trim_messages``, and the growth of the summarizer's CPU time per request
from the smallest to the largest count. Two targets, checked for each kind (exit 1 when one is
missed, unless ``--report-only``):

- linear time: the time per request at the largest count is at most ``--max-growth`` times
  that at the smallest (default 2.0: linear time gives about 1.0, the quadratic cliff issue 10
  found gave 10);
- "2,000 requests of 3K characters in under a second of CPU" (issue 22, which made the
  summarizer read every sentence for its state ledger): 2,000 requests (measured when 2,000 is
  among the counts, else at the largest count's time per request) take at most
  ``--max-seconds`` of CPU (default 1.0). Issue 10 asked for "well under a second" before the
  ledger existed and this script gated at 0.75 s then; chat now takes about 0.79 s on a quiet
  machine, so pass ``--max-seconds 0.75`` to hold it to that older margin.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _history import to_langchain
from _timing import Contender, fmt_ratio, median_ratio, rounds
from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import Message
from autocompact.estimation import estimate_content_tokens

CAP_TOKENS = 20_000
COUNTS = (500, 1_000, 2_000, 4_000)
TARGET_REQUESTS = 2_000  # issue 10: "2,000 requests well under a second"
_NOUNS = ("cache", "queue", "parser", "billing", "report", "auth", "scheduler", "exporter")
_VERBS = ("refactor", "fix", "speed up", "document", "test", "port", "harden")
# About 400 common English words; the constraint words among them are those of everyday speech
# ("only", "never"), the rest come from the templates below.
_COMMON = """the a an and or but so because when while if then than that this these those it
its we you they he she I me my our your their them us is are was were be been being have has had
do does did will would can could should may might shall not no yes all any some each every few
more most other such own same very just also only even still already again never often usually
about above after before below between during into through over with without from to of in on at
by for up down out off new old good bad first last long short big small right wrong next early
late fast slow clear simple hard easy sure maybe think know want need like look make take give
find tell ask work seem feel try leave call keep let begin show hear play run move live believe
hold bring happen write provide sit stand lose pay meet include continue set learn change lead
understand watch follow stop create speak read allow add spend grow open walk win offer remember
love consider appear buy wait serve die send expect build stay fall cut reach kill remain suggest
raise pass sell report decide pull time year people way day man thing woman life child world
school state family student group country problem hand part place case week company system
program question government number night point home water room mother area money story fact month
lot study book eye job word business issue side kind head house service friend father power hour
game line end member law car city community name president team minute idea kid body information
back parent face others level office door health person art war history party result morning
reason research girl guy moment air teacher force education""".split()  # noqa: SIM905


def _prose(rng: random.Random, low: int = 6, high: int = 26) -> str:
    words = [rng.choice(_COMMON) for _ in range(rng.randrange(low, high))]
    return " ".join(words).capitalize() + rng.choice(".....?!")


def _sentence(rng: random.Random) -> str:
    roll = rng.random()
    noun = rng.choice(_NOUNS)
    if roll < 0.05:
        return rng.choice(
            (
                f"The {noun} job must finish in under {rng.randrange(2, 60)} minutes.",
                f"Never change the {noun} schema without asking me first.",
                f"Please do not touch the {noun} tests this week.",
                f"We can only deploy {noun} changes on {rng.choice(('Monday', 'Friday'))}.",
            )
        )
    if roll < 0.09:
        what = rng.choice(("port", "timeout", "owner", "region", "limit"))
        return f"The {noun} {what} is {rng.randrange(10, 9999)}."
    if roll < 0.17:
        where = rng.choice(
            (
                f"src/{noun}/mod_{rng.randrange(99)}.py",
                f"{noun}_{rng.choice(_COMMON)}_handler",
                f"{noun.capitalize()}{rng.choice(_COMMON).capitalize()}Client",
                f"version {rng.randrange(1, 9)}.{rng.randrange(20)}",
            )
        )
        return f"{_prose(rng, 4, 14)[:-1]} in {where}."
    return _prose(rng)


def _chat_text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = _sentence(rng) + ("\n\n" if rng.random() < 0.08 else " ")
        out.append(sentence)
        size += len(sentence)
    return "".join(out).strip()


def chat_session(count: int, seed: int = 5) -> list[Message]:
    """``count`` chatty requests of about 3,000 characters, each with a 300-character reply."""
    rng = random.Random(seed)
    history: list[Message] = []
    for n in range(count):
        opening = f"Request {n}: please {rng.choice(_VERBS)} the {rng.choice(_NOUNS)} module. "
        history.append(Message.user(opening + _chat_text(rng, 2_950)))
        history.append(Message.model(_chat_text(rng, 300)))
    return history


def long_sentence_session(count: int, seed: int = 5) -> list[Message]:
    """``count`` requests of one 3,000-character sentence each (issue 10's shape)."""
    rng = random.Random(seed)
    history: list[Message] = []
    for n in range(count):
        words = " ".join(rng.choice(_NOUNS) + str(rng.randrange(99)) for _ in range(400))
        history.append(Message.user(f"Request {n}: please {rng.choice(_VERBS)} {words}."))
        history.append(Message.model(f"Done with request {n}."))
    return history


def _code_block(rng: random.Random, noun: str) -> str:
    lines = [f"def {noun}_{rng.randrange(99)}(items, limit={rng.randrange(10, 500)}):"]
    for k in range(rng.randrange(12, 30)):
        name = f"{rng.choice(_NOUNS)}_{k}"
        lines.append(f"    {name} = [x.{rng.choice(_COMMON)}() for x in items if x.id > {k}]")
        if k % 5 == 0:
            lines.append(f"    if not {name}:  # {_prose(rng, 3, 8)}")
            lines.append(f"        raise ValueError(f'no {{limit}} in {name}')")
    lines.append("    return result")
    return "```python\n" + "\n".join(lines) + "\n```"


def _traceback(rng: random.Random, noun: str) -> str:
    frames = [
        f'  File "/home/dev/proj/src/{rng.choice(_NOUNS)}/mod_{rng.randrange(60)}.py", line '
        f"{rng.randrange(10, 900)}, in {rng.choice(_NOUNS)}_{rng.randrange(99)}\n"
        f"    value = self.{rng.choice(_COMMON)}(payload[{rng.randrange(9)}])"
        for _ in range(rng.randrange(3, 9))
    ]
    error = rng.choice(("KeyError: 'tenant_id'", "TypeError: 'NoneType' object is not iterable"))
    return "Traceback (most recent call last):\n" + "\n".join(frames) + f"\n{error}"


def code_session(count: int, seed: int = 5) -> list[Message]:
    """``count`` requests of about 3,000 characters that paste code and a traceback between a
    few sentences of prose, each with a 300-character reply."""
    rng = random.Random(seed)
    history: list[Message] = []
    for n in range(count):
        noun = rng.choice(_NOUNS)
        parts = [f"Request {n}: the {noun} module fails, see below. " + _chat_text(rng, 200)]
        size = len(parts[0])
        while size < 2_900:
            piece = _code_block(rng, noun) if rng.random() < 0.6 else _traceback(rng, noun)
            parts.append(piece)
            size += len(piece)
        history.append(Message.user("\n\n".join(parts)[:3_000]))
        history.append(Message.model(_chat_text(rng, 300)))
    return history


KINDS = {
    "one long sentence": long_sentence_session,
    "chat": chat_session,
    "code and tracebacks": code_session,
}


def _truncate(history: Sequence[Message]) -> str:
    text = "\n".join(m.text for m in history)
    return text[-CAP_TOKENS * 4 :]


def _summary(history: Sequence[Message]) -> str:
    return extractive_summary(history, max_tokens=CAP_TOKENS)


def _triple(history: Sequence[Message]) -> str:
    """Control: a summarizer three times as slow (it summarizes three times)."""
    _summary(history)
    _summary(history)
    return _summary(history)


_CONTROL_STEP = 20  # messages: 10 requests


def _quadratic(history: Sequence[Message]) -> str:
    """Control: a compaction that rereads the whole history every 10 requests instead of
    updating what it has (quadratic in the requests)."""
    for end in range(_CONTROL_STEP, len(history), _CONTROL_STEP):
        _summary(history[:end])
    return _summary(history)


CONTROLS = {"none": _summary, "triple": _triple, "quadratic": _quadratic}


def _contenders(dicts: list[dict[str, Any]], control: str = "none") -> list[Contender]:
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    fresh = lambda: history_from_dicts(dicts)  # noqa: E731
    return [
        Contender("extractive_summary", CONTROLS[control], prepare=fresh),
        Contender(
            "trim_messages",
            lambda lc: trim_messages(
                lc,
                strategy="last",
                max_tokens=CAP_TOKENS,
                token_counter=count_tokens_approximately,
            ),
            prepare=lambda: to_langchain(fresh()),
        ),
        Contender("truncation", _truncate, prepare=fresh),
    ]


def _rounds(
    contenders: Sequence[Contender], n_rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each contender, one entry per round (``_timing.rounds``): on a
    shared machine the wall time also counts the time other processes held the core."""
    cpu: dict[str, list[float]] = {}
    wall = rounds(contenders, n_rounds, cpu)
    return wall, cpu


def _machine_loop() -> float:
    """CPU seconds of an empty Python loop of ten million steps: how fast this machine is now."""
    start = time.process_time()
    for _ in range(10_000_000):
        pass
    return time.process_time() - start


def _fmt(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds >= 0.01 else f"{seconds * 1e3:.2f} ms"


def run(counts: Sequence[int], n_rounds: int, control: str = "none") -> dict[str, dict[int, float]]:
    """Print the tables; return the summarizer's median CPU seconds per kind and request count."""
    medians: dict[str, dict[int, float]] = {}
    warm = long_sentence_session(20)
    _rounds(_contenders(history_to_dicts(warm)), 1)  # imports and first calls, not timed
    for kind, build in KINDS.items():
        print(f"\n### {kind} (requests of about 3,000 characters)\n")
        print(
            "| requests | input tokens | extractive_summary CPU | wall | CPU per request "
            "| trim_messages CPU | truncation CPU | summary vs trim_messages |"
        )
        print("|---|---|---|---|---|---|---|---|")
        medians[kind] = {}
        for count in counts:
            history = build(count)
            tokens = estimate_content_tokens(history)
            wall, cpu = _rounds(_contenders(history_to_dicts(history), control), n_rounds)
            ours = statistics.median(cpu["extractive_summary"])
            ratio = median_ratio(cpu["extractive_summary"], cpu["trim_messages"])
            medians[kind][count] = ours
            print(
                f"| {count:,} | {tokens:,} | {_fmt(ours)} "
                f"| {_fmt(statistics.median(wall['extractive_summary']))} "
                f"| {ours / count * 1e6:.0f} µs | {_fmt(statistics.median(cpu['trim_messages']))} "
                f"| {_fmt(statistics.median(cpu['truncation']))} | {fmt_ratio(ratio)} |"
            )
    return medians


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per size (default 5)")
    parser.add_argument(
        "--counts", type=int, nargs="+", default=list(COUNTS), help="request counts to time"
    )
    parser.add_argument(
        "--max-growth",
        type=float,
        default=2.0,
        help="fail when seconds per request at the largest count exceed this many times those "
        "at the smallest (default 2.0)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=1.0,
        help=f"fail when {TARGET_REQUESTS:,} requests of either kind (measured, or at the largest "
        "count's time per request) take more CPU seconds than this (default 1.0)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="print the tables and verdicts; never fail"
    )
    parser.add_argument(
        "--control",
        choices=sorted(CONTROLS),
        default="none",
        help="time a control in the summarizer's place, to show the targets can be missed: "
        "'triple' summarizes three times (misses the time target), 'quadratic' rereads the "
        "whole history every 10 requests (misses the linear-time target); default none",
    )
    args = parser.parse_args(argv)
    counts = sorted(set(args.counts))
    if len(counts) < 2 or counts[0] <= 0 or args.rounds < 1:
        parser.error("give at least two positive request counts and one round")
    print("## Extractive summarizer time\n")
    print(
        f"Median of {args.rounds} rounds; cap {CAP_TOKENS:,} tokens. Machine: an empty Python "
        f"loop of 10M steps took {_machine_loop():.2f} s of CPU before the run; load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) on {os.cpu_count()} "
        "cores."
    )
    if args.control != "none":
        print(f"\nCONTROL: '{args.control}' is timed in extractive_summary's place.")
    medians = run(counts, args.rounds, args.control)
    small, large = counts[0], counts[-1]
    failed = False
    print()
    for kind, by_count in medians.items():
        growth = (by_count[large] / large) / (by_count[small] / small)
        over_growth = growth > args.max_growth
        print(
            f"- {kind}: time per request at {large:,} requests is {growth:.2f}× that at "
            f"{small:,} (limit {args.max_growth:g}×): {'FAILED' if over_growth else 'ok'}"
        )
        if TARGET_REQUESTS in by_count:
            target, how = by_count[TARGET_REQUESTS], "measured"
        else:
            target, how = by_count[large] / large * TARGET_REQUESTS, f"from {large:,} requests"
        over_time = target > args.max_seconds
        print(
            f"- {kind}: {TARGET_REQUESTS:,} requests in {target:.3f} s of CPU ({how}; "
            f"limit {args.max_seconds:g} s): {'FAILED' if over_time else 'ok'}"
        )
        failed = failed or over_growth or over_time
    print(
        f"- load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"(1, 5, 15 min) on {os.cpu_count()} cores"
    )
    if failed and args.report_only:
        print("\n(--report-only: a target was missed, exit status 0)")
    return 1 if failed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
