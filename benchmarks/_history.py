"""Histories for the benchmarks: real sessions when present, generated ones otherwise.

Every history is kept in the codec's neutral dict form (``autocompact.codec``), so each
benchmark can build *fresh* :class:`~autocompact.content.Message` objects (whose cached character
statistics have never been computed) as often as it needs, outside its timed region.

Real messages come from ``../shared/data/claude-code-sessions/`` (Claude Code JSONL, Anthropic
message blocks): ``text`` → text, ``thinking`` → thinking, ``tool_use`` → function call,
``tool_result`` → function response, ``image`` → image. The pool is repeated, in order, until a
history reaches the token size asked for (by the engine's own estimate). Without the data folder
a deterministic generator writes coding-agent turns of the same shape.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from autocompact.codec import history_from_dicts
from autocompact.content import Message
from autocompact.estimation import estimate_content_tokens

__all__ = [
    "DATA_DIR",
    "History",
    "build_history",
    "fresh_messages",
    "load_pool",
    "to_langchain",
    "to_texts",
]


def _data_dir() -> Path:
    """The recorded sessions: ``$AUTOCOMPACT_SESSIONS_DIR``, else ``shared/`` beside the clone
    (or beside the worktree's parent, for a worktree under ``wt/``)."""
    given = os.environ.get("AUTOCOMPACT_SESSIONS_DIR")
    if given:
        return Path(given)
    here = Path(__file__).resolve().parents[1]
    candidates = [p / "shared" / "data" / "claude-code-sessions" for p in here.parents[:2]]
    return next((c for c in candidates if c.is_dir()), candidates[0])


DATA_DIR = _data_dir()

Dict = dict[str, Any]


class History:
    """A history of a target size in neutral dict form, with its measured estimate."""

    def __init__(self, dicts: list[Dict], tokens: int, source: str) -> None:
        self.dicts = dicts
        self.tokens = tokens
        self.source = source

    def __len__(self) -> int:
        return len(self.dicts)


def fresh_messages(dicts: Sequence[Dict]) -> list[Message]:
    """New message objects for ``dicts`` (``history_from_dicts``, which measures each message as
    it builds it: time a build with the estimate that follows it, or that work is left out)."""
    return history_from_dicts(dicts)


# --- real sessions -------------------------------------------------------------------------


def _session_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.rglob("*.jsonl.gz"))


def _block_parts(role: str, content: object) -> list[Dict]:
    if isinstance(content, str):
        return [{"kind": "text", "text": content}] if content else []
    parts: list[Dict] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            parts.append({"kind": "text", "text": block["text"]})
        elif kind == "thinking":
            parts.append(
                {
                    "kind": "thinking",
                    "text": block.get("thinking", ""),
                    "signature": block.get("signature"),
                    "redacted": False,
                }
            )
        elif kind == "tool_use":
            parts.append(
                {
                    "kind": "function_call",
                    "id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "arguments": block.get("input") or {},
                }
            )
        elif kind == "tool_result":
            parts.append(
                {
                    "kind": "function_response",
                    "id": block.get("tool_use_id", ""),
                    "name": "tool",
                    "response": block.get("content", ""),
                    "is_error": bool(block.get("is_error", False)),
                }
            )
        elif kind == "image":
            source = block.get("source") or {}
            parts.append(
                {
                    "kind": "image",
                    "media_type": source.get("media_type", "image/png"),
                    "data": source.get("data"),
                    "url": None,
                }
            )
    return parts


def _read_session(path: Path) -> Iterator[Dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("type") not in ("user", "assistant"):
                continue
            message = entry.get("message") or {}
            role = "model" if message.get("role") == "assistant" else "user"
            parts = _block_parts(role, message.get("content"))
            if parts:
                yield {"role": role, "parts": parts}


def _real_pool(data_dir: Path) -> list[Dict]:
    pool: list[Dict] = []
    for path in _session_files(data_dir):
        pool.extend(_read_session(path))
    return pool


# --- generated sessions --------------------------------------------------------------------

_VOCABULARY = (
    "the function returns a value when the cache is empty so we read the file again and "
    "check each test before the refactor of module parser config handler request response"
)
_WORDS = _VOCABULARY.split()


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _code(rng: random.Random, lines: int) -> str:
    out = []
    for i in range(lines):
        name = rng.choice(_WORDS)
        out.append(f"{i + 1:>5}\t    {name}_{i} = compute({name!r}, limit={rng.randint(1, 999)})")
    return "\n".join(out)


def _synthetic_pool(turns: int = 400, seed: int = 0) -> list[Dict]:
    rng = random.Random(seed)
    pool: list[Dict] = []
    for turn in range(turns):
        if turn % 10 == 0:
            pool.append({"role": "user", "parts": [{"kind": "text", "text": _prose(rng, 40)}]})
        call_id = f"toolu_{turn:05d}"
        path = f"src/pkg/{rng.choice(_WORDS)}_{turn}.py"
        pool.append(
            {
                "role": "model",
                "parts": [
                    {"kind": "text", "text": _prose(rng, rng.randint(10, 60))},
                    {
                        "kind": "function_call",
                        "id": call_id,
                        "name": "Read",
                        "arguments": {"file_path": path, "limit": 200},
                    },
                ],
            }
        )
        pool.append(
            {
                "role": "user",
                "parts": [
                    {
                        "kind": "function_response",
                        "id": call_id,
                        "name": "Read",
                        "response": _code(rng, rng.randint(20, 160)),
                        "is_error": False,
                    },
                ],
            }
        )
    pool.append({"role": "model", "parts": [{"kind": "text", "text": _prose(rng, 30)}]})
    return pool


def load_pool(data_dir: Path = DATA_DIR) -> tuple[list[Dict], str]:
    """The message pool and a description of where it came from."""
    if data_dir.is_dir():
        pool = _real_pool(data_dir)
        if pool:
            files = len(_session_files(data_dir))
            return pool, f"real Claude Code sessions ({files} files, {len(pool)} messages)"
    pool = _synthetic_pool()
    return pool, f"generated coding-agent turns ({len(pool)} messages; shared data absent)"


def build_history(pool: Sequence[Dict], target_tokens: int, source: str) -> History:
    """Repeat the pool's messages in order until the estimate reaches ``target_tokens``.

    The history starts at a plain user turn, chosen so that its messages are about as large on
    average as the pool's (a 10K-token history of a few huge tool outputs would be atypical).
    Repeated messages are distinct dicts (shallow copies), so fresh objects built from them are
    distinct too. The history ends on a model message calling no tool, as a history does
    between sends.
    """
    sizes = [estimate_content_tokens(fresh_messages([d])) for d in pool]
    typical = target_tokens / (sum(sizes) / len(sizes))
    starts = [
        i
        for i, d in enumerate(pool)
        if d["role"] == "user" and all(p["kind"] != "function_response" for p in d["parts"])
    ] or [0]
    best: tuple[float, list[Dict], int] | None = None
    for start in starts:
        dicts, total = _take(pool, sizes, start, target_tokens)
        miss = abs(len(dicts) - typical)
        if best is None or miss < best[0]:
            best = (miss, dicts, total)
    assert best is not None
    return History(best[1], best[2], source)


def _take(
    pool: Sequence[Dict], sizes: Sequence[int], start: int, target_tokens: int
) -> tuple[list[Dict], int]:
    dicts: list[Dict] = []
    total = 0
    i = start
    # End on a model message that calls no tool: a history between sends (pending calls
    # would have to be answered by the next message, and the sends here are typed messages).
    while total < target_tokens or not _between_sends(dicts[-1]):
        item = pool[i % len(pool)]
        dicts.append({"role": item["role"], "parts": [dict(p) for p in item["parts"]]})
        total += sizes[i % len(pool)]
        i += 1
    return dicts, total


def _between_sends(message: Dict) -> bool:
    return message["role"] == "model" and all(
        p["kind"] != "function_call" for p in message["parts"]
    )


# --- what the competitors measure ----------------------------------------------------------


def to_langchain(messages: Sequence[Message]) -> list[Any]:
    """The same messages as LangChain messages, in the Anthropic shape the sessions came in.

    Model turns hold text / thinking / ``tool_use`` content blocks plus ``tool_calls``;
    tool results become ``ToolMessage`` objects whose content is the original string or block
    list; images become ``image_url`` blocks (LangChain counts those at a fixed size).
    """
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for message in messages:
        blocks: list[Any] = []
        calls: list[Dict] = []
        for part in message.parts:
            if part.kind == "text":
                blocks.append({"type": "text", "text": part.text})
            elif part.kind == "thinking":
                blocks.append({"type": "thinking", "thinking": part.text})
            elif part.kind == "function_call":
                args = dict(part.arguments)
                blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": args})
                calls.append({"name": part.name, "args": args, "id": part.id})
            elif part.kind == "function_response":
                response = part.response
                content = response if isinstance(response, str | list) else json.dumps(response)
                out.append(ToolMessage(content=content, tool_call_id=part.id))
            else:
                blocks.append({"type": "image_url", "image_url": {"url": "data:,"}})
        if message.role == "model":
            out.append(AIMessage(content=blocks, tool_calls=calls))
        elif blocks:
            out.append(HumanMessage(content=blocks))
    return out


def to_texts(messages: Sequence[Message]) -> list[str]:
    """The text an exact tokenizer would encode: text and thinking, and each call's JSON."""
    from autocompact.content import json_form

    texts: list[str] = []
    for message in messages:
        for part in message.parts:
            if part.kind in ("text", "thinking"):
                texts.append(part.text)
            elif part.kind == "function_call":
                texts.append(json_form({"name": part.name, "args": part.arguments}))
            elif part.kind == "function_response":
                texts.append(json_form({"name": part.name, "response": part.response}))
    return texts
