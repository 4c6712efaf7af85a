"""Tool-output clearing (issue 6): budgets, errors, idempotence, file dedup, structure."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction.clearing import (
    CLEARED_PREFIX,
    ClearingResult,
    clear_tool_outputs,
    is_cleared,
    latest_turn_start,
    read_target,
)
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, TextPart
from autocompact.errors import ConfigError
from autocompact.estimation import estimate_content_tokens

SESSIONS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"
AUTO_200K = 167_000


# -- builders -----------------------------------------------------------------------------------


def out(tokens: int) -> str:
    """A tool output of about ``tokens`` estimated tokens (JSON at 2 characters a token)."""
    return "x" * (tokens * 2)


def call(cid: str, name: str = "Bash", **args: Any) -> FunctionCallPart:
    return FunctionCallPart(id=cid, name=name, arguments=args)


def resp(
    cid: str, response: Any, name: str = "Bash", *, error: bool = False
) -> FunctionResponsePart:
    return FunctionResponsePart(id=cid, name=name, response=response, is_error=error)


def turn(
    cid: str, tokens: int, name: str = "Bash", *, error: bool = False, **args: Any
) -> list[Message]:
    """One model call and its response."""
    return [
        Message.model(call(cid, name, **args)),
        Message.user(resp(cid, out(tokens), name, error=error)),
    ]


def history_of(*turns: list[Message], prompt: str = "do the task") -> list[Message]:
    messages = [Message.user(prompt)]
    for t in turns:
        messages.extend(t)
    return messages


def responses(history: Sequence[Message]) -> dict[str, FunctionResponsePart]:
    return {p.id: p for m in history for p in m.function_responses}


def cleared_ids(result: ClearingResult) -> set[str]:
    return {cid for cid, p in responses(result.history).items() if is_cleared(p)}


# -- budget and latest turn -------------------------------------------------------------------


def test_keeps_newest_output_within_protect_tokens() -> None:
    """The newest responses that fit protect_tokens stay; the first that overflows and older go."""
    history = history_of(*(turn(f"c{i}", 1000) for i in range(10)))
    result = clear_tool_outputs(history, protect_tokens=3500)
    # each response is ~1,005 tokens with its JSON envelope: c9 (latest), c8, c7 fit in 3,500
    assert cleared_ids(result) == {f"c{i}" for i in range(7)}
    assert result.cleared == 7
    assert result.deduplicated == 0


def test_overflowing_response_clears_everything_older_even_small_ones() -> None:
    """The budget is a cut, not a knapsack: a small output older than the cut is cleared too."""
    history = history_of(turn("old", 200), turn("big", 5000), turn("new", 500))
    result = clear_tool_outputs(history, protect_tokens=3000)
    assert cleared_ids(result) == {"old", "big"}


def test_latest_turn_is_protected_beyond_the_budget() -> None:
    """Every response after the last model call message stays, even with a zero budget."""
    history = history_of(turn("a", 2000), turn("b", 2000))
    history += [
        Message.model(call("l1"), call("l2"), call("l3")),
        Message.user(resp("l1", out(3000)), resp("l2", out(3000))),
        Message.user(resp("l3", out(3000))),
    ]
    result = clear_tool_outputs(history, protect_tokens=0)
    assert cleared_ids(result) == {"a", "b"}
    assert result.history[-3:] == tuple(history[-3:])


def test_latest_turn_counts_toward_the_budget() -> None:
    """A large latest turn uses the budget, so older output is cleared."""
    history = history_of(turn("a", 1000), turn("b", 1000), turn("latest", 4000))
    assert cleared_ids(clear_tool_outputs(history, protect_tokens=4500)) == {"a", "b"}
    assert cleared_ids(clear_tool_outputs(history, protect_tokens=5100)) == {"a"}


def test_latest_turn_start_definition() -> None:
    """The latest turn starts after the last model message that has a function call."""
    history = history_of(turn("a", 10), turn("b", 10))
    assert latest_turn_start(history) == len(history) - 1
    assert latest_turn_start([*history, Message.model("done")]) == len(history) - 1
    assert latest_turn_start([Message.user("hi"), Message.model("hello")]) == 0
    assert latest_turn_start([*history, Message.model(call("p"))]) == len(history) + 1


def test_pending_call_leaves_no_latest_responses_to_protect() -> None:
    """When the history ends with a call awaiting its response, all earlier output is clearable."""
    history = [*history_of(turn("a", 3000)), Message.model(call("pending"))]
    assert cleared_ids(clear_tool_outputs(history, protect_tokens=100)) == {"a"}


# -- what is never cleared --------------------------------------------------------------------


def test_error_results_are_never_cleared() -> None:
    """An error result older than the cut stays as it was."""
    history = history_of(turn("err", 3000, error=True), turn("ok", 3000), turn("last", 10))
    result = clear_tool_outputs(history, protect_tokens=0)
    assert cleared_ids(result) == {"ok"}
    assert responses(result.history)["err"] == responses(history)["err"]


def test_small_outputs_are_kept_when_a_placeholder_would_not_save() -> None:
    """Clearing never makes a response bigger."""
    history = history_of(turn("tiny", 1), turn("big", 500), turn("last", 10))
    history[2] = Message.user(resp("tiny", "ok"))
    result = clear_tool_outputs(history, protect_tokens=0)
    assert cleared_ids(result) == {"big"}
    assert result.tokens_saved > 0


def test_clearing_twice_changes_nothing() -> None:
    """A cleared history is a fixed point: placeholders are recognised and skipped."""
    history = history_of(*(turn(f"c{i}", 700 * (i % 3 + 1)) for i in range(12)))
    first = clear_tool_outputs(history, protect_tokens=2000)
    second = clear_tool_outputs(first.history, protect_tokens=2000)
    assert first.cleared > 0
    assert second.history == first.history
    assert (second.cleared, second.tokens_saved, second.deduplicated) == (0, 0, 0)


# -- placeholders -------------------------------------------------------------------------------


def test_placeholder_keeps_tool_name_call_id_and_size() -> None:
    """The placeholder names the tool and call and says how big the output was."""
    history = history_of(turn("toolu_01", 12_000, name="Read", file_path="a.py"), turn("z", 5))
    part = responses(clear_tool_outputs(history, protect_tokens=0).history)["toolu_01"]
    assert (part.id, part.name, part.is_error) == ("toolu_01", "Read", False)
    assert isinstance(part.response, str)
    assert part.response.startswith(CLEARED_PREFIX)
    tokens = estimate_content_tokens([responses(history)["toolu_01"]])
    assert part.response == f"{CLEARED_PREFIX} Read call toolu_01 returned {tokens:,} tokens]"
    assert is_cleared(part)


def test_is_cleared_recognises_only_placeholders() -> None:
    """Ordinary responses, other parts and non-string responses are not placeholders."""
    assert is_cleared(resp("a", f"{CLEARED_PREFIX} Bash call a returned 9 tokens]"))
    assert not is_cleared(resp("a", "plain output"))
    assert not is_cleared(resp("a", {"output": CLEARED_PREFIX}))
    assert not is_cleared(TextPart(text=CLEARED_PREFIX))


def test_tokens_saved_is_the_estimate_difference() -> None:
    """tokens_saved equals the history estimate before minus after."""
    history = history_of(*(turn(f"c{i}", 900) for i in range(6)))
    result = clear_tool_outputs(history, protect_tokens=1000)
    saved = estimate_content_tokens(history) - estimate_content_tokens(result.history)
    assert result.tokens_saved == saved
    assert saved > 4 * 900


def test_negative_budget_is_rejected_naming_the_argument() -> None:
    """A negative protect_tokens is a ConfigError that names the argument and the value."""
    with pytest.raises(ConfigError, match=r"protect_tokens.*-1"):
        clear_tool_outputs([], protect_tokens=-1)


def test_history_without_tool_output_is_returned_as_is() -> None:
    """Nothing to clear: the same messages come back and nothing is counted."""
    history = [Message.user("hi"), Message.model("hello")]
    result = clear_tool_outputs(history, protect_tokens=0)
    assert result == ClearingResult(history=tuple(history))


# -- repeated reads -----------------------------------------------------------------------------


def test_repeated_reads_of_a_file_collapse_to_the_latest() -> None:
    """Older reads of the same file are cleared even inside the budget, with a note saying so."""
    history = history_of(
        turn("r1", 800, name="Read", file_path="/src/a.py"),
        turn("b1", 800, name="Read", file_path="/src/b.py"),
        turn("r2", 800, name="Read", file_path="/src/./a.py"),
        turn("r3", 800, name="Read", file_path="/src/a.py"),
        turn("last", 10),
    )
    result = clear_tool_outputs(history, protect_tokens=1_000_000)
    assert cleared_ids(result) == {"r1", "r2"}
    assert result.deduplicated == 2
    assert result.cleared == 0
    note = responses(result.history)["r1"].response
    assert "a later read of the same file (/src/a.py) follows" in note


def test_dedup_respects_ranges() -> None:
    """A later whole-file read supersedes a partial one; different ranges or a later part do not."""
    history = history_of(
        turn("part", 800, name="Read", file_path="a.py", offset=10, limit=50),
        turn("other", 800, name="Read", file_path="a.py", offset=100, limit=50),
        turn("whole", 800, name="Read", file_path="a.py"),
        turn("again", 800, name="Read", file_path="a.py", offset=100, limit=50),
        turn("last", 10),
    )
    result = clear_tool_outputs(history, protect_tokens=1_000_000)
    assert cleared_ids(result) == {"part", "other"}
    assert result.deduplicated == 2


def test_failed_later_read_does_not_supersede() -> None:
    """An error result of a later read does not make the earlier content redundant."""
    history = history_of(
        turn("good", 800, name="Read", file_path="a.py"),
        turn("bad", 800, name="Read", file_path="a.py", error=True),
        turn("last", 10),
    )
    assert cleared_ids(clear_tool_outputs(history, protect_tokens=1_000_000)) == set()


def test_read_in_latest_turn_supersedes_but_is_never_cleared() -> None:
    """A re-read in the latest turn clears the older read; both reads in the latest turn stay."""
    history = history_of(turn("old", 800, name="read_file", path="a.py"))
    history += [
        Message.model(call("n1", "read_file", path="a.py"), call("n2", "read_file", path="a.py")),
        Message.user(resp("n1", out(800), "read_file"), resp("n2", out(800), "read_file")),
    ]
    result = clear_tool_outputs(history, protect_tokens=1_000_000)
    assert cleared_ids(result) == {"old"}


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("Read", {"file_path": "/a/b.py"}, ("/a/b.py", "")),
        ("read_file", {"path": "a/./b.py"}, ("a/b.py", "")),
        ("ReadFile", {"filename": "x.txt"}, ("x.txt", "")),
        ("view", {"path": "x.txt", "view_range": [1, 9]}, ("x.txt", "[('view_range', '[1, 9]')]")),
        ("cat", {"file": "notes.md"}, ("notes.md", "")),
        ("NotebookRead", {"notebook_path": "n.ipynb"}, ("n.ipynb", "")),
        ("str_replace_based_edit_tool", {"command": "view", "path": "e.py"}, ("e.py", "")),
        ("str_replace_based_edit_tool", {"command": "str_replace", "path": "e.py"}, None),
        ("Write", {"file_path": "a.py"}, None),
        ("Read", {"pattern": "*.py"}, None),
    ],
    ids=[
        "Read",
        "read_file",
        "ReadFile",
        "view-range",
        "cat",
        "notebook",
        "editor-view",
        "editor-edit",
        "Write",
        "no-path",
    ],
)
def test_read_target_detects_read_like_calls(
    name: str, args: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    """Read-like tools are recognised by name (or a view command) and a path argument."""
    assert read_target(call("c", name, **args)) == expected


# -- properties over random histories -----------------------------------------------------------

TOOLS = ("Read", "Bash", "Edit")
PATHS = ("a.py", "b.py", "c.py")
SIZES = ("ok", "y" * 400, "z" * 3000, "w" * 20000)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """User text, model calls (0–3 per message) and their responses, in random shapes."""
    messages: list[Message] = [Message.user("start")]
    counter = 0
    for _ in range(draw(st.integers(0, 10))):
        n_calls = draw(st.integers(0, 3))
        if n_calls == 0:
            messages.append(Message.model(draw(st.sampled_from(["ok", "thinking it over"]))))
            messages.append(Message.user(draw(st.sampled_from(["go on", "now run tests"]))))
            continue
        calls = []
        for _ in range(n_calls):
            counter += 1
            args: dict[str, Any] = {"file_path": draw(st.sampled_from(PATHS))}
            if draw(st.booleans()):
                args["offset"] = draw(st.sampled_from([1, 50]))
            calls.append(call(f"id{counter}", draw(st.sampled_from(TOOLS)), **args))
        messages.append(Message.model("calling", *calls))
        answered = calls if draw(st.integers(0, 9)) else calls[:-1]  # sometimes a pending call
        parts = [
            resp(c.id, draw(st.sampled_from(SIZES)), c.name, error=draw(st.integers(0, 4)) == 0)
            for c in answered
        ]
        if parts:
            messages.append(Message.user(*parts))
    return messages


@settings(max_examples=150, deadline=None)
@given(history=histories(), protect=st.sampled_from([0, 300, 2000, 12000, 40000]))
def test_structure_pairs_and_input_are_untouched(history: list[Message], protect: int) -> None:
    """Only response contents change: count, roles, order, calls, ids, names, errors stay."""
    snapshot = copy.deepcopy(history)
    result = clear_tool_outputs(history, protect_tokens=protect)
    assert history == snapshot
    assert len(result.history) == len(history)
    latest = latest_turn_start(history)
    for index, (before, after) in enumerate(zip(history, result.history, strict=True)):
        assert before.role == after.role
        assert len(before.parts) == len(after.parts)
        if index >= latest:
            assert after == before
        for old, new in zip(before.parts, after.parts, strict=True):
            assert type(old) is type(new)
            if not isinstance(old, FunctionResponsePart):
                assert new == old
                continue
            assert isinstance(new, FunctionResponsePart)
            assert (new.id, new.name, new.is_error) == (old.id, old.name, old.is_error)
            if old.is_error:
                assert new == old
            assert new == old or is_cleared(new)
    old_parts = [p for m in history for p in m.function_responses]
    new_parts = [p for m in result.history for p in m.function_responses]
    changed = sum(1 for a, b in zip(old_parts, new_parts, strict=True) if a != b)
    assert result.cleared + result.deduplicated == changed
    assert result.tokens_saved == (
        estimate_content_tokens(history) - estimate_content_tokens(result.history)
    )
    assert result.tokens_saved >= 0


@settings(max_examples=150, deadline=None)
@given(history=histories(), protect=st.sampled_from([0, 300, 2000, 12000, 40000]))
def test_clearing_is_idempotent(history: list[Message], protect: int) -> None:
    """Clearing an already cleared history changes nothing."""
    once = clear_tool_outputs(history, protect_tokens=protect)
    twice = clear_tool_outputs(once.history, protect_tokens=protect)
    assert twice.history == once.history
    assert (twice.cleared, twice.deduplicated, twice.tokens_saved) == (0, 0, 0)


@settings(max_examples=150, deadline=None)
@given(history=histories(), protect=st.sampled_from([0, 300, 2000, 12000, 40000]))
def test_kept_older_output_fits_the_budget(history: list[Message], protect: int) -> None:
    """Kept clearable output outside the latest turn plus the latest turn stays within budget."""
    result = clear_tool_outputs(history, protect_tokens=protect)
    latest = latest_turn_start(history)
    latest_tokens = sum(
        estimate_content_tokens([p]) for m in history[latest:] for p in m.function_responses
    )
    kept = sum(
        estimate_content_tokens([p])
        for m in result.history[:latest]
        for p in m.function_responses
        if not p.is_error and not is_cleared(p) and p.response != "ok"
    )
    assert kept == 0 or kept + latest_tokens <= protect


# -- real sessions ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SessionPoint:
    """A session's history just before its last API call ahead of any compaction."""

    name: str
    history: list[Message]
    reported_prompt: int
    baseline: int


def load_session_point(path: Path) -> SessionPoint:
    """Read a Claude Code JSONL transcript (user/assistant lines, each message.id once)."""
    raw: list[dict[str, Any]] = []
    calls: list[tuple[int, int]] = []  # (messages before the call, reported prompt size)
    seen: dict[str, int] = {}
    compacted_at: int | None = None
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            entry = json.loads(line)
            if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
                compacted_at = len(raw) if compacted_at is None else compacted_at
                continue
            if entry.get("type") not in ("user", "assistant"):
                continue
            msg = entry["message"]
            content = msg["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if msg["role"] == "assistant":
                mid = msg.get("id")
                if mid in seen:
                    raw[seen[mid]]["content"].extend(blocks)
                    continue
                usage = msg.get("usage") or {}
                prompt = sum(
                    int(usage.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                )
                calls.append((len(raw), prompt))
                seen[mid] = len(raw)
            if blocks:
                raw.append({"role": msg["role"], "content": list(blocks)})
    from autocompact.convert import from_anthropic_messages

    _, history = from_anthropic_messages(raw)
    before = [c for c in calls if compacted_at is None or c[0] < compacted_at]
    at, prompt = before[-1]
    first_at, first_prompt = calls[0]
    return SessionPoint(
        name=path.name.removesuffix(".jsonl.gz")[:14],
        history=history[:at],
        reported_prompt=prompt,
        baseline=first_prompt - estimate_content_tokens(history[:first_at]),
    )


def session_files() -> Iterator[Path]:
    """The main sessions, then the sub-agent conversations (not the compaction calls)."""
    if SESSIONS.is_dir():
        yield from sorted(SESSIONS.glob("*.jsonl.gz"))
        for path in sorted(SESSIONS.glob("*/subagents/agent-*.jsonl.gz")):
            if not path.name.startswith("agent-acompact"):
                yield path


@pytest.mark.skipif(not SESSIONS.is_dir(), reason=f"real sessions not present at {SESSIONS}")
def test_clearing_on_real_sessions_reports_savings() -> None:
    """On the real sessions clearing keeps structure, saves tokens and ends below a 200K auto."""
    rows = []
    for path in session_files():
        point = load_session_point(path)
        result = clear_tool_outputs(point.history, protect_tokens=40_000)
        estimate = estimate_content_tokens(point.history)
        after = estimate - result.tokens_saved + point.baseline
        # the reported size scaled by how much of the history estimate clearing removed
        ratio = (point.reported_prompt - point.baseline) / max(1, estimate)
        projected = round(point.reported_prompt - result.tokens_saved * ratio)
        rows.append((point, estimate, result, after, projected))
        assert [m.role for m in result.history] == [m.role for m in point.history]
        assert result.tokens_saved >= 0
    print()
    print(
        f"{'session':14} {'msgs':>5} {'reported':>9} {'estimate':>9} {'saved':>8} {'%':>6} "
        f"{'cleared':>7} {'dedup':>5} {'est+base after':>14} {'projected real':>14}"
    )
    for point, estimate, result, after, projected in rows:
        pct = 100 * result.tokens_saved / max(1, estimate)
        print(
            f"{point.name:14} {len(point.history):5} {point.reported_prompt:9,} {estimate:9,} "
            f"{result.tokens_saved:8,} {pct:5.1f}% {result.cleared:7} {result.deduplicated:5} "
            f"{after:14,} {projected:14,}"
        )
    long_sessions = [row for row in rows if row[0].reported_prompt > 150_000]
    below = [row for row in long_sessions if row[3] < AUTO_200K and row[4] < AUTO_200K]
    print(
        f"long sessions below the 200K auto threshold (167K) by clearing alone: "
        f"{len(below)} of {len(long_sessions)}"
    )
    assert long_sessions, "the two long sessions are expected in the data folder"
    for point, estimate, result, _, _ in long_sessions:
        assert result.tokens_saved > estimate // 3, point.name
    assert len(below) == len(long_sessions)
