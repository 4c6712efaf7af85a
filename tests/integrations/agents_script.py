"""A scripted Agents SDK ``Model`` (its own interface, no network) for the integration tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from agents import SQLiteSession, Usage
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.models.openai_responses import Converter
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from autocompact import open_store
from autocompact.integrations.openai_agents import AutocompactSession, StoreSession


def count_tokens(system: str | None, items: list[Any], tools: list[Any]) -> int:
    """The scripted model's own tokenizer: 3 characters a token over the items' JSON form
    (the engine estimates 4 for text and 2 for JSON, so the two disagree)."""
    schema = sum(len(json.dumps(getattr(t, "params_json_schema", {}))) for t in tools)
    return (len(system or "") + len(json.dumps(items)) + schema) // 3


def declarations_tokens(handoffs: list[Any], output_schema: Any) -> int:
    """The same tokenizer over what the Responses API receives besides the items and the function
    tools' schemas: each handoff as a function tool declaration, the output schema as
    ``text.format`` (both built by the SDK's own converter)."""
    sent: list[Any] = list(Converter.convert_tools([], list(handoffs)).tools)
    text = Converter.get_response_format(output_schema)
    if isinstance(text, dict):
        sent.append(text)
    return len(json.dumps(sent)) // 3 if sent else 0


def text_output(text: str) -> ResponseOutputMessage:
    """An assistant message output item."""
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call_output(call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    """A function call output item."""
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
    )


Script = Callable[[str | None, list[Any], dict[str, Any]], list[Any]]


class ScriptedModel(Model):
    """Answers with what ``script(system, items, settings)`` returns; rejects requests over
    ``window`` tokens (by its own count, handoffs and output schema included) the way a
    provider would."""

    def __init__(self, script: Script, *, window: int | None = None) -> None:
        self.script = script
        self.window = window
        self.requests: list[dict[str, Any]] = []
        self.counter = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        """One scripted reply, with usage from the model's own tokenizer."""
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        tokens = count_tokens(system_instructions, items, tools)
        tokens += declarations_tokens(handoffs, output_schema)
        self.requests.append(
            {
                "system": system_instructions,
                "items": items,
                "tokens": tokens,
                "max_tokens": model_settings.max_tokens,
                "tools": len(tools),
            }
        )
        if self.window is not None and tokens > self.window:
            raise ValueError(f"request of {tokens} tokens is over the window of {self.window}")
        self.counter += 1
        output = self.script(system_instructions, items, {"max_tokens": model_settings.max_tokens})
        return ModelResponse(
            output=output,
            usage=Usage(
                requests=1, input_tokens=tokens, output_tokens=10, total_tokens=tokens + 10
            ),
            response_id=f"resp_{self.counter}",
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Not used by these tests."""
        raise NotImplementedError


def stored_history() -> list[Any]:
    """Eight stored turns of 10,000 characters each: 20,000 tokens by the estimate (under the
    hard threshold of a 32,000 window), about 27,000 by the scripted model's own count."""
    items: list[Any] = []
    for n in range(8):
        items += [
            {"role": "user", "content": f"question {n} " + "q" * 5_000},
            {"role": "assistant", "content": f"answer {n} " + "a" * 5_000},
        ]
    return items


async def session_with_history(kind: str, path: Path, window: int, name: str) -> Any:
    """An ``AutocompactSession`` over a ``SQLiteSession`` (``kind="wrapper"``) or a
    ``StoreSession`` on a SQLite store under ``path`` (``"store"``), holding
    :func:`stored_history`, stored without any compaction."""
    if kind == "wrapper":
        wrapped = AutocompactSession(
            SQLiteSession(name), context_window=window, summarizer="offline"
        )
        await wrapped.underlying.add_items(stored_history())
        return wrapped
    store = open_store(f"sqlite:///{path / f'{name}.db'}")
    stored = StoreSession(store, name, context_window=window, summarizer="offline")
    await stored.add_items(stored_history())
    return stored
