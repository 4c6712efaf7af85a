"""The extractive summarizer (issue 6): structure, key terms, the cap, determinism."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction.extractive import (
    MIN_SUMMARY_TOKENS,
    extractive_summary,
    key_terms,
    shorten_middle,
)
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.errors import ConfigError
from autocompact.estimation import estimate_text_tokens

SESSIONS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"
TAGS = (
    "overall_goal",
    "constraints",
    "key_knowledge",
    "file_system_state",
    "code_state",
    "errors_and_fixes",
    "recent_actions",
    "current_plan",
    "next_step",
)


def call(cid: str, name: str, **args: Any) -> FunctionCallPart:
    return FunctionCallPart(id=cid, name=name, arguments=args)


def resp(cid: str, name: str, response: Any, *, error: bool = False) -> FunctionResponsePart:
    return FunctionResponsePart(id=cid, name=name, response=response, is_error=error)


def step(cid: str, name: str, output: Any, *, error: bool = False, **args: Any) -> list[Message]:
    return [
        Message.model(call(cid, name, **args)),
        Message.user(resp(cid, name, output, error=error)),
    ]


REQUEST_1 = (
    "Fix the failing test in tests/test_parser.py: line 1423 raises IndexError when "
    "MAX_DEPTH is 64. Do not touch parse_window()."
)
REQUEST_2 = "Now bump the version to 2.4.1 in pyproject.toml and add a CHANGELOG.md entry for #88."


def coding_session() -> list[Message]:
    """A small agent session: read, failing test, edit, passing test, write, todo list."""
    return [
        Message.user(REQUEST_1),
        Message.model("Let me look at the parser."),
        *step(
            "c1", "Read", "def parse(depth):\n    return stack[depth]\n", file_path="src/parser.py"
        ),
        *step(
            "c2",
            "Bash",
            "FAILED tests/test_parser.py::test_deep - IndexError: list index out of range",
            error=True,
            command="pytest tests/test_parser.py -x",
        ),
        *step(
            "c3",
            "Edit",
            "The file src/parser.py has been updated.",
            file_path="src/parser.py",
            old_string="return stack[depth]",
            new_string="return stack[min(depth, MAX_DEPTH - 1)]",
        ),
        *step("c4", "Bash", "collected 12 items\n12 passed in 0.4s", command="pytest -q"),
        Message.model("The test passes now."),
        Message.user(REQUEST_2),
        *step(
            "c5",
            "TodoWrite",
            "ok",
            todos=[
                {"content": "Bump version to 2.4.1", "status": "completed"},
                {"content": "Add CHANGELOG entry for #88", "status": "in_progress"},
                {"content": "Run the release check", "status": "pending"},
            ],
        ),
        *step(
            "c6", "Write", "File created.", file_path="CHANGELOG.md", content="## 2.4.1\n- #88\n"
        ),
    ]


def section(summary: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n    </{tag}>", summary, re.S)
    assert match is not None, f"no <{tag}> in the summary"
    return match.group(1)


# -- structure and content --------------------------------------------------------------------


def test_summary_has_the_model_summary_structure() -> None:
    """The snapshot has the nine sections of the summary prompt, in order."""
    summary = extractive_summary(coding_session())
    assert summary.startswith("<state_snapshot>\n")
    assert summary.endswith("\n</state_snapshot>")
    positions = [summary.index(f"<{tag}>") for tag in TAGS]
    assert positions == sorted(positions)


def test_every_user_request_keeps_its_key_terms() -> None:
    """File names, numbers and identifiers of every user request are in the summary."""
    summary = extractive_summary(coding_session())
    expected = ["tests/test_parser.py", "1423", "IndexError", "MAX_DEPTH", "64", "parse_window"]
    expected += ["2.4.1", "pyproject.toml", "CHANGELOG.md", "88"]
    constraints = section(summary, "constraints")
    for term in expected:
        assert term in constraints, term
    for request in (REQUEST_1, REQUEST_2):
        for term in key_terms(request):
            assert term in constraints, term


def test_files_commands_errors_and_plan_are_extracted() -> None:
    """Files come from call arguments, commands from `command`, errors with the next action."""
    summary = extractive_summary(coding_session())
    files = section(summary, "file_system_state")
    assert "Read:\n- src/parser.py" in files
    assert "Edited:\n- src/parser.py" in files
    assert "Written:\n- CHANGELOG.md" in files
    knowledge = section(summary, "key_knowledge")
    assert "`pytest tests/test_parser.py -x` → failed" in knowledge
    assert "`pytest -q` → ok: 12 passed in 0.4s" in knowledge
    errors = section(summary, "errors_and_fixes")
    assert "Bash(command=pytest tests/test_parser.py -x) failed: FAILED" in errors
    assert "→ next: Edit(file_path=src/parser.py)" in errors
    assert "MAX_DEPTH - 1" in section(summary, "code_state")
    plan = section(summary, "current_plan")
    assert "[DONE] Bump version to 2.4.1" in plan
    assert "[IN PROGRESS] Add CHANGELOG entry for #88" in plan
    assert "[TODO] Run the release check" in plan
    assert "Write(file_path=CHANGELOG.md)" in section(summary, "recent_actions")
    assert REQUEST_2 in section(summary, "next_step")


def test_open_error_is_marked_still_open() -> None:
    """An error with no later action is reported as still open."""
    history = [Message.user("run it"), *step("c1", "Bash", "boom", error=True, command="make")]
    assert "failed: boom → still open" in section(extractive_summary(history), "errors_and_fixes")


def test_user_text_beside_an_error_result_is_the_next_action() -> None:
    """Text the user typed next to a failed tool result is recorded as what followed it."""
    history = [
        Message.user("deploy"),
        Message.model(call("c1", "Bash", command="make deploy")),
        Message.user(resp("c1", "Bash", "permission denied", error=True), "stop, use sudo"),
    ]
    errors = section(extractive_summary(history), "errors_and_fixes")
    assert "failed: permission denied → next: user said stop, use sudo" in errors


def test_an_earlier_summary_is_kept_and_labelled() -> None:
    """A previous snapshot in the history is carried over as a labelled request."""
    earlier = "<state_snapshot>\n<overall_goal>\nport lexer.c to Rust\n</overall_goal>"
    history = [Message.user(earlier), Message.model("ok"), Message.user("continue")]
    constraints = section(extractive_summary(history), "constraints")
    assert "[1] (summary of the earlier conversation) <state_snapshot>" in constraints
    assert "lexer.c" in constraints


def test_summary_is_deterministic_and_input_untouched() -> None:
    """The same history gives the same text; the history is not modified."""
    history = coding_session()
    snapshot = copy.deepcopy(history)
    first = extractive_summary(history)
    assert extractive_summary(copy.deepcopy(history)) == first
    assert extractive_summary(history, max_tokens=600) == extractive_summary(
        snapshot, max_tokens=600
    )
    assert history == snapshot


def test_empty_history_gives_an_empty_snapshot() -> None:
    """No messages: every section says nothing was recorded."""
    summary = extractive_summary([])
    assert summary.count("(nothing recorded)") == len(TAGS) - 2
    assert "Wait for the user's first request." in summary


def test_cap_below_minimum_is_rejected() -> None:
    """A max_tokens below the minimum is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match=str(MIN_SUMMARY_TOKENS - 1)):
        extractive_summary([], max_tokens=MIN_SUMMARY_TOKENS - 1)


def test_works_as_the_compression_service_summarizer() -> None:
    """CompressionService(summarizer=extractive_summary) compacts without a provider."""
    from autocompact.compaction import (
        CompressionService,
        CompressionStatus,
        CompressionTrigger,
        CompressOptions,
    )

    history: list[Message] = []
    for i in range(30):
        history += [
            Message.user(f"request {i}: edit module_{i}.py"),
            *step(f"c{i}", "Read", "x" * 4000, file_path=f"module_{i}.py"),
        ]
        history.append(Message.model(f"done {i}"))
    service = CompressionService(None, summarizer=extractive_summary)
    options = CompressOptions(context_window=200_000, force=True, trigger=CompressionTrigger.MANUAL)
    result = service.compress(history, options)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert "<state_snapshot>" in result.history[0].text
    assert "module_0.py" in result.history[0].text


# -- the cap ------------------------------------------------------------------------------------


def huge_history(requests: int = 40, steps: int = 300) -> list[Message]:
    """Many requests with unique file names and numbers, and a lot of tool output."""
    history: list[Message] = []
    per = steps // requests
    for r in range(requests):
        history.append(
            Message.user(f"Request {r}: update handler_{r}.py so that retry_limit is {10_000 + r}.")
        )
        for s in range(per):
            cid = f"c{r}_{s}"
            history += step(
                cid, "Bash", "line\n" * 2000, command=f"pytest tests/test_{r}_{s}.py -k case_{s}"
            )
            history += step(cid + "r", "Read", "y" * 20_000, file_path=f"src/pkg/mod_{r}_{s}.py")
            history.append(Message.model(f"Checked mod_{r}_{s}; " + "notes " * 200))
    return history


@pytest.mark.parametrize("cap", [20_000, 6_000, 2_000])
def test_huge_history_stays_within_the_cap_and_keeps_requests(cap: int) -> None:
    """On a huge history the summary fits the cap and every request's file and number remain."""
    history = huge_history()
    summary = extractive_summary(history, max_tokens=cap)
    assert estimate_text_tokens(summary) <= cap
    constraints = section(summary, "constraints")
    for r in range(40):
        assert f"handler_{r}.py" in constraints
        assert str(10_000 + r) in constraints


def test_least_important_sections_go_first() -> None:
    """Under pressure the model notes and reads go before written files and requests."""
    history = huge_history()
    summary = extractive_summary(history, max_tokens=6_000)
    assert "Model notes:\n- (… " in summary
    assert "Read:\n- (… " in summary
    assert "(nothing recorded)" not in section(summary, "current_plan")


def test_long_user_message_is_shortened_in_the_middle_keeping_key_terms() -> None:
    """A huge paste keeps its head, its tail and the names and numbers of its middle."""
    paste = (
        "START of my request: please review the log below.\n"
        + "filler words here\n" * 6_000
        + "the crash is in needle_function at /var/log/app-77.log line 31337\n"
        + "more filler\n" * 6_000
        + "END: fix it without changing config.yaml."
    )
    history = [
        Message.user(paste),
        Message.model("Looking."),
        Message.user("also add tests for #512"),
    ]
    summary = extractive_summary(history, max_tokens=2_000)
    assert estimate_text_tokens(summary) <= 2_000
    for term in (
        "START of my request",
        "END: fix it",
        "config.yaml",
        "needle_function",
        "/var/log/app-77.log",
        "31337",
        "#512",
    ):
        assert term in summary, term
    assert "chars cut" in summary


def test_requests_are_dropped_only_when_no_room_remains() -> None:
    """With a tiny cap and many requests, the first and latest requests survive."""
    history = [Message.user(f"task {i}: fix file_{i}.py " + "because " * 100) for i in range(60)]
    summary = extractive_summary(history, max_tokens=MIN_SUMMARY_TOKENS)
    assert estimate_text_tokens(summary) <= MIN_SUMMARY_TOKENS
    for tag in TAGS:
        assert f"<{tag}>" in summary
        assert f"</{tag}>" in summary
    constraints = section(summary, "constraints")
    assert "file_0.py" in constraints
    assert "file_59.py" in constraints
    assert "left out: no room" in constraints
    roomy = section(extractive_summary(history, max_tokens=8_000), "constraints")
    for i in range(60):
        assert f"file_{i}.py" in roomy


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
    """Whatever the history and cap, the summary is well formed, deterministic and fits."""
    summary = extractive_summary(history, max_tokens=cap)
    assert estimate_text_tokens(summary) <= cap
    assert summary.startswith("<state_snapshot>")
    assert summary.endswith("</state_snapshot>")
    assert extractive_summary(history, max_tokens=cap) == summary


# -- real sessions ------------------------------------------------------------------------------


def real_history(path: Path) -> list[Message]:
    """The conversation of a Claude Code transcript (each message.id once)."""
    from autocompact.convert import from_anthropic_messages

    raw: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            entry = json.loads(line)
            if entry.get("type") not in ("user", "assistant"):
                continue
            msg = entry["message"]
            content = msg["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            mid = msg.get("id") if msg["role"] == "assistant" else None
            if mid is not None and mid in seen:
                raw[seen[mid]]["content"].extend(blocks)
                continue
            if mid is not None:
                seen[mid] = len(raw)
            if blocks:
                raw.append({"role": msg["role"], "content": list(blocks)})
    return from_anthropic_messages(raw)[1]


@pytest.mark.skipif(not SESSIONS.is_dir(), reason=f"real sessions not present at {SESSIONS}")
@pytest.mark.parametrize("cap", [20_000, 2_000])
def test_real_sessions_fit_and_keep_written_files(cap: int) -> None:
    """On the real sessions the summary fits the cap and names the files the agent wrote."""
    for path in sorted(SESSIONS.glob("*.jsonl.gz")):
        history = real_history(path)
        summary = extractive_summary(history, max_tokens=cap)
        assert estimate_text_tokens(summary) <= cap, path.name
        written = {
            c.arguments["file_path"]
            for m in history
            for c in m.function_calls
            if c.name == "Write" and "file_path" in c.arguments
        }
        for file_path in written:
            assert file_path in summary, (path.name, file_path)
