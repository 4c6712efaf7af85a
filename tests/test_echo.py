"""SPEC §10.8, second half: a reply that echoes the prompt is refused, a summary is kept."""

from __future__ import annotations

import pytest

from autocompact.chat import ChatSession
from autocompact.compaction import CompressionStatus
from autocompact.compaction.echo import echo_source
from autocompact.compaction.prompts import (
    SUMMARY_ACKNOWLEDGEMENT,
    SUMMARY_FINAL_INSTRUCTION,
    summary_system_prompt,
)
from autocompact.content import Message
from autocompact.providers.fake import FakeProvider

SYSTEM = "You are a helpful assistant for the billing team. Answer briefly and politely."
SOURCES = {
    "the summary prompt": summary_system_prompt() + "\n" + SUMMARY_FINAL_INSTRUCTION,
    "the acknowledgement": SUMMARY_ACKNOWLEDGEMENT,
    "the system prompt": SYSTEM,
}
REAL_SUMMARY = """<state_snapshot>
<overall_goal>Fix the invoice rounding bug in billing/invoice.py.</overall_goal>
<key_knowledge>- Totals use Decimal; the float conversion in render_total() was the bug.
</key_knowledge>
<next_step>Run pytest tests/test_invoice.py after the patch.</next_step>
</state_snapshot>"""


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (SUMMARY_FINAL_INSTRUCTION, "the summary prompt"),
        ("Write the <state_snapshot> for the conversation above now.", "the summary prompt"),
        (SUMMARY_ACKNOWLEDGEMENT, "the acknowledgement"),
        ("Got it. Thanks for the additional context!\n\nGot it.", "the acknowledgement"),
        (SYSTEM, "the system prompt"),
        (
            "<state_snapshot>\n<overall_goal>The user's high-level objective, in one or two "
            "sentences.</overall_goal>\n<constraints>Requirements, preferences and rules the "
            "user stated, as a list.</constraints>\n</state_snapshot>",
            "the summary prompt",
        ),
        (REAL_SUMMARY, None),
        ("Got it.", "the acknowledgement"),
        ("Invoice bug fixed.", None),
        ("", None),
    ],
    ids=[
        "instruction",
        "instruction-part",
        "acknowledgement",
        "acknowledgement-twice",
        "system-prompt",
        "template",
        "real-summary",
        "short-acknowledgement",
        "short-own-words",
        "empty",
    ],
)
def test_echo_source(reply: str, expected: str | None) -> None:
    """Echoes of the instruction, acknowledgement, system prompt or template are named; a real
    summary (even one that uses the template's tags) is not an echo."""
    assert echo_source(reply, SOURCES) == expected


def test_summary_quoting_one_prompt_sentence_is_kept() -> None:
    """A summary that quotes the system prompt once but is mostly its own words is kept."""
    reply = REAL_SUMMARY + "\nThe user said: " + SYSTEM
    assert echo_source(reply, SOURCES) is None


def test_session_refuses_an_echo_and_keeps_the_history() -> None:
    """An echoed summary is a counted failure with the history unchanged."""
    fake = FakeProvider()
    fake.enqueue(SUMMARY_FINAL_INSTRUCTION, purpose="side_query")
    history = tuple(
        m for i in range(6) for m in (Message.user(f"q{i} " * 400), Message.model(f"a{i} " * 400))
    )
    session = ChatSession(fake, context_window=32_000, history=history, system_instruction=SYSTEM)
    info = session.compress()
    assert info.status is CompressionStatus.COMPRESSION_FAILED_ECHO
    assert "echo of the summary prompt" in (info.error or "")
    assert session.history == history
