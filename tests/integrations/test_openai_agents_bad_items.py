"""Malformed Agents SDK items: a ContentError naming the item and the field, never a raw
TypeError / KeyError / AttributeError (fuzzer report AG-1); a hand-built function call whose
``arguments`` is an object rather than a JSON string works end to end."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.run_config import CallModelData, ModelInputData

from autocompact import ContentError
from autocompact.compaction import CompressionStatus
from autocompact.integrations.openai_agents import (
    AutocompactSession,
    from_autocompact,
    to_autocompact,
)

from .agents_script import ScriptedModel, text_output

set_tracing_disabled(True)

USER = {"role": "user", "content": "hi"}
CALL = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}


def call(**fields: Any) -> dict[str, Any]:
    """A function_call item with ``fields`` changed (``None``: the field left out)."""
    item = {**CALL, **fields}
    return {k: v for k, v in item.items() if v is not None}


def output(**fields: Any) -> dict[str, Any]:
    """A function_call_output item answering ``c1`` with ``fields`` changed (``None``: left out)."""
    item = {"type": "function_call_output", "call_id": "c1", "output": "r", **fields}
    return {k: v for k, v in item.items() if v is not None}


def assistant(piece: dict[str, Any]) -> dict[str, Any]:
    """An assistant output message holding one content part (the SDK's stored shape)."""
    return {
        "type": "message",
        "role": "assistant",
        "id": "m1",
        "status": "completed",
        "content": [piece],
    }


def reasoning(summary: Any) -> dict[str, Any]:
    """A reasoning item with ``summary`` as given."""
    return {"type": "reasoning", "id": "rs_1", "summary": summary}


# (items, the index named, words the message must hold)
MALFORMED: dict[str, tuple[list[Any], int, str]] = {
    "arguments-int": ([USER, call(arguments=5), output()], 1, "'arguments'.*int"),
    "arguments-list": ([USER, call(arguments=["a"]), output()], 1, "'arguments'.*list"),
    "input_text-without-text": (
        [USER, {"role": "user", "content": [{"type": "input_text"}]}],
        1,
        "'text'.*missing",
    ),
    "output_text-text-none": (
        [USER, assistant({"type": "output_text", "text": None, "annotations": []})],
        1,
        "'text'.*NoneType",
    ),
    "refusal-without-refusal": ([USER, assistant({"type": "refusal"})], 1, "'refusal'.*missing"),
    "call-without-call_id": ([USER, call(call_id=None)], 1, "'call_id'.*missing"),
    "call-without-name": ([USER, call(name=None), output()], 1, "'name'.*missing"),
    "call-name-int": ([USER, call(name=7), output()], 1, "'name'.*int"),
    "output-without-call_id": ([USER, CALL, output(call_id=None)], 2, "'call_id'.*missing"),
    "output-without-output": ([USER, CALL, output(output=None)], 2, "'output'.*missing"),
    "summary-str": ([USER, reasoning("thinking...")], 1, "'summary'.*str"),
    "summary-list-of-str": ([USER, reasoning(["thinking"])], 1, r"summary\[0\].*str"),
    "summary-text-none": (
        [USER, reasoning([{"type": "summary_text", "text": None}])],
        1,
        r"summary\[0\].*'text'.*NoneType",
    ),
    "system-text-int": (
        [USER, {"role": "system", "content": [{"type": "input_text", "text": 5}]}],
        1,
        "'text'.*int",
    ),
    "image_url-int": (
        [{"role": "user", "content": [{"type": "input_image", "image_url": 5}]}],
        0,
        "'image_url'.*int",
    ),
    "file_data-list": (
        [{"role": "user", "content": [{"type": "input_file", "file_data": ["x"]}]}],
        0,
        "'file_data'.*list",
    ),
    "file_url-int": (
        [{"role": "user", "content": [{"type": "input_file", "file_url": 3}]}],
        0,
        "'file_url'.*int",
    ),
    "filename-dict": (
        [
            {
                "role": "user",
                "content": [{"type": "input_file", "file_data": "QQ==", "filename": {}}],
            }
        ],
        0,
        "'filename'.*dict",
    ),
    "developer-text-none": (
        [{"role": "developer", "content": [{"type": "input_text", "text": None}]}, USER],
        0,
        "'text'.*NoneType",
    ),
}
CASES = pytest.mark.parametrize(
    ("items", "index", "words"), list(MALFORMED.values()), ids=list(MALFORMED)
)


@CASES
def test_malformed_item_is_a_content_error(items: list[Any], index: int, words: str) -> None:
    """The conversion names the item, the field and what it got, as a ContentError."""
    with pytest.raises(ContentError, match=f"^item {index}: .*{words}") as caught:
        to_autocompact(items)
    assert caught.value.index == index


@CASES
async def test_run_compaction_raises_and_keeps_the_items(
    items: list[Any], index: int, words: str
) -> None:
    """run_compaction surfaces the ContentError; the stored items stay as they were."""
    store = SQLiteSession("s")
    await store.add_items(items)
    session = AutocompactSession(store, context_window=32_000, summarizer="offline")
    with pytest.raises(ContentError, match=f"^item {index}: .*{words}"):
        await session.run_compaction({"force": True})
    assert await store.get_items() == items


@CASES
def test_input_filter_raises_and_leaves_the_request(
    items: list[Any], index: int, words: str
) -> None:
    """The input filter surfaces the ContentError without touching the request's items."""
    session = AutocompactSession(SQLiteSession("s"), context_window=32_000, summarizer="offline")
    agent = Agent(name="coder", instructions="be brief", model=ScriptedModel(lambda *_: []))
    request = [dict(item) for item in items]
    data = CallModelData(
        model_data=ModelInputData(input=request, instructions="be brief"),
        agent=agent,
        context=None,
    )
    with pytest.raises(ContentError, match=f"^item {index}: .*{words}"):
        session.call_model_input_filter(data)
    assert request == items


# -- arguments given as an object ----------------------------------------------------------------


def dict_history(turns: int, size: int = 40_000) -> list[Any]:
    """Stored items whose function calls carry their arguments as an object (hand-built)."""
    items: list[Any] = []
    for turn in range(turns):
        items += [
            {"role": "user", "content": f"task {turn}"},
            {
                "type": "function_call",
                "call_id": f"c{turn}",
                "name": "read",
                "arguments": {"path": f"f{turn}.py"},
            },
            {"type": "function_call_output", "call_id": f"c{turn}", "output": "z" * size},
            {"role": "assistant", "content": f"done {turn}"},
        ]
    return items


def test_object_arguments_are_the_call_arguments() -> None:
    """A Mapping ``arguments`` is taken as the arguments object; the item comes back as is."""
    items = dict_history(1, size=10)
    converted = to_autocompact(items)
    (part,) = converted.messages[1].function_calls
    assert part.arguments == {"path": "f0.py"}
    back = from_autocompact(converted.messages, converted)
    assert all(a is b for a, b in zip(back, items, strict=True))
    # Rebuilt without the originals, the call goes out as the SDK's JSON string.
    rebuilt = from_autocompact(converted.messages)
    assert rebuilt[1]["arguments"] == '{"path": "f0.py"}'


async def test_object_arguments_compact_end_to_end() -> None:
    """A session holding such calls compacts between turns, and a run through the runner with
    the input filter installed reaches the model under the window."""
    store = SQLiteSession("s")
    await store.add_items(dict_history(6))
    session = AutocompactSession(store, context_window=32_000, summarizer="offline")
    await session.run_compaction({"force": True})
    assert session.compactions[-1].status is CompressionStatus.COMPRESSED
    kept = await session.get_items()
    calls = {i["call_id"] for i in kept if i.get("type") == "function_call"}
    answered = {i["call_id"] for i in kept if i.get("type") == "function_call_output"}
    assert calls == answered

    await store.clear_session()
    await store.add_items(dict_history(6))
    model = ScriptedModel(lambda *_: [text_output("ok")], window=60_000)
    agent = Agent(name="coder", instructions="be brief", model=model)
    result = await Runner.run(agent, "next", session=session, run_config=session.run_config())
    assert result.final_output == "ok"
    assert session.trimmed_requests == 1
    assert model.requests[0]["tokens"] < 60_000


@pytest.mark.parametrize(
    "arguments", ['{"a": ' + "1" * 5000 + "}", "[" * 100_000], ids=["long-number", "deep"]
)
def test_arguments_python_cannot_read_are_kept_as_they_came(arguments: str) -> None:
    """Arguments that are JSON Python cannot read (a number of more than 4,300 digits, nesting
    past the parser's stack) are kept as text, as arguments that are not JSON are (they were a
    raw ValueError and RecursionError); the item comes back unchanged."""
    items = [USER, call(arguments=arguments), output()]
    converted = to_autocompact(items)
    (part,) = converted.messages[1].function_calls
    assert part.arguments == {"_arguments": arguments}
    back = from_autocompact(converted.messages, converted)
    assert all(a is b for a, b in zip(back, items, strict=True))
