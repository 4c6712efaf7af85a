"""Scripted LangChain chat models for the middleware tests (built on LangChain's own fakes).

``ScriptedModel`` is LangChain's ``GenericFakeChatModel`` with what a real chat model adds: it
binds tools, counts each request with its own tokenizer (unlike the engine's estimate: every
character of the JSON form of each message at ``chars_per_token``, plus a per-message overhead,
plus the tool schemas), reports that count in ``usage_metadata``, and raises LangChain's
``ContextOverflowError`` when a request is over its window. Summary requests (recognized by the
engine's summary instruction) are answered from a separate script, so a test can make them fail.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from autocompact.compaction.prompts import SUMMARY_FINAL_INSTRUCTION

SummaryReply = str | Exception | Callable[[list[BaseMessage]], str]


def _never() -> Iterator[AIMessage]:
    return iter(())


class ScriptedModel(GenericFakeChatModel):
    """A fake chat model with tool binding, usage, a window and a summary script."""

    messages: Iterator[AIMessage | str] = _never()
    window: int = 1_000_000
    chars_per_token: float = 3.0
    per_message: int = 4
    summaries: list[SummaryReply] = Field(default_factory=list)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    summary_requests: list[list[BaseMessage]] = Field(default_factory=list)
    counts: list[int] = Field(default_factory=list)
    rejected: list[int] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Remember the tool schemas (they are counted in every request)."""
        self.bound_tools = [convert_to_openai_tool(t) for t in tools]
        return self

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """This model's own token count of a request (differs from the engine's estimate)."""
        chars = sum(len(json.dumps(_wire(m), ensure_ascii=False)) for m in messages)
        chars += len(json.dumps(self.bound_tools))
        return math.ceil(chars / self.chars_per_token) + self.per_message * len(messages)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        tokens = self.count(messages)
        if _is_summary(messages):
            self.summary_requests.append(list(messages))
            reply = (
                self.summaries.pop(0)
                if self.summaries
                else "<state_snapshot>goal: test</state_snapshot>"
            )
            if isinstance(reply, Exception):
                raise reply
            text = reply(messages) if callable(reply) else reply
            if tokens > self.window:
                raise ContextOverflowError(f"prompt is too long: {tokens} > {self.window}")
            return _result(AIMessage(content=text), tokens)
        if tokens > self.window:
            self.rejected.append(tokens)
            raise ContextOverflowError(f"prompt is too long: {tokens} tokens > {self.window}")
        self.requests.append(list(messages))
        self.counts.append(tokens)
        message = next(self.messages)
        reply_msg = AIMessage(content=message) if isinstance(message, str) else message
        return _result(reply_msg, tokens)


def _result(message: AIMessage, tokens: int) -> ChatResult:
    output = math.ceil(len(str(message.content)) / 3) + 10 * len(message.tool_calls)
    message = message.model_copy(
        update={
            "usage_metadata": {
                "input_tokens": tokens,
                "output_tokens": output,
                "total_tokens": tokens + output,
            }
        }
    )
    return ChatResult(generations=[ChatGeneration(message=message)])


def _is_summary(messages: Sequence[BaseMessage]) -> bool:
    last = messages[-1] if messages else None
    return last is not None and SUMMARY_FINAL_INSTRUCTION in str(last.content)


def _wire(message: BaseMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """A scripted reply that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def orphans(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool-pair validator on the wire: ids of calls without a result and results without a call
    (a result must follow its call; every call must be answered before the next model turn)."""
    problems: list[str] = []
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            problems.extend(f"unanswered {i}" for i in sorted(open_calls))
            open_calls = {c["id"] for c in message.tool_calls if c["id"]}
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(f"orphan result {message.tool_call_id}")
            open_calls.discard(message.tool_call_id)
    return problems
