"""LangChain messages from chat models with built-in web search, block for block as the installed
langchain-openai (Responses API, ``output_version`` "responses/v1" and "v1") and
langchain-anthropic (web search and code execution server tools) build them from the API's
replies. ``test_langchain_blocks_real.py`` checks each shape against those packages' own parsers;
the other tests need only langchain-core.

Each builder takes the turn ``i`` (ids and text differ per turn) and ``size``: how many
characters of encrypted content the search carries (what makes a conversation grow).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage


def secret(i: int, size: int) -> str:
    """Encrypted content as the APIs send it (opaque base64-like text)."""
    return f"gAAAAB{i:04d}" + "Qk9PTXRvb2xz" * (size // 12)


def url(i: int) -> str:
    """The page a search of turn ``i`` found."""
    return f"https://example.org/release-{i}"


def openai_search(i: int, size: int = 100) -> list[dict[str, Any]]:
    """ChatOpenAI (Responses API, responses/v1): an encrypted reasoning item, the web search
    call, the answer text with its url_citation."""
    text = f"Version {i} was released on day {i} [1]."
    return [
        {
            "id": f"rs_{i}",
            "summary": [{"text": f"Searching release {i}.", "type": "summary_text"}],
            "type": "reasoning",
            "encrypted_content": secret(i, size),
        },
        {
            "id": f"ws_{i}",
            "action": {
                "type": "search",
                "query": f"autocompact release {i}",
                "sources": [{"type": "url", "url": url(i)}],
            },
            "status": "completed",
            "type": "web_search_call",
        },
        cited_text(i, text, "url_citation"),
    ]


def cited_text(i: int, text: str, kind: str) -> dict[str, Any]:
    """A text block citing release ``i`` (``kind``: the Responses API's ``url_citation``, or
    LangChain's standard ``citation``)."""
    citation = {"end_index": len(text), "start_index": 0, "title": f"Release {i}", "type": kind}
    return {"type": "text", "text": text, "annotations": [{**citation, "url": url(i)}],
            "id": f"msg_{i}"}  # fmt: skip


def openai_function_call(i: int) -> dict[str, Any]:
    """ChatOpenAI (Responses API, responses/v1): a function call item (it mirrors a tool call)."""
    return {
        "arguments": json.dumps({"path": f"notes/{i}.md", "size": 40}),
        "call_id": f"call_{i}",
        "name": "read_file",
        "type": "function_call",
        "id": f"fc_{i}",
        "status": "completed",
    }


def openai_v1_search(i: int, size: int = 100) -> list[dict[str, Any]]:
    """The same reply with ``output_version="v1"`` (LangChain's standard blocks)."""
    text = f"Version {i} was released on day {i} [1]."
    return [
        {
            "type": "reasoning",
            "id": f"rs_{i}",
            "reasoning": f"Searching release {i}.",
            "encrypted_content": secret(i, size),
        },
        {
            "type": "server_tool_call",
            "name": "web_search",
            "args": {"type": "search", "query": f"autocompact release {i}"},
            "id": f"ws_{i}",
        },
        {
            "type": "server_tool_result",
            "tool_call_id": f"ws_{i}",
            "output": {"sources": [{"type": "url", "url": url(i)}]},
            "status": "success",
        },
        cited_text(i, text, "citation"),
    ]


def openai_v1_tool_call(i: int) -> dict[str, Any]:
    """A v1 ``tool_call`` block with the Responses item's id in ``extras``."""
    return {
        "type": "tool_call",
        "name": "read_file",
        "args": {"path": f"notes/{i}.md", "size": 40},
        "id": f"call_{i}",
        "extras": {"item_id": f"fc_{i}", "status": "completed"},
    }


def anthropic_search(i: int, size: int = 100) -> list[dict[str, Any]]:
    """ChatAnthropic with the web search server tool: the server tool use, its result (with
    encrypted page content), the answer text with its citation."""
    return [
        {"text": f"Searching release {i}.", "type": "text"},
        {
            "id": f"srvtoolu_{i}",
            "input": {"query": f"autocompact release {i}"},
            "name": "web_search",
            "type": "server_tool_use",
        },
        {
            "content": [
                {
                    "encrypted_content": secret(i, size),
                    "page_age": f"{i} days ago",
                    "title": f"Release {i}",
                    "type": "web_search_result",
                    "url": url(i),
                }
            ],
            "tool_use_id": f"srvtoolu_{i}",
            "type": "web_search_tool_result",
        },
        {
            "citations": [
                {
                    "cited_text": f"Version {i} is out",
                    "encrypted_index": f"Eo{i}",
                    "title": f"Release {i}",
                    "type": "web_search_result_location",
                    "url": url(i),
                }
            ],
            "text": f"Version {i} was released on day {i}.",
            "type": "text",
        },
    ]


def anthropic_tool_use(i: int) -> dict[str, Any]:
    """ChatAnthropic's tool_use block (it mirrors the tool call)."""
    return {
        "id": f"toolu_{i}",
        "input": {"path": f"notes/{i}.md", "size": 40},
        "name": "read_file",
        "type": "tool_use",
        "toolset_name": None,
    }


def anthropic_code_execution(i: int) -> list[dict[str, Any]]:
    """ChatAnthropic with the code execution server tool: its use and its result."""
    return [
        {
            "id": f"srvtoolu_c{i}",
            "input": {"code": f"print({i} * 2)"},
            "name": "code_execution",
            "type": "server_tool_use",
        },
        {
            "content": {
                "content": [],
                "return_code": 0,
                "stderr": "",
                "stdout": f"{i * 2}\n",
                "type": "code_execution_result",
            },
            "tool_use_id": f"srvtoolu_c{i}",
            "type": "code_execution_tool_result",
        },
    ]


def anthropic_v1_search(i: int, size: int = 100) -> list[dict[str, Any]]:
    """The Anthropic reply with ``output_version="v1"``."""
    return [
        {"type": "text", "text": f"Searching release {i}."},
        {
            "type": "server_tool_call",
            "name": "web_search",
            "args": {"query": f"autocompact release {i}"},
            "id": f"srvtoolu_{i}",
        },
        {
            "type": "server_tool_result",
            "tool_call_id": f"srvtoolu_{i}",
            "status": "success",
            "extras": {"block_type": "web_search_tool_result"},
            "output": [
                {
                    "encrypted_content": secret(i, size),
                    "page_age": f"{i} days ago",
                    "title": f"Release {i}",
                    "type": "web_search_result",
                    "url": url(i),
                }
            ],
        },
        {
            "type": "text",
            "text": f"Version {i} was released on day {i}.",
            "annotations": [
                {
                    "type": "citation",
                    "cited_text": f"Version {i} is out",
                    "url": url(i),
                    "title": f"Release {i}",
                    "extras": {"encrypted_index": f"Eo{i}"},
                }
            ],
        },
    ]


CACHED_TEXT = {"type": "text", "text": "Use the notes.", "cache_control": {"type": "ephemeral"}}
"""A text block with Anthropic prompt caching set on it."""


def call(i: int, call_id: str) -> dict[str, Any]:
    """The tool call the blocks above mirror."""
    args = {"path": f"notes/{i}.md", "size": 40}
    return {"name": "read_file", "args": args, "id": call_id, "type": "tool_call"}


SHAPES = ("openai", "openai-v1", "anthropic", "anthropic-v1")


def answer(shape: str, i: int, size: int = 100) -> AIMessage:
    """A final answer after a web search, in each provider's shape."""
    blocks = {
        "openai": openai_search,
        "openai-v1": openai_v1_search,
        "anthropic": anthropic_search,
        "anthropic-v1": anthropic_v1_search,
    }[shape](i, size)
    if shape == "anthropic":
        blocks = [*blocks, *anthropic_code_execution(i)]
    provider = "anthropic" if shape.startswith("anthropic") else "openai"
    return AIMessage(content=blocks, response_metadata={"model_provider": provider})


def searching_call(shape: str, i: int, size: int = 100) -> AIMessage:
    """A web search followed by a call of the read_file tool, in each provider's shape."""
    ids = {"openai": f"call_{i}", "openai-v1": f"call_{i}", "anthropic": f"toolu_{i}"}
    call_id = ids.get(shape, f"toolu_{i}")
    if shape == "openai":
        blocks = [*openai_search(i, size)[:2], openai_function_call(i)]
    elif shape == "openai-v1":
        blocks = [*openai_v1_search(i, size)[:3], openai_v1_tool_call(i)]
    elif shape == "anthropic":
        blocks = [*anthropic_search(i, size)[:3], anthropic_tool_use(i)]
    else:
        mirror = {**call(i, call_id), "extras": {"toolset_name": None}}
        del mirror["type"]
        blocks = [*anthropic_v1_search(i, size)[:3], {"type": "tool_call", **mirror}]
    provider = "anthropic" if shape.startswith("anthropic") else "openai"
    return AIMessage(
        content=blocks,
        tool_calls=[call(i, call_id)],  # type: ignore[list-item]
        response_metadata={"model_provider": provider},
    )
