"""Side by side: the pydantic-ai and Agents SDK integrations against each framework's default.

Every run goes through the real framework (pydantic-ai's ``Agent`` with a ``FunctionModel``; the
Agents SDK's ``Runner`` with a scripted ``Model``) replaying the same model replies and tool
outputs, so each configuration answers the same conversation:

- **scripted**: 12 prompts, each a tool call returning 24,000 characters, then a reply;
- **recorded**: the Claude Code sessions in ``../shared/data/`` (the first ``--sessions`` of
  them, the first ``--replies`` model replies of each), their tool outputs replayed by call id.

Configurations. pydantic-ai: the agent as shipped (no history processor) and with the
``Autocompact`` capability. Agents SDK: a plain ``SQLiteSession`` (what a session does by
default); an item-count session — the SDK's own decision (``default_should_trigger_compaction``:
compact when 10 candidate items are stored) with the offline summary standing in for the
``responses.compact`` call it would make (which needs the OpenAI API); and ``AutocompactSession``
with its input filter. autocompact summarizes offline here (no model call), so "tokens sent" is
the chat requests alone; the integration tests cover summaries by the model itself.

Measured per configuration: model requests, requests over the window, summaries written, and
tokens sent, all counted by the replaying model with its own tokenizer (o200k_base through the
bench extra's offline tiktoken when installed, else 3 characters a token) — not by the engine.

    python benchmarks/integrations.py [--window 32000] [--sessions 3] [--replies 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents import (  # noqa: E402
    Agent as AgentsAgent,
)
from agents import (  # noqa: E402
    FunctionTool,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    set_tracing_disabled,
)
from agents.items import ModelResponse  # noqa: E402
from agents.memory.openai_responses_compaction_session import (  # noqa: E402
    default_should_trigger_compaction,
    select_compaction_candidate_items,
)
from agents.models.interface import Model as AgentsModel  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent, Tool  # noqa: E402
from pydantic_ai import messages as pm  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.usage import RequestUsage, UsageLimits  # noqa: E402

from autocompact import FunctionCallPart, Message, TextPart  # noqa: E402
from autocompact.compaction.extractive import extractive_summary  # noqa: E402
from autocompact.errors import MessageTooLargeError, TranscriptFormatError  # noqa: E402
from autocompact.integrations import openai_agents as oa  # noqa: E402
from autocompact.integrations import pydantic_ai as pa  # noqa: E402
from autocompact.transcripts import read_transcript  # noqa: E402

set_tracing_disabled(True)
DATA = ROOT.parent / "shared" / "data"
ANY_ARGS = {"type": "object", "additionalProperties": True}


def make_counter() -> tuple[str, Callable[[str], int]]:
    """The replaying model's tokenizer: o200k_base when available, else 3 characters a token."""
    try:
        from _offline_tiktoken import load_o200k

        encoding = load_o200k()
        return "o200k_base", lambda text: len(encoding.encode(text, disallowed_special=()))
    except (ImportError, ValueError):
        return "3 characters a token", lambda text: len(text) // 3


TOKENIZER, COUNT = make_counter()


# -- runs -----------------------------------------------------------------------------------------


@dataclass
class Episode:
    """One prompt and the model replies that answer it (the last one makes no call)."""

    prompt: str
    replies: list[Message] = field(default_factory=list)


@dataclass
class Run:
    """A conversation to replay: episodes and the recorded tool outputs by call id."""

    name: str
    episodes: list[Episode]
    outputs: dict[str, str]
    tools: list[str]


def scripted_run(prompts: int = 12, chars: int = 24_000) -> Run:
    """Prompts that each make one tool call with a large output."""
    episodes = [
        Episode(
            prompt=f"task {i}: read file_{i}.py",
            replies=[
                Message.model(FunctionCallPart(id=f"c{i}", name="read", arguments={"i": i})),
                Message.model(f"file_{i}.py read; done."),
            ],
        )
        for i in range(prompts)
    ]
    outputs = {
        f"c{i}": f"file_{i}.py\n" + "x = 1  # code\n" * (chars // 14) for i in range(prompts)
    }
    return Run(name="scripted", episodes=episodes, outputs=outputs, tools=["read"])


def recorded_run(path: Path, max_replies: int) -> Run | None:
    """A recorded session as episodes (replies with no part the frameworks replay skipped)."""
    transcript = read_transcript(path)
    skip = set(transcript.summary_positions)
    episodes: list[Episode] = []
    outputs: dict[str, str] = {}
    tools: set[str] = set()
    replies = 0
    for index, message in enumerate(transcript.messages):
        if index in skip:
            continue
        if message.role == "user":
            for response in message.function_responses:
                value = response.response
                outputs[response.id] = value if isinstance(value, str) else json.dumps(value)
            if message.text.strip() and not message.function_responses:
                episodes.append(Episode(prompt=message.text))
            continue
        parts = tuple(p for p in message.parts if isinstance(p, TextPart | FunctionCallPart))
        if not parts or not episodes:
            continue
        if episodes[-1].replies and not episodes[-1].replies[-1].function_calls:
            episodes.append(Episode(prompt="continue"))
        episodes[-1].replies.append(Message(role="model", parts=parts))
        tools.update(p.name for p in parts if isinstance(p, FunctionCallPart))
        replies += 1
        if replies >= max_replies:
            break
    episodes = [e for e in episodes if e.replies]
    for episode in episodes:  # every episode ends on a reply without calls
        if episode.replies[-1].function_calls:
            episode.replies.append(Message.model("(stopped)"))
    if not episodes:
        return None
    return Run(name=path.name[:12], episodes=episodes, outputs=outputs, tools=sorted(tools))


def recorded_runs(sessions: int, max_replies: int) -> list[Run]:
    """The first ``sessions`` recorded sessions in ../shared/data (none when it is absent)."""
    folder = DATA / "claude-code-sessions"
    if sessions <= 0 or not folder.is_dir():
        return []
    runs: list[Run] = []
    for path in sorted(p for p in folder.iterdir() if ".jsonl" in p.name):
        try:
            run = recorded_run(path, max_replies)
        except TranscriptFormatError as exc:
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
            continue
        if run is not None:
            runs.append(run)
        if len(runs) == sessions:
            break
    return runs


# -- measurement ---------------------------------------------------------------------------------


@dataclass
class Stats:
    """What one configuration sent."""

    requests: int = 0
    over: int = 0
    summaries: int = 0
    tokens: int = 0
    largest: int = 0

    def add(self, tokens: int, window: int) -> None:
        """Record one request of ``tokens``."""
        self.requests += 1
        self.tokens += tokens
        self.over += tokens > window
        self.largest = max(self.largest, tokens)


def summaries_of(events: list[Any]) -> int:
    """Successful compactions that wrote a summary (clearing alone is not one)."""
    return sum(
        1 for e in events if e.kind == "compaction_succeeded" and e.info.method != "clearing"
    )


# -- pydantic-ai ---------------------------------------------------------------------------------


def pydantic_count(messages: list[pm.ModelMessage], info: AgentInfo) -> int:
    """The replaying model's count of a pydantic-ai request."""
    chunks = [info.instructions or ""]
    chunks += [json.dumps(t.parameters_json_schema) for t in info.function_tools]
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            args = getattr(part, "args", None)
            chunks.append(content if isinstance(content, str) else json.dumps(content or args))
    return COUNT("\n".join(chunks))


def run_pydantic(run: Run, window: int, capability: Any, events: list[Any]) -> Stats:
    """Replay ``run`` through a pydantic-ai agent (with ``capability``, or none)."""
    stats = Stats()
    replies: Iterator[Message] = iter(r for e in run.episodes for r in e.replies)

    def model(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        tokens = pydantic_count(messages, info)
        stats.add(tokens, window)
        (reply,) = pa.from_autocompact([next(replies)])
        assert isinstance(reply, pm.ModelResponse)
        reply.usage = RequestUsage(input_tokens=tokens, output_tokens=50)
        return reply

    def replay_tool(ctx: Any, **_: Any) -> str:
        return run.outputs.get(ctx.tool_call_id, "")

    tools = [Tool.from_schema(replay_tool, n, "a recorded tool", ANY_ARGS, True) for n in run.tools]
    agent = Agent(
        FunctionModel(model),
        system_prompt="You are a coding agent.",
        tools=tools,
        capabilities=[capability] if capability is not None else None,
    )
    history: list[pm.ModelMessage] | None = None
    for episode in run.episodes:
        result = agent.run_sync(
            episode.prompt, message_history=history, usage_limits=UsageLimits(request_limit=None)
        )
        history = result.all_messages()
    stats.summaries = summaries_of(events)
    return stats


# -- the Agents SDK ------------------------------------------------------------------------------


def agents_output(message: Message) -> list[Any]:
    """A recorded reply as Responses output items."""
    out: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content = [ResponseOutputText(type="output_text", text=part.text, annotations=[])]
            out.append(
                ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed", content=content
                )
            )
        elif isinstance(part, FunctionCallPart):
            arguments = json.dumps(dict(part.arguments))
            out.append(
                ResponseFunctionToolCall(
                    type="function_call", call_id=part.id, name=part.name, arguments=arguments
                )
            )
    return out


class ReplayModel(AgentsModel):
    """Replays recorded replies; counts each request with the replaying tokenizer."""

    def __init__(self, run: Run, window: int, stats: Stats) -> None:
        self.replies = iter(r for e in run.episodes for r in e.replies)
        self.window = window
        self.stats = stats

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *a: Any,
        **k: Any,
    ) -> ModelResponse:
        """The next recorded reply."""
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        schemas = [json.dumps(getattr(t, "params_json_schema", {})) for t in tools]
        tokens = COUNT("\n".join([system_instructions or "", *schemas, json.dumps(items)]))
        self.stats.add(tokens, self.window)
        usage = Usage(requests=1, input_tokens=tokens, output_tokens=50, total_tokens=tokens + 50)
        return ModelResponse(
            output=agents_output(next(self.replies)), usage=usage, response_id="resp"
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        """Not used."""
        raise NotImplementedError


class ItemCountSession(SQLiteSession):
    """The SDK's item-count decision (10 candidate items) with the offline summary standing in
    for ``responses.compact``: all stored items are replaced by one summary message."""

    summaries = 0

    async def run_compaction(self, args: Any = None) -> None:
        """Compact when the SDK's default decision says so."""
        items = await self.get_items()
        candidates = select_compaction_candidate_items(items)
        if not default_should_trigger_compaction({"compaction_candidate_items": candidates}):
            return
        converted = oa.to_autocompact(items)
        summary = extractive_summary(converted.messages)
        await self.clear_session()
        await self.add_items([{"role": "user", "content": summary}])
        self.summaries += 1


def run_agents(run: Run, window: int, kind: str) -> Stats:
    """Replay ``run`` through the Agents SDK runner on a session of ``kind``."""
    stats = Stats()
    model = ReplayModel(run, window, stats)
    events: list[Any] = []

    async def replay_tool(ctx: Any, _: str) -> str:
        return run.outputs.get(ctx.tool_call_id, "")

    tools = [
        FunctionTool(
            name=n,
            description="a recorded tool",
            params_json_schema=ANY_ARGS,
            on_invoke_tool=replay_tool,
            strict_json_schema=False,
        )
        for n in run.tools
    ]
    agent = AgentsAgent(
        name="coder", instructions="You are a coding agent.", model=model, tools=tools
    )
    session: Any
    config = RunConfig()
    if kind == "plain":
        session = SQLiteSession(run.name)
    elif kind == "item-count":
        session = ItemCountSession(run.name)
    else:
        session = oa.AutocompactSession(
            SQLiteSession(run.name),
            context_window=window,
            summarizer="offline",
            hooks=[events.append],
        )
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)

    async def main() -> None:
        for episode in run.episodes:
            await Runner.run(
                agent, episode.prompt, session=session, run_config=config, max_turns=100_000
            )

    asyncio.run(main())
    stats.summaries = session.summaries if kind == "item-count" else summaries_of(events)
    return stats


# -- the report ----------------------------------------------------------------------------------


def row(framework: str, config: str, run: Run, stats: Stats) -> str:
    """One table row."""
    return (
        f"| {run.name} | {framework} | {config} | {stats.requests} | {stats.over} | "
        f"{stats.largest:,} | {stats.summaries} | {stats.tokens:,} |"
    )


def configurations(run: Run, window: int) -> list[str]:
    """Every configuration's row for ``run``."""
    rows = [row("pydantic-ai", "default (no processor)", run, run_pydantic(run, window, None, []))]
    events: list[Any] = []
    capability = pa.Autocompact(context_window=window, summarizer="offline", hooks=[events.append])
    rows.append(
        row("pydantic-ai", "Autocompact", run, run_pydantic(run, window, capability, events))
    )
    for kind, label in (
        ("plain", "SQLiteSession (no compaction)"),
        ("item-count", "item-count compaction (SDK default decision)"),
        ("autocompact", "AutocompactSession + input filter"),
    ):
        rows.append(row("Agents SDK", label, run, run_agents(run, window, kind)))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run every configuration on every run and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--replies", type=int, default=150)
    args = parser.parse_args(argv)
    runs = [scripted_run(), *recorded_runs(args.sessions, args.replies)]
    print(f"Window {args.window:,} tokens; counts by the replaying model ({TOKENIZER}).\n")
    print(
        "| run | framework | configuration | requests | over the window | largest | "
        "summaries | tokens sent |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for run in runs:
        try:
            rows = configurations(run, args.window)
        except MessageTooLargeError as exc:
            # autocompact refuses a message larger than the whole window before sending it.
            print(f"| {run.name} | all | not replayable: {exc} | | | | | |")
            continue
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
