"""The ledger's second pass (issue 22): whole statements, subjects, supersession, token sizing."""

from __future__ import annotations

import random

import pytest

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.ledger import build_ledger, render_ledger
from autocompact.compaction.ledger.keys import key_words, rule_key, same_subject, shapes
from autocompact.compaction.ledger.statements import statements, unglued
from autocompact.compaction.ledger.text import fact_of
from autocompact.compaction.ledger.tokens import conservative_tokens, token_share
from autocompact.content import Message

_TALK = (
    "That was a long meeting and I am glad it is over now. "
    "We can pick the thread up again after lunch if you like. "
    "Thanks, the explanation helped me a lot. "
)


def talk(*said: str, turns: int = 24, seed: int = 3) -> list[Message]:
    """A chat with ``said`` spread over its user turns (one sentence group a turn)."""
    rng = random.Random(seed)
    history = [Message.user("Port the billing report to the new scheduler."), Message.model("ok")]
    slots = {2 + 3 * n: text for n, text in enumerate(said)}
    for n in range(turns):
        text = _TALK * rng.randrange(1, 3) + slots.get(n, "")
        history += [Message.user(text), Message.model("Understood, carrying on with it.")]
    return history


def summary_of(history: list[Message], budget: int = 20_000) -> str:
    """The ledger of ``history`` as text."""
    return render_ledger(build_ledger(history), budget)


@pytest.mark.parametrize(
    "phrase",
    [
        "the retention period for the audit log",
        "the audit log's retention period",
        "retention period of the audit logs",
        "Audit log retention period",
    ],
)
def test_a_subject_has_one_key_however_it_is_phrased(phrase: str) -> None:
    """Stop words go, possessives and plurals fold, word order does not matter."""
    assert key_words(phrase) == frozenset({"audit", "log", "retention", "period"})


def test_values_are_not_key_words_and_shapes_tell_a_kind_of_value() -> None:
    """A host name is a value, not a word of the key; two hosts of one pattern share a shape."""
    assert key_words("the mirror host is cache-7.lab.example") == frozenset({"mirror", "host"})
    assert shapes(["cache-7.lab.example"]) == shapes(["cache-31.lab.example"])
    assert not shapes(["42"])  # a bare number tells nothing
    words = key_words("mirror host")
    assert same_subject(words, frozenset(), key_words("our mirror host"), frozenset())
    assert not same_subject(words, frozenset(), key_words("the build host"), frozenset())


def test_a_rule_about_one_path_is_not_a_rule_about_another() -> None:
    """An identifier stays in a rule's key; a quantity does not."""
    assert rule_key("Do not touch `lib/alpha-12`.") != rule_key("Do not touch `lib/beta-40`.")
    assert rule_key("Keep page loads under 300 ms.") == rule_key("Keep page loads under 450 ms.")
    text = summary_of(talk("Do not touch `lib/alpha-12`.", "Do not touch `lib/beta-40`."))
    assert "lib/alpha-12" in text
    assert "lib/beta-40" in text


def test_a_later_limit_replaces_the_earlier_one() -> None:
    """Same rule, another number: the old number is gone."""
    text = summary_of(talk("Keep page loads under 300 ms.", "Keep page loads under 450 ms."))
    assert "450 ms" in text
    assert "300 ms" not in text


def test_a_statement_over_several_sentences_is_kept_whole() -> None:
    """A topic sentence and the pronoun-led sentences after it are one statement."""
    joined = statements(
        [
            "Regarding the thumbnail worker.",
            "Nobody has looked at it since March.",
            "It writes its output to `cdn/thumbs-88`.",
            "The weather is fine.",
        ]
    )
    assert joined[0].endswith("`cdn/thumbs-88`.")
    assert joined[0].startswith("Regarding the thumbnail worker.")
    assert joined[1] == "The weather is fine."
    text = summary_of(
        talk(
            "Regarding the thumbnail worker. Nobody has looked at it since March. "
            "It writes its output to `cdn/thumbs-88`."
        )
    )
    assert "Regarding the thumbnail worker. Nobody has looked at it since March." in text
    assert "cdn/thumbs-88" in text


def test_a_labelled_value_run_into_the_next_sentence_is_split_off() -> None:
    """``Label: value`` without an end mark does not swallow the next sentence."""
    assert unglued(["Build cache: s3://cache-41 The printer is out of paper."]) == [
        "Build cache: s3://cache-41",
        "The printer is out of paper.",
    ]
    assert unglued(["Queue name: jobs_q-12 Parking: 3 spots left."]) == [
        "Queue name: jobs_q-12",
        "Parking: 3 spots left.",
    ]


@pytest.mark.parametrize(
    ("first", "later"),
    [
        (
            "Our log shipper points at collector-east-12.",
            "We moved the log shipper to collector-west-40 last night.",
        ),
        (
            "Log shipper: collector-east-12",
            "Quick correction on the shipper for logs: it is collector-west-40.",
        ),
        (
            "The log shipper's target is collector-east-12.",
            "Someone switched the log shipper to collector-west-40.",
        ),
    ],
)
def test_a_paraphrased_update_supersedes_and_the_stale_value_is_absent(
    first: str, later: str
) -> None:
    """The subject is recognised across wordings; only the latest value is carried."""
    text = summary_of(talk(first, later))
    assert "collector-west-40" in text
    assert "collector-east-12" not in text


def test_a_value_said_to_have_changed_wins_over_a_plain_statement_in_the_same_part() -> None:
    """Told as a change first and restated plainly later in one part: the change is current."""
    text = summary_of(
        talk(
            "Heads up, the nightly export moved: it is exports-b-77 now.",
            "I looked at the wiki: the nightly export goes to exports-b-15.",
        )
    )
    assert "exports-b-77" in text
    assert "exports-b-15" not in text


def test_an_update_phrase_reads_to_its_subject() -> None:
    """A long lead before the key (``a fix to what I said about …: it is``) is read past."""
    fact = fact_of("A small fix to what I told you earlier about the print queue: it is pq-9.")
    assert fact is not None
    assert {"print", "queue"} <= set(fact.key.split())
    assert fact.value == "pq-9"


def test_a_template_said_again_and_again_ranks_below_a_unique_item() -> None:
    """Repeated small talk with numbers fills only the room the items leave: the item is kept
    at every budget that holds it, the noise never before it nor all of it."""
    noise = [f"The kettle took {n} seconds to boil." for n in range(20, 29)]
    history = talk(*noise, "Keep the `reports/q3-final.xlsx` file out of git.", turns=40)
    ledger = build_ledger(history)
    for budget in range(150, 400, 25):
        text = render_ledger(ledger, budget)
        assert "reports/q3-final.xlsx" in text
        assert "kettle" not in text.split("reports/q3-final.xlsx")[0]
        assert text.count("kettle") < len(noise)


def test_items_survive_five_merged_rounds_until_superseded() -> None:
    """Each round summarises the previous summary plus new talk: items stay, updates replace."""
    carried: list[Message] = []
    rounds = [
        ("Never push to `release/eu-4` on Fridays.", "Artifact mirror: mirror-a-81"),
        ("Build logs go to `logs/ci-553`.", "The CI image is img-base-7."),
        ("Let's drop the report port; the rest of the week goes to `/v3/export-19`.", ""),
        ("Ops switched the artifact mirror to mirror-a-82.", ""),
        ("", ""),
    ]
    summary = ""
    for n, said in enumerate(rounds):
        history = carried + talk(*[s for s in said if s], seed=n)
        summary = extractive_summary(history, max_tokens=600)
        carried = [Message.user(summary), Message.model("ok")]
    for value in ("release/eu-4", "logs/ci-553", "img-base-7", "/v3/export-19", "mirror-a-82"):
        assert value in summary
    assert "mirror-a-81" not in summary


@pytest.mark.parametrize(
    "text",
    [
        "svc-relay-4079.mail.example FF_IMPORT_1475 kv/amber/5755 pg-x-3.internal",
        "def step_3(row): return row.strip().split(';')[0]",
        "Plain words about the plan for the week and how it went.",
    ],
)
def test_the_token_measure_does_not_undercount_identifiers(text: str) -> None:
    """Identifier-heavy text costs more than characters / 4; the count never falls below it
    for code and identifiers."""
    if "Plain" not in text:
        assert conservative_tokens(text) >= len(text) / 4
    assert conservative_tokens(text) >= len(text.split())


def test_the_summary_stays_within_its_cap_by_the_token_measure() -> None:
    """Sized by the conservative count, scaled to the part's own tokens per character."""
    history = talk(
        *[f"Service endpoint {n}: https://svc-{n}.internal.example/v{n}" for n in range(8)]
    )
    for cap in (64, 120, 400):
        summary = extractive_summary(history, max_tokens=cap)
        assert conservative_tokens(summary) <= cap
        assert len(summary) <= cap * 4
    assert token_share(["plain words of prose only, nothing else at all"]) < 1.0
    assert token_share([]) == 1.0
