"""The middleware maps each engine message to its LangChain messages by the message's
identity. An ``id()`` is reused once its object is freed: the pending turn's own groups are
freed when the turn is built, and a message the engine makes later (a cleared copy, a summary)
can land at the same address. It must never come back as the freed message's LangChain
messages (in CI a tool result came back where its call should have been, and the next turn
was refused as an orphaned tool result)."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from autocompact.content import Message, TextPart
from autocompact.integrations.langchain import AutocompactMiddleware
from autocompact.integrations.langchain._turn import Fixed, Turn


def test_a_new_message_never_takes_a_freed_message_s_sources() -> None:
    middleware = AutocompactMiddleware(context_window=16_000, summarizer="offline")
    fixed = Fixed(
        system=None, tools=(), model=GenericFakeChatModel(messages=iter(())), window=16_000
    )
    calls = [{"name": "read", "args": {}, "id": f"c{i}"} for i in range(2)]
    state = [
        HumanMessage("read both", id="h"),
        AIMessage("", tool_calls=calls, id="a"),
        ToolMessage("one", tool_call_id="c0", id="t0"),
        ToolMessage("two", tool_call_id="c1", id="t1"),
    ]
    converted = 0
    for _ in range(50):
        turn = Turn(middleware, state, {}, fixed)
        # Many new messages, alive together: some take the addresses the turn freed.
        fresh = [Message(role="model", parts=(TextPart(text=f"m{i}"),)) for i in range(200)]
        out = turn.to_langchain(fresh)
        assert [m.content for m in out] == [f"m{i}" for i in range(200)]
        assert all(isinstance(m, AIMessage) for m in out)
        converted += len(out)
        # The turn's own messages still come back as the state's objects.
        assert turn.to_langchain([turn.pending])[0] is state[2]
    assert converted == 50 * 200
