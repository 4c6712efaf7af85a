"""Issue 16 (5): a streamed reply renders in work linear in its length (counted, never timed)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
import rich.markdown
from rich.console import Console

from autocompact.chat import ChatSession
from autocompact.cli.repl import Repl
from autocompact.cli.slash import ChatContext
from autocompact.cli.stream_view import MAX_TAIL_LINES, MarkdownStream
from autocompact.testing import FakeProvider


def long_reply(size: int) -> str:
    """Markdown of about ``size`` characters: paragraphs, a list and a code block, repeated."""
    block = (
        "The engine keeps every request under the window while the summary waits. " * 4
        + "\n\n- one item\n- another item\n\n```python\nx = compute(1)\ny = compute(2)\n```\n\n"
    )
    return (block * (size // len(block) + 1))[:size] + "\n\nTHE END"


def console() -> Console:
    """A terminal console writing to memory."""
    return Console(file=io.StringIO(), force_terminal=True, width=100, height=30)


def words(text: str) -> list[str]:
    """The text as word-sized deltas, as a provider streams it."""
    return re.findall(r"\S*\s*", text)


@pytest.mark.parametrize("size", [2_000, 20_000])
def test_each_character_is_parsed_a_bounded_number_of_times(size: int) -> None:
    """Feeding word by word parses each character about once: no re-parse per delta."""
    text = long_reply(size)
    stream = MarkdownStream(console(), auto_refresh=False)
    deltas = words(text)
    for delta in deltas:
        stream.feed(delta)
    # A delta never draws by itself: the tail is drawn after a committed block is printed
    # (and by the refresh timer, off here), never once per delta.
    assert stream.tail_renders <= stream.commits
    assert stream.tail_renders < len(deltas) / 10
    stream.close()
    assert stream.parsed_chars <= 2 * len(text)


def test_a_long_block_without_blank_lines_is_committed_in_pieces() -> None:
    """A code block longer than the live region is committed in closed, reopened pieces."""
    lines = [f"line_{i} = {i}" for i in range(3 * MAX_TAIL_LINES)]
    text = "```python\n" + "\n".join(lines) + "\n```\n"
    out = console()
    stream = MarkdownStream(out, auto_refresh=False)
    for delta in words(text):
        stream.feed(delta)
    stream.close()
    assert stream.commits >= 2
    assert len(stream.tail_text()) < len(text) / 2
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    assert all(line.split(" = ")[0] in shown for line in lines)
    assert "```" not in shown  # every piece was drawn as a code block, not as raw fences


def test_everything_streamed_is_shown_once_in_order() -> None:
    """The committed blocks and the final tail together show the whole reply, in order."""
    text = long_reply(3_000)
    out = console()
    printed: list[str] = []
    real_print = out.print

    def recording(*objects: Any, **kw: Any) -> None:
        printed.extend(o.markup for o in objects if isinstance(o, rich.markdown.Markdown))
        real_print(*objects, **kw)

    out.print = recording  # type: ignore[method-assign]
    stream = MarkdownStream(out, auto_refresh=False)
    for delta in words(text):
        stream.feed(delta)
    stream.close()
    shown = "\n\n".join([*printed, stream.tail_text()])
    assert shown.split() == text.split()


def test_the_terminal_chat_parses_a_long_reply_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the REPL (interactive), a 20K-character reply costs O(n) Markdown parsing."""
    parsed: list[int] = []
    real_init = rich.markdown.Markdown.__init__

    def counting(self: Any, markup: str, *args: Any, **kw: Any) -> None:
        parsed.append(len(markup))
        real_init(self, markup, *args, **kw)

    monkeypatch.setattr(rich.markdown.Markdown, "__init__", counting)
    text = long_reply(20_000)
    fake = FakeProvider()
    fake.enqueue(text, purpose="chat")
    session = ChatSession(fake, context_window=128_000)
    ctx = ChatContext(session=session, provider_name="fake", model=fake.model)
    repl = Repl(ctx, console=console(), interactive=True)
    repl.turn("write a lot")
    assert session.history[-1].text == text
    # The replaced renderer parsed the whole text so far on every delta: ~n²/(2·5) chars.
    assert sum(parsed) <= 2 * len(text)
