"""The state ledger (issue 22): items by structure and specificity, supersession, harness text."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.compaction.ledger import build_ledger, parse_ledger, render_ledger
from autocompact.compaction.ledger.text import fact_of, shorten, stale_tokens
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message

# Plain chat around the items: common words, no values, nothing specific.
_CHAT = (
    "Thanks for that, it reads well and I like where this is going. "
    "Let me think about it for a moment before we go on. "
    "That makes sense to me and the team seems happy with it so far. "
)


def chat(*extra: str, turns: int = 30) -> list[Message]:
    """A chat session: plain requests and replies, with ``extra`` user sentences in the middle."""
    rng = random.Random(7)
    history = [
        Message.user("Write the invoice exporter for the finance team."),
        Message.model("ok"),
    ]
    for n in range(turns):
        text = _CHAT * rng.randrange(1, 3)
        if n == turns // 2:
            text += " ".join(extra)
        history += [Message.user(text), Message.model("Sure, that sounds good to me.")]
    return history


def rendered(history: list[Message], budget: int = 20_000) -> str:
    """The ledger of ``history`` as text."""
    return render_ledger(build_ledger(history), budget)


# -- items without trigger words, each next to a distractor of the same shape -------------------

ITEMS = [
    # (statement, what must survive, a distractor of the same shape that must not)
    ("Region for the production database: us-south-4.", "us-south-4", "Mood for the demo: good."),
    ("Only Python 3.11. No external network calls from the sandbox.", "Python 3.11", "No way."),
    (
        "About the deploy. It has to go out before 14:00 UTC on Friday.",
        "14:00 UTC on Friday",
        "About the lunch.",
    ),
    ("The retry count for the importer is 7.", "importer is 7", "The weather is nice."),
    ("Keep the logs in JSON lines, one object per line.", "JSON lines", "Keep going."),
    ("I'd rather have pytest fixtures than setUp methods.", "pytest fixtures", "I'd rather not."),
    ("Leave third_party/zlib alone.", "third_party/zlib", "Leave it."),
    ("Owner of the billing service: Dana Whitfield.", "Dana Whitfield", "Owner: me."),
    ("Set the staging port to 6543.", "6543", "Set it up."),
    ("Use tabs for indentation in the Makefile.", "Makefile", "Use it."),
]


@pytest.mark.parametrize(("statement", "marker", "distractor"), ITEMS)
def test_an_item_is_kept_and_its_distractor_is_not(
    statement: str, marker: str, distractor: str
) -> None:
    """Each planted item survives in a long chat; the same-shaped generic line does not."""
    text = rendered(chat(statement, distractor))
    assert marker in text
    assert distractor not in text


def test_the_key_part_of_a_statement_is_kept_when_it_is_not_the_first_sentence() -> None:
    """A multi-sentence statement keeps its later sentences too."""
    text = rendered(chat("Quick note on the sandbox. Outbound calls to api.example.com are off."))
    assert "Outbound calls to api.example.com are off." in text


def test_an_update_replaces_the_earlier_value_and_the_stale_value_is_absent() -> None:
    """Key → latest value, across paraphrases of the key: the old value is nowhere."""
    history = chat("Budget cap for the pilot is $499.")
    history += [Message.user("The pilot budget cap is $800 now."), Message.model("ok")]
    history += [Message.user("Keep every request under 30 seconds."), Message.model("ok")]
    history += [Message.user("Keep every request under 45 seconds."), Message.model("ok")]
    text = rendered(history)
    assert "$800" in text
    assert "$499" not in text
    assert "45 seconds" in text
    assert "30 seconds" not in text


def test_a_change_of_goal_is_kept_with_the_goal() -> None:
    """The goal as stated and the later change (an imperative opening a turn) both show."""
    history = chat()
    history += [
        Message.user("Drop the exporter; build the Kafka ingestion worker."),
        Message.model("ok"),
    ]
    ledger = build_ledger(history)
    assert ledger.goal is not None
    assert "invoice exporter" in ledger.goal.text
    assert any("Kafka ingestion worker" in e.text for e in ledger.goal_changes)


@pytest.mark.parametrize(
    "harness",
    [
        "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
        "<summary>Background command done</summary>\n</task-notification>",
        "[Request interrupted by user for tool use]",
        "<system-reminder>Remember the todo list.</system-reminder>",
        "/mcp",
    ],
)
def test_harness_text_is_never_the_goal_next_step_or_an_error(harness: str) -> None:
    """Task notifications, reminders, interruptions and slash commands are not the user's."""
    history = [
        Message.user("Fix the flaky upload test in tests/test_upload.py."),
        Message.model("Looking."),
        Message.user(harness),
    ]
    ledger = build_ledger(history)
    assert ledger.next_step is not None
    assert "task-notification" not in ledger.next_step.text
    assert "interrupted" not in ledger.next_step.text
    assert "/mcp" not in ledger.next_step.text
    assert ledger.goal is not None
    assert "flaky upload" in ledger.goal.text


def test_a_local_commands_caveat_is_no_rule_of_the_user() -> None:
    """Claude Code writes a caveat before a local command (``/model``, ``/cost``) that tells
    the model not to answer it: the harness's words, not a rule the user set."""
    history = [
        Message.user("Fix the flaky upload test in tests/test_upload.py. Never touch the CI."),
        Message.model("Looking."),
        Message.user(
            "<local-command-caveat>Caveat: The messages below were generated by the user "
            "while running local commands. DO NOT respond to these messages or otherwise "
            "consider them in your response unless the user explicitly asks you to."
            "</local-command-caveat>"
        ),
        Message.user(
            "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
            "<command-args></command-args>"
        ),
        Message.user("<local-command-stdout>Set model to opus</local-command-stdout>"),
        Message.user("Go on with the upload test."),
        Message.model("On it."),
    ]
    ledger = build_ledger(history)
    kept = [e.text for e in (*ledger.constraints, *ledger.notes, *ledger.goal_changes)]
    assert "Never touch the CI." in kept
    assert not any("respond to these messages" in text for text in kept)
    assert "respond to these messages" not in render_ledger(ledger, 16_000)


def test_a_foreign_summarys_wrapper_and_headings_are_no_rules() -> None:
    """Claude Code's summary of an earlier part opens and ends with its own sentences and is
    cut into headed sections: neither is a rule of the user's. What the sections say, indented
    under their numbered headings as Markdown continues a list item, is read."""
    summary = (
        "This session is being continued from a previous conversation that ran out of "
        "context. The summary below covers the earlier portion of the conversation.\n\n"
        "Summary:\n1. Primary Request and Intent:\n   Port the billing worker to Go.\n\n"
        "2. Pending Tasks:\n   - Keep the retry budget at 7 attempts.\n\n"
        "3. Current Work:\n   Rewriting the ledger export in cmd/export.go.\n\n"
        "If you need specific details from before compaction (like exact code snippets, "
        "error messages, or content you generated), read the full transcript at: "
        "/home/u/.claude/projects/p/s.jsonl\nPlease continue the conversation from where we "
        "left off without asking the user any further questions. Continue with the last task "
        "that you were asked to work on."
    )
    history = [Message.user(summary), Message.model("Resuming the export.")]
    ledger = build_ledger(history)
    shown = render_ledger(ledger, 16_000)
    for wrapper in ("summary below covers", "further questions", "full transcript", "last task"):
        assert wrapper not in shown
    for heading in ("Pending Tasks:", "Current Work:", "Primary Request and Intent:"):
        assert heading not in shown
    assert "7 attempts" in shown
    assert "cmd/export.go" in shown


def test_a_foreign_summary_quotes_the_user_and_states_the_work() -> None:
    """In Claude Code's summary, the sections of the user's request and messages are the user's
    words (the goal, the rules); the others are the work's state as a model wrote it: notes,
    never the user's rules (the audit would append each one to every summary)."""
    summary = (
        "This session is being continued from a previous conversation that ran out of "
        "context. The summary below covers the earlier portion of the conversation.\n\n"
        "Analysis:\nGoing through the conversation in order.\n\nSummary:\n"
        "1. Primary Request and Intent:\n   Migrate the invoices service to PostgreSQL 16.\n\n"
        "2. Pending Tasks:\n   - Rewrite the nightly export in jobs/export.py.\n\n"
        '3. All user messages:\n   - "Never drop the legacy invoices table."\n\n'
        "4. Current Work:\n   Porting the schema in db/schema.sql.\n\n"
        "Please continue the conversation from where we left off without asking the user any "
        "further questions."
    )
    ledger = build_ledger([Message.user(summary), Message.model("Porting it.")])
    assert ledger.goal is not None
    assert "PostgreSQL 16" in ledger.goal.text
    rules = " ".join(e.text for e in ledger.constraints)
    assert "Never drop the legacy invoices table" in rules
    assert "jobs/export.py" not in rules
    assert "db/schema.sql" not in rules
    notes = " ".join(e.text for e in ledger.notes)
    assert "jobs/export.py" in notes
    assert "db/schema.sql" in notes


def test_the_headings_of_a_pasted_playbook_are_no_rules() -> None:
    """A Markdown document the user pastes (a playbook, a skill) heads its rules with ``#``
    lines: the rules under them are read, the headings are not."""
    playbook = (
        "Release the mobile app this week.\n\n# Release Playbook\n\n## Freeze\n"
        "Never merge feature branches after Thursday.\n\n### Step 2: Smoke Tests\n"
        "Run the smoke suite on the Pixel 7 emulator before tagging."
    )
    ledger = build_ledger([Message.user(playbook), Message.model("Starting the freeze.")])
    shown = render_ledger(ledger, 16_000)
    assert "Never merge feature branches after Thursday." in shown
    assert "Pixel 7" in shown
    for heading in ("# Release Playbook", "## Freeze", "### Step 2"):
        assert heading not in shown


def test_a_word_of_grammar_is_never_a_stale_value() -> None:
    """An old value read whole where its sentences were not split holds a capitalised ``The``
    that reads as a name: as a stale token it would hide every kept sentence that says "the"."""
    old = 'a P1 epic titled "Unified parity." The epic has 3 subtasks.'
    stale = stale_tokens(old, "a P2 epic")
    assert "p1" in stale
    assert "the" not in stale


def _run(cid: str, command: str, output: str, *, error: bool) -> list[Message]:
    call = FunctionCallPart(id=cid, name="Bash", arguments={"command": command})
    result = FunctionResponsePart(id=cid, name="Bash", response=output, is_error=error)
    return [Message.model(call), Message.user(result)]


def test_an_error_is_fixed_when_a_later_run_succeeds() -> None:
    """A failed push retried with success, a failing test run then a passing one: both fixed;
    the rejection boilerplate is no error, and the latest test result is kept."""
    history = [Message.user("Ship the release branch.")]
    history += _run("a", "git push origin main", "error: failed to push some refs", error=True)
    history += _run("b", "git push origin main", "To github.com:x/y.git", error=False)
    history += _run("c", "pytest -q", "E AssertionError\n1 failed, 4 passed", error=True)
    history += _run("d", "pytest -q", "5 passed in 0.2s", error=False)
    history += _run(
        "e",
        "rm -rf build",
        "The user doesn't want to proceed with this tool use. The tool use was rejected. "
        "STOP what you are doing and wait for the user to tell you how to proceed.",
        error=True,
    )
    ledger = build_ledger(history)
    assert [e.mark for e in ledger.errors] == ["fixed", "fixed"]
    assert not any("STOP what you" in e.text for e in ledger.errors)
    assert [r.text for r in ledger.results] == ["tests: `pytest -q` → 5 passed in 0.2s"]


def test_a_runner_named_only_in_a_quoted_argument_is_no_result() -> None:
    """A tracker's title or a commit message that names a linter or a test runner runs none:
    its output does not replace the latest lint or test result (a quoted program, or a shell's
    quoted command, is still read)."""
    history = [Message.user("Check the suite, then plan the quality tooling as beads.")]
    history += _run("a", 'sh -c "mix test --max-failures 1"', "41 tests, 0 failures", error=False)
    history += _run("b", '"./node_modules/.bin/eslint" src', "All checks passed", error=False)
    history += _run(
        "c",
        'bd create --title="Install quality tools and configure Credo" --type=task',
        "Created issue: spotter-0p7.1 (2 dependencies passed validation)",
        error=False,
    )
    history += _run(
        "d", "git commit -m 'tests: cover the mix test alias'", "1 file changed", error=False
    )
    assert [r.text for r in build_ledger(history).results] == [
        'tests: `sh -c "mix test --max-failures 1"` → 41 tests, 0 failures',
        'lint: `"./node_modules/.bin/eslint" src` → All checks passed',
    ]


def test_long_commands_and_output_lines_are_cut_after_a_whole_word() -> None:
    """A command, an error line or a result line too long to quote whole is quoted up to a whole
    word, marked "…" (the snapshot promises no item cut mid-word); a long command leaves its
    result room."""
    title = " ".join(f"segment{n}" for n in range(30))
    failing = "pytest -q tests/test_export.py " + " ".join(f"--deselect=case{n}" for n in range(40))
    history = [Message.user("Track the exporter rewrite and run its tests.")]
    history += _run("a", f'tk new --title="{title}" --kind=task', "ok", error=False)
    history += _run("b", failing, "E   " + " ".join(["mismatch"] * 80), error=True)
    history += _run("c", failing, "9 passed in 0.3s", error=False)
    ledger = build_ledger(history)
    quoted = [e.text for e in (*ledger.actions, *ledger.errors, *ledger.results)]
    assert len(quoted) == 3, quoted
    words = {*title.split(), *failing.split(), "mismatch", "E"}
    assert quoted[-1].endswith(" …` → 9 passed in 0.3s"), quoted[-1]
    for text in quoted:
        assert " …" in text, text
        for cut in text.split(" …")[:-1]:  # each quote cut ends on a whole word
            last = cut.rsplit(" ", 1)[-1].strip('`"=')
            assert last in words or last.split("=")[-1].strip('"') in words, (last, text)


def test_a_chained_command_that_succeeds_fixes_the_errors_of_each_of_its_commands() -> None:
    """A commit refused by a pre-commit hook, alone and chained after ``git add``, then
    ``git add … && git commit …`` that goes through: every command of the chain succeeded, so
    both the add's and the commit's errors are fixed (a text after the first line, a commit
    message holding ``&&``, is no command)."""
    hook = "Pre-commit validation failed:\n[FORMAT] Code is not formatted."
    message = "-m \"$(cat <<'EOF'\nfeat: export\n\nRun it with make a && git push later\nEOF\n)\""
    history = [Message.user("Commit the exporter.")]
    history += _run("a", f"git add lib/export.ex && git commit {message}", hook, error=True)
    history += _run("b", f"git commit {message}", hook, error=True)
    history += _run("p", "git push", "fatal: no upstream branch", error=True)
    history += _run(
        "c",
        f"git add lib/export.ex lib/fmt.ex && git commit {message}",
        "[main 1a2b3c4] feat",
        error=False,
    )
    errors = {e.key: e.mark for e in build_ledger(history).errors}
    assert errors == {"cmd:git add": "fixed", "cmd:git commit": "fixed", "cmd:git push": "open"}


def test_the_project_root_is_where_most_files_are_not_a_scratch_file_outside_it() -> None:
    """A background task's output read under /tmp (as Claude Code writes it) leaves the project's
    files shown relative to the project, and is shown whole itself."""
    root = "/home/dev/work/ledger-svc"
    calls = [
        ("Edit", f"{root}/src/ledger/post.py"),
        ("Read", f"{root}/tests/test_post.py"),
        ("Read", "/tmp/claude-1000/tasks/b7636e2.output"),
        ("Write", f"{root}/src/ledger/close.py"),
    ]
    history = [Message.user("Close the ledger period in src/ledger/close.py.")]
    for index, (tool, path) in enumerate(calls):
        call = FunctionCallPart(id=f"f{index}", name=tool, arguments={"file_path": path})
        done = FunctionResponsePart(id=f"f{index}", name=tool, response="ok")
        history += [Message.model(call), Message.user(done)]
    shown = [e.key for e in build_ledger(history).files]
    assert shown == [
        "src/ledger/post.py",
        "tests/test_post.py",
        "/tmp/claude-1000/tasks/b7636e2.output",
        "src/ledger/close.py",
    ], shown


def test_todos_give_the_status_and_the_next_step() -> None:
    """The latest todo list is the status; the first open item is the next step."""
    todos = [
        {"content": "Parse the CSV", "status": "completed"},
        {"content": "Write the exporter", "status": "in_progress"},
        {"content": "Add tests", "status": "pending"},
    ]
    call = FunctionCallPart(id="t", name="TodoWrite", arguments={"todos": todos})
    history = [
        Message.user("Build the exporter."),
        Message.model(call),
        Message.user(FunctionResponsePart(id="t", name="TodoWrite", response="ok")),
    ]
    ledger = build_ledger(history)
    assert [e.text for e in ledger.status] == [
        "[DONE] Parse the CSV",
        "[IN PROGRESS] Write the exporter",
        "[TODO] Add tests",
    ]
    assert ledger.next_step is not None
    assert ledger.next_step.text == "Continue: Write the exporter"


def test_an_explicit_next_step_wins() -> None:
    """``Next step is …`` in the user's words is the next step."""
    history = chat(
        "Current task is the CSV parser. Steps 1-3 of 5 are done. Next step is wiring S3."
    )
    ledger = build_ledger(history)
    assert ledger.next_step is not None
    assert ledger.next_step.text == "wiring S3"
    text = render_ledger(ledger, 20_000)
    assert "Steps 1-3 of 5 are done." in text


# -- the text helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "key", "value"),
    [
        (
            "Region for the production database: us-south-4.",
            "database production region",
            "us-south-4",
        ),
        ("The production database region is eu-west-1.", "database production region", "eu-west-1"),
        ("Set the staging port to 6543.", "port staging", "6543"),
        ("Use tabs for indentation.", "indentation", "tabs"),
        ("Update: the API version is 2.4.", "api version", "2.4"),
    ],
)
def test_a_fact_has_one_key_however_it_is_worded(sentence: str, key: str, value: str) -> None:
    """``key: value``, ``key is value``, ``set key to value``, ``use value for key``."""
    fact = fact_of(sentence)
    assert fact is not None
    assert (fact.key, fact.value) == (key, value)


@pytest.mark.parametrize(
    "sentence",
    [
        "It is fine.",
        "This is great.",
        "Change of plan: build the JSON exporter now.",
        "const pushSelection = () => {",
        "Status: —",
        "Almost done — this is a first-time test env build.",
    ],
)
def test_not_every_is_or_colon_is_a_fact(sentence: str) -> None:
    """A pronoun is no key (nor one after a dash: that is a clause of its own); a statement
    after a label is no value, nor are marks alone (a line of code outside a fence)."""
    assert fact_of(sentence) is None


def test_shortening_keeps_values_negations_and_conditions() -> None:
    """Only labels and filler words go."""
    short = shorten("Note: please do not really touch the 3 files in src/ unless the build fails.")
    assert short == "do not touch 3 files in src/ unless build fails."


# -- rendering and reading back ----------------------------------------------------------------


def test_the_rendered_ledger_reads_back_to_the_same_text() -> None:
    """render → parse → render is the identity (lossless), so merges keep every item."""
    history = chat("Region for the production database: us-south-4.", "Never touch api/v2.")
    history += _run("a", "pytest -q", "1 failed", error=True)
    first = rendered(history)
    assert render_ledger(parse_ledger(first), 20_000) == first


@pytest.mark.parametrize("budget", [60, 120, 200, 400, 800, 4_000])
def test_every_rendering_is_within_its_budget_and_never_cut_mid_word(budget: int) -> None:
    """At any budget: within it, and every kept line a whole (possibly shortened) statement."""
    statements = [s for s, _, _ in ITEMS]
    history = chat(*statements)
    text = rendered(history, budget)
    assert len(text) <= max(budget, 35)
    for line in text.splitlines()[1:-1]:
        body = line.split(": ", 1)[-1].removeprefix("- ")
        assert any(body in s or body == shorten(s) for s in statements) or not body.startswith(
            tuple(s[:6] for s in statements)
        )


def test_a_model_snapshot_is_read_back_section_by_section() -> None:
    """A model's XML snapshot (and its restored items) seeds the next ledger: its rules and
    facts carry on, and a later update supersedes a fact it held."""
    snapshot = (
        "<state_snapshot>\n<overall_goal>Ship the exporter.</overall_goal>\n"
        "<constraints>\n- Never touch api/v2.\n</constraints>\n"
        "<retained_from_history>\n- Region for the production database: us-south-4.\n"
        "</retained_from_history>\n</state_snapshot>"
    )
    history = [
        Message.user("This session continues an earlier conversation.\n\n" + snapshot),
        Message.model("ok"),
        Message.user("Region for the production database: eu-west-9."),
    ]
    ledger = build_ledger(history)
    assert ledger.goal is not None
    assert ledger.goal.text == "Ship the exporter."
    assert [e.text for e in ledger.constraints] == ["Never touch api/v2."]
    assert [e.value for e in ledger.facts] == ["eu-west-9"]
    assert "us-south-4" not in render_ledger(ledger, 20_000)


def test_a_sentence_of_one_word_and_an_end_mark_after_a_blank_is_read() -> None:
    """``Fix .`` is one word once its end mark is off (a second word was looked up, and the
    ledger failed on an assistant's ``\\`make_all\\` .``)."""
    assert fact_of("Fix .") is None
    history = [
        Message.user("Please look at the build."),
        Message.model("Done with it. `make_all` ."),
    ]
    assert build_ledger(history).goal is not None


# Words and marks a sentence reader trips on: end marks after a blank, code spans, lone marks,
# arrows, markup the summary itself writes, non-ASCII, blank lines, the heads of statements.
_PIECES = st.sampled_from(
    [
        "Fix", "fix", "Done", ".", "..", "…", "!", "?", ":", ";", "-", "—", "=", "->", "→", "`",
        "`make_all`", "```", "#", "*", "1.", "(", ")", '"', "'", "'s", "I", "We", "we'll", "Let's",
        "never", "Never", "please", "Please", "use", "Use", "set", "to", "is", "not", "don't",
        "must", "under", "30", "seconds", "changed", "no longer", "instead", "of", "the", "port",
        "8080", "v2", "api/v2", "/src/a.py", "now", "goal", "é", "日本", "<state_snapshot>",
        "</state_snapshot>", "<goal>", "TODO", "commit", "", " ", "\t", "\n", "\n\n",
    ]
)  # fmt: skip
_TEXTS = st.lists(st.tuples(_PIECES, st.sampled_from(["", " ", "  "])), max_size=30).map(
    lambda pieces: "".join(a + b for a, b in pieces)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "model"]), _TEXTS), min_size=1, max_size=6))
def test_the_ledger_reads_any_text(turns: list[tuple[str, str]]) -> None:
    """Whatever the user and the model wrote, the ledger is built, rendered within any budget
    and read back: no sentence makes it fail (a lone end mark after one word once did)."""
    history = [
        Message.user(text or " ") if role == "user" else Message.model(text or " ")
        for role, text in turns
    ]
    ledger = build_ledger(history)
    for budget in (200, 2000, 20_000):
        assert len(render_ledger(ledger, budget)) <= budget
        parse_ledger(render_ledger(ledger, budget))


def test_a_harness_asking_for_its_own_summary_states_no_rule_and_no_goal() -> None:
    """Claude Code's /compact and Codex's checkpoint ask for a summary in a user turn (a
    replayed side query, a pool of logs): what they ask is the summarizer's task, never the
    user's rule or goal, nor what was added to it (a focus for that summary); the user's
    request and rule before them are kept."""
    requests = (
        "Your task is to create a detailed summary of the conversation so far, with care for "
        "each request.\n\nWrap your reasoning in <analysis> tags first.\n\n"
        "1. Errors and fixes: List every error you met and how it was fixed.\n"
        "2. Open work: Do not start on requests that were finished long ago.\n\n"
        "<example>\n- [Concept 2]\n</example>\n\nAdditional Instructions:\n"
        "Always squash the commits before merging to main.",
        "You are performing a CONTEXT CHECKPOINT COMPACTION. Write a handoff note for the next "
        "model.\n\nInclude:\n- Important constraints or user preferences\n"
        "- What remains to be done\n\nBe brief, structured and exact.",
    )
    for request in requests:
        history = [
            Message.user(
                "Add rate limiting to the upload endpoint in api/upload.py. Never touch the "
                "billing module."
            ),
            Message.model("Adding a token bucket to api/upload.py."),
            Message.user(request),
        ]
        ledger = build_ledger(history)
        assert ledger.goal is not None
        assert "rate limiting" in ledger.goal.text
        rules = " ".join(e.text for e in ledger.constraints)
        assert "billing module" in rules
        said = " ".join(e.text for e in (*ledger.constraints, *ledger.goal_changes))
        for word in ("error", "Concept", "finished", "squash", "handoff", "preferences", "brief"):
            assert word not in said, (word, said)


def test_codexs_summary_of_an_earlier_part_is_the_works_state() -> None:
    """Codex resumes after its own compaction with the model's summary in a user turn, under
    a fixed preamble: the preamble is no rule, and the summary is the work's state (notes and
    facts) as Claude Code's is, not the user's rules."""
    summary = (
        "Another language model started to solve this problem and produced a summary of its "
        "thinking process. Use this to build on the work that has already been done and avoid "
        "duplicating work. Here is the summary produced by the other language model:\n"
        "Moved the nightly export in jobs/export.py to the new queue. Always run the export "
        "with --dry-run first on staging-eu-2."
    )
    ledger = build_ledger([Message.user(summary), Message.model("Checking the queue.")])
    rules = " ".join(e.text for e in ledger.constraints)
    assert "duplicating" not in rules
    assert "dry-run" not in rules
    kept = " ".join(e.text for e in (*ledger.notes, *ledger.facts))
    assert "jobs/export.py" in kept


def test_what_the_user_typed_after_a_slash_command_is_their_request() -> None:
    """A custom command or skill run with arguments (``/ship:release cut the 2.4 release …``):
    the arguments are the user's words, the request the expanded text then serves; the focus
    typed after ``/compact`` is for that summary and is not read (as its request is not)."""
    command = (
        "<command-message>ship:release</command-message>\n"
        "<command-name>/ship:release</command-name>\n"
        "<command-args>cut the 2.4 release of the billing service from branch rel-24"
        "</command-args>"
    )
    expanded = (
        "# Release skill\n\nWork through the checklist for every release.\n\n"
        "- [ ] **Changelog entries** — each one names its ticket, e.g. BILL-812.\n"
        "- [ ] **Version bump** — pyproject.toml and the Helm chart carry one number.\n"
        "- [ ] **Staging soak** — 30 minutes on staging-eu-2 before the tag."
    )
    compact = (
        "<command-name>/compact</command-name>\n"
        "<command-args>keep an eye on the flaky payment tests</command-args>"
    )
    history = [
        Message.user(command),
        Message.user(expanded),
        Message.model("Starting with the changelog."),
        Message.user(compact),
        Message.model("Compacted."),
    ]
    ledger = build_ledger(history)
    assert ledger.goal is not None
    assert "2.4 release of the billing service" in ledger.goal.text
    said = " ".join(
        e.text for e in (*ledger.constraints, *ledger.goal_changes, *ledger.notes, *ledger.facts)
    )
    assert "flaky payment tests" not in said


def test_the_summarizers_comments_on_the_users_messages_are_not_their_words() -> None:
    """Claude Code lists the user's messages as quotes with its own comment in brackets after
    them; the quote is the user's, the comment ("after the rebuild finished, asking …") is the
    work's state, never a rule the audit would append."""
    summary = (
        "This session is being continued from a previous conversation that ran out of "
        "context.\n\nSummary:\n1. Primary Request and Intent:\n"
        "   Speed up the nightly ETL in etl/nightly.py.\n\n"
        "2. All user messages:\n"
        '   - "Speed up the nightly ETL in etl/nightly.py"\n'
        "   - (stopped the long profile run after ten minutes)\n"
        '   - "look again" (after the rebuild finished, asking to re-check the timings)\n'
        '   - "Never touch the warehouse schema."\n\n'
        "3. Current Work:\n   Profiling etl/nightly.py.\n"
    )
    ledger = build_ledger([Message.user(summary), Message.model("Profiling.")])
    rules = " ".join(e.text for e in ledger.constraints)
    assert "Never touch the warehouse schema" in rules
    for comment in ("ten minutes", "rebuild", "re-check"):
        assert comment not in rules, rules


def test_a_rule_is_read_through_its_quotes_bold_and_full_stop() -> None:
    """A rule later in a message is found by its negation or modal word whatever stands next
    to it: a quote (a summary quoting the user), Markdown bold, the full stop at its end."""
    history = [
        Message.user("Tidy up the billing module. I have a few constraints for you."),
        Message.model("Listening."),
        Message.user(
            "Some background first. Keep the changes small. "
            '"Never rename the public endpoints." '
            "Write migrations by hand, **never** autogenerated. "
            "Run the integration suite against staging only."
        ),
        Message.model("Understood."),
    ]
    rules = " ".join(e.text for e in build_ledger(history).constraints)
    assert "Never rename the public endpoints" in rules
    assert "autogenerated" in rules
    assert "staging only" in rules


@pytest.mark.parametrize(
    ("line", "read"),
    [
        ("- **Retry budget**: 7 attempts", "Retry budget: 7 attempts"),
        (
            "* **Note:** the cache lives in /var/cache/app",
            "Note: the cache lives in /var/cache/app",
        ),
        ("3. **Task ops-4.1**: move the cron", "Task ops-4.1: move the cron"),
        ("- *Owner*: Dana", "Owner: Dana"),
        ("**Total: 454 lines**", "Total: 454 lines"),
        ("- **Spotter** is a **Phoenix** app", "Spotter is a **Phoenix** app"),
        ("**kwargs and **options are passed on", "kwargs and **options are passed on"),
        ("- **unclosed emphasis stays as it is", "unclosed emphasis stays as it is"),
        ("2) plain numbered item", "2) plain numbered item"),
    ],
)
def test_emphasis_that_opens_a_line_is_taken_out_where_it_closes(line: str, read: str) -> None:
    """A list item's bold label (``- **Label**: text``, as summaries write them) loses its
    opening marks with the list mark; its closing marks go too, and a list number before it,
    where they close: after a mark, before what is no part of a word. Emphasis inside the
    line, and marks that close nothing, are left as they are."""
    from autocompact.compaction.ledger.sentences import sentence_list

    assert sentence_list(line) == [read]


def test_a_summarys_bold_labels_leave_no_marks_in_the_ledger() -> None:
    """Claude Code's summary labels its items in bold: the ledger's facts and notes read the
    label without its closing ``**`` (which once stayed: ``Credo error**: …``)."""
    summary = (
        "This session is being continued from a previous conversation that ran out of "
        "context. The summary below covers the earlier portion of the conversation.\n\n"
        "Summary:\n1. Primary Request and Intent:\n   Port the billing worker to Go.\n\n"
        "2. Errors and fixes:\n"
        "   - **Credo error**: Function body nested too deep at line 152 of lib/a.ex.\n"
        "   - **`lib/billing/worker.ex`** (NEW) holds the retry loop.\n"
        "   3. **Retry budget**: 7 attempts.\n"
    )
    ledger = build_ledger([Message.user(summary), Message.model("Resuming the port.")])
    shown = render_ledger(ledger, 16_000)
    assert "**" not in shown
    assert "Credo error: Function body nested too deep at line 152 of lib/a.ex." in shown
    assert "`lib/billing/worker.ex` (NEW) holds the retry loop." in shown
    assert "Retry budget: 7 attempts." in shown


def test_the_goal_said_again_is_no_change_of_goal() -> None:
    """A user who repeats the request, or a summary that quotes it under a goal stating it, says
    the goal again: that is no change of goal (and no rule either)."""
    history = [
        Message.user("Port the billing-7 worker to Go."),
        Message.model("Porting it."),
        Message.user("Port the billing-7 worker to Go!"),
        Message.model("Still on it."),
        Message.user("Now move the ledger-3 export to Rust as well."),
        Message.model("ok"),
    ]
    ledger = build_ledger(history)
    assert ledger.goal is not None
    assert "billing-7" in ledger.goal.text
    changes = [e.text for e in ledger.goal_changes]
    assert changes == ["Now move the ledger-3 export to Rust as well."]
    assert not any("billing-7" in e.text for e in ledger.constraints)


@pytest.mark.parametrize(
    ("goal", "change", "again"),
    [
        (
            'The user requested "Implement spotter-gqc" — the full epic.',
            '"Implement spotter-gqc"',
            True,
        ),
        (
            "Websearch how to set up credo fast",
            "**Arguments**: websearch how to set up credo fast",
            True,
        ),
        (
            "Port the worker to Go",
            "Port the worker to Go and rewrite the invoice API in Rust",
            False,
        ),
        ("Port the worker to Go", "Port the exporter to Go", False),
        ("Implement spotter-gqc", "Implement spotter", False),
        ("Set up credo fast. Maybe igniter?", "Parse `set up credo fast", True),
        ("Set up credo fast. Maybe igniter?", "Arguments: set up credo fast", True),
        ("Deploy billing worker to production", "Deploy billing worker to staging", False),
        ("Deploy billing worker to production", "Then deploy the billing worker", False),
    ],
)
def test_says_again_reads_words_not_marks(goal: str, change: str, again: bool) -> None:
    """The goal's words holding the change's, in order, or making most of it: marks, quotes
    and case aside; a word is matched whole (``spotter`` is no ``spotter-gqc``)."""
    from autocompact.compaction.ledger.goals import says_again
    from autocompact.compaction.ledger.model import Entry

    assert says_again(Entry(goal, 0.0, 1), Entry(change, 0.0, 2)) is again


def test_what_the_model_will_look_up_is_no_decision_and_no_fact() -> None:
    """ "Let me verify the port is 5433." states no port, "Now update the timeout to 90s." sets
    none yet, and "Let me check X" decides nothing: none is kept; a choice the model states in
    the same words is still a decision."""
    history = [
        Message.user("Fix the billing-7 export."),
        Message.model(
            "Let me verify the port is 5433. Let me check `config/app.toml` for the timeout. "
            "I'll first look at jobs/export.py to see the retry loop. "
            "Now update the timeout in jobs/export.py to 90s. "
            "Let me switch the cache to Redis 7 because memcached drops keys."
        ),
        Message.user("ok go"),
        Message.model("Done: the export runs on port 5432 now."),
    ]
    ledger = build_ledger(history)
    assert [e.text for e in ledger.decisions] == [
        "Let me switch the cache to Redis 7 because memcached drops keys."
    ]
    assert not any("5433" in e.text or "90s" in e.text for e in ledger.facts)
    assert "5433" not in render_ledger(ledger, 16_000)
    assert "90s" not in render_ledger(ledger, 16_000)


@pytest.mark.parametrize(
    ("sentence", "lookup"),
    [
        ("Let me check the render function for `@show_debug`.", True),
        ("Let me also verify the not_found path works.", True),
        ("I'll start by reading lib/app.ex.", True),
        ("Now I'll double-check the migration in priv/repo.", True),
        ("I\u2019ll quickly grep for `TODO` in lib/.", True),
        ("Let me find out why lib/a.ex fails.", True),
        ("I'll conduct a thorough exploration of lib/.", True),
        ("Let me find the fix in lib/a.ex.", False),
        ("Now update lib/renderer_test.exs to cover ids.", True),
        ("Now I need to check where lib/x.ex is used.", True),
        ("Now the tests in lib/ pass.", False),
        ("Now updated lib/a.ex to v2.", False),
        ("Update lib/a.ex to v2.", False),
        ("Let me rewrite it with proper SQLite handling in lib/repo.ex.", False),
        ("I'll add a flash display inline in lib/live.ex.", False),
        ("Checking the port shows 5432.", False),
        ("Let me see-saw the value in lib/x.ex.", False),
    ],
)
def test_a_lookup_is_told_by_its_verb(sentence: str, lookup: bool) -> None:
    """The verbs of looking something up after "let me", "I'll" and the like, and no other; a
    bare verb of looking or changing after "now" (a step the model tells itself)."""
    from autocompact.compaction.ledger.announcements import is_announcement

    assert is_announcement(sentence) is lookup


def test_the_request_before_the_goals_sentence_is_kept_with_it() -> None:
    """Of a first request in a few sentences, the goal's sentence (the one naming the most) may
    say how; the requests before it naming the same thing say what, and stay with it (none of
    them a change of goal). A rule, small talk or a request about something else before it is
    not joined to it."""
    what = "Work on ticket ops-12."
    how = "Run tk show ops-12 to see its details and tk ready to list its subtasks."
    then = "Start with the first ready one."

    def goal_of(request: str) -> tuple[str, tuple[str, ...]]:
        ledger = build_ledger([Message.user(request), Message.model("Looking."), *chat()[1:]])
        assert ledger.goal is not None
        return ledger.goal.text, tuple(e.text for e in ledger.goal_changes)

    assert goal_of(f"{what} {how} {then}") == (f"{what} {how}", ())
    assert goal_of(f"{how} {then}") == (how, ())
    assert goal_of(f"Never restart db-3. {how}")[0] == how
    assert goal_of(f"Thanks for the help so far. {how}")[0] == how  # no request
    assert goal_of(f"Bump lib-9 to v2. {how}")[0] == how  # a request for something else
