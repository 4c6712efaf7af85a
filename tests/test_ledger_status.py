"""The ledger's task status (work finished, read from what succeeded) and the goal as changed."""

from __future__ import annotations

import pytest

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.ledger import build_ledger, parse_ledger, render_ledger
from autocompact.compaction.ledger.status import MAX_DONE, finished
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message

# -- helpers --------------------------------------------------------------------------------------

_count = iter(range(10_000))


def shell(command: str, output: str, *, error: bool = False) -> list[Message]:
    """An assistant's shell call and its result."""
    cid = f"sh{next(_count)}"
    call = FunctionCallPart(id=cid, name="run_shell", arguments={"cmd": command})
    return [
        Message.model("Running it.", call),
        Message.user(
            FunctionResponsePart(id=cid, name="run_shell", response=output, is_error=error)
        ),
    ]


def todo(*items: tuple[str, str]) -> list[Message]:
    """A todo-list tool call (content, status) and its acknowledgement."""
    cid = f"td{next(_count)}"
    todos = [{"content": c, "status": s} for c, s in items]
    call = FunctionCallPart(id=cid, name="TodoWrite", arguments={"todos": todos})
    return [
        Message.model("Updating the plan.", call),
        Message.user(FunctionResponsePart(id=cid, name="TodoWrite", response="ok")),
    ]


def done_lines(history: list[Message]) -> list[str]:
    """The finished entries of the ledger of ``history``."""
    return [e.text for e in build_ledger(history).status if e.mark == "DONE"]


def next_round(summary: str, *extra: Message) -> list[Message]:
    """The history after a compaction: the summary, then new messages."""
    return [Message.user(summary), Message.model("Understood."), *extra]


# -- finished work from tool results ----------------------------------------------------------


def test_a_commit_that_succeeded_is_finished_work_with_its_hash_and_subject() -> None:
    """A ``git commit`` whose output names the new commit is a [DONE] line with both."""
    history = [
        Message.user("Teach the uploader to back off when S3 throttles it."),
        *shell(
            "cd /srv/app && git add -A && git commit -m 'uploader: exponential backoff'",
            "[feat/backoff 7c1d9e2] uploader: exponential backoff\n 2 files changed",
        ),
    ]
    lines = done_lines(history)
    assert len(lines) == 1
    assert "7c1d9e2" in lines[0]
    assert "uploader: exponential backoff" in lines[0]
    assert "7c1d9e2" in extractive_summary(history, max_tokens=400)


def test_a_failed_commit_or_close_is_not_finished_work() -> None:
    """A commit that failed (nothing to commit, a hook refused it) and a close that failed add
    nothing to the status."""
    history = [
        Message.user("Tidy the changelog for the 2.4 release."),
        *shell("git commit -am 'changelog'", "pre-commit hook failed: trailing spaces", error=True),
        *shell("tk finish REL-204", "error: REL-204 has open subtasks", error=True),
    ]
    assert done_lines(history) == []


def test_a_tracker_closing_items_names_each_id_and_no_option_value() -> None:
    """``<tool> close|done|resolve <ids>`` (the verb first or second after the program) names
    the ids it closed, not the values of its options nor what a pipe does after it."""
    assert finished("gh issue close 4182 --comment 'fixed in 7c1d9e2'", "✓ Closed issue #4182") == [
        ("closed:4182", "closed 4182")
    ]
    found = finished("tk resolve OPS-17 OPS-18 --note=shipped 2>&1 | tail -1", "resolved 2")
    assert found == [("closed:OPS-17 OPS-18", "closed OPS-17, OPS-18")]
    assert finished("NO_COLOR=1 jt done web-3.2", "") == [("closed:web-3.2", "closed web-3.2")]


def test_words_that_only_look_like_closing_are_no_finished_work() -> None:
    """A script named close…, an echo of the word, a search for it, and a close without an id
    are not work finished."""
    for command in (
        "python close_ports.py 8080",
        "echo done 3",
        "grep -rn done src/",
        "git log --grep close",
        "make close",
    ):
        assert finished(command, "ok") == [], command


def test_finished_work_survives_the_next_compactions() -> None:
    """A [DONE] line of one summary is still there after two more rounds that finish other
    work, and the latest :data:`MAX_DONE` are kept when many pile up."""
    first = [
        Message.user("Port the CSV reader to the streaming API."),
        *shell("tk close CSV-9", "closed CSV-9"),
    ]
    summary = extractive_summary(first, max_tokens=600)
    second = next_round(
        summary, Message.user("Now the writer too."), *shell("tk close CSV-10", "ok")
    )
    summary = extractive_summary(second, max_tokens=600)
    third = next_round(summary, Message.user("And the docs page."))
    summary = extractive_summary(third, max_tokens=600)
    assert "CSV-9" in summary
    assert "CSV-10" in summary
    many = [Message.user("Close out the sprint board.")]
    for n in range(MAX_DONE + 5):
        many += shell(f"tk close SPR-{n}", "ok")
    lines = done_lines(many)
    assert len(lines) == MAX_DONE
    assert lines[-1].endswith(f"SPR-{MAX_DONE + 4}")


def test_a_new_todo_list_replaces_the_carried_one_but_work_done_stays() -> None:
    """The latest todo list is the plan; a carried [DONE] line stays, a carried open item the
    new list no longer has is gone."""
    first = [
        Message.user("Add dark mode to the settings screen."),
        *todo(("draft the palette", "completed"), ("wire the toggle", "pending")),
        *shell("tk close UI-3", "ok"),
    ]
    ledger = parse_ledger(render_ledger(build_ledger(first), 5_000))
    assert any("UI-3" in e.text for e in ledger.status)
    second = next_round(
        render_ledger(build_ledger(first), 5_000),
        *todo(("wire the toggle", "completed"), ("persist the choice", "in_progress")),
    )
    status = [e.text for e in build_ledger(second).status]
    assert "[DONE] closed UI-3" in status
    assert "[DONE] draft the palette" in status
    assert "[DONE] wire the toggle" in status
    assert "[IN PROGRESS] persist the choice" in status
    assert "[TODO] wire the toggle" not in status


def test_finished_work_is_kept_before_notes_and_files_only_read_in_a_tight_budget() -> None:
    """Under a budget that cannot hold everything, the [DONE] lines come before files that
    were only read."""
    history = [Message.user("Migrate the cron jobs to systemd timers.")]
    for n in range(30):
        cid = f"rd{n}"
        call = FunctionCallPart(
            id=cid, name="Read", arguments={"file_path": f"/srv/etc/job{n}.conf"}
        )
        history += [
            Message.model("Reading.", call),
            Message.user(FunctionResponsePart(id=cid, name="Read", response="x")),
        ]
    history += shell("tk close CRON-41", "ok")
    text = render_ledger(build_ledger(history), 320)
    assert "CRON-41" in text
    assert "job0.conf" not in text


def test_an_item_marked_in_progress_shows_until_finished_work_names_it() -> None:
    """``<tracker> <sub> <id> --status in_progress`` is an [IN PROGRESS] line; a later close of
    that id replaces it, and a listing filtered by status marks nothing."""
    history = [
        Message.user("Work through the accessibility tickets."),
        *shell("tk list --status=in_progress", "A11Y-5 A11Y-6"),
        *shell(
            "tk update A11Y-5 --status in_progress && tk update A11Y-6 --status=in_progress", ""
        ),
    ]
    status = [e.text for e in build_ledger(history).status]
    assert status == ["[IN PROGRESS] A11Y-5", "[IN PROGRESS] A11Y-6"]
    later = next_round(render_ledger(build_ledger(history), 5_000), *shell("tk close A11Y-5", "ok"))
    status = [e.text for e in build_ledger(later).status]
    assert status == ["[IN PROGRESS] A11Y-6", "[DONE] closed A11Y-5"]


def test_the_next_step_is_the_item_in_progress_since_the_latest_request() -> None:
    """The model marked an item in progress after the user's latest request: that item is the
    next step (the request it serves still named); a newer request is the next step again."""
    history = [
        Message.user("Work on the epic SHOP-12. Start with the first ready task."),
        *shell("tk update SHOP-12.1 --status in_progress", ""),
        *shell("tk close SHOP-12.1", "closed"),
        *shell("tk update SHOP-12.2 --status=in_progress", ""),
        *shell("pytest -q tests/test_cart.py", "3 passed"),
    ]
    step = build_ledger(history).next_step
    assert step is not None
    assert "SHOP-12.2" in step.text
    assert "Start with the first ready task" in step.text
    history.append(Message.user("Hold on, write the release notes for SHOP-12 first."))
    step = build_ledger(history).next_step
    assert step is not None
    assert "release notes" in step.text
    assert "SHOP-12.2" not in step.text


def test_the_last_reply_as_next_step_is_its_words_on_whole_words() -> None:
    """A report that ends the part is quoted by its words: not its opening interjection, its
    Markdown headings or its table rows, and cut after a whole word, marked "…"."""
    report = (
        "Splendid! The exporter now writes one Parquet file per tenant.\n\n"
        "## Outcome of the migration\n\n"
        "| tenant | rows |\n|--------|------|\n| north-7 | 10412 |\n\n"
        "### 2. Throughput\n\n"
        "Each tenant's file is flushed after 50000 rows, so memory stays below 300 MB while "
        "the biggest tenant exports; the schema registry pins version 14 of the record layout "
        "and the nightly job reads that version back before it publishes anything downstream."
    )
    history = [Message.user("Port the exporter to Parquet."), Message.model(report)]
    step = build_ledger(history).next_step
    assert step is not None
    said = step.text.removeprefix("Carry on after the last reply: ")
    assert said.startswith("The exporter now writes one Parquet file per tenant.")
    for layout in ("Splendid", "#", "|", "---", "Outcome of the migration", "Throughput"):
        assert layout not in said, (layout, said)
    assert said.endswith(" …")
    last_word = said.removesuffix(" …").rsplit(" ", 1)[-1]
    assert f" {last_word} " in report, said  # a whole word of the report, not a piece of one
    assert len(said) <= 200


def test_a_long_latest_request_as_next_step_is_cut_after_a_whole_word() -> None:
    """A latest request of more than 200 characters is quoted up to a whole word."""
    request = (
        "Now rename every `ledger_v1` table to `ledger_v2` in the reporting schema, keep "
        "read-only views under the old names for the dashboards that still query them, "
        "update the nightly aggregation job and its fixtures, and tell me which dashboards "
        "break if we drop the views next quarter."
    )
    history = [
        Message.user("Clean up the reporting schema."),
        Message.model("Done: the unused indexes are gone."),
        Message.user(request),
    ]
    step = build_ledger(history).next_step
    assert step is not None
    asked = step.text.removeprefix("Continue with the latest request: ")
    assert asked.endswith(" …")
    assert request.startswith(asked.removesuffix(" …"))
    assert request[len(asked) - 2] == " ", asked  # cut at a space: the last word is whole


# -- the goal as changed ----------------------------------------------------------------------

_SMALL_TALK = (
    "Thanks, that reads fine. The standup ran long again today. "
    "Open the dashboard when you get a chance. "
)


def test_the_goal_is_the_request_of_the_first_message_not_its_greeting_or_a_rule() -> None:
    """A greeting before the request and a rule next to it are not the goal."""
    history = [
        Message.user(
            "Morning! Hope the weekend was calm. Never force-push to trunk. "
            "Could you make `tools/snapshot.sh` resume an interrupted upload?"
        ),
        Message.model("Sure."),
    ]
    goal = build_ledger(history).goal
    assert goal is not None
    assert "tools/snapshot.sh" in goal.text


@pytest.mark.parametrize(
    "request_text",
    [
        "Map how the invoice exporter batches its writes. Things to find out:\n"
        "1. Which queue `exporter/batch_writer.py` drains first\n"
        "2. Where retries_total gets incremented\n"
        "3. The lock order between the two workers",
        "How does reconciliation handle a late bank feed? Cover:\n"
        "- The timeout in `jobs/reconcile.rb`, the grace period and who sets RECONCILE_GRACE\n"
        "- Whether the ledger rows stay locked meanwhile\n\n"
        "Read every file you need.",
    ],
)
def test_the_goal_is_the_request_a_list_details_not_an_item_of_the_list(
    request_text: str,
) -> None:
    """A request that opens a message and is then detailed by a list under a heading ("Things
    to find out:"): the goal is the request, not the list item richest in names."""
    history = [Message.user(request_text), Message.model("Reading the code.")]
    goal = build_ledger(history).goal
    assert goal is not None
    assert goal.text.startswith(request_text[:24]), goal.text


def test_a_change_of_goal_inside_a_turn_takes_its_value_from_the_next_sentence() -> None:
    """A directive that names the goal's subject mid-turn, with the new target in the sentence
    after it, is a change of goal holding that target."""
    history = [
        Message.user("Please port `billing/ledger_sync.go` to the new queue client."),
        Message.model("On it."),
        Message.user(
            "Good progress. Shelve the ledger sync for now. "
            "This sprint belongs to `payments/refund-api` instead of that."
        ),
        Message.model("Understood."),
    ]
    changes = [e.text for e in build_ledger(history).goal_changes]
    assert any("Shelve the ledger sync" in t and "payments/refund-api" in t for t in changes)


def test_the_changed_goal_survives_every_round_until_newer_changes_replace_it() -> None:
    """Six compactions under a binding cap, each round with new turn-opening requests and
    specific notes competing: the changed goal stays in the summary; three newer changes of the
    same goal replace it."""
    history = [
        Message.user("Please port `billing/ledger_sync.go` to the new queue client."),
        Message.model("On it."),
        Message.user(
            "Nice. Shelve the ledger sync for now. What counts now is `payments/refund-api`."
        ),
        Message.model("Understood."),
        *[m for _ in range(6) for m in (Message.user(_SMALL_TALK), Message.model("Sure."))],
    ]
    summary = extractive_summary(history, max_tokens=250)
    assert "payments/refund-api" in summary, "round 1"
    for n in range(5):
        turns: list[Message] = []
        for k in range(10):
            said = (
                f"Check the pipeline run {n}{k} for `stage-{n}{k}`. The runner pool "
                f"`pool-{n}{k}` has {n * 7 + k} idle hosts. {_SMALL_TALK}"
            )
            turns += [Message.user(said), Message.model("Done, it is green.")]
        summary = extractive_summary(next_round(summary, *turns), max_tokens=250)
        assert "payments/refund-api" in summary, f"round {n + 2}"
    for target in ("fx-rates", "audit-trail", "tax-report"):
        turns = [
            Message.user(f"Park the ledger work. What counts now is `payments/{target}`."),
            Message.model("Understood."),
        ]
        summary = extractive_summary(next_round(summary, *turns), max_tokens=250)
    assert "payments/tax-report" in summary
    assert "payments/refund-api" not in summary


def test_a_question_the_user_asks_is_no_rule() -> None:
    """A question with a condition or a limit in it ("… when the bank feed is late?", "… over
    ten minutes?") asks something: it is not a rule the audit would append to every summary.
    A request worded as a question ("Could you …") keeps its rule."""
    history = [
        Message.user("Please migrate the nightly export to the queue in `jobs/export.py`."),
        Message.model("Migrating."),
        Message.user("What does the reconciliation job do when the bank feed is late?"),
        Message.model("It waits for the feed."),
        Message.user("Why does the CI build of `svc-ledger` take over ten minutes?"),
        Message.model("The cache is cold."),
        Message.user("Could you make sure the export never runs twice in one night?"),
        Message.model("Added a lock."),
    ]
    rules = " ".join(e.text for e in build_ledger(history).constraints)
    assert "bank feed" not in rules
    assert "svc-ledger" not in rules
    assert "never runs twice" in rules


def test_a_step_announced_before_a_tool_call_is_no_decision() -> None:
    """ "Let me read `lib/web/render.ex`:" says what the next tool call does (the call and its
    result are read on their own); a choice the model states is a decision."""
    read = FunctionCallPart(id="r1", name="Read", arguments={"file_path": "lib/web/render.ex"})
    history = [
        Message.user(
            "Make the CSV importer in `importer/csv_load.py` accept files without a header."
        ),
        Message.model("Let me read the loader in `importer/csv_load.py` and its tests first:"),
        Message.model(read),
        Message.user(FunctionResponsePart(id="r1", name="Read", response="def load(path): ...")),
        Message.model(
            "I'll switch `importer/csv_load.py` to `csv.reader` with header detection, so a "
            "file without a header row loads too."
        ),
    ]
    decisions = [e.text for e in build_ledger(history).decisions]
    assert any("csv.reader" in d for d in decisions)
    assert not any(d.endswith(":") for d in decisions), decisions


def test_a_problem_the_user_reports_is_no_rule() -> None:
    """ "X does not work", "it didn't load": a report of what goes wrong (the request to fix it),
    not a rule; "Don't …" and "… must not …" still are."""
    history = [
        Message.user("Fix the export pipeline in `jobs/export.py`."),
        Message.model("Looking."),
        Message.user("The export still does not finish on the 2 GB files."),
        Message.model("Checking the chunking."),
        Message.user("Scrolling in the xterm.js pane doesn't work (maybe the outer page eats it)?"),
        Message.model("Checking the pane."),
        Message.user("The login form didn't accept the rotated API key yesterday."),
        Message.model("Checking the form."),
        Message.user("Don't retry the webhook. The worker must not hold the lock over 5 s."),
        Message.model("Noted."),
    ]
    rules = " ".join(e.text for e in build_ledger(history).constraints)
    for report in ("2 GB", "xterm.js", "rotated API key"):
        assert report not in rules, rules
    assert "Don't retry the webhook" in rules
    assert "must not hold the lock" in rules
