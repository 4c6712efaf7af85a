"""Checks made before a message is sent, so nothing fails after the model was paid (issue 27).

A turn is stored after the model replied. What can make that write fail is checked here first,
from the message alone (pure functions, no I/O):

- a value JSON cannot hold (a set, a datetime, bytes, an object) in a tool call's arguments,
  a tool result or an opaque payload: :func:`json_problem` names the part, the field and the
  path to the value (``ContentError``);
- a message that alone is over the store's per-turn limit (16 MB unless told otherwise):
  :func:`check_before_send` (``SessionStoreError``), measured on the very JSON the store writes.

What can only fail after the reply (the reply itself pushing the turn over the limit, the store
going down) keeps the reply: :func:`unsaved_reply` makes the error that carries it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autocompact.codec import history_to_dicts
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, OpaquePart
from autocompact.errors import ContentError, SessionStoreError, described
from autocompact.textsafe import dumps

__all__ = ["check_before_send", "json_problem", "store_turn_limit", "unsaved_reply"]

_MAX_WALK_DEPTH = 1_000  # deeper values were refused when the part was built (content.py)


def json_problem(value: object, path: str = "") -> str | None:
    """Where ``value`` holds something JSON cannot hold, as ``"path: type"``, or ``None``.

    JSON holds ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists and tuples of JSON,
    and mappings with ``str`` keys of JSON. Iterative (a deep value cannot exhaust the stack).
    """
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{where or 'the value'}: {item!r} (JSON has no NaN or infinity)"
            continue
        if depth > _MAX_WALK_DEPTH:
            return f"{where or 'the value'}: nested deeper than {_MAX_WALK_DEPTH} levels"
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    return (
                        f"{where or 'the value'}: a key of type {type(key).__name__} ({key!r:.40})"
                    )
                stack.append((child, f"{where}[{key!r:.40}]", depth + 1))
            continue
        if isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
            continue
        return f"{where or 'the value'}: a {type(item).__name__} ({item!r:.40})"
    return None


def _check_parts(message: Message) -> None:
    for index, part in enumerate(message.parts):
        field: str
        value: Any
        match part:
            case FunctionCallPart():
                field, value = "arguments", part.arguments
            case FunctionResponsePart():
                field, value = "response", part.response
            case OpaquePart():
                field, value = "payload", part.payload
            case _:
                continue
        problem = json_problem(value, field)
        if problem is not None:
            raise ContentError(
                f"part {index} ({part.kind} {getattr(part, 'name', '')!r}) holds a value JSON "
                f"cannot hold, at {problem}; convert it (a set to a list, a datetime to an ISO "
                "string) before sending — nothing was sent"
            )


def store_turn_limit(store: object) -> int | None:
    """The per-turn byte limit of a store (an asyncio wrapper's inner store's), if it has one."""
    for candidate in (store, getattr(store, "store", None)):
        limit = getattr(candidate, "max_turn_bytes", None)
        if isinstance(limit, int) and not isinstance(limit, bool):
            return limit
    return None


def _where(binding: object | None) -> tuple[str, str | None]:
    """``(the store's address, the session id)`` of a chat's store binding (``("", None)``)."""
    store = getattr(binding, "store", None)
    address = getattr(store, "address", None)
    session_id = getattr(binding, "session_id", None)
    return (
        address if isinstance(address, str) else "",
        session_id if isinstance(session_id, str) else None,
    )


def check_before_send(message: Message, binding: object | None = None) -> None:
    """Refuse, before the send, a message whose turn could not be stored.

    Args:
        message: the message about to be sent.
        binding: the chat's store binding (``.store``, ``.session_id``), or ``None``.

    Raises:
        ContentError: a part holds a value JSON cannot hold (named with its path).
        SessionStoreError: the message alone is over the store's per-turn limit as stored JSON.
    """
    _check_parts(message)
    max_turn_bytes = store_turn_limit(getattr(binding, "store", None))
    if max_turn_bytes is None:
        return
    address, session_id = _where(binding)
    size = len(dumps(history_to_dicts([message])).encode("utf-8"))
    if size > max_turn_bytes:
        raise SessionStoreError(
            f"the message is {_size(size)} as stored, over this store's limit of "
            f"{_size(max_turn_bytes)} per turn; nothing was sent — shorten the tool output "
            "or attachment, or open the store with a larger max_turn_bytes",
            store=address,
            session_id=session_id,
        )


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def unsaved_reply(exc: BaseException, reply: object, binding: object | None) -> SessionStoreError:
    """The error for a turn the model answered but the store did not take: it carries the reply
    (``.reply``, a :class:`~autocompact.providers.base.Completion`) and says how to recover it."""
    address, session_id = _where(binding)
    cause = str(exc) if isinstance(exc, SessionStoreError) else described(exc)
    return SessionStoreError(
        f"{cause} — the model's reply was not saved and the session is as before this turn; "
        "the reply is kept in this error's .reply (reply.message), so nothing is lost: save it "
        "with store.append_turn(session_id, turn_id, [message, reply.message]) or send the "
        "message again once the store takes it",
        store=address,
        session_id=session_id,
        reply=reply,
    )
