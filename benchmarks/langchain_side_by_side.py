"""AutocompactMiddleware beside LangChain's SummarizationMiddleware, on the same agent runs.

    .venv/bin/python benchmarks/langchain_side_by_side.py            # every run, Markdown table
    .venv/bin/python benchmarks/langchain_side_by_side.py --quick    # scripted runs only

Each run drives a real ``create_agent`` agent (real tool loop, ``InMemorySaver``) on a scripted
fake chat model, once per middleware, with the same script. The model counts every request with
its own tokenizer (JSON of each message at 2.5 characters a token, like Claude 4.x on this kind of
content, plus 4 tokens a message; the system prompt and the tool schemas included), reports that
count as usage, and records whether the request was over its window instead of raising, so both
middlewares run to the end and the table can say how many requests a real provider would have
rejected. Summaries are answered by the same model with the same fixed-size snapshot.

Runs:

- ``tool loop``: one request, then 40 tool calls returning 12K characters each (128K window).
- ``chat + tools``: 12 user turns of 3 tool calls of 8K characters (128K window).
- ``big prompt``: the chat run with a 60K-character system prompt and 30 long tool schemas.
- the recorded Claude Code sessions in ``../shared/data/`` (when present), replayed turn by turn:
  each recorded user message is one ``invoke``, the model answers with the recorded assistant
  messages (tool calls included) and the tools return the recorded results (200K window, the
  window these sessions ran on).

LangChain's middleware is configured as its documentation suggests for a known window:
``trigger=("fraction", 0.8)`` of the model profile's ``max_input_tokens`` and ``keep=("messages",
20)`` (its default keep). autocompact's is ``AutocompactMiddleware(context_window=window)``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from autocompact.compaction.prompts import SUMMARY_FINAL_INSTRUCTION
from autocompact.content import Message
from autocompact.events import (
    CompactionSucceeded,
    Event,
    RequestTrimmed,
)
from autocompact.integrations.langchain import AutocompactMiddleware, from_autocompact

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
SUMMARY = "<state_snapshot>\n" + "goal: keep working on the task; facts and files so far.\n" * 60
SUMMARY += "</state_snapshot>"
CHARS_PER_TOKEN = 2.5


class BenchModel(GenericFakeChatModel):
    """A fake chat model that counts requests, never raises, and records over-window sends."""

    messages: Iterator[AIMessage | str] = iter(())
    window: int = 128_000
    next_reply: Callable[[], AIMessage] | None = None
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    turn_counts: list[int] = Field(default_factory=list)
    summary_counts: list[int] = Field(default_factory=list)
    summary_at: list[int] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound_tools = [convert_to_openai_tool(t) for t in tools]
        return self

    def count(self, messages: Sequence[BaseMessage], *, with_tools: bool) -> int:
        chars = sum(len(json.dumps(_wire(m), ensure_ascii=False)) for m in messages)
        if with_tools:
            chars += len(json.dumps(self.bound_tools))
        return math.ceil(chars / CHARS_PER_TOKEN) + 4 * len(messages)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = str(messages[-1].content) if messages else ""
        if SUMMARY_FINAL_INSTRUCTION in last or "<role>\nContext Extraction Assistant" in last:
            self.summary_counts.append(self.count(messages, with_tools=False))
            self.summary_at.append(len(self.turn_counts))
            return _result(AIMessage(content=SUMMARY), self.summary_counts[-1])
        tokens = self.count(messages, with_tools=True)
        self.turn_counts.append(tokens)
        reply = self.next_reply() if self.next_reply else AIMessage(content="ok")
        return _result(reply, tokens)


def _result(message: AIMessage, tokens: int) -> ChatResult:
    output = math.ceil(len(json.dumps(_wire(message))) / CHARS_PER_TOKEN)
    usage = {"input_tokens": tokens, "output_tokens": output, "total_tokens": tokens + output}
    # A real provider names itself, which lets SummarizationMiddleware trust reported usage.
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


@dataclass
class Script:
    """One agent run: user turns, each with the model replies that answer it, and the tools."""

    name: str
    window: int
    system_prompt: str
    turns: list[tuple[str, list[AIMessage]]]
    results: dict[tuple[str, str], deque[Any]] = field(default_factory=dict)
    schemas: dict[str, str] = field(default_factory=dict)

    def tools(self) -> list[BaseTool]:
        names = sorted(
            {c["name"] for _, replies in self.turns for r in replies for c in r.tool_calls}
        )
        return [self._tool(name) for name in names]

    def _tool(self, name: str) -> BaseTool:
        queues = self.results

        def run(**kwargs: Any) -> Any:
            key = (name, json.dumps(kwargs, sort_keys=True, default=str))
            queue = queues.get(key)
            return queue.popleft() if queue else "(no recorded result)"

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return StructuredTool.from_function(
            func=run,
            name=name,
            description=self.schemas.get(name, f"the recorded tool {name}"),
            args_schema=schema,
        )


def synthetic(name: str, turns: int, calls: int, size: int, *, big: bool = False) -> Script:
    """A scripted run: ``turns`` user turns of ``calls`` tool calls returning ``size`` chars."""
    results: dict[tuple[str, str], deque[Any]] = defaultdict(deque)
    script: list[tuple[str, list[AIMessage]]] = []
    n = 0
    for turn in range(turns):
        replies = []
        for _ in range(calls):
            args = {"path": f"src/module_{n}.py"}
            body = f"# module {n}\n" + "".join(
                f"def f{n}_{i}(x): return x * {i}\n" for i in range(size // 28)
            )
            results[("read_file", json.dumps(args, sort_keys=True))].append(body[:size])
            replies.append(
                AIMessage(
                    content="", tool_calls=[{"name": "read_file", "args": args, "id": f"c{n}"}]
                )
            )
            n += 1
        replies.append(AIMessage(content=f"Read {calls} modules for turn {turn}."))
        script.append((f"Turn {turn}: read the next {calls} modules and report.", replies))
    system = "You are a meticulous coding agent. " * (60_000 // 35 if big else 20)
    out = Script(name=name, window=128_000, system_prompt=system, turns=script, results=results)
    if big:
        out.schemas = {"read_file": "Read a file from the workspace. " * 40}
        for i in range(29):
            out.schemas[f"tool_{i}"] = f"Tool {i}: " + "does a specific thing with care. " * 40
            out.turns[0][1].insert(
                0,
                AIMessage(
                    content="", tool_calls=[{"name": f"tool_{i}", "args": {"x": i}, "id": f"t{i}"}]
                ),
            )
            out.results[(f"tool_{i}", json.dumps({"x": i}))].append("ok")
    return out


def recorded(path: Path, window: int = 200_000) -> Script | None:
    """A recorded session as a script (``None`` when it has no complete turn)."""
    from autocompact.transcripts import read_transcript

    transcript = read_transcript(path)
    skip = transcript.summary_positions
    messages = [m for i, m in enumerate(transcript.messages) if i not in skip]
    results: dict[tuple[str, str], deque[Any]] = defaultdict(deque)
    turns: list[tuple[str, list[AIMessage]]] = []
    replies: list[Message] = []
    prompt: str | None = None

    def close() -> None:
        if prompt is not None and replies:
            merged = _merge(replies)
            turns.append(
                (prompt, [m for m in from_autocompact(merged) if isinstance(m, AIMessage)])
            )

    for message in messages:
        if message.role == "user" and not message.function_responses:
            close()
            prompt, replies = message.text or "(continue)", []
        elif message.role == "model":
            replies.append(message)
        else:
            for part in message.function_responses:
                call = _find_call(replies, part.id)
                if call is not None:
                    key = (call.name, json.dumps(dict(call.arguments), sort_keys=True, default=str))
                    response = (
                        part.response
                        if isinstance(part.response, str)
                        else json.dumps(part.response)
                    )
                    results[key].append(response)
    close()
    if not turns:
        return None
    return Script(
        name=path.name.split(".")[0][:12],
        window=window,
        system_prompt="You are Claude Code. " * 3_000,
        turns=turns,
        results=results,
    )


def _find_call(replies: Sequence[Message], call_id: str) -> Any:
    for reply in reversed(replies):
        for call in reply.function_calls:
            if call.id == call_id:
                return call
    return None


def _merge(replies: Sequence[Message]) -> list[Message]:
    """Consecutive model messages of one turn, merged so each model call is one message ending
    at its tool calls (the agent loop answers every call before the next model message)."""
    out: list[Message] = []
    pending: list[Any] = []
    for reply in replies:
        pending.extend(reply.parts)
        if reply.function_calls:
            out.append(Message(role="model", parts=tuple(pending)))
            pending = []
    if pending:
        out.append(Message(role="model", parts=tuple(pending)))
    return out


class MeasuredSummarization(SummarizationMiddleware):
    """LangChain's middleware, unchanged, recording when it replaces the history and with what."""

    def __init__(self, model: BenchModel, **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)
        self.bench_model = model
        self.fired: list[tuple[int, str]] = []

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        update = super().before_model(state, runtime)
        if update is not None:
            summary = str(update["messages"][1].content)
            self.fired.append((len(self.bench_model.turn_counts), summary))
        return update


@dataclass
class Outcome:
    requests: int = 0
    over: int = 0
    peak: int = 0
    summaries: int = 0
    sent: int = 0
    summary_input: int = 0
    trims: int = 0
    fired_at: list[str] = field(default_factory=list)
    lost: int = 0
    error: str | None = None


def play(script: Script, which: str) -> Outcome:
    """Run the script through a fresh agent with one middleware; measure what was sent."""
    queue: deque[AIMessage] = deque()
    model = BenchModel(window=script.window, profile={"max_input_tokens": script.window})
    model.next_reply = lambda: queue.popleft() if queue else AIMessage(content="ok")
    events: list[tuple[int, Event]] = []

    def hook(event: Event) -> None:
        events.append((len(model.turn_counts), event))

    if which == "autocompact":
        middleware: Any = AutocompactMiddleware(context_window=script.window, hooks=[hook])
    else:
        middleware = MeasuredSummarization(model, trigger=("fraction", 0.8))
    # Fresh tool queues per run: the scripts are replayed twice.
    results = {k: deque(v) for k, v in script.results.items()}
    runner = Script(
        script.name, script.window, script.system_prompt, script.turns, results, script.schemas
    )
    agent = create_agent(
        model,
        runner.tools(),
        system_prompt=script.system_prompt,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": 10_000}
    outcome = Outcome()
    try:
        for prompt, replies in script.turns:
            queue.clear()
            queue.extend(r.model_copy() for r in replies)
            agent.invoke({"messages": [HumanMessage(content=prompt)]}, config)
    except Exception as exc:  # a middleware that fails mid-run is reported, not hidden
        outcome.error = f"{type(exc).__name__}: {str(exc)[:80]}"
    counts = model.turn_counts
    outcome.requests = len(counts)
    outcome.over = sum(1 for c in counts if c > script.window)
    outcome.peak = max(counts, default=0)
    outcome.summaries = len(model.summary_counts)
    outcome.sent = sum(counts)
    outcome.summary_input = sum(model.summary_counts)
    outcome.trims = sum(1 for _, e in events if isinstance(e, RequestTrimmed))
    if which == "autocompact":
        for at, event in events:
            if isinstance(event, CompactionSucceeded):
                outcome.fired_at.append(f"{at}{'c' if event.info.method == 'clearing' else 's'}")
    else:
        for at, summary in middleware.fired:
            lost = "too long to summarize" in summary
            outcome.lost += lost
            outcome.fired_at.append(f"{at}{'!' if lost else 's'}")
    return outcome


def _fmt(n: int) -> str:
    return f"{n / 1000:.0f}K" if n >= 10_000 else str(n)


def table(scripts: Sequence[Script]) -> str:
    """Play every script with both middlewares; one Markdown row each."""
    rows = [
        "| run | middleware | requests | over the window | peak request | history rewrites "
        "(at request #) | summary calls | history lost without a summary | tokens sent "
        "(turns + summaries) | trimmed requests |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for script in scripts:
        for which in ("autocompact", "langchain"):
            o = play(script, which)
            fired = ", ".join(o.fired_at[:6]) + (" …" if len(o.fired_at) > 6 else "")
            label = "Autocompact" if which == "autocompact" else "Summarization"
            note = f" — stopped: {o.error}" if o.error else ""
            rows.append(
                f"| {script.name} ({_fmt(script.window)}) | {label}{note} | {o.requests} | "
                f"{o.over} | {_fmt(o.peak)} | {len(o.fired_at)} ({fired or '–'}) | "
                f"{o.summaries} | {o.lost} | {_fmt(o.sent)} + {_fmt(o.summary_input)} | {o.trims} |"
            )
    legend = (
        "\n\nRewrites: `c` clearing of old tool output (no model call), `s` a summary, `!` the "
        "history replaced by LangChain's placeholder \"Previous conversation was too long to "
        'summarize." (no model call: the part to summarize was over its 4K-token '
        "`trim_tokens_to_summarize`)."
    )
    return "\n".join(rows) + legend


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="scripted runs only")
    args = parser.parse_args(argv)
    scripts = [
        synthetic("tool loop", 1, 40, 12_000),
        synthetic("chat + tools", 12, 3, 8_000),
        synthetic("big prompt", 12, 3, 8_000, big=True),
    ]
    if not args.quick and DATA_DIR.is_dir():
        for path in sorted((DATA_DIR / "claude-code-sessions").glob("*.jsonl.gz")):
            script = recorded(path)
            if script is not None:
                scripts.append(script)
    print(table(scripts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
