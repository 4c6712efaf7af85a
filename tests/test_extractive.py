"""The extractive summarizer (issue 10 item 6): compresses, with priorities, merges, fits."""

from __future__ import annotations

import copy
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.compaction.extractive import (
    MIN_SUMMARY_TOKENS,
    extractive_summary,
    key_terms,
    shorten_middle,
)
from autocompact.compaction.extractive.sentences import sentences
from autocompact.compaction.prompts import SUMMARY_ACKNOWLEDGEMENT, SUMMARY_PREAMBLE
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.errors import ConfigError
from autocompact.estimation import estimate_content_chars, estimate_text_tokens

SESSIONS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"


def call(cid: str, name: str, **args: Any) -> FunctionCallPart:
    """A function call part."""
    return FunctionCallPart(id=cid, name=name, arguments=args)


def step(cid: str, name: str, output: str, *, error: bool = False, **args: Any) -> list[Message]:
    """A model call and the user message with its result."""
    return [
        Message.model(call(cid, name, **args)),
        Message.user(FunctionResponsePart(id=cid, name=name, response=output, is_error=error)),
    ]


_HEADINGS = {
    "overall_goal": ("goal", "goal now"),
    "constraints": ("rules",),
    "key_knowledge": ("facts",),
    "file_system_state": ("files",),
    "errors_and_fixes": ("errors",),
}


def section(summary: str, tag: str) -> str:
    """The lines of one section of a snapshot ("" when the section is absent)."""
    out: list[str] = []
    current = ""
    for line in summary.splitlines():
        if line.startswith("- "):
            if current in _HEADINGS.get(tag, (tag,)):
                out.append(line)
            continue
        current, _, rest = line.partition(":")
        if current in _HEADINGS.get(tag, (tag,)) and rest.strip():
            out.append(rest.strip())
    return "\n".join(out)


def agent_session(filler: int = 40) -> list[Message]:
    """A coding-agent session: one request with rules and facts, tool traffic, errors."""
    history = [
        Message.user(
            "Port the billing service to the new queue. You must never push to main directly. "
            "The staging database port is 5433. Keep every request under 30 seconds. "
            + "Context: "
            + "background prose without anything notable in it. " * 20
        )
    ]
    for n in range(filler):
        history += step(f"r{n}", "Read", "line\n" * 200, file_path=f"/home/dev/proj/src/m{n}.py")
    history += step("e1", "Edit", "ok", file_path="/home/dev/proj/src/billing.py", new_string="x")
    history += step(
        "b1",
        "Bash",
        "collecting\nImportError: cannot import name 'Queue' from 'billing'\nExit code 2",
        error=True,
        command="pytest -q",
    )
    history.append(Message.user("Update: the staging database port is now 6432."))
    history.append(Message.model("Understood."))
    history.append(Message.user("[Request interrupted by user for tool use]"))
    history.append(Message.model("Acknowledged. Continuing with the plan."))
    return history


# -- what it keeps ------------------------------------------------------------------------


def test_compresses_a_session_to_its_cap_and_below_its_input() -> None:
    """The summary is far smaller than the session and within the cap it is given."""
    history = agent_session()
    summary = extractive_summary(history, max_tokens=400)
    assert estimate_text_tokens(summary) <= 400
    assert len(summary) < estimate_content_chars(history) / 10


def test_keeps_constraints_goal_and_the_latest_value_of_a_fact() -> None:
    """Rules and limits are kept verbatim; an updated fact keeps only its latest value."""
    summary = extractive_summary(agent_session(), max_tokens=400)
    assert "Port the billing service to the new queue." in section(summary, "overall_goal")
    assert "You must never push to main directly." in summary
    assert "Keep every request under 30 seconds." in summary
    assert "6432" in summary
    assert "5433" not in summary


def test_files_are_relative_to_the_project_root_with_their_last_action() -> None:
    """Paths lose the common absolute prefix; an edited file says so."""
    summary = extractive_summary(agent_session(), max_tokens=2_000)
    files = section(summary, "file_system_state")
    assert "- src/billing.py (edited)" in files
    assert "/home/dev/proj" not in files


def test_errors_keep_the_line_that_says_what_failed() -> None:
    """An error is the line naming the failure, never only the exit code."""
    errors = section(extractive_summary(agent_session(), max_tokens=2_000), "errors_and_fixes")
    assert "ImportError: cannot import name 'Queue' from 'billing'" in errors
    assert "Exit code 2" not in errors


def test_harness_lines_duplicates_and_empty_sections_are_left_out() -> None:
    """Interruption markers and acknowledgements are not the plan; no empty section appears."""
    history = agent_session()
    history += [Message.user("Acknowledged. Continuing with the plan.")] * 5
    summary = extractive_summary(history, max_tokens=2_000)
    assert "Request interrupted" not in summary
    assert "Acknowledged" not in summary
    assert "(nothing recorded)" not in summary
    assert "<code_state>" not in summary  # nothing to say there: no empty section


def test_goal_changes_are_kept_next_to_the_goal() -> None:
    """A later change of goal is kept with the original goal."""
    history = [
        Message.user("Build the CSV exporter for reports."),
        Message.model("Working on it. " + "details " * 300),
        Message.user("Change of plan: build the JSON exporter instead, keep CSV for later."),
        Message.model("OK."),
    ]
    goal = section(extractive_summary(history, max_tokens=300), "overall_goal")
    assert "CSV exporter" in goal
    assert "Change of plan: build the JSON exporter instead, keep CSV for later." in goal


def test_a_statement_too_long_for_the_cap_is_left_out_never_cut_mid_word() -> None:
    """A rule that does not fit even shortened is left out whole: no line is cut mid-word, and
    no kept rule loses a value."""
    rule = "You must " + " ".join(f"word{n}" for n in range(400)) + "."
    history = [Message.user("Do the task. " + rule), Message.model("ok")]
    summary = extractive_summary(history, max_tokens=60)
    assert "word0" not in summary
    assert "Do the task." in summary


def test_an_earlier_summary_is_merged_section_by_section_never_nested() -> None:
    """Re-compaction updates the earlier snapshot: its items stay, no snapshot inside one."""
    first = extractive_summary(agent_session(), max_tokens=600)
    again = [
        Message.user(SUMMARY_PREAMBLE + first),
        Message.model(SUMMARY_ACKNOWLEDGEMENT),
        Message.user("Also: the queue name must be billing-v2."),
        Message.model("ok"),
    ]
    second = extractive_summary(again, max_tokens=600)
    assert second.count("<state_snapshot>") == 1
    assert "You must never push to main directly." in second
    assert "the queue name must be billing-v2" in second
    assert "This session continues" not in second
    assert "6432" in second


def test_summary_is_deterministic_and_input_untouched() -> None:
    """The same history gives the same text, and the history is not modified."""
    history = agent_session()
    snapshot = copy.deepcopy(history)
    assert extractive_summary(history) == extractive_summary(history)
    assert history == snapshot


def test_empty_history_gives_an_empty_snapshot() -> None:
    """Nothing to summarize gives the bare frame."""
    assert extractive_summary([]) == "<state_snapshot>\n</state_snapshot>"


def test_cap_below_minimum_is_rejected() -> None:
    """A cap too small for the frame is a ConfigError naming max_tokens."""
    with pytest.raises(ConfigError, match="max_tokens"):
        extractive_summary([Message.user("x")], max_tokens=MIN_SUMMARY_TOKENS - 1)


def test_the_service_passes_the_summary_target_as_the_cap() -> None:
    """CompressionService(summarizer=extractive_summary) honours summary_target_tokens strictly."""
    service = CompressionService(None, summarizer=extractive_summary)
    options = CompressOptions(context_window=200_000, force=True, summary_target_tokens=200)
    result = service.compress(agent_session(), options)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert result.info.summary is not None
    assert estimate_text_tokens(result.info.summary) <= 200


def test_shorten_middle_keeps_head_tail_and_terms() -> None:
    """shorten_middle keeps both ends and lists the middle's key terms; short text is unchanged."""
    text = "alpha " * 100 + "deep/inside.py 4242 some_name " + "omega " * 100
    short = shorten_middle(text, 200)
    assert short.startswith("alpha")
    assert short.endswith("omega ")
    for term in ("deep/inside.py", "4242", "some_name"):
        assert term in short
    assert len(short) < 200 + 200 // 3 + 60
    assert shorten_middle("short", 200) == "short"


def test_key_terms_finds_names_paths_and_numbers() -> None:
    """key_terms picks files, paths, identifiers, flags, constants and numbers, in order, once."""
    terms = key_terms("Edit src/a.py and `make lint` with --fast; MAX_N=64, getX, FooBar, 64 again")
    assert terms == ["src/a.py", "make lint", "--fast", "MAX_N", "64", "getX", "FooBar"]


# -- properties -------------------------------------------------------------------------------

WORDS = st.sampled_from(["fix", "a.py", "src/b/c.py", "42", "run_tests", "please", "x" * 500])


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Random user text, model text and calls with responses (some errors, some large)."""
    messages: list[Message] = []
    for i in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "model", "call"]))
        if kind == "user":
            messages.append(Message.user(" ".join(draw(st.lists(WORDS, min_size=1, max_size=40)))))
        elif kind == "model":
            messages.append(Message.model(" ".join(draw(st.lists(WORDS, max_size=10))) or "ok"))
        else:
            name = draw(st.sampled_from(["Read", "Bash", "Edit", "Write", "Grep"]))
            args = {"file_path": draw(WORDS), "command": draw(WORDS)}
            out = draw(st.sampled_from(["ok", "z" * 5000, "Error: nope"]))
            messages += step(f"c{i}", name, out, error=draw(st.booleans()), **args)
    return messages


@settings(max_examples=100, deadline=None)
@given(history=histories(), cap=st.integers(MIN_SUMMARY_TOKENS, 3000))
def test_any_history_fits_any_cap(history: list[Message], cap: int) -> None:
    """Whatever the history and cap: well formed, deterministic, within the cap, smaller than the
    input, no empty section."""
    summary = extractive_summary(history, max_tokens=cap)
    assert estimate_text_tokens(summary) <= cap
    if history:
        assert len(summary) < max(estimate_content_chars(history), 40)
    assert "(nothing recorded)" not in summary
    assert summary.startswith("<state_snapshot>")
    assert summary.endswith("</state_snapshot>")
    assert extractive_summary(history, max_tokens=cap) == summary


# -- real sessions ------------------------------------------------------------------------------


def real_history(path: Path) -> list[Message]:
    """The conversation of a Claude Code transcript."""
    from autocompact.transcripts import read_transcript

    transcript = read_transcript(path)
    return list(transcript.messages)


@pytest.mark.skipif(not SESSIONS.is_dir(), reason=f"real sessions not present at {SESSIONS}")
@pytest.mark.parametrize("cap", [20_000, 2_000])
def test_real_sessions_fit_and_name_edited_files(cap: int) -> None:
    """On the real sessions the summary fits the cap and names files the agent wrote or edited."""
    for path in sorted(SESSIONS.glob("*.jsonl.gz")):
        history = real_history(path)
        summary = extractive_summary(history, max_tokens=cap)
        assert estimate_text_tokens(summary) <= cap, path.name
        written = {
            c.arguments["file_path"].rsplit("/", 1)[-1]
            for m in history
            for c in m.function_calls
            if c.name in ("Write", "Edit") and "file_path" in c.arguments
        }
        named = sum(1 for name in written if name in summary)
        assert named >= min(len(written), 5) * 0.8, (path.name, named, len(written))


# -- the sentence splitter equals the plain one ---------------------------------------------

_PLAIN_BREAK = re.compile(r"[.!?][ \t]+")
_PLAIN_OPENS = re.compile(r"[A-Z`\"'(\[]")


def plain_unmarked(line: str) -> str:
    """``line`` without the emphasis that opens its text (after list or quote marks and blanks,
    or a list number) and the emphasis closing it, written out char by char."""
    for k in range(len(line) + 1):
        lead = line[:k]
        marks_only = all(c in "-*\u2022> \t" for c in lead)
        digits = lead.lstrip(" \t")
        number = digits.rstrip(" ")
        numbered = (
            1 <= len(number) - 1 <= 3
            and number[-1] in ".)"
            and all(c.isdecimal() for c in number[:-1])
            and digits.endswith(" ")
        )
        if k and not (line[k - 1] in "-*\u2022> \t.)" or line[k - 1].isdecimal()):
            return line  # no longer a lead
        if not (marks_only or numbered) or lead.endswith("*"):
            continue
        run = len(line[k:]) - len(line[k:].lstrip("*"))
        if not 1 <= run <= 3 or k + run >= len(line) or line[k + run].isspace():
            continue
        rest = line[k + run :]
        for i in range(1, len(rest)):
            after = rest[i + run : i + run + 1]
            if (
                rest[i : i + run] == "*" * run
                and not rest[i - 1].isspace()
                and rest[i - 1] != "*"
                and not (after and (after.isalnum() or after in "_*"))
            ):
                return ("" if numbered and not marks_only else lead) + rest[:i] + rest[i + run :]
        return line
    return line


def plain_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as the first extractive summarizer split them, with the
    emphasis that opens a line's text taken out (:func:`plain_unmarked`)."""
    out: list[str] = []
    for raw_line in map(plain_unmarked, text.splitlines()):
        start = 0
        ends = [m.end() for m in _PLAIN_BREAK.finditer(raw_line)]
        for end in (*ends, len(raw_line)):
            if end < len(raw_line) and not _PLAIN_OPENS.match(raw_line, end):
                continue
            piece = raw_line[start : min(end, start + 800)]
            line = " ".join(piece.split()).lstrip("-*•> ").strip()
            start = end
            if line:
                out.append(line[:400])
    return out[:400]


TEXT = st.lists(
    st.sampled_from(
        [
            *"ab Zy.!?:,-*•>`'\"(_/0",
            *("  ", "\t", "\n", "\r\n", "\u00a0", "\x1f", "\u2028", "İ", "Σ", "é", "—"),
            *("must ", "Only ", "do not ", "do\u00a0not ", "no  later ", "instead ", "switch to "),
            *("Change of plan: ", "now we need ", "AB ", "getX ", "a.b ", "x_y ", "Update: "),
            *("[Request interrupted", "Acknowledged. ", "Continue.", "q" * 300, "w " * 300),
            *("\r", "\x0b", "e.g. ", "3. ", "! ", "? ", ". ", "ack\u212anowledged. ", "\u0663"),
            *("The port is 5433. ", "x = 1 ", "key : v ", "lives in ", "ＡＢ ", "what most "),
            *("**", "***", "- **", "2) *", "*a* ", "**Label**: ", "**k**_"),
        ]
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXT)
def test_sentences_split_as_the_plain_splitter(text: str) -> None:
    """Blanks of any kind, marks, long and cut sentences: the same sentences as before."""
    assert list(sentences(text)) == plain_sentences(text)


def test_a_constraint_phrase_split_by_odd_blanks_is_still_a_constraint() -> None:
    """'do<nbsp> not' reads as 'do not' once blanks are collapsed, in a long chatty request."""
    chatter = "Thanks for the update on the work so far today. " * 10
    request = chatter + "Please do\u00a0 not touch the billing tables. " + chatter
    history = [Message.user("Build the exporter."), Message.model("ok"), Message.user(request)]
    constraints = section(extractive_summary(history, max_tokens=400), "constraints")
    assert "Please do not touch the billing tables." in constraints


def test_a_chatty_history_keeps_rules_facts_and_the_change_of_goal() -> None:
    """Many long requests of plain chatter: what is kept is the rules, facts and goal change."""
    chatter = " ".join(["Thanks, that reads well and I like where this is going."] * 40)
    history = [Message.user("Build the CSV exporter. " + chatter), Message.model("ok")]
    for n in range(60):
        extra = ""
        if n == 10:
            extra = " The staging port is 5433."
        elif n == 20:
            extra = " You must never push to main."
        elif n == 50:
            extra = " Change of plan: build the JSON exporter instead."
        history += [Message.user(chatter + extra), Message.model("Done.")]
    summary = extractive_summary(history, max_tokens=400)
    assert "The staging port is 5433." in section(summary, "key_knowledge")
    assert "You must never push to main." in section(summary, "constraints")
    assert "Change of plan: build the JSON exporter instead." in summary
    assert "Thanks, that reads well" not in summary.split("<next_step>")[0]


# -- the speed benchmark runs and can fail ------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("langchain_core") is None,
    reason="benchmark extra not installed: pip install -e '.[bench]'",
)
def test_speed_benchmark_runs_and_fails_on_a_missed_target() -> None:
    """benchmarks/extractive_speed.py prints its tables; it exits 1 when the time per request
    grows more than --max-growth allows (0 cannot be met) or 2,000 requests would take more
    than --max-seconds, 0 with generous limits or with --report-only."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "extractive_speed.py"
    small = [sys.executable, str(script), "--rounds", "1", "--counts", "4", "8"]
    generous = ["--max-growth", "1000", "--max-seconds", "1000"]
    ok = subprocess.run([*small, *generous], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "| requests | input tokens | extractive_summary CPU |" in ok.stdout
    assert "trim_messages" in ok.stdout
    assert "### chat" in ok.stdout
    assert "### one long sentence" in ok.stdout
    assert "FAILED" not in ok.stdout
    for missed in (["--max-growth", "0", "--max-seconds", "1000"], ["--max-seconds", "0"]):
        failed = subprocess.run([*small, *missed], capture_output=True, text=True)
        assert failed.returncode == 1, missed
        assert "FAILED" in failed.stdout
    report = subprocess.run([*small, "--max-seconds", "0", "--report-only"], capture_output=True)
    assert report.returncode == 0
    assert b"FAILED" in report.stdout
