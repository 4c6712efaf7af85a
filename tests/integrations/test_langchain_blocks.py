"""Agents whose model uses a provider's built-in tools (web search, code execution): the content
blocks the engine does not read are carried, sized, summarized as text and given back exactly.

The block shapes are langchain-openai's and langchain-anthropic's (``lc_blocks``, checked
against those packages in ``test_langchain_blocks_real.py``); the model is LangChain's fake.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import CONTENT_BLOCK, Message, OpaquePart, TextPart, portable_history
from autocompact.errors import ContentError
from autocompact.estimation import estimate_content_tokens
from autocompact.events import CompactionSucceeded, Event
from autocompact.integrations.langchain import (
    AutocompactMiddleware,
    from_autocompact,
    to_autocompact,
)
from autocompact.integrations.langchain._provider import completion_of
from autocompact.jsonsize import json_length
from autocompact.sessions.stores import SessionStore, SqliteStore

from .lc_blocks import (
    CACHED_TEXT,
    SHAPES,
    answer,
    anthropic_code_execution,
    openai_search,
    searching_call,
    secret,
    url,
)
from .lc_fakes import ScriptedModel, orphans
from .store_workers import two_stores
from .test_langchain_agent import read_file

__all__ = ["two_stores"]

WINDOW = 32_000
TURNS = 8
SEARCH = 8_000  # characters of encrypted content a search carries


def wire(content: Any) -> str:
    """Content as the bytes a provider client serializes."""
    return json.dumps(content, ensure_ascii=False)


def same_content(old: BaseMessage, new: BaseMessage) -> None:
    """``new`` holds ``old``'s content: each block equal, and each block the engine does not
    read byte for byte (a block holding only a tool call comes back as that tool call)."""
    if isinstance(old.content, str):
        assert new.content == old.content
        return
    expected = [b for b in old.content if not only_mirrors(b)]
    assert new.content == expected or (new.content == expected[0]["text"] and len(expected) == 1)
    for was, now in zip(expected, new.content, strict=False):
        if not (isinstance(was, dict) and was.keys() <= {"type", "text"}):
            assert wire(now) == wire(was)


def only_mirrors(block: Any) -> bool:
    """A block that holds nothing but one of the message's tool calls (carried by the call)."""
    return (
        isinstance(block, dict)
        and block.get("type") in ("tool_use", "tool_call")
        and all(k in ("type", "id", "name", "args", "input") or v is None for k, v in block.items())
    )


def conversation(shape: str) -> list[BaseMessage]:
    """A user turn, a search with a tool call, its result, and the cited answer."""
    call = searching_call(shape, 1)
    return [
        HumanMessage([CACHED_TEXT, {"type": "text", "text": "Find the release."}]),
        call,
        ToolMessage("notes", tool_call_id=call.tool_calls[0]["id"], name="read_file"),
        answer(shape, 1),
    ]


# -- conversion ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_gives_every_block_back_byte_exact(shape: str) -> None:
    """to_autocompact → from_autocompact gives each message back with its content byte for
    byte (a block holding only a tool call comes back as that tool call)."""
    messages = conversation(shape)
    system, history = to_autocompact(messages)
    back = from_autocompact(history, system=system)
    assert [type(m) for m in back] == [type(m) for m in messages]
    for old, new in zip(messages, back, strict=True):
        same_content(old, new)
    assert back[1].tool_calls == messages[1].tool_calls  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_engine_reads_the_text_and_carries_the_rest(shape: str) -> None:
    """The answer's text is a text part (what summaries and the ledger read); each block the
    engine does not read is an opaque content block whose text names what it holds."""
    _, (message,) = to_autocompact([answer(shape, 7)])
    assert "Version 7 was released on day 7" in message.text
    carried = [p for p in message.parts if isinstance(p, OpaquePart)]
    assert carried
    assert all(p.provider == "langchain" and p.family == CONTENT_BLOCK for p in carried)
    readable = "".join(p.summary for p in carried)
    assert "autocompact release 7" in readable
    assert url(7) in readable
    assert secret(7, 100) not in readable  # encrypted content is never read as words


@pytest.mark.parametrize("shape", SHAPES)
def test_the_estimate_counts_the_blocks(shape: str) -> None:
    """A message's estimate is its text plus each block's JSON at 2 characters a token (the
    same message without its blocks estimates to its text alone)."""
    big, small = answer(shape, 2, size=40_000), answer(shape, 2, size=100)
    _, (with_blocks,) = to_autocompact([big])
    text_only = Message(
        role="model", parts=tuple(p for p in with_blocks.parts if isinstance(p, TextPart))
    )
    blocks = [b for b in big.content if isinstance(b, dict) and b.get("type") != "text"]
    expected = sum(json_length(b) for b in blocks) / 2
    grown = estimate_content_tokens([with_blocks]) - estimate_content_tokens([text_only])
    assert expected <= grown <= expected + 200  # (the text blocks' citations and ids)
    _, (smaller,) = to_autocompact([small])
    assert estimate_content_tokens([with_blocks]) - estimate_content_tokens([smaller]) > 19_000


@pytest.mark.parametrize("shape", SHAPES)
def test_a_stored_history_gives_the_same_blocks_back(shape: str) -> None:
    """The session codec (what every store writes) keeps each carried block byte-exact."""
    _, history = to_autocompact(conversation(shape))
    loaded = history_from_dicts(json.loads(json.dumps(history_to_dicts(history))))
    assert tuple(loaded) == history
    for old, new in zip(from_autocompact(history), from_autocompact(loaded), strict=True):
        assert wire(new.content) == wire(old.content)


def test_what_cannot_be_carried_is_refused_by_name() -> None:
    """A block JSON cannot hold, and a system prompt a string cannot carry exactly, raise a
    ContentError naming it (nothing is dropped)."""
    odd = {"type": "web_search_call", "id": "ws_1", "action": {"queries": {"a", "b"}}}
    with pytest.raises(ContentError, match=r"web_search_call.*\['action'\]\['queries'\]: a set"):
        to_autocompact([HumanMessage("q"), AIMessage([odd])])
    with pytest.raises(ContentError, match="cache_control"):
        to_autocompact([SystemMessage([CACHED_TEXT]), HumanMessage("q")])


def test_a_summary_reply_that_carries_blocks_is_read_as_its_text() -> None:
    """A summarizer's reply with a reasoning item and an annotated text block is its text."""
    reply = AIMessage(
        [
            {"id": "rs_9", "summary": [], "type": "reasoning", "encrypted_content": "gAAA"},
            {"type": "text", "text": "<state_snapshot>x</state_snapshot>", "annotations": []},
        ]
    )
    completion = completion_of(reply)
    assert completion.text == "<state_snapshot>x</state_snapshot>"


# -- agents -------------------------------------------------------------------------------


def script(shape: str) -> list[AIMessage | str]:
    """Each turn: a web search (large encrypted content) with a read_file call, then the cited
    answer (small), so the context grows inside a turn."""
    steps: list[AIMessage | str] = []
    for i in range(TURNS):
        steps += [searching_call(shape, i, SEARCH), answer(shape, i)]
    return steps


class Run:
    """An agent with the middleware on a scripted model, driven turn by turn."""

    def __init__(self, shape: str, *, cached: bool = False, **options: Any) -> None:
        self.model = ScriptedModel(messages=iter(script(shape)), window=WINDOW)
        self.cached = cached  # the system prompt and each user message with cache_control
        self.events: list[Event] = []
        middleware = AutocompactMiddleware(
            context_window=WINDOW, hooks=[self.events.append], **options
        )
        self.agent = create_agent(
            self.model,
            [read_file],
            system_prompt=SystemMessage([CACHED_TEXT]) if cached else "You research releases.",
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        self.invokes: list[range] = []  # the model requests each invoke made

    def turns(self, count: int = TURNS) -> None:
        config = {"configurable": {"thread_id": "t"}}
        for turn in range(count):
            before = len(self.model.requests)
            text = f"turn {turn}: find release {turn}"
            content = [{**CACHED_TEXT, "text": text}] if self.cached else text
            self.agent.invoke({"messages": [HumanMessage(content, id=f"q{turn}")]}, config)
            self.invokes.append(range(before, len(self.model.requests)))


def test_prompt_caching_blocks_on_the_system_prompt_and_user_messages() -> None:
    """A system prompt and user messages whose text blocks carry cache_control (Anthropic
    prompt caching) run through a compaction; a kept user message keeps its block exactly."""
    run = Run("anthropic", cached=True)
    run.turns()
    assert any(isinstance(e, CompactionSucceeded) for e in run.events)
    last = run.model.requests[-1]
    assert last[0].content == [CACHED_TEXT]
    asked = [m for m in last if isinstance(m, HumanMessage) and m.id == f"q{TURNS - 1}"]
    assert asked
    assert wire(asked[0].content) == wire(
        [{**CACHED_TEXT, "text": f"turn {TURNS - 1}: find release {TURNS - 1}"}]
    )


def summarized_at(run: Run) -> int:
    """The index of the first model request sent after a compaction."""
    return next(
        i
        for i, request in enumerate(run.model.requests)
        if "<state_snapshot>" in str(request[1].content)
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_a_web_search_agent_runs_its_turns_through_a_compaction(shape: str) -> None:
    """Eight turns of web search reach the automatic compaction; every turn runs (no
    ContentError); no request orphans a tool call; the model's count stays in the window."""
    run = Run(shape)
    run.turns()
    assert any(isinstance(e, CompactionSucceeded) for e in run.events)
    assert run.model.summary_requests
    assert len(run.model.requests) == 2 * TURNS
    assert all(orphans(r) == [] for r in run.model.requests)
    assert max(run.model.counts) < WINDOW


@pytest.mark.parametrize("stored", [False, True], ids=["state", "store"])
@pytest.mark.parametrize("shape", SHAPES)
def test_kept_messages_are_the_same_objects_with_the_same_blocks(
    shape: str, stored: bool, tmp_path: Path
) -> None:
    """The request after the compaction holds the kept messages as the very objects of the
    request before it (same invoke), blocks byte-equal, with or without a store; a message is
    kept or summarized whole, never cut inside (its reasoning, search and text together)."""
    run = Run(shape, store=SqliteStore(tmp_path / "s.db")) if stored else Run(shape)
    run.turns()
    after = summarized_at(run)
    assert any(after in r and after - 1 in r for r in run.invokes), "compacted mid-turn"
    before = {m.id: m for m in run.model.requests[after - 1]}
    kept = [m for m in run.model.requests[after][1:] if m.id in before]
    assert any(isinstance(m, AIMessage) and isinstance(m.content, list) for m in kept)
    for message in kept:
        assert message is before[message.id]
    for message in run.model.requests[after]:
        old = before.get(message.id)
        if isinstance(message, AIMessage) and old is not None:
            assert wire(message.content) == wire(old.content)
    # Every later request still sends each kept search message whole.
    ids = [m.id for m in kept if isinstance(m, AIMessage)]
    for request in run.model.requests[after:]:
        sent = {m.id: m for m in request}
        assert all(wire(sent[i].content) == wire(before[i].content) for i in ids if i in sent)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("summarizer", ["model", "offline"])
def test_a_summary_reads_the_blocks_as_text(shape: str, summarizer: str) -> None:
    """What a compaction summarizes reaches the summarizer as readable text (never a raw block
    nor its encrypted content); the summary replaces those messages whole."""
    run = Run(shape, summarizer=summarizer)
    run.turns()
    assert any(isinstance(e, CompactionSucceeded) for e in run.events)
    if summarizer == "model":
        (request,) = run.model.summary_requests[:1]
        blocks = [b for m in request for b in (m.content if isinstance(m.content, list) else [])]
        assert all(isinstance(b, str) or b.get("type") == "text" for b in blocks)
        sent = wire([m.content for m in request])
        assert "autocompact release 0" in sent
        assert url(0) in sent
        assert "gAAAAB" not in sent
    summary = run.model.requests[summarized_at(run)][1]
    assert "gAAAAB" not in str(summary.content)
    if summarizer == "offline":  # the ledger read the assistant's cited text
        assert "was released on day" in str(summary.content)


def test_the_text_cited_in_the_summarized_part_reaches_the_offline_ledger() -> None:
    """The offline summary reads the assistant's cited text (a text part), not only blocks."""
    _, history = to_autocompact(
        [HumanMessage("find the release notes of autocompact"), answer("anthropic", 3)]
    )
    summary = extractive_summary(portable_history(history))
    assert "Version 3 was released on day 3." in summary


def test_a_code_execution_result_reads_as_its_output() -> None:
    """Anthropic's code execution result is carried; its text is the code and its output."""
    _, (message,) = to_autocompact([AIMessage(anthropic_code_execution(5))])
    text = "".join(p.summary for p in message.parts if isinstance(p, OpaquePart))
    assert "print(5 * 2)" in text
    assert "10\\n" in text


# -- with a store ---------------------------------------------------------------------------


def worker(model: ScriptedModel, store: SessionStore) -> Any:
    """A worker's agent over ``store`` with its own checkpointer."""
    return create_agent(
        model,
        [read_file],
        system_prompt="You research releases.",
        middleware=[AutocompactMiddleware(context_window=WINDOW, store=store)],
        checkpointer=InMemorySaver(),
    )


def ask(agent: Any, text: str) -> Any:
    """One request on the shared conversation."""
    return agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "c"}})


@pytest.mark.parametrize("shape", SHAPES)
def test_one_worker_with_a_store_sends_the_messages_langchain_gave(
    shape: str, tmp_path: Path
) -> None:
    """With a store, the requests hold the state's own messages (ids, metadata, blocks)."""
    model = ScriptedModel(messages=iter(script(shape)), window=WINDOW)
    agent = worker(model, SqliteStore(tmp_path / "one.db"))
    ask(agent, "turn 0")
    ask(agent, "turn 1")
    state = agent.get_state({"configurable": {"thread_id": "c"}}).values["messages"]
    assert not [m.id for m in state if str(m.id).startswith("autocompact-")]
    for request in model.requests[1:]:
        assert [m.model_dump() for m in request[1:]] == [
            m.model_dump() for m in state[: len(request) - 1]
        ]


@pytest.mark.parametrize("shape", SHAPES)
def test_another_worker_rebuilds_the_blocks_from_the_store(
    shape: str, two_stores: tuple[SessionStore, SessionStore]
) -> None:
    """Worker B, with an empty checkpointer, sends worker A's search messages rebuilt from
    the store's form: each block byte-exact in its place, the tool pairs whole."""
    a, b = two_stores
    model = ScriptedModel(messages=iter(script(shape)), window=WINDOW)
    first = worker(model, a)
    ask(first, "turn 0")
    given = first.get_state({"configurable": {"thread_id": "c"}}).values["messages"]
    ask(worker(model, b), "turn 1")
    rebuilt = model.requests[2][1:]  # B's first request, after the system prompt
    assert orphans(rebuilt) == []
    assert [type(m) for m in rebuilt] == [*[type(m) for m in given], HumanMessage]
    for old, new in zip(given, rebuilt, strict=False):
        assert new is not old
        same_content(old, new)
    assert rebuilt[1].tool_calls == given[1].tool_calls  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_reply_of_blocks_alone_comes_back_as_it_was(shape: str) -> None:
    """A reply that is blocks alone (no text block) converts and comes back as it was."""
    blocks = openai_search(4)[:2] if shape == "openai" else anthropic_code_execution(4)
    system, history = to_autocompact([HumanMessage("q"), AIMessage(blocks)])
    assert history[1].text == ""
    (back,) = from_autocompact(history[1:], system=system)
    assert wire(back.content) == wire(blocks)
