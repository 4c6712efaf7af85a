"""The offline demo: a synthetic coding-agent session through the real engine. No I/O.

A scripted :class:`FakeProvider` plays the model on a 100K window (warn 60K, auto 70K,
hard 77K). The user pastes logs, the model reads files through a tool, one turn carries an image.
The script makes every behaviour of the ladder happen once, in this order:

1. the count crosses *warn*: the ``compress-intro`` tip;
2. it crosses *auto*: tool-output clearing runs, then a summary (an automatic compaction);
3. three summaries fail in a row (empty, provider error, inflated): the breaker opens and the
   ``context-high`` tip says automatic compaction is paused;
4. the count reaches *hard*: the forced rescue gets a truncated summary, which is refused, and the
   request is trimmed so it still fits;
5. the next rescue succeeds and closes the breaker.

:func:`run_demo` returns the turns as data; the CLI renders them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autocompact.chat import ChatSession
from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.plan import CompressionInfo, CompressionTrigger
from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
)
from autocompact.context_report import ContextReport, build_context_report
from autocompact.errors import ProviderError
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionCancelled,
    CompactionFailed,
    CompactionOutgrown,
    CompactionSkipped,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    RequestTrimmed,
    ThresholdCrossed,
    WindowLearned,
)
from autocompact.providers.base import ChatRequest, FinishReason
from autocompact.providers.fake import FakeProvider, FakeReply
from autocompact.thresholds import CompactionThresholds
from autocompact.tips import Tip, format_tokens, select_tip

__all__ = ["DEMO_WINDOW", "DemoReport", "DemoTurn", "describe_event", "run_demo"]

DEMO_WINDOW = 100_000
_MAX_TURNS = 200
_FORCED = (CompressionTrigger.HARD, CompressionTrigger.REACTIVE)
"""Triggers of the forced compactions (the tip says whether one ran before the send)."""
SCREENSHOT = Message.user(
    "Here is the failing dashboard.", ImagePart(media_type="image/png", data="iVBORw0KGgo=")
)


@dataclass(frozen=True, kw_only=True)
class DemoTurn:
    """One user turn of the demo: what was sent, where the count stood, what happened."""

    number: int
    label: str
    tokens_before: int
    tokens_after: int
    tier: str
    events: tuple[str, ...]
    tip: Tip | None = None


@dataclass(frozen=True, kw_only=True)
class DemoReport:
    """The whole demo run."""

    window: int
    thresholds: CompactionThresholds
    turns: tuple[DemoTurn, ...]
    context_reports: tuple[tuple[int, ContextReport], ...]
    compactions: tuple[CompressionInfo, ...] = field(default=())


def describe_event(event: Event) -> str:
    """One line of plain text for an engine event."""
    match event:
        case ThresholdCrossed():
            return (
                f"tier {event.previous.value} → {event.current.value} "
                f"at {format_tokens(event.tokens)}"
            )
        case CompactionStarted():
            return f"compaction started ({event.trigger.value}) at {format_tokens(event.tokens)}"
        case CompactionSucceeded():
            info = event.info
            how = "tool-output clearing only" if info.method == "clearing" else "summary"
            cleared = (
                f", {info.cleared_tool_outputs} tool outputs cleared"
                if info.cleared_tool_outputs
                else ""
            )
            return (
                f"compressed {format_tokens(info.original_token_count)} → "
                f"{format_tokens(info.new_token_count)} by {how}{cleared}"
            )
        case CompactionFailed():
            return f"compaction failed ({event.info.status.value}): {event.info.error}"
        case CompactionSkipped():
            reason = event.info.error or "the history is too short"
            return f"compaction skipped ({event.info.trigger.value}): {reason}"
        case CompactionCancelled():
            return (
                f"compaction {event.reason} ({event.trigger.value}): {event.error or 'no result'}"
            )
        case CompactionOutgrown():
            return (
                f"compaction outgrown after {event.calls} calls: counted as ineffective, "
                f"hold until {format_tokens(event.hold_until)}"
            )
        case BreakerOpened():
            return (
                f"breaker open after {event.consecutive_failures} failures: "
                "automatic compaction paused"
            )
        case BreakerClosed():
            return "breaker closed: automatic compaction resumes"
        case RequestTrimmed():
            n = event.dropped_messages
            what = "1 earlier message" if n == 1 else f"{n} earlier messages"
            return (
                f"request trimmed: {what} left out of this "
                f"request ({format_tokens(event.tokens_before)} → "
                f"{format_tokens(event.tokens_after)}); the history keeps them"
            )
        case WindowLearned():
            return f"window learned from the server: {format_tokens(event.context_window)}"


def _code(name: str, lines: int) -> str:
    body = [f'"""Module {name}: synthetic source for the autocompact demo."""', ""]
    for i in range(lines):
        body.append(f"def handler_{i}(request, retries={i % 5}):")
        body.append(f"    return process(request, stage={i}, name='{name}')")
    return "\n".join(body)


def _log(step: int, lines: int) -> str:
    return "\n".join(
        f"2026-12-02T10:{step:02d}:{i % 60:02d} INFO worker-{i % 4} processed batch {i} "
        f"in {12 + i % 40} ms"
        for i in range(lines)
    )


def _side_query_script(provider: FakeProvider) -> None:
    """The demo's summaries: written by the extractive summarizer, unless scripted to fail."""

    def respond(request: ChatRequest) -> FakeReply:
        if request.purpose == "side_query":
            return FakeReply(text=extractive_summary(request.messages[:-1], max_tokens=4_000))
        return FakeReply(text="Done. The change is in place and the tests pass.")

    provider.responder = respond


def run_demo(window: int = DEMO_WINDOW) -> DemoReport:
    """Run the scripted session and return every turn (deterministic)."""
    provider = FakeProvider(model="demo-model", context_window=window)
    _side_query_script(provider)
    events: list[Event] = []
    session = ChatSession(
        provider,
        context_window=window,
        system_instruction="You are a careful coding agent working in a Python repository.",
        hooks=[events.append],
    )
    turns: list[DemoTurn] = []
    reports: list[tuple[int, ContextReport]] = []
    last_tip: list[str | None] = [None]

    def turn(label: str, send: Callable[[], object]) -> None:
        if len(turns) >= _MAX_TURNS:
            raise RuntimeError(f"the demo script did not finish in {_MAX_TURNS} turns")
        before = session.estimate_tokens()
        events.clear()
        send()
        after = session.estimate_tokens()
        hold = session.hold_until
        tip = select_tip(
            after,
            window=window,
            thresholds=session.thresholds,
            breaker_open=session.breaker_open,
            held=hold is not None and after < hold,
            rescue_ran=any(
                isinstance(e, CompactionStarted) and e.trigger in _FORCED for e in events
            ),
        )
        shown = tip if tip is not None and tip.id != last_tip[0] else None
        last_tip[0] = tip.id if tip is not None else None
        turns.append(
            DemoTurn(
                number=len(turns) + 1,
                label=label,
                tokens_before=before,
                tokens_after=after,
                tier=session.thresholds.tier(after).value,
                events=tuple(describe_event(e) for e in events),
                tip=shown,
            )
        )

    def breaker_open() -> bool:
        return session.breaker_open

    def tool_turn(step: int, path: str, lines: int) -> None:
        call = FunctionCallPart(id=f"call_{step}", name="read_file", arguments={"file_path": path})
        provider.enqueue(
            FakeReply(parts=(call,), finish_reason=FinishReason.TOOL_CALL), purpose="chat"
        )
        turn(
            f"ask to review {path}",
            lambda: session.send(f"Step {step}: review {path} and fix the retry bug."),
        )
        response = FunctionResponsePart(id=call.id, name="read_file", response=_code(path, lines))
        turn(f"tool result: {path}", lambda: session.send(Message(role="user", parts=(response,))))

    def paste_turn(step: int, lines: int) -> None:
        turn(
            f"paste a {lines}-line log",
            lambda: session.send(
                f"Step {step}: here is the worker log, find the slow batch.\n{_log(step, lines)}"
            ),
        )

    # 1-2: grow to warn and auto; the first automatic compaction clears tool output and summarizes.
    step = 0
    while session.estimate_tokens() < session.thresholds.auto - 6_000:
        step += 1
        if step == 3:
            turn("send a screenshot", lambda: session.send(SCREENSHOT))
        elif step % 2:
            tool_turn(step, f"src/service/module_{step}.py", 90)
        else:
            paste_turn(step, 160)
    reports.append(
        (len(turns), build_context_report(session.estimate_tokens(), session.thresholds))
    )
    while not session.compactions:
        step += 1
        paste_turn(step, 200)

    # 3: three failing summaries trip the breaker.
    provider.enqueue_empty()
    provider.enqueue_error(
        ProviderError(
            "503 service unavailable (scripted)", provider="fake", model="demo-model", status=503
        ),
        purpose="side_query",
    )
    provider.enqueue_inflated()
    # Small steps, so the three failures are automatic attempts inside the auto band (a failed
    # hard rescue is forced and does not count towards the breaker).
    while not breaker_open():
        step += 1
        near_auto = session.estimate_tokens() >= session.thresholds.auto - 5_000
        paste_turn(step, 60 if near_auto else 320)

    # 4-5: with the breaker open the count reaches hard; the rescue's summary is truncated and
    # refused (the request is trimmed to fit), then the next rescue succeeds.
    provider.enqueue_truncated()
    while breaker_open():
        step += 1
        paste_turn(step, 240)
    reports.append(
        (len(turns), build_context_report(session.estimate_tokens(), session.thresholds))
    )
    return DemoReport(
        window=window,
        thresholds=session.thresholds,
        turns=tuple(turns),
        context_reports=tuple(reports),
        compactions=tuple(session.compactions),
    )
