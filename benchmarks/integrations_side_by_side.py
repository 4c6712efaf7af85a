"""Each framework's own answer to a full context window beside autocompact, on one workload.

    .venv/bin/python benchmarks/integrations_side_by_side.py          # Markdown table

The workload (the one a newcomer tried): a 16K-token window, 8 user turns, each answered by two
``read_file`` calls of about 3K tokens each and then a short reply. The model is a scripted fake
that counts every request with its own tokenizer — 3 characters a token over the system prompt,
the tool schemas and the JSON of each message — and *rejects* a request over its limit with
LangChain's ``ContextOverflowError``, as a provider would. A turn whose ``invoke`` raises is a
rejected turn (the next turn goes on with the checkpointed state).

Conditions:

- ``base``: as above;
- ``dense``: the model's tokenizer counts 2 characters a token (denser than any estimate);
- ``4K system``: a 12,000-character system prompt;
- ``long loop``: one turn of 8 sequential reads (about 24K tokens: longer than the window);
- ``limit 7K``: the provider rejects above 7,000 tokens although 16,000 is configured
  (well below autocompact's auto threshold of 11,200: its clearing alone does not keep
  every request under it).

Configurations. LangChain (a real ``create_agent`` agent, ``InMemorySaver``): no middleware (the
control: it must lose turns), ``SummarizationMiddleware(model, trigger=("fraction", 0.8))`` with
the model profile's ``max_input_tokens`` set to the window (its documented setup for a known
window; default keep), and ``AutocompactMiddleware(context_window=16_000)``. The Agents SDK (a
real ``Runner`` on a ``SQLiteSession``): the plain session (control), the SDK's own
``ToolOutputTrimmer()`` as ``call_model_input_filter`` (defaults), and
``AutocompactSession(SQLiteSession(...), context_window=16_000, summarizer="offline")`` with
its ``call_model_input_filter``. The SDK's ``OpenAIResponsesCompactionSession`` needs the OpenAI API
(``responses.compact``) and cannot run offline; pydantic-ai-harness cannot be installed next to
the pydantic-ai-slim this project needs (it pins slim 2.62; the integration needs 2.64), so
pydantic-ai has no built-in answer to compare with here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents import Agent as AgentsAgent
from agents import FunctionTool, RunConfig, Runner, SQLiteSession, Usage, set_tracing_disabled
from agents.extensions.tool_output_trimmer import ToolOutputTrimmer
from agents.items import ModelResponse
from agents.models.interface import Model as AgentsModel
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import Field

from autocompact.compaction.prompts import SUMMARY_FINAL_INSTRUCTION
from autocompact.events import CompactionSucceeded, Event
from autocompact.integrations import openai_agents as oa
from autocompact.integrations.langchain import AutocompactMiddleware

set_tracing_disabled(True)  # offline: no trace export

WINDOW = 16_000
FILE_CHARS = 9_000  # about 3K tokens at 3 characters a token
SUMMARY = "The user asked for modules to be read; they were read and reported. " * 8


class RejectingModel(GenericFakeChatModel):
    """A scripted chat model that counts each request and rejects it over ``limit``."""

    messages: Any = iter(())
    limit: int = WINDOW
    chars_per_token: float = 3.0
    replies: deque[AIMessage] = Field(default_factory=deque)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    sent: list[int] = Field(default_factory=list)
    over: int = 0
    summaries: int = 0

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound_tools = [convert_to_openai_tool(t) for t in tools]
        return self

    def count(self, messages: Sequence[BaseMessage], *, with_tools: bool) -> int:
        chars = sum(len(json.dumps(_wire(m), ensure_ascii=False)) for m in messages)
        if with_tools:
            chars += len(json.dumps(self.bound_tools))
        return math.ceil(chars / self.chars_per_token)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = str(messages[-1].content) if messages else ""
        summary = SUMMARY_FINAL_INSTRUCTION in last or "Context Extraction Assistant" in last
        tokens = self.count(messages, with_tools=not summary)
        self.sent.append(tokens)
        if tokens > self.limit:
            self.over += 1
            raise ContextOverflowError(
                f"prompt is too long: {tokens} tokens > {self.limit} maximum"
            )
        if summary:
            self.summaries += 1
            return _result(AIMessage(content=SUMMARY), tokens, self.chars_per_token)
        reply = self.replies.popleft() if self.replies else AIMessage(content="Done.")
        return _result(reply, tokens, self.chars_per_token)


def _result(message: AIMessage, tokens: int, chars_per_token: float) -> ChatResult:
    output = math.ceil(len(json.dumps(_wire(message))) / chars_per_token)
    usage = {"input_tokens": tokens, "output_tokens": output, "total_tokens": tokens + output}
    metadata = {**message.response_metadata, "model_provider": "benchmodel"}
    message = message.model_copy(
        update={"usage_metadata": usage, "response_metadata": metadata, "id": None}
    )
    return ChatResult(generations=[ChatGeneration(message=message)])


def _wire(message: BaseMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def read_file(path: str) -> str:
    """Read a file from the workspace."""
    n = sum(map(ord, path))
    body = "".join(f"def f{n}_{i}(x): return x * {i}  # line {i}\n" for i in range(400))
    return f"# {path}\n" + body[:FILE_CHARS]


@dataclass(frozen=True, kw_only=True)
class Condition:
    """One column of the table: the tokenizer, the system prompt, the loop, the real limit."""

    name: str
    chars_per_token: float = 3.0
    system_chars: int = 200
    turns: int = 8
    reads_per_turn: int = 2
    sequential: bool = False
    limit: int = WINDOW


CONDITIONS = (
    Condition(name="base"),
    Condition(name="dense", chars_per_token=2.0),
    Condition(name="4K system", system_chars=12_000),
    Condition(name="long loop", turns=1, reads_per_turn=8, sequential=True),
    Condition(name="limit 7K", limit=7_000),
)


def turn_replies(turn: int, condition: Condition) -> list[AIMessage]:
    """The model's replies for one turn: the reads (one step, or one per read), then a reply."""
    calls = [
        {"name": "read_file", "args": {"path": f"src/t{turn}_m{i}.py"}, "id": f"c{turn}_{i}"}
        for i in range(condition.reads_per_turn)
    ]
    steps = [[c] for c in calls] if condition.sequential else [calls]
    return [
        *(AIMessage(content="", tool_calls=step) for step in steps),
        AIMessage(content=f"Read {len(calls)} files for task {turn}."),
    ]


@dataclass(frozen=True, kw_only=True)
class Row:
    """What one configuration did under one condition."""

    condition: str
    config: str
    requests: int
    peak: int
    over: int
    summaries: int
    tokens: int
    rejected_turns: int


def run(condition: Condition, config: str) -> Row:
    """Drive a real create_agent agent through the condition's turns with one configuration."""
    model = RejectingModel(
        limit=condition.limit,
        chars_per_token=condition.chars_per_token,
        profile={"max_input_tokens": WINDOW},
    )
    middleware: list[Any] = []
    if config == "Autocompact":
        middleware = [AutocompactMiddleware(context_window=WINDOW)]
    elif config == "Summarization":
        middleware = [SummarizationMiddleware(model, trigger=("fraction", 0.8))]
    agent = create_agent(
        model,
        [StructuredTool.from_function(read_file)],
        system_prompt=("You are a careful coding agent. " * 400)[: condition.system_chars],
        middleware=middleware,
        checkpointer=InMemorySaver(),
    )
    settings: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": 200}
    rejected = 0
    for turn in range(condition.turns):
        model.replies.clear()
        model.replies.extend(turn_replies(turn, condition))
        try:
            agent.invoke({"messages": [HumanMessage(content=f"Task {turn}: read them.")]}, settings)
        except Exception:  # the provider's rejection reached the application: a lost turn
            rejected += 1
    return Row(
        condition=condition.name,
        config=f"LangChain: {config}",
        requests=len(model.sent),
        peak=max(model.sent, default=0),
        over=model.over,
        summaries=model.summaries,
        tokens=sum(model.sent),
        rejected_turns=rejected,
    )


# -- the OpenAI Agents SDK -----------------------------------------------------------------------


class RejectingAgentsModel(AgentsModel):
    """A scripted Agents SDK model that counts each request and rejects it over ``limit``."""

    def __init__(self, limit: int, chars_per_token: float) -> None:
        self.limit = limit
        self.chars_per_token = chars_per_token
        self.replies: deque[AIMessage] = deque()
        self.sent: list[int] = []
        self.over = 0
        self.summaries = 0

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        """The next scripted reply, or a rejection when the request is over the limit."""
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        schemas = [json.dumps(getattr(t, "params_json_schema", {})) for t in tools]
        text = "".join([system_instructions or "", *schemas, json.dumps(items, default=str)])
        tokens = math.ceil(len(text) / self.chars_per_token)
        self.sent.append(tokens)
        if tokens > self.limit:
            self.over += 1
            raise RuntimeError(f"context_length_exceeded: {tokens} tokens > {self.limit}")
        reply = self.replies.popleft() if self.replies else AIMessage(content="Done.")
        usage = Usage(requests=1, input_tokens=tokens, output_tokens=20, total_tokens=tokens + 20)
        return ModelResponse(output=_agents_output(reply), usage=usage, response_id="resp")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        """Not used."""
        raise NotImplementedError


def _agents_output(message: AIMessage) -> list[Any]:
    if message.tool_calls:
        return [
            ResponseFunctionToolCall(
                type="function_call",
                call_id=c["id"],
                name=c["name"],
                arguments=json.dumps(c["args"]),
            )
            for c in message.tool_calls
        ]
    content = [ResponseOutputText(type="output_text", text=str(message.content), annotations=[])]
    return [
        ResponseOutputMessage(
            id="msg", type="message", role="assistant", status="completed", content=content
        )
    ]


def run_agents(condition: Condition, config: str) -> Row:
    """Drive an Agents SDK Runner through the condition's turns with one configuration."""
    model = RejectingAgentsModel(condition.limit, condition.chars_per_token)

    async def invoke_read(ctx: Any, arguments: str) -> str:
        return read_file(json.loads(arguments)["path"])

    tool = FunctionTool(
        name="read_file",
        description="Read a file from the workspace.",
        params_json_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        on_invoke_tool=invoke_read,
    )
    agent = AgentsAgent(
        name="coder",
        instructions=("You are a careful coding agent. " * 400)[: condition.system_chars],
        model=model,
        tools=[tool],
    )
    events: list[Event] = []
    session: Any = SQLiteSession(f"bench-{condition.name}-{config}")
    run_config = RunConfig()
    if config == "ToolOutputTrimmer":
        run_config = RunConfig(call_model_input_filter=ToolOutputTrimmer())
    elif config == "Autocompact":
        session = oa.AutocompactSession(
            session, context_window=WINDOW, summarizer="offline", hooks=[events.append]
        )
        run_config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    rejected = 0

    async def main() -> int:
        lost = 0
        for turn in range(condition.turns):
            model.replies.clear()
            model.replies.extend(turn_replies(turn, condition))
            try:
                await Runner.run(
                    agent, f"Task {turn}: read them.", session=session, run_config=run_config
                )
            except Exception:  # the provider's rejection reached the application
                lost += 1
        return lost

    rejected = asyncio.run(main())
    # The session's summarizer is offline here: these summaries cost no model call.
    summaries = sum(
        1 for e in events if isinstance(e, CompactionSucceeded) and e.info.method != "clearing"
    )
    return Row(
        condition=condition.name,
        config=f"Agents SDK: {config}",
        requests=len(model.sent),
        peak=max(model.sent, default=0),
        over=model.over,
        summaries=summaries,
        tokens=sum(model.sent),
        rejected_turns=rejected,
    )


CONFIGS = ("none (control)", "Summarization", "Autocompact")
AGENTS_CONFIGS = ("plain session (control)", "ToolOutputTrimmer", "Autocompact")
"""The Agents SDK's Autocompact row counts offline summaries (no model call) as summaries."""


def table(rows: Sequence[Row]) -> str:
    """The Markdown table."""
    out = [
        "| condition | configuration | requests | largest | over the limit (rejected) "
        "| summary calls | tokens sent | rejected turns |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r.condition} | {r.config} | {r.requests} | {r.peak:,} | {r.over} | {r.summaries} "
            f"| {r.tokens:,} | {r.rejected_turns} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every condition with every configuration and print the table; exit 1 when the
    control did not fail (the benchmark would then prove nothing) or autocompact lost a turn."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = [run(c, config) for c in CONDITIONS for config in CONFIGS]
    rows += [run_agents(c, config) for c in CONDITIONS for config in AGENTS_CONFIGS]
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        print(table(rows))
    control = [r for r in rows if "(control)" in r.config]
    ours = [r for r in rows if r.config.endswith("Autocompact")]
    if not all(r.rejected_turns for r in control):
        print("the control lost no turn: the workload does not fill the window", file=sys.stderr)
        return 1
    if any(r.rejected_turns for r in ours):
        print("autocompact lost a turn", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
