"""Which conversation a request belongs to. Pure.

A conversation is named by the first of these a request carries (docs/serve.md):

1. ``X-Autocompact-Conversation``: the caller names it; used as given.
2. The agent's own session id: Claude Code's ``X-Claude-Code-Session-Id`` (with
   ``X-Claude-Code-Agent-Id`` on a sub-agent's requests); Codex's
   ``session_id`` / ``session-id`` / ``conversation_id`` headers.
3. An id in the body: Anthropic ``metadata.user_id``, OpenAI ``prompt_cache_key``, the
   Responses ``conversation`` (a string or ``{"id": ...}``), OpenAI ``user``.
4. Nothing: the content itself (``content``).

Under 2–4 the conversation is also told apart by its **root**, the hash of its first message:
an agent's sub-agents share its session id but start from their own task, so each is a
conversation of its own, and two conversations of one API user (``metadata.user_id``) do not
mix. Under every signal the state found is the record whose **prefix hash** matches the
request's messages (:mod:`autocompact.serve.substitution`), so a shared first message (project
instructions) never makes two conversations share a summary. Values are hashed before they
name a store session: ids and keys are never stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autocompact.serve.wire import chain_hashes

__all__ = ["AGENT_HEADER", "CONVERSATION_HEADER", "SESSION_HEADERS", "Identity", "identify"]

CONVERSATION_HEADER = "x-autocompact-conversation"
AGENT_HEADER = "x-claude-code-agent-id"
"""Claude Code's sub-agent id, sent beside its session id on a sub-agent's requests."""
SESSION_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-claude-code-session-id", "claude-code"),
    ("session_id", "codex"),
    ("session-id", "codex"),
    ("conversation_id", "codex"),
)
"""Agent session headers, in the order they are read, with the agent they come from."""


@dataclass(frozen=True, kw_only=True)
class Identity:
    """A request's conversation.

    Attributes:
        signal: what named it (``header``, ``claude-code``, ``codex``, ``metadata.user_id``,
            ``prompt_cache_key``, ``conversation``, ``user``, ``content``).
        session_id: the store session that holds its records (hashes only).
    """

    signal: str
    session_id: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _body_id(body: Mapping[str, Any]) -> tuple[str, str] | None:
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        user_id = metadata.get("user_id")
        if isinstance(user_id, str) and user_id:
            return "metadata.user_id", user_id
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return "prompt_cache_key", key
    conversation = body.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return "conversation", conversation
    user = body.get("user")
    if isinstance(user, str) and user:
        return "user", user
    return None


def identify(
    headers: Mapping[str, str], body: Mapping[str, Any], messages: Sequence[Any], protocol: str
) -> Identity:
    """The conversation of a request (``headers`` with lower-case names).

    Args:
        headers: the request's headers.
        body: the parsed body.
        messages: the conversation's messages (after any leading system messages).
        protocol: the wire protocol's name (conversations of two protocols never mix).
    """
    explicit = headers.get(CONVERSATION_HEADER, "").strip()
    if explicit:
        return Identity(signal="header", session_id=f"serve:{protocol}:h:{_digest(explicit)}")
    root = chain_hashes(messages[:1], seed=protocol)[0] if messages else "empty"
    for name, agent in SESSION_HEADERS:
        value = headers.get(name, "").strip()
        if value and agent == "claude-code":
            # A sub-agent sends its own id beside the session's: two sub-agents given the same
            # task are two conversations (two leases), not one.
            sub = headers.get(AGENT_HEADER, "").strip()
            value = f"{value}\x00{sub}" if sub else value
        if value:
            return Identity(
                signal=agent, session_id=f"serve:{protocol}:s:{_digest(value)}:{root[:16]}"
            )
    found = _body_id(body)
    if found is not None:
        signal, value = found
        return Identity(
            signal=signal, session_id=f"serve:{protocol}:b:{_digest(value)}:{root[:16]}"
        )
    return Identity(signal="content", session_id=f"serve:{protocol}:c:{root}")
