"""Bytes on the wire: canonical hashing of messages and splicing stored bytes into a body. Pure.

A conversation's messages are hashed as a **chain**: ``h[i]`` covers messages ``0..i`` (each in
a canonical JSON form with Anthropic's moving ``cache_control`` markers left out), so the longest
stored prefix of a request is found by comparing ``h[len(prefix) - 1]`` with the stored hash, and
two conversations that share their first message (project instructions) still differ at their
first different message.

A body is rebuilt by :func:`splice_body`: the client's other fields are written back in their
order, and the message array is the stored replacement's bytes, as stored, followed by the rest
of the client's messages. The same stored bytes and the same client body give the same output
bytes every time, so the upstream's prompt cache hits on the replacement.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from autocompact.errors import ContentError

__all__ = [
    "canonical",
    "chain_hashes",
    "dump",
    "splice_body",
]

_VOLATILE_KEYS = frozenset({"cache_control"})
_PLACEHOLDER = "\x00autocompact-messages\x00"


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _not_json(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``: the standard
# library's C encoder made once (json.dumps makes one per call), without the circular check (a
# decoded request cannot be circular). The same bytes as json.dumps for every JSON value.
_c_make = getattr(json.encoder, "c_make_encoder", None)
_c_sorted: Any = (
    None
    if _c_make is None
    else _c_make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", True, False, True)
)
_MARKER = '"cache_control"'


def _sorted_json(value: Any) -> str:
    if _c_sorted is None or type(value) is str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "".join(_c_sorted(value, 0))


def canonical(message: Any) -> bytes:
    """One message as canonical JSON bytes (sorted keys, no ``cache_control``).

    Serialized once as it is; only a message whose JSON holds a ``"cache_control"`` string (a
    key, or a value exactly that) is stripped and serialized again: the same bytes either way.
    """
    try:
        text = _sorted_json(message)
        if _MARKER in text:
            text = _sorted_json(_strip(message))
    except RecursionError:
        raise ContentError(
            "a message is nested too deeply to read (arrays or objects within each other "
            "hundreds of levels down)"
        ) from None
    # A lone surrogate (a client's "\ud800" escape) hashes as its own code point: valid text
    # gives the bytes of UTF-8 either way.
    return text.encode("utf-8", "surrogatepass")


def chain_hashes(messages: Sequence[Any], *, seed: str = "") -> list[str]:
    """``h[i]``: the hash of messages ``0..i`` (hex, 32 characters)."""
    out: list[str] = []
    previous = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    for message in messages:
        digest = hashlib.sha256(previous + canonical(message)).digest()
        out.append(digest.hex()[:32])
        previous = digest
    return out


def dump(value: Any) -> bytes:
    """Compact JSON bytes (the form the proxy writes: no spaces, UTF-8 as is; a text holding a
    lone surrogate, which a client can send as a ``\\ud800`` escape and UTF-8 cannot hold, is
    written with escapes, as the client sent it)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def splice_body(
    body: dict[str, Any],
    key: str,
    stored: bytes,
    rest: Sequence[Any],
    *,
    head: Sequence[Any] = (),
) -> bytes:
    """``body`` with ``body[key]`` = ``head``, the JSON array ``stored``, then ``rest``.

    Args:
        body: the client's parsed body (its other fields are written back in order).
        key: the field of the message array (``messages`` or ``input``).
        stored: a JSON array as bytes (the stored replacement), written as is.
        rest: the client's messages that follow the replaced prefix.
        head: the client's messages before it (leading system messages), written as sent.
    """
    inner = stored.strip()
    if not (inner.startswith(b"[") and inner.endswith(b"]")):
        raise ValueError("a stored replacement must be a JSON array")
    pieces = (dump(list(head))[1:-1], inner[1:-1].strip(), dump(list(rest))[1:-1])
    parts = [p for p in pieces if p]
    array = b"[" + b",".join(parts) + b"]"
    shell = dict(body)
    shell[key] = _PLACEHOLDER
    text = dump(shell)
    marker = dump(_PLACEHOLDER)
    head, found, tail = text.partition(marker)
    if not found:  # pragma: no cover - dump() always writes the placeholder once
        raise ValueError("could not place the messages in the body")
    return head + array + tail
