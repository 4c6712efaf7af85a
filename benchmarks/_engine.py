"""Benchmarks of the engine around the model call: per-send overhead, compaction, memory.

The provider here is :class:`CannedProvider`: ``complete`` returns a completion built once in
advance, so what is timed is the engine's own work. Its cost (a method call returning an
object) is measured in the same rounds and subtracted from the per-send figure.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import statistics
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

from _history import History, fresh_messages
from _timing import Contender, Report, fmt_bytes, fmt_ratio, fmt_time, median_ratio, rounds
from autocompact.codec import message_from_dict
from autocompact.content import Message, Usage
from autocompact.estimation import estimate_prompt_tokens
from autocompact.providers.base import ChatRequest, Completion, FinishReason, StreamDone

__all__ = ["CannedProvider", "section_compaction", "section_memory", "section_send"]

WINDOW = 4_000_000
"""Large enough that a 1M-token history stays in the safe tier: sends measure the steady path."""
CALL_SECONDS = 0.300
SUMMARY = "## Goal\nKeep going.\n## Key knowledge\n" + "A fact worth keeping. " * 200


class CannedProvider:
    """A provider whose replies are built in advance (no I/O, next to no work)."""

    name = "bench"
    model = "canned"

    def __init__(self, prompt_tokens: int) -> None:
        self.reply = Completion(
            message=Message.model("Done."),
            usage=Usage(prompt_tokens=prompt_tokens, output_tokens=3),
            finish_reason=FinishReason.STOP,
        )
        self.summary = Completion(
            message=Message.model(SUMMARY),
            usage=Usage(prompt_tokens=prompt_tokens, output_tokens=len(SUMMARY) // 4),
            finish_reason=FinishReason.STOP,
        )

    def complete(self, request: ChatRequest) -> Completion:
        """The canned reply (the summary for the side query)."""
        return self.summary if request.purpose == "side_query" else self.reply

    def stream(self, request: ChatRequest) -> Iterator[Any]:
        """The canned reply as a one-event stream."""
        yield StreamDone(completion=self.complete(request))

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        return self.complete(request)

    async def astream(self, request: ChatRequest) -> AsyncIterator[Any]:
        """Async :meth:`stream`."""
        yield StreamDone(completion=self.complete(request))


def _label(tokens: int) -> str:
    return f"{tokens / 1_000_000:g}M" if tokens >= 1_000_000 else f"{tokens / 1_000:g}K"


def _pendings(pending_pool: list[Any], n: int) -> list[Message]:
    """Fresh pending messages, the same sequence on every call (fair across sizes)."""
    return fresh_messages([pending_pool[i % len(pending_pool)] for i in range(n)])


# --- (b) per-send overhead -----------------------------------------------------------------


def section_send(
    report: Report,
    cfg: Any,
    histories: dict[int, History],
    pending_pool: list[Any],
    results: Any,
) -> None:
    """Everything ``ChatSession.send`` does around the provider call, at each history size."""
    report.heading("(b) Per-send overhead")
    if importlib.util.find_spec("autocompact.chat") is None:
        report.line("autocompact.chat not available: per-send overhead not measured.")
        return
    from autocompact.chat import ChatSession

    report.line(
        "`ChatSession.send` on a provider that returns a prebuilt completion (its own cost,"
        f" measured in the same rounds, is subtracted); window {WINDOW:,} so every send stays in"
        " the safe tier (the steady path: estimate, tier, unforced gate, request, accounting)."
        " *Warm*: a running session (last reported count known). *Restore + first send*:"
        " the history built from plain message dicts (`history_from_dicts`, which measures each"
        " message as it builds it), `ChatSession(history=...)` with no reported count, then one"
        " send, all timed (the constructor's and the send's cold estimates included)."
    )
    report.line()
    ops = max(20, cfg.warm_ops // 20)
    rows = []
    warm_by_size: dict[int, list[float]] = {}
    for size, hist in histories.items():
        seen = fresh_messages(hist.dicts)
        estimate_prompt_tokens(seen, None, 0)
        provider = CannedProvider(hist.tokens)
        request = ChatRequest(messages=tuple(seen))

        def warm_session(
            s: list[Message] = seen, p: CannedProvider = provider, n: int = hist.tokens
        ) -> Any:
            session = ChatSession(p, context_window=WINDOW, history=s, last_prompt_token_count=n)
            return session, _pendings(pending_pool, ops)

        def first_sends() -> Any:
            return _pendings(pending_pool, 3)

        def restore_and_send(batch: Any, p: CannedProvider = provider, h: History = hist) -> None:
            # The history's build and the session's are timed too: history_from_dicts measures
            # each message as it builds it, and the session takes the cold estimate (its tier).
            for pending in batch:
                ChatSession(p, context_window=WINDOW, history=fresh_messages(h.dicts)).send(pending)

        contenders = [
            Contender("warm", lambda arg: [arg[0].send(m) for m in arg[1]], warm_session, ops),
            Contender("first", restore_and_send, first_sends, 3),
            Contender(
                "provider",
                lambda _, p=provider, r=request: [p.complete(r) for _ in range(ops)],
                ops=ops,
            ),
        ]
        times = rounds(contenders, cfg.rounds)
        warm = [w - p for w, p in zip(times["warm"], times["provider"], strict=True)]
        first = [f - p for f, p in zip(times["first"], times["provider"], strict=True)]
        warm_by_size[size] = warm
        w, f = statistics.median(warm), statistics.median(first)
        rows.append(
            [
                _label(size),
                str(len(hist)),
                fmt_time(w),
                f"{w / CALL_SECONDS * 100:.4f} %",
                fmt_time(f),
                f"{f / CALL_SECONDS * 100:.3f} %",
            ]
        )
        results.figures[f"send_seconds|{size}"] = w
    report.table(
        ["history", "messages", "warm send", "of 300 ms", "restore + first send", "of 300 ms"], rows
    )
    sizes = list(histories)
    growth = median_ratio(warm_by_size[sizes[-1]], warm_by_size[sizes[0]])
    results.figures["send_growth"] = growth
    results.figures["send_share"] = results.figures[f"send_seconds|{sizes[-1]}"] / CALL_SECONDS
    report.line()
    report.line(
        f"Warm per-send overhead, {_label(sizes[-1])} / {_label(sizes[0])} (same rounds): "
        f"{growth:.2f}."
    )


# --- (c) compaction ------------------------------------------------------------------------


def section_compaction(
    report: Report, cfg: Any, histories: dict[int, History], results: Any
) -> None:
    """Split + slim + plan + apply on the largest history, the side query answered instantly."""
    report.heading("(c) Compaction overhead (side query excluded)")
    try:
        from autocompact.compaction import (
            CompressionService,
            CompressionStatus,
            CompressionTrigger,
            CompressOptions,
        )
        from autocompact.compaction.slimming import slim_for_summary
        from autocompact.compaction.split import find_split_point
    except ImportError as exc:
        report.line(f"autocompact.compaction not available ({exc}).")
        return
    size = max(histories)
    hist = histories[size]
    provider = CannedProvider(hist.tokens)
    service = CompressionService(provider)
    options = CompressOptions(
        context_window=WINDOW,
        force=True,
        last_prompt_token_count=hist.tokens,
        trigger=CompressionTrigger.MANUAL,
    )
    seen = fresh_messages(hist.dicts)
    check = service.compress(seen, options)
    if check.info.status is not CompressionStatus.COMPRESSED:
        report.line(f"compaction did not compress ({check.info.status}): {check.info.error}")
        return
    # A window that puts the history in the auto tier (auto <= tokens < hard).
    auto_window = hist.tokens + 28_000
    auto_options = replace(options, trigger=CompressionTrigger.AUTO, context_window=auto_window)
    auto = service.compress(seen, auto_options).info
    split = find_split_point(seen)
    report.line(
        f"`CompressionService.compress(force=True)` on the {_label(size)}-token history"
        f" ({len(hist)} messages); the provider returns a prebuilt summary at once. *Manual*"
        f" (`/compress`): split, slim, side query, apply ({check.info.compressed_messages}"
        f" messages summarized, {check.info.kept_messages} kept). *Automatic*: tool-output"
        f" clearing first, the summary only if clearing is not enough (window {auto_window:,},"
        f" the history in the auto tier; here: method"
        f" `{getattr(auto, 'method', '?')}`, status `{auto.status}`). *Seen objects* is the"
        " running-session case (a `ChatSession` measures every message as it is added);"
        " *fresh objects*: a history just loaded, never measured (its build from plain"
        " message dicts timed with it, since the build measures each message)."
    )
    report.line()
    try:
        from langchain_core.messages.utils import count_tokens_approximately as cta

        from _history import to_langchain

        lc = to_langchain(seen)
    except ImportError:
        cta = None
    contenders = [
        Contender(  # built inside the timed part: the build measures each message
            "manual, fresh objects",
            lambda _: service.compress(fresh_messages(hist.dicts), options),
        ),
        Contender("manual, seen objects", lambda _: service.compress(seen, options)),
        Contender("automatic, seen objects", lambda _: service.compress(seen, auto_options)),
        Contender("split point", lambda _: find_split_point(seen)),
        Contender("input slimming", lambda _: slim_for_summary(seen[:split])),
    ]
    if cta is not None:
        contenders.append(Contender("count_tokens_approximately", lambda _: cta(lc)))
    times = rounds(contenders, cfg.rounds)
    rows = []
    for c in contenders[:5]:
        t = statistics.median(times[c.name])
        vs = (
            fmt_ratio(median_ratio(times[c.name], times["count_tokens_approximately"]))
            if cta
            else "n/a"
        )
        rows.append([c.name, fmt_time(t), f"{t / CALL_SECONDS * 100:.2f} %", vs])
    report.table(
        ["step", "time", "of a 300 ms call", "vs one count_tokens_approximately pass"], rows
    )
    results.figures["compaction_seconds"] = statistics.median(times["manual, fresh objects"])


# --- (d) memory ----------------------------------------------------------------------------


def section_memory(
    report: Report,
    cfg: Any,
    histories: dict[int, History],
    pending_pool: list[Any],
    results: Any,
) -> None:
    """Bytes the engine keeps (cached statistics, session state) against the history's own."""
    report.heading("(d) Memory")
    report.line(
        "tracemalloc. *History*: the message objects and their strings, parsed from JSON."
        " *Statistics cache*: what a cold estimate leaves cached on the parts and messages (the"
        " history is built here through `message_from_dict`, which leaves the statistics to the"
        " first estimate; `history_from_dicts` computes the same ones while it builds, where"
        " they could not be told from the history's own size)."
        " *Session*: a `ChatSession` over the history after one send (includes that send's"
        " two new messages). *Held* = statistics cache + session: what stays allocated. *Peak*:"
        " the highest extra allocation during those steps, transient buffers included (the JSON"
        " text a function response is measured by lives only while it is measured)."
    )
    report.line()
    chat = importlib.util.find_spec("autocompact.chat") is not None
    rows = []
    for size, hist in histories.items():
        blob = json.dumps(hist.dicts)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            messages = [message_from_dict(d, index=i) for i, d in enumerate(json.loads(blob))]
            gc.collect()
            history_bytes = tracemalloc.get_traced_memory()[0] - base
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            estimate_prompt_tokens(messages, None, 0)
            gc.collect()
            cache_bytes = tracemalloc.get_traced_memory()[0] - base
            session_bytes = 0
            if chat:
                from autocompact.chat import ChatSession

                pending = _pendings(pending_pool, 1)[0]
                before = tracemalloc.get_traced_memory()[0]
                session = ChatSession(
                    CannedProvider(hist.tokens), context_window=WINDOW, history=messages
                )
                session.send(pending)
                gc.collect()
                session_bytes = tracemalloc.get_traced_memory()[0] - before
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        held = cache_bytes + session_bytes
        per_m = 1_000_000 / hist.tokens
        rows.append(
            [
                _label(size),
                fmt_bytes(history_bytes),
                fmt_bytes(cache_bytes),
                fmt_bytes(session_bytes) if chat else "n/a",
                fmt_bytes(held * per_m),
                f"{held / history_bytes * 100:.1f} %",
                fmt_bytes(peak),
                f"{peak / history_bytes * 100:.1f} %",
            ]
        )
        results.figures["memory_share"] = held / history_bytes
        results.figures["memory_peak_share"] = peak / history_bytes
    report.table(
        [
            "history",
            "history size",
            "statistics cache",
            "session",
            "held per 1M tokens",
            "held / history",
            "peak extra",
            "peak / history",
        ],
        rows,
    )
