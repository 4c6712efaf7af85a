"""Issue 17 items 3 and 5: a 30-turn session on each real llama.cpp server.

The sessions run on both servers at once (one thread each). Gemma 3 270M is a *base* model: asked
for a summary it recites the prompt or runs on with the conversation to its cap, so every
summary it writes is refused — for real, by the engine's checks on the server's own reply.
After three such failures the breaker opens; meanwhile the guarantee trims each request (never
the history) so that none goes over the window. On an 8K window *hard* equals *auto*, so with
the breaker open nothing automatic runs (SPEC §10.7) and only a success closes it: the user
switches the summarizer to the offline extractive one and runs ``/compress`` (what a user of
such a model would do). That summary is kept, and it is a summary. Through all 30 turns, no
request — main turn or side query, with its output cap — goes over the 8K window by the
server's own count.

Prompt processing dominates the running time (one thread, about 50-100 tokens a second), so
while the model summarizes the session keeps 70 % verbatim: each refused side query reads about
2K tokens instead of 5K.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from autocompact.chat import ChatSession
from autocompact.compaction.echo import echo_source
from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.plan import CompressionInfo, CompressionStatus
from autocompact.compaction.prompts import SUMMARY_FINAL_INSTRUCTION, summary_system_prompt
from autocompact.compaction.service import CompressionService
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.content import Message
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionFailed,
    CompactionSucceeded,
    Event,
    RequestTrimmed,
)
from autocompact.limits import query_server_limits
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES

from .conftest import N_CTX, Exchange, LlamaServer, LlamaServers
from .helpers import MAIN_CAP, provider_for, turn_text

pytestmark = pytest.mark.usefixtures("no_http_proxy")

TURNS = 30
MODEL_SUMMARY_TARGET = 48
"""The model's summary target (and so its cap): it only bounds how long a refused summary runs."""
MODEL_KEEP_SHARE = 0.7
"""The share kept verbatim while the model summarizes: it only bounds each side query's input."""
REFUSED = {
    CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
    CompressionStatus.COMPRESSION_FAILED_ECHO,
    CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY,
}


@dataclass
class SessionRun:
    """What one 30-turn session did."""

    server: LlamaServer
    session: ChatSession | None = None
    events: list[Event] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    error: BaseException | None = None
    seconds: float = 0.0
    switched_at: int | None = None
    manual: CompressionInfo | None = None


def _run_session(server: LlamaServer, run: SessionRun) -> None:
    start = time.monotonic()
    mark = server.proxy.mark()
    progress = server.log.with_name(f"session-{server.kind}.log")
    try:
        if server.kind == "llama-server":
            limits = query_server_limits(server.base_url, server.model, kind="llamacpp", timeout=30)
            assert limits is not None
            window = limits.context_window
        else:  # llama_cpp.server states its window nowhere: the user passes it (--window)
            window = N_CTX
        session = ChatSession(
            provider_for(server),
            context_window=window,
            max_output_tokens=MAIN_CAP,
            summary_target_tokens=MODEL_SUMMARY_TARGET,
            keep_share=MODEL_KEEP_SHARE,
            hooks=(run.events.append,),
        )
        run.session = session
        seen = 0
        for i in range(TURNS):
            if run.switched_at is None and any(isinstance(e, BreakerOpened) for e in run.events):
                session.compression = CompressionService(None, summarizer=extractive_summary)
                session.summary_target_tokens = 600
                session.keep_share = COMPRESSION_PRESERVE_THRESHOLD
                run.manual = session.compress()  # /compress: never blocked, closes the breaker
                run.switched_at = i
            failed = sum(isinstance(e, CompactionFailed) for e in run.events)
            if run.switched_at is not None:
                text = f"Turn {i}: which ticket tracks the billing rounding? One word."
            elif failed:
                # ~1K tokens: enough growth to end the hold after a failure (10 % of the window)
                text = turn_text(i, sentences=34)
            else:  # ~720 tokens: the window fills in about 8 turns
                text = turn_text(i, sentences=24)
            reply = ""
            for event in session.send_stream(Message.user(text)):
                reply += getattr(event, "text", "") or ""
            run.replies.append(reply)
            with progress.open("a") as log:
                names = ",".join(type(e).__name__ for e in run.events[seen:])
                log.write(
                    f"{time.monotonic() - start:7.1f}s turn {i}: count "
                    f"{session.last_prompt_token_count} {names}\n"
                )
            seen = len(run.events)
    except BaseException as exc:  # reported by the tests, with the server's log
        run.error = exc
    finally:
        run.exchanges = server.proxy.since(mark)
        run.seconds = time.monotonic() - start


@pytest.fixture(scope="module")
def sessions(llama_servers: LlamaServers) -> Iterator[dict[str, SessionRun]]:
    """The 30-turn session on each server, both at once."""
    runs = {server.kind: SessionRun(server) for server in llama_servers.all()}
    threads = [
        threading.Thread(target=_run_session, args=(run.server, run), daemon=True)
        for run in runs.values()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return runs


KINDS = ["llama-server", "llama_cpp.server"]


def _ok(run: SessionRun) -> ChatSession:
    if run.error is not None:
        raise AssertionError(
            f"the session on {run.server.kind} failed: {run.error!r}\n"
            f"server log:\n{run.server.log_tail()}"
        ) from run.error
    assert run.session is not None
    return run.session


@pytest.mark.parametrize("kind", KINDS)
def test_session_completes_all_turns(
    sessions: dict[str, SessionRun], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every turn of the 30 is answered; the time and request count go to the CI log."""
    run = sessions[kind]
    _ok(run)
    assert len(run.replies) == TURNS
    with capsys.disabled():  # the running time belongs in the CI log
        print(f"\n{kind}: {TURNS} turns in {run.seconds:.0f}s, {len(run.exchanges)} requests")


@pytest.mark.parametrize("kind", KINDS)
def test_no_request_goes_over_the_window(sessions: dict[str, SessionRun], kind: str) -> None:
    """Items 3 and the session: every request, main turn or side query, fits the 8K window by
    the server's own count, the side query's output cap included; none was rejected."""
    run = sessions[kind]
    _ok(run)
    chats = [e for e in run.exchanges if e.is_chat]
    side = [e for e in chats if not e.streamed]
    assert side, "no side query was sent"
    for exchange in chats:
        assert exchange.status == 200, (exchange.status, exchange.body[:300])
        prompt = run.server.count(exchange.request)
        reported = exchange.usage_prompt_tokens()
        if reported is not None:
            assert reported == prompt
        cap = exchange.request.get("max_tokens")
        assert cap is not None
        assert prompt + cap <= N_CTX, (prompt, cap, exchange.request["messages"][-1])
    for exchange in [e for e in chats if e.streamed]:
        assert exchange.text() or exchange.finish_reason(), "an empty stream was accepted"


@pytest.mark.parametrize("kind", KINDS)
def test_breaker_engages_after_repeated_failures(
    sessions: dict[str, SessionRun], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model's summaries are refused by the engine (cut at the cap, or an echo); after three
    failures in a row the breaker opens, and meanwhile requests are trimmed (never the history)."""
    run = sessions[kind]
    _ok(run)
    kinds = [type(e).__name__ for e in run.events]
    assert "BreakerOpened" in kinds, kinds
    opened = kinds.index("BreakerOpened")
    failures = [e.info for e in run.events[:opened] if isinstance(e, CompactionFailed)]
    assert len(failures) >= MAX_CONSECUTIVE_FAILURES
    assert {info.status for info in failures} <= REFUSED, [i.error for i in failures]
    with capsys.disabled():
        print(f"\n{kind}: refused before the breaker opened: {[i.status.value for i in failures]}")
    model_side = [e for e in run.exchanges if e.is_chat and not e.streamed]
    assert len(model_side) >= len(failures)
    for exchange, info in zip(model_side, failures, strict=False):
        assert exchange.status == 200
        if info.status is CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED:
            assert exchange.finish_reason() == "length"
    assert any(isinstance(e, RequestTrimmed) for e in run.events[:opened])
    breaker = run.events[opened]
    assert isinstance(breaker, BreakerOpened)
    assert breaker.consecutive_failures >= MAX_CONSECUTIVE_FAILURES


@pytest.mark.parametrize("kind", KINDS)
def test_summaries_kept_are_summaries(sessions: dict[str, SessionRun], kind: str) -> None:
    """Item 5 and the session: every reply the model wrote to a side query was refused (cut at
    its cap, an echo, or empty) and none was kept; what was kept is a summary — not an echo of
    the prompt, made of the conversation, shorter than what it replaced — that stands first in
    the history, and the manual compaction closed the breaker."""
    run = sessions[kind]
    session = _ok(run)
    prompt = summary_system_prompt(None) + "\n" + SUMMARY_FINAL_INSTRUCTION
    model_replies = [
        e.text().strip()
        for e in run.exchanges
        if e.is_chat and e.request.get("max_tokens") == MODEL_SUMMARY_TARGET
    ]
    assert model_replies
    failed = [e.info for e in run.events if isinstance(e, CompactionFailed)]
    assert len(failed) == len(model_replies)  # one refusal per side query the model answered
    assert {info.status for info in failed} <= REFUSED, [i.error for i in failed]
    assert run.manual is not None
    assert run.manual.status is CompressionStatus.COMPRESSED, run.manual.error
    assert any(isinstance(e, BreakerClosed) for e in run.events)
    kept = [e.info for e in run.events if isinstance(e, CompactionSucceeded)]
    assert kept, "no summary was kept"
    assert run.switched_at is not None
    for info in kept:
        assert info.summary
        assert info.summary.strip()
        assert all(info.summary.strip() != reply for reply in model_replies if reply)
        assert echo_source(info.summary, {"the summary prompt": prompt}) is None
        assert "ticket" in info.summary  # made of the conversation
        assert info.new_token_count < info.original_token_count
    assert kept[-1].summary is not None
    assert kept[-1].summary.strip() in session.history[0].text
