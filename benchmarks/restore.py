"""Restore and per-send benchmarks of issue 11 (fast restores), printed as Markdown.

    .venv/bin/python benchmarks/restore.py            # 1M restore, 10K vs 4M per-send (~1 min)
    .venv/bin/python benchmarks/restore.py --quick    # 100K restore, 10K vs 400K per-send

(1) *Restore + first cold estimate* at 1M tokens, a real agent's shape on both sides: a ~12K
character system prompt and 16 realistic tool declarations. The session file is written once by
the session store (untimed); each round loads it again (``SessionStore.open``: fresh message
objects, statistics seeded from the file), untimed, then times ``ChatSession(...)`` (history
validation, the statistics sum, the tool declarations measured once) plus its first cold
``estimate_tokens(pending)``. Against, on the same messages built untimed: LangChain's
``count_tokens_approximately`` (system message and ``tools=`` included) and exact tiktoken
``o200k_base`` over the same text (system prompt and tool JSON included). The load itself (JSON
parsing of the file, the same for any reader) is reported separately.

(2) *Per-send time* of a warm ``ChatSession.send`` at 10K and at 4M tokens (provider cost
subtracted, as in ``run.py``): the ratio 4M / 10K.

Ratios are medians of same-round ratios (``_timing.py``). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine import CannedProvider, _pendings
from _history import build_history, load_pool, to_langchain, to_texts
from _timing import Contender, Report, fmt_ratio, fmt_time, median_ratio, rounds
from autocompact.chat import ChatSession
from autocompact.codec import history_from_dicts
from autocompact.content import Message, json_form
from autocompact.providers.base import ChatRequest, ToolSpec
from autocompact.sessions.store import SessionStore

SYSTEM = (
    "You are an interactive coding agent. Use the tools to read, search and edit the "
    "repository; run the tests before you report; keep answers short and exact. "
) * 75


def _tool(name: str, about: str, **props: str) -> ToolSpec:
    properties = {key: {"type": "string", "description": text} for key, text in props.items()}
    return ToolSpec(
        name=name,
        description=about,
        parameters={"type": "object", "properties": properties, "required": list(props)[:1]},
    )


TOOLS = [
    _tool(
        "Read",
        "Read a file from the local filesystem. " * 6,
        file_path="Absolute path",
        offset="Line to start at",
        limit="Number of lines",
    ),
    _tool(
        "Write",
        "Write a file, replacing it. " * 6,
        file_path="Absolute path",
        content="The whole new content",
    ),
    _tool(
        "Edit",
        "Exact string replacement in a file. " * 8,
        file_path="Absolute path",
        old_string="Text to replace",
        new_string="Replacement",
        replace_all="All matches",
    ),
    _tool(
        "Bash",
        "Run a shell command with a timeout. " * 10,
        command="The command",
        timeout="Milliseconds",
        description="What it does",
    ),
    _tool(
        "Grep",
        "Search file contents with a regular expression. " * 8,
        pattern="Regex",
        path="Where",
        glob="File filter",
        output_mode="content|files|count",
    ),
    _tool("Glob", "Find files by pattern. " * 5, pattern="Glob pattern", path="Root"),
    _tool("LS", "List a directory. " * 4, path="Absolute path", ignore="Globs to skip"),
    _tool("WebFetch", "Fetch a URL and answer about it. " * 6, url="URL", prompt="Question"),
    _tool("WebSearch", "Search the web. " * 5, query="Query", allowed_domains="Domains"),
    _tool("TodoWrite", "Maintain the task list. " * 10, todos="The list as JSON"),
    _tool("Task", "Start a sub-agent for a task. " * 8, description="Short", prompt="Task"),
    _tool(
        "NotebookEdit",
        "Edit a Jupyter cell. " * 6,
        notebook_path="Path",
        cell_id="Cell",
        new_source="Source",
        cell_type="code|markdown",
        edit_mode="replace|insert",
    ),
    _tool("MultiEdit", "Several edits to one file. " * 6, file_path="Path", edits="JSON list"),
    _tool("ExitPlanMode", "Leave plan mode with a plan. " * 4, plan="The plan"),
    _tool("BashOutput", "Read a background shell's output. " * 4, bash_id="Shell id"),
    _tool("KillShell", "Stop a background shell. " * 3, shell_id="Shell id"),
]


def _langchain_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": t.as_json() | {"parameters": dict(t.parameters)}}
        for t in TOOLS
    ]


def restore_section(report: Report, tokens: int, n_rounds: int) -> dict[str, float]:
    """(1) Restore + first cold estimate against LangChain and tiktoken."""
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from _offline_tiktoken import load_o200k

    encoding = load_o200k()
    pool, source = load_pool()
    hist = build_history(pool, tokens, source)
    lc_tools = _langchain_tools()
    tool_texts = [json_form(t.as_json()) for t in TOOLS]
    pending = Message.user("Run the tests again and fix what fails.")
    provider = CannedProvider(hist.tokens)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as root:
        store = SessionStore(Path(root))
        with store.create(
            provider="bench", model="m", context_window=2_000_000, system_instruction=SYSTEM
        ) as writer:
            writer.append_messages(history_from_dicts(hist.dicts))
            sid = writer.id

        def ours(loaded: Any) -> int:
            session = ChatSession(
                provider,
                context_window=2_000_000,
                system_instruction=SYSTEM,
                tools=TOOLS,
                history=loaded.history,
            )
            return session.estimate_tokens(pending)

        def lc_prepare() -> list[Any]:
            messages = store.open(sid).history
            return [SystemMessage(content=SYSTEM), *to_langchain(messages)]

        def tk_prepare() -> list[str]:
            messages = store.open(sid).history
            return [SYSTEM, *tool_texts, *to_texts(messages)]

        contenders = [
            Contender("autocompact", ours, lambda: store.open(sid)),
            Contender(
                "langchain",
                lambda msgs: count_tokens_approximately(msgs, tools=lc_tools),
                lc_prepare,
            ),
            Contender(
                "tiktoken",
                lambda texts: sum(map(len, encoding.encode_ordinary_batch(texts))),
                tk_prepare,
            ),
            Contender("load", lambda _: store.open(sid)),
        ]
        times = rounds(contenders, n_rounds)
    ours_t = statistics.median(times["autocompact"])
    vs_lc = median_ratio(times["langchain"], times["autocompact"])
    vs_tk = median_ratio(times["tiktoken"], times["autocompact"])
    figures.update(restore_vs_langchain=vs_lc, restore_vs_tiktoken=vs_tk)
    report.heading(
        f"(1) Restore + first cold estimate, {hist.tokens:,} tokens"
        f" ({len(hist):,} messages, {source})"
    )
    report.table(
        ["contender", "median time", "autocompact is faster by"],
        [
            [
                "autocompact: ChatSession(history, system, tools) + estimate_tokens",
                fmt_time(ours_t),
                "–",
            ],
            [
                "LangChain count_tokens_approximately (system + tools)",
                fmt_time(statistics.median(times["langchain"])),
                fmt_ratio(vs_lc),
            ],
            [
                "tiktoken o200k_base (system + tools JSON + text)",
                fmt_time(statistics.median(times["tiktoken"])),
                fmt_ratio(vs_tk),
            ],
            [
                "(the file's load itself: SessionStore.open)",
                fmt_time(statistics.median(times["load"])),
                "–",
            ],
        ],
    )
    return figures


def send_section(report: Report, small: int, large: int, n_rounds: int, ops: int) -> float:
    """(2) Warm per-send time at two sizes; returns large / small."""
    pool, source = load_pool()
    pending_pool = [{"role": "user", "parts": [{"kind": "text", "text": "Run the tests."}]}]
    per: dict[int, list[float]] = {}
    for size in (small, large):
        hist = build_history(pool, size, source)
        seen = history_from_dicts(hist.dicts)
        provider = CannedProvider(hist.tokens)
        request = ChatRequest(messages=tuple(seen))

        def warm(
            s: list[Message] = seen, p: CannedProvider = provider, n: int = hist.tokens
        ) -> Any:
            session = ChatSession(
                p, context_window=100_000_000, history=s, last_prompt_token_count=n
            )
            return session, _pendings(pending_pool, ops)

        contenders = [
            Contender("warm", lambda arg: [arg[0].send(m) for m in arg[1]], warm, ops),
            Contender(
                "provider",
                lambda _, p=provider, r=request: [p.complete(r) for _ in range(ops)],
                ops=ops,
            ),  # type: ignore[arg-type]
        ]
        times = rounds(contenders, n_rounds)
        per[size] = [w - p for w, p in zip(times["warm"], times["provider"], strict=True)]
    growth = median_ratio(per[large], per[small])
    report.heading("(2) Warm per-send time")
    report.table(
        ["history", "per send"],
        [
            [f"{small:,}", fmt_time(statistics.median(per[small]))],
            [f"{large:,}", fmt_time(statistics.median(per[large]))],
        ],
    )
    report.line(f"Per-send time {large:,} / {small:,} (same rounds): {growth:.2f}")
    return growth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    report = Report(print)
    restore_tokens, large, n_rounds = (
        (100_000, 400_000, 3) if args.quick else (1_000_000, 4_000_000, 7)
    )
    figures = restore_section(report, restore_tokens, n_rounds)
    growth = send_section(report, 10_000, large, n_rounds, 50 if args.quick else 200)
    report.heading("Targets (issue 11)")
    report.table(
        ["target", "figure", "verdict"],
        [
            [
                "restore + first cold estimate ≥ 5× faster than count_tokens_approximately",
                fmt_ratio(figures["restore_vs_langchain"]),
                "met" if figures["restore_vs_langchain"] >= 5 else "NOT met",
            ],
            [
                "restore + first cold estimate ≥ 20× faster than tiktoken",
                fmt_ratio(figures["restore_vs_tiktoken"]),
                "met" if figures["restore_vs_tiktoken"] >= 20 else "NOT met",
            ],
            [
                f"per-send time {large:,} / 10,000 ≤ 1.5",
                f"{growth:.2f}",
                "met" if growth <= 1.5 else "NOT met",
            ],
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
