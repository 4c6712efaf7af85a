"""The scripted model server ``real_agents.py`` points the real agents at (127.0.0.1 only).

It speaks Anthropic Messages, OpenAI Responses and Chat Completions, streamed as SSE (the
agents all stream), counts a request's tokens its own way (bytes of its messages, system and
tools as JSON / 3: not the engine's estimate) and rejects one over its window with the
protocol's own "too long" error. The script: a request whose system prompt is autocompact's
summary prompt gets a snapshot; Claude Code's first request (``subagent``) gets a call of its
``Agent`` tool (a sub-agent that reads three files, a conversation of its own under the same
session id); an agent request with a shell tool gets a call that reads the
next ``big_K.txt`` (K found from the ``cat big_K.txt`` calls the request carries) until
``turns`` files were read, then ``done``; a request without tools (aider, on either
protocol) gets a reply naming the next two files (counted by this server: a compacted request
no longer shows them), which aider adds to the chat, until ``turns`` files were named.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SNAPSHOT_MARK = "scripted-summary-of-the-agent-run"
OWN_SUMMARY_MARK = "the-client-s-own-summary"
_SUMMARY_PROMPT = "structured state snapshot"
_CAT = re.compile(r"cat (?:\./)?big_(\d+)\.txt")
_RANGE = re.compile(r"big_\d+\.txt to big_(\d+)\.txt")
_SAMPLED = (
    "thinking",
    "context_management",
    "metadata",
    "include",
    "reasoning",
    "prompt_cache_key",
    "client_metadata",
    "max_tokens",
    "temperature",
)


def _snapshot(n: int) -> str:
    return (
        f"<state_snapshot><overall_goal>{SNAPSHOT_MARK} #{n}: read the big files</overall_goal>"
        "<key_knowledge>the files hold numbered lines about a fox</key_knowledge>"
        "<recent_actions>read files with cat</recent_actions>"
        "<next_step>read the next file</next_step></state_snapshot>"
    )


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> AsyncIterator[bytes]:
    async def gen() -> AsyncIterator[bytes]:
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            yield f"{head}data: {json.dumps(data)}\n\n".encode()

    return gen()


@dataclass
class AgentUpstream:
    """The server's script and what it saw."""

    window: int
    turns: int
    workdir: str = ""
    received: list[bytes] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    tools: list[list[str]] = field(default_factory=list)
    header_names: set[str] = field(default_factory=set)
    body_keys: set[str] = field(default_factory=set)
    samples: dict[str, Any] = field(default_factory=dict)
    signed_issued: int = 0
    signed_returned: int = 0
    subagent: bool = False
    own_compactions: int = 0
    spawned: bool = False
    rejected: int = 0
    forged: int = 0
    summaries: int = 0
    issued: int = 0

    def app(self) -> Starlette:
        """The ASGI app (anything else answers 404 and is recorded)."""
        routes = [
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ]
        app = Starlette(routes=routes)
        app.add_route("/{path:path}", self.unknown, methods=["GET", "POST", "HEAD", "PUT"])
        return app

    def agent_bodies(self) -> list[bytes]:
        """The bodies of the agent's own requests (not summaries, not token counts)."""
        return [raw for raw, kind in zip(self.received, self.kinds, strict=True) if kind == "agent"]

    def summary(self) -> dict[str, Any]:
        """What the server saw, for the run's logs."""
        return {
            "requests": self.requests,
            "counts": self.counts,
            "tools": self.tools,
            "header_names": sorted(self.header_names),
            "body_keys": sorted(self.body_keys),
            "samples": self.samples,
            "signed_issued": self.signed_issued,
            "signed_returned": self.signed_returned,
            "rejected": self.rejected,
            "forged": self.forged,
            "own_compactions": self.own_compactions,
            "summaries": self.summaries,
        }

    async def _read(self, request: Request) -> tuple[bytes, dict[str, Any]]:
        raw = await request.body()
        self.requests.append(f"{request.method} {request.url.path}?{request.url.query}")
        body = json.loads(raw) if raw else {}
        self.header_names.update(k.lower() for k in request.headers)
        if isinstance(body, dict) and _SUMMARY_PROMPT not in raw.decode(errors="replace"):
            self.body_keys.update(body)
            for key in _SAMPLED:
                if key in body:
                    self.samples.setdefault(key, body[key])
            text = raw.decode(errors="replace")
            self.signed_returned += text.count('"signature"') + text.count('"encrypted_content"')
        return raw, body

    def _count(self, parts: list[Any]) -> int:
        return len(json.dumps(parts, ensure_ascii=False).encode("utf-8")) // 3

    def _admit(self, raw: bytes, kind: str, tokens: int, tools: list[str]) -> bool:
        self.received.append(raw)
        self.kinds.append(kind)
        self.counts.append(tokens)
        self.tools.append(tools)
        if tokens > self.window:
            self.rejected += 1
            return False
        return True

    def _next_file(self, raw: bytes) -> int:
        """The next file to read: one after the highest ``cat big_K.txt`` the request carries."""
        text = raw.decode("utf-8", errors="replace")
        found = [int(n) for n in _CAT.findall(text)]
        summarized = SNAPSHOT_MARK in text or OWN_SUMMARY_MARK in text
        done = max(found) if found else (self.issued if summarized else 0)
        return done + 1

    def _name_files(self) -> str:
        """aider's script: name the next two files (it adds them to the chat), then done."""
        wanted = list(range(self.issued + 1, min(self.issued + 2, self.turns) + 1))
        self.issued += len(wanted)
        if not wanted:
            return "done"
        return "I need to see " + " and ".join(f"big_{k}.txt" for k in wanted) + " next."

    def _limit(self, raw: bytes) -> int:
        """The last file of this conversation's task: ``big_A.txt to big_B.txt`` in the request
        (a sub-agent's prompt names fewer), at most ``turns``."""
        found = [int(n) for n in _RANGE.findall(raw.decode("utf-8", errors="replace"))]
        return min(max(found), self.turns) if found else self.turns

    # -- routes --------------------------------------------------------------------------------

    async def unknown(self, request: Request) -> Response:
        """Recorded, 404."""
        self.requests.append(f"{request.method} {request.url.path} (unknown)")
        return JSONResponse({"error": {"message": "not found"}}, status_code=404)

    async def models(self, request: Request) -> Response:
        """A model list with a vLLM-style ``max_model_len``."""
        self.requests.append(f"GET {request.url.path}")
        model = {"id": "scripted", "object": "model", "max_model_len": self.window}
        return JSONResponse({"object": "list", "data": [model], "models": []})

    async def count_tokens(self, request: Request) -> Response:
        """Anthropic's token count, by this server's count."""
        _, body = await self._read(request)
        tokens = self._count([body.get("messages"), body.get("system"), body.get("tools")])
        return JSONResponse({"input_tokens": tokens})

    async def messages(self, request: Request) -> Response:
        """Anthropic Messages (streamed when asked)."""
        raw, body = await self._read(request)
        tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]
        tokens = self._count([body.get("messages"), body.get("system"), tools and body["tools"]])
        summary = _SUMMARY_PROMPT in json.dumps(body.get("system"))
        if forged := _bad_thinking(body.get("messages") or []):
            self.forged += 1
            error = {"type": "invalid_request_error", "message": forged}
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        if not self._admit(raw, "summary" if summary else "agent", tokens, tools):
            message = f"prompt is too long: {tokens} tokens > {self.window} maximum"
            error = {"type": "invalid_request_error", "message": message}
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        content: list[dict[str, Any]]
        if summary:
            self.summaries += 1
            content, stop = [{"type": "text", "text": _snapshot(self.summaries)}], "end_turn"
        elif self.subagent and "Agent" in tools and not self.spawned and b"SUBTASK" not in raw:
            self.spawned = True
            sub = min(3, self.turns)
            call = {
                "type": "tool_use",
                "id": f"toolu_{len(self.received)}",
                "name": "Agent",
                "input": {
                    "description": "Read the first files",
                    "prompt": f"SUBTASK: read big_1.txt to big_{sub}.txt with cat, then say done.",
                    "subagent_type": "general-purpose",
                },
            }
            content, stop = [{"type": "text", "text": "Delegating."}, call], "tool_use"
        elif "Bash" in tools and (k := self._next_file(raw)) <= self._limit(raw):
            self.issued = k
            call = {
                "type": "tool_use",
                "id": f"toolu_{len(self.received)}",
                "name": "Bash",
                "input": {"command": f"cat big_{k}.txt", "description": f"Read big_{k}.txt"},
            }
            content, stop = [{"type": "text", "text": f"Reading big_{k}.txt."}, call], "tool_use"
            if (
                isinstance(body.get("thinking"), dict)
                and body["thinking"].get("type") != "disabled"
            ):
                self.signed_issued += 1
                thought = f"The user wants big_{k}.txt (request {len(self.received)})."
                content.insert(
                    0, {"type": "thinking", "thinking": thought, "signature": _sign(thought)}
                )
        else:
            text = self._name_files() if not tools else "done"  # no tools: aider
            content, stop = [{"type": "text", "text": text}], "end_turn"
        usage = {
            "input_tokens": tokens,
            "output_tokens": 5,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        message = {
            "id": f"msg_{len(self.received)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(message)
        events: list[tuple[str | None, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            ),
        ]
        for i, block in enumerate(content):
            extra: list[tuple[str | None, dict[str, Any]]] = []
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            elif block["type"] == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                delta = {"type": "thinking_delta", "thinking": block["thinking"]}
                sig = {"type": "signature_delta", "signature": block["signature"]}
                extra = [
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": sig},
                    )
                ]
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                ),
                *extra,
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "usage": {"output_tokens": 5},
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return StreamingResponse(_sse(events), media_type="text/event-stream")

    async def responses(self, request: Request) -> Response:
        """OpenAI Responses, streamed (Codex)."""
        raw, body = await self._read(request)
        tools = [str(t.get("name") or t.get("type")) for t in body.get("tools") or []]
        items = body.get("input") or []
        tokens = self._count([items, body.get("instructions"), body.get("tools")])
        summary = _SUMMARY_PROMPT in str(body.get("instructions"))
        if forged := _bad_reasoning(items):
            self.forged += 1
            error = {
                "message": forged,
                "type": "invalid_request_error",
                "code": "invalid_encrypted_content",
            }
            return JSONResponse({"error": error}, status_code=400)
        if not self._admit(raw, "summary" if summary else "agent", tokens, tools):
            error = {
                "message": f"Your input exceeds the context window ({tokens} tokens).",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
            return JSONResponse({"error": error}, status_code=400)
        n = len(self.received)
        output: list[dict[str, Any]]
        k = self._next_file(raw)
        if summary:
            self.summaries += 1
            output = [_out_text(n, _snapshot(self.summaries))]
        elif not tools and "CONTEXT CHECKPOINT COMPACTION" in raw.decode(errors="replace"):
            self.own_compactions += 1  # Codex's own compaction request
            output = [_out_text(n, f"{OWN_SUMMARY_MARK}: big_1.txt .. big_{self.issued}.txt read")]
        elif k <= self.turns and (call := _codex_call(tools, k)) is not None:
            self.issued = k
            name, args = call
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{n}",
                    "call_id": f"call_{n}",
                    "name": name,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            ]
            if "reasoning.encrypted_content" in (body.get("include") or []):
                self.signed_issued += 1
                output.insert(
                    0,
                    {
                        "type": "reasoning",
                        "id": f"rs_{n}",
                        "summary": [],
                        "encrypted_content": _sign(f"rs_{n}"),
                    },
                )
        else:
            output = [_out_text(n, "done")]
        usage = {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + 5,
        }
        response = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model", "scripted"),
            "status": "completed",
            "output": output,
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(response)
        events: list[tuple[str | None, dict[str, Any]]] = [
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {**response, "status": "in_progress", "output": []},
                },
            ),
        ]
        for i, item in enumerate(output):
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": i, "item": item},
                )
            )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": i, "item": item},
                )
            )
        events.append(("response.completed", {"type": "response.completed", "response": response}))
        return StreamingResponse(_sse(events), media_type="text/event-stream")

    async def chat(self, request: Request) -> Response:
        """OpenAI Chat Completions, streamed when asked (aider)."""
        raw, body = await self._read(request)
        messages = body.get("messages") or []
        tools = [str((t.get("function") or {}).get("name")) for t in body.get("tools") or []]
        tokens = self._count([messages, None, body.get("tools")])
        first = messages[0] if messages else {}
        summary = _SUMMARY_PROMPT in json.dumps(first.get("content"))
        if not self._admit(raw, "summary" if summary else "agent", tokens, tools):
            message = (
                f"This model's maximum context length is {self.window} tokens. However, "
                f"your messages resulted in {tokens} tokens."
            )
            error = {
                "message": message,
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
            return JSONResponse({"error": error}, status_code=400)
        if summary:
            self.summaries += 1
            text = _snapshot(self.summaries)
        else:
            text = self._name_files()
        n = len(self.received)
        usage = {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}
        base = {
            "id": f"chatcmpl-{n}",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
        }
        if not body.get("stream"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
            return JSONResponse(
                {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
        chunk = {**base, "object": "chat.completion.chunk"}
        events: list[tuple[str | None, dict[str, Any]]] = [
            (
                None,
                {
                    **chunk,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": text},
                            "finish_reason": None,
                        }
                    ],
                },
            ),
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            (None, {**chunk, "choices": [], "usage": usage}),
        ]

        async def gen() -> AsyncIterator[bytes]:
            async for part in _sse(events):
                yield part
            yield b"data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")


def _sign(text: str) -> str:
    """This server's signature of a thinking text or a reasoning item id."""
    return hashlib.sha256(b"scripted-secret" + text.encode("utf-8")).hexdigest()


def _bad_thinking(messages: list[Any]) -> str:
    """Why a thinking block is not one this server signed ("" when all are)."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            thinking = isinstance(block, dict) and block.get("type") == "thinking"
            if thinking and block.get("signature") != _sign(str(block.get("thinking"))):
                return "messages: Invalid `signature` in `thinking` block"
    return ""


def _bad_reasoning(items: list[Any]) -> str:
    """Why a reasoning item's encrypted content is not this server's ("" when all are)."""
    for item in items:
        reasoning = isinstance(item, dict) and item.get("type") == "reasoning"
        if reasoning and item.get("encrypted_content") != _sign(str(item.get("id"))):
            return "The encrypted content for a reasoning item could not be verified."
    return ""


def _out_text(n: int, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{n}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _codex_call(tools: list[str], k: int) -> tuple[str, dict[str, Any]] | None:
    """Codex's shell tool, by the name this version declares."""
    command = f"cat big_{k}.txt"
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell" in tools:
        return "shell", {"command": ["bash", "-lc", command]}
    return None
