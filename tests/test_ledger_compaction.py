"""The ledger in compaction (issue 22): the retention audit, five merged rounds, the budget."""

from __future__ import annotations

import random

import pytest

from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressOptions,
)
from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.ledger import build_ledger, render_ledger
from autocompact.compaction.prompts import LEDGER_INTRODUCTION
from autocompact.compaction.sidequery import summary_cap
from autocompact.content import Message
from autocompact.estimation import estimate_content_tokens
from autocompact.events import CompactionSucceeded
from autocompact.testing import FakeProvider

RULES = [
    "Never touch the vendored folder third_party/zlib.",
    "Only Python 3.11 on the build hosts.",
    "Do not rename the public functions in api/v2.",
]
FACTS = [
    "Region for the production database: us-south-4.",
    "Owner of the billing service: Dana Whitfield.",
]
_WORDS = [
    "we",
    "the",
    "team",
    "said",
    "it",
    "looks",
    "fine",
    "and",
    "the",
    "work",
    "goes",
    "on",
    "with",
    "a",
    "plan",
    "for",
    "the",
    "week",
    "as",
    "people",
    "think",
    "about",
    "time",
    "and",
    "money",
    "and",
    "the",
    "way",
    "things",
    "are",
    "done",
    "here",
    "now",
]


def prose(rng: random.Random, sentences: int) -> str:
    """Plain chat prose of common words."""
    return " ".join(
        " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(6, 16))).capitalize() + "."
        for _ in range(sentences)
    )


def session(seed: int, *, planted: bool = True, turns: int = 40) -> list[Message]:
    """A chat session, text heavy, with the rules and facts planted in the middle."""
    rng = random.Random(seed)
    history = [Message.user("Build the invoice exporter for finance. " + prose(rng, 4))]
    items = list(RULES + FACTS) if planted else []
    for n in range(turns):
        text = prose(rng, rng.randrange(3, 9))
        if items and n % 3 == 1:
            text += " " + items.pop(0)
        history += [Message.user(text), Message.model(prose(rng, 2))]
    if planted:
        history += [Message.user("Budget cap is $499. " + prose(rng, 3)), Message.model("ok")]
        history += [Message.user("The budget cap is now $800."), Message.model("ok")]
    return history


def dropping_summarizer(fake: FakeProvider, dropped: list[str]) -> None:
    """Script the fake to reply with a summary that omits ``dropped`` and keeps the rest."""
    kept = [s for s in RULES + FACTS + ["Budget cap is now $800."] if s not in dropped]
    body = "\n".join(f"- {s}" for s in kept)
    fake.enqueue_text(
        "<state_snapshot>\n<overall_goal>Build the exporter.</overall_goal>\n"
        f"<constraints>\n{body}\n</constraints>\n</state_snapshot>",
        purpose="side_query",
    )


def test_the_audit_restores_every_constraint_a_model_dropped() -> None:
    """A model that drops two rules and a fact: all three are appended verbatim, and the
    telemetry and the event report what was audited and restored."""
    fake = FakeProvider()
    dropped = [RULES[0], RULES[2], FACTS[1]]
    dropping_summarizer(fake, dropped)
    options = CompressOptions(context_window=200_000, force=True, keep_share=0.0)
    result = CompressionService(fake).compress(session(1), options)
    info = result.info
    assert info.status is CompressionStatus.COMPRESSED
    assert info.summary is not None
    for statement in dropped:
        assert statement in info.summary.split("<retained_from_history>")[1]
    assert info.restored == 3
    assert info.audited >= len(RULES) + len(FACTS)
    assert "$499" not in info.summary
    event = CompactionSucceeded(info=info)
    assert (event.audited, event.restored) == (info.audited, info.restored)
    assert "<state_snapshot>" in (fake.requests[0].system_instruction or "")
    assert RULES[0] in (fake.requests[0].system_instruction or "")


def test_a_summary_that_keeps_everything_restores_nothing() -> None:
    """Nothing dropped: nothing appended, the summary is the model's own."""
    fake = FakeProvider()
    dropping_summarizer(fake, [])
    options = CompressOptions(context_window=200_000, force=True, keep_share=0.0)
    info = CompressionService(fake).compress(session(2), options).info
    assert info.restored == 0
    assert info.summary is not None
    assert "retained_from_history" not in info.summary


@pytest.mark.parametrize("share", [0.1, 0.2, 0.3])
def test_five_merged_rounds_keep_every_item_within_budget_and_no_stale_value(
    share: float,
) -> None:
    """Five compactions, each over the last summary and fresh chat: every planted item stays,
    the stale value never shows, each compacted history is within its budget."""
    history = session(3)
    budget = round(share * estimate_content_tokens(history))
    service = CompressionService(None, summarizer=extractive_summary)
    for round_index in range(5):
        options = CompressOptions(
            context_window=1_000_000,
            force=True,
            keep_share=0.0,
            summary_target_tokens=budget,
            clear_tool_outputs=False,
        )
        result = service.compress(history, options)
        assert result.info.status is CompressionStatus.COMPRESSED
        assert estimate_content_tokens(result.history) <= budget + 64  # the preamble
        assert result.info.ledger_dropped == 0
        text = "\n".join(m.text for m in result.history)
        for statement in RULES + FACTS:
            assert statement in text, (round_index, statement)
        assert "$800" in text
        assert "$499" not in text
        history = [*result.history, *session(10 + round_index, planted=False, turns=15)[1:]]


def test_a_binding_target_says_what_it_could_not_hold() -> None:
    """A target too small for the ledger: the compaction reports the items it dropped."""
    service = CompressionService(None, summarizer=extractive_summary)
    options = CompressOptions(
        context_window=1_000_000,
        force=True,
        keep_share=0.0,
        summary_target_tokens=40,
        clear_tool_outputs=False,
    )
    info = service.compress(session(4), options).info
    assert info.status is CompressionStatus.COMPRESSED
    assert info.ledger_dropped > 0
    assert info.audited >= len(RULES) + len(FACTS)


def test_the_local_target_follows_the_window_not_the_part_summarized() -> None:
    """Without a target the local cap is a share of the window (less what must be freed),
    never below what the ledger needs: it does not shrink with the part summarized."""
    small = session(5, turns=5)
    large = session(5, turns=60)
    caps = [
        summary_cap(part, None, local=True, image_token_estimate=0, window=200_000)
        for part in (small, large)
    ]
    assert caps[0] == caps[1] == 10_000
    tight = summary_cap(
        large, None, local=True, image_token_estimate=0, window=200_000, must_free=10**9, need=300
    )
    assert tight == 300
    assert summary_cap(large, 500, local=True, image_token_estimate=0, window=200_000) == 500


def test_a_small_summarizer_window_still_holds_a_large_ledger() -> None:
    """A part whose ledger is long (200 rules: about 20,000 characters written) summarized by a
    model with an 8K window: the requests show the ledger cut to an eighth of that window, so
    the part is summarized in chunks that each fit the summarizer's window by its own count
    (the ledger at its 16,000 characters made every request too large: "the summarizer's
    window is too small"); the audit still reads the whole ledger."""
    rng = random.Random(7)
    verbs = ["restart", "redeploy", "patch", "reboot", "drain", "migrate", "resize", "upgrade"]
    jobs = ["backup", "billing export", "audit sweep", "cache warmup", "index rebuild", "vacuum"]
    history = [Message.user("Build the inventory service. " + prose(rng, 2))]
    rules = []
    for n in range(200):
        verb, job = verbs[n % len(verbs)], jobs[n // len(verbs) % len(jobs)]
        rules.append(
            f"Never {verb} host-{n:03d}.internal before {n % 12 + 1} pm, the {job} of "
            f"/srv/data/{n:03d} runs until then."
        )
        history += [Message.user(f"{rules[-1]} {prose(rng, 1)}"), Message.model(prose(rng, 1))]
    assert len(render_ledger(build_ledger(history), 10**6)) > 16_000
    fake = FakeProvider(context_window=8_192)  # its own count, not the engine's estimate
    options = CompressOptions(
        context_window=200_000, summarizer_window=8_192, force=True, keep_share=0.0
    )
    info = CompressionService(fake).compress(history, options).info
    assert info.status is CompressionStatus.COMPRESSED, info.error
    assert info.side_queries > 1
    assert not fake.oversized
    shown = [(r.system_instruction or "").partition(LEDGER_INTRODUCTION)[2] for r in fake.requests]
    assert all(0 < len(ledger) <= 8_192 * 4 // 8 + 1 for ledger in shown)
    # The fake's summaries hold no rule: the audit put back every one, from the whole ledger.
    assert info.restored == info.audited == 200
    assert all(rule in (info.summary or "") for rule in rules)
