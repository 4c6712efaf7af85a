"""Issue 27 in the framework integrations: a lone surrogate in a user's message (as a
non-UTF-8 file name gives) is stored as U+FFFD, the run's reply kept — it raised a raw
UnicodeEncodeError from the store after the model was paid."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocompact.sessions.stores import SqliteStore


def test_pydantic_ai_stores_a_surrogate_as_a_replacement(tmp_path: Path) -> None:
    """pydantic-ai with store=: the run answers and the store holds 'bad \\ufffd'."""
    pytest.importorskip("pydantic_ai")
    from .test_pydantic_ai import Script
    from .test_pydantic_ai_store import worker

    store = SqliteStore(tmp_path / "s.db")
    result = worker(Script(), store).run_sync("bad \udce9", conversation_id="c", run_id="r0")
    assert result.output  # the paid reply came back
    users = [m.text for m in store.load("c").history if m.role == "user" and m.text]
    assert users == ["bad \ufffd"]


def test_langchain_stores_a_surrogate_as_a_replacement(tmp_path: Path) -> None:
    """LangChain with store=: the agent answers and the store holds 'bad \\ufffd'."""
    pytest.importorskip("langchain.agents")
    from .lc_fakes import ScriptedModel
    from .test_langchain_agent import WINDOW, scripted
    from .test_langchain_store import ask, worker

    store = SqliteStore(tmp_path / "s.db")
    model = ScriptedModel(messages=iter(scripted([2_000], per_turn=1)), window=WINDOW)
    out = ask(worker(model, store), "bad \udce9")
    assert out["messages"][-1].content  # the paid reply came back
    users = [m.text for m in store.load("conv").history if m.role == "user" and m.text]
    assert users == ["bad \ufffd"]
