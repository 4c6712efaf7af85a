"""A scripted model server on 127.0.0.1 for the proxy's tests (OpenAI chat and Anthropic).

It counts tokens its own way (bytes of the request's JSON / 3, not the engine's estimate) and
rejects a request over its window by that count with the protocol's own "too long" error. A
request whose system prompt is autocompact's summary prompt is answered with a snapshot (and
counted in ``summaries``); otherwise the reply calls the ``read`` tool when tools are declared
and the last message is not a tool result, else it says ``ok <n>``. Streams carry an event type
no SDK knows, to check that the proxy passes unknown events through. Every request's body bytes
are kept in ``received``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SNAPSHOT = (
    "<state_snapshot><overall_goal>finish the task</overall_goal><constraints>none"
    "</constraints><key_knowledge>files were read</key_knowledge><file_system_state>a.py"
    "</file_system_state><code_state>def f(): pass</code_state><errors_and_fixes>none"
    "</errors_and_fixes><recent_actions>read files</recent_actions><current_plan>1. [DONE] read"
    "</current_plan><next_step>continue</next_step></state_snapshot>"
)


def count_tokens(body: dict[str, Any]) -> int:
    """The upstream's own count: bytes of messages, system and tools as JSON, divided by 3."""
    parts = [body.get("messages"), body.get("system"), body.get("tools")]
    return len(json.dumps(parts, ensure_ascii=False).encode("utf-8", "surrogatepass")) // 3


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


@dataclass
class ScriptedUpstream:
    """The server's script and what it saw."""

    window: int = 8000
    received: list[bytes] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    summaries: int = 0
    summaries_started: int = 0
    rejected: int = 0
    fail_status: int | None = None
    drop_stream_after: int | None = None
    delay: float = 0.0
    summary_delay: float = 0.0
    stream_pause: float = 0.0
    """Seconds an Anthropic stream waits before its last event."""
    summary_reply: str = SNAPSHOT
    """What a summary request is answered with (``""``: an empty summary)."""
    url: str = ""
    bytes_per_token: int = 3
    """The Responses endpoint's count: bytes of the request's JSON per token."""
    states_window: bool = True
    """Whether a "too long" error (chat, Anthropic) states the window; the Responses one never
    does."""
    refuse: Callable[[dict[str, Any]], str | None] | None = None
    """Given a request's body (summary requests aside), the message of an error to answer it
    with, of status :attr:`refuse_status` (``None``: answered as usual)."""
    refuse_status: int = 400

    def app(self) -> Starlette:
        """The ASGI app."""
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self.count, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
            ]
        )

    async def _record(self, request: Request) -> tuple[bytes, dict[str, Any]]:
        raw = await request.body()
        self.received.append(raw)
        self.paths.append(request.url.path)
        self.queries.append(request.url.query)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        if self.delay:
            await asyncio.sleep(self.delay)
        return raw, json.loads(raw)

    def _refused(self, body: dict[str, Any], summary: bool, anthropic: bool) -> Response | None:
        """The error :attr:`refuse` answers a request with, if any."""
        message = None if summary or self.refuse is None else self.refuse(body)
        if message is None:
            return None
        error = {"type": "invalid_request_error", "message": message}
        return JSONResponse(
            {"type": "error", "error": error} if anthropic else {"error": error},
            status_code=self.refuse_status,
        )

    def _is_summary(self, body: dict[str, Any]) -> bool:
        system = body.get("system") or ""
        messages = body.get("messages") or []
        if messages and messages[0].get("role") == "system":
            system = _text(messages[0])
        return "structured state snapshot" in str(system)

    async def models(self, request: Request) -> Response:
        """A vLLM-style model list with ``max_model_len``."""
        self.paths.append(request.url.path)
        return JSONResponse(
            {"object": "list", "data": [{"id": "scripted", "max_model_len": self.window}]}
        )

    async def count(self, request: Request) -> Response:
        """Anthropic's count_tokens by this server's own count."""
        _, body = await self._record(request)
        return JSONResponse({"input_tokens": count_tokens(body)})

    async def responses(self, request: Request) -> Response:
        """OpenAI Responses, stateless: counts ``input``/``instructions``/``tools`` as bytes/3
        (:attr:`bytes_per_token`);
        a ``previous_response_id`` request is answered with the hash of its body."""
        raw, body = await self._record(request)
        if body.get("previous_response_id"):
            return JSONResponse(
                {"id": "resp_1", "object": "response", "output": [], "input_sha": _sha(raw)}
            )
        summary = "structured state snapshot" in str(body.get("instructions"))
        if (refused := self._refused(body, summary, anthropic=False)) is not None:
            return refused
        items = body.get("input") or []
        parts = [items, body.get("instructions"), body.get("tools")]
        size = len(json.dumps(parts, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        tokens = size // self.bytes_per_token
        if tokens > self.window:
            self.rejected += 1
            error = {"message": f"Your input exceeds the context window ({tokens} tokens).",
                     "type": "invalid_request_error"}  # fmt: skip
            error["code"] = "context_length_exceeded"
            return JSONResponse({"error": error}, status_code=400)
        if "structured state snapshot" in str(body.get("instructions")):
            self.summaries_started += 1
            await asyncio.sleep(self.summary_delay)
            self.summaries += 1
            text: str | None = self.summary_reply
        elif body.get("tools") and items and items[-1].get("type") != "function_call_output":
            text = None
        else:
            text = f"ok {len(items)}"
        if text is None:
            output: list[dict[str, Any]] = [
                {"type": "reasoning", "id": f"rs_{len(items)}", "summary": [],
                 "encrypted_content": f"enc-{len(items)}"},
                {"type": "function_call", "id": f"fc_{len(items)}", "call_id": f"call_{len(items)}",
                 "name": "read", "arguments": json.dumps({"path": "a.py"}), "status": "completed"},
            ]  # fmt: skip
        else:
            content = [{"type": "output_text", "text": text, "annotations": []}]
            output = [{"type": "message", "id": f"msg_{len(items)}", "role": "assistant",
                       "status": "completed", "content": content}]  # fmt: skip
        usage = {"input_tokens": tokens, "output_tokens": 3, "total_tokens": tokens + 3,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
        return JSONResponse(
            {
                "id": f"resp_{len(items)}",
                "object": "response",
                "created_at": 1,
                "model": body.get("model", "scripted"),
                "status": "completed",
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": body.get("tools", []),
                "usage": usage,
            }
        )

    async def chat(self, request: Request) -> Response:
        """OpenAI chat completions."""
        _raw, body = await self._record(request)
        if (refused := self._refused(body, self._is_summary(body), anthropic=False)) is not None:
            return refused
        if self.fail_status and not self._is_summary(body):
            return JSONResponse(
                {"error": {"message": "upstream broke", "type": "server_error"}},
                status_code=self.fail_status,
            )
        tokens = count_tokens(body)
        if tokens > self.window:
            self.rejected += 1
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your "
                f"messages resulted in {tokens} tokens."
            )
            if not self.states_window:
                message = "Input is too long for the model's context window."
            error = {"message": message, "type": "invalid_request_error"}
            error["code"] = "context_length_exceeded"
            return JSONResponse({"error": error}, status_code=400)
        messages = body.get("messages", [])
        if self._is_summary(body):
            self.summaries_started += 1
            await asyncio.sleep(self.summary_delay)
            self.summaries += 1
            reply: dict[str, Any] = {"role": "assistant", "content": self.summary_reply}
            finish = "stop"
        elif body.get("tools") and messages and messages[-1].get("role") != "tool":
            call = {"id": f"call_{len(messages)}", "type": "function"}
            call["function"] = {"name": "read", "arguments": json.dumps({"path": "a.py"})}
            reply = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            reply = {"role": "assistant", "content": f"ok {len(messages)}"}
            finish = "stop"
        usage = {"prompt_tokens": tokens, "completion_tokens": 3, "total_tokens": tokens + 3}
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": reply, "finish_reason": finish}],
                    "usage": usage,
                    "x_unknown_field": {"kept": True},
                }
            )
        return StreamingResponse(
            self._chat_stream(body, reply, finish, usage), media_type="text/event-stream"
        )

    async def _chat_stream(
        self, body: dict[str, Any], reply: dict[str, Any], finish: str, usage: dict[str, int]
    ) -> Any:
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
        base["model"] = body.get("model", "scripted")
        delta: dict[str, Any] = {"role": "assistant"}
        if reply.get("tool_calls"):
            calls = [{"index": 0, **reply["tool_calls"][0]}]
            delta["tool_calls"] = calls
        chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
        for word in str(reply.get("content") or "").split(" "):
            if word:
                d = {"content": word + " "}
                chunks.append(
                    {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                )
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        chunks.append({**base, "choices": [], "usage": usage, "x_unknown": 1})
        for n, chunk in enumerate(chunks):
            if self.drop_stream_after is not None and n >= self.drop_stream_after:
                raise RuntimeError("scripted stream drop")
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b": a comment line\n\n"
        yield b"data: [DONE]\n\n"

    async def messages(self, request: Request) -> Response:
        """Anthropic messages."""
        _raw, body = await self._record(request)
        if (refused := self._refused(body, self._is_summary(body), anthropic=True)) is not None:
            return refused
        if self.fail_status and not self._is_summary(body):
            return JSONResponse(
                {"type": "error", "error": {"type": "api_error", "message": "upstream broke"}},
                status_code=self.fail_status,
            )
        tokens = count_tokens(body)
        if tokens > self.window:
            self.rejected += 1
            error = {"type": "invalid_request_error"}
            error["message"] = f"prompt is too long: {tokens} tokens > {self.window} maximum"
            if not self.states_window:
                error["message"] = "prompt is too long"
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        messages = body.get("messages", [])
        last = messages[-1] if messages else {}
        last_is_result = isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        )
        if self._is_summary(body):
            self.summaries_started += 1
            await asyncio.sleep(self.summary_delay)
            self.summaries += 1
            content: list[dict[str, Any]] = [{"type": "text", "text": self.summary_reply}]
            stop = "end_turn"
        elif body.get("tools") and not last_is_result:
            tool = {"type": "tool_use", "id": f"toolu_{len(messages)}", "name": "read"}
            tool["input"] = {"path": "a.py"}
            content = [{"type": "text", "text": "reading"}, tool]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": f"ok {len(messages)}"}]
            stop = "end_turn"
        usage = {"input_tokens": tokens, "output_tokens": 3}
        message = {
            "id": "msg_1",
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
        return StreamingResponse(self._anthropic_stream(message), media_type="text/event-stream")

    async def _anthropic_stream(self, message: dict[str, Any]) -> Any:
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": {**message, "content": []}}),
            ("x_unknown_event", {"type": "x_unknown_event", "data": 1}),
        ]
        for i, block in enumerate(message["content"]):
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": start},
                )
            )
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
            )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        events.append(
            (
                "message_delta",
                {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 3}},
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        for n, (name, data) in enumerate(events):
            if self.drop_stream_after is not None and n >= self.drop_stream_after:
                raise RuntimeError("scripted stream drop")
            if name == "message_stop":
                await asyncio.sleep(self.stream_pause)
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tool_media_request(
    *media: dict[str, Any], after: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    """An Anthropic request whose last message holds a Read call's result: a text block and
    ``media`` (image or document blocks), then the blocks ``after`` it."""
    result = {"type": "tool_result", "tool_use_id": "c1", "content": [TEXT_BLOCK, *media]}
    return {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Check the login page."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "Read", "input": {}}],
            },
            {"role": "user", "content": [result, *after]},
        ],
    }


TEXT_BLOCK = {"type": "text", "text": "login.png"}


def image_block(data: str) -> dict[str, Any]:
    """An Anthropic base64 PNG image block."""
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
