"""The scripted fake provider behind ``autocompact chat --provider fake`` (a testing aid).

``AUTOCOMPACT_FAKE_SCRIPT`` names a JSON file of replies queued in order (see
:func:`load_fake_script`); a reply may also stream part of its text and then raise
:class:`KeyboardInterrupt`, as Ctrl-C would, so tests can cancel a turn mid-stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from autocompact import jsonsafe
from autocompact.content import Usage
from autocompact.errors import (
    ConfigError,
    ContentError,
    ContextOverflowError,
    ProviderError,
    ProviderTimeoutError,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    StreamDone,
    StreamEvent,
    TextDelta,
)
from autocompact.providers.fake import FakeProvider, FakeReply

__all__ = ["ScriptedFake", "load_fake_script"]

_INTERRUPT = "\x00interrupt\x00"


class ScriptedFake(FakeProvider):
    """The fake provider, plus replies that raise KeyboardInterrupt part-way through a stream
    (or, for a request that is not streamed, such as a summary, instead of the reply)."""

    def complete(self, request: ChatRequest) -> Completion:
        """Answer from the script; an ``interrupt`` reply raises KeyboardInterrupt instead."""
        completion = super().complete(request)
        if _INTERRUPT in completion.text:
            raise KeyboardInterrupt
        return completion

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Stream the scripted reply; an ``interrupt`` reply stops with KeyboardInterrupt."""
        for event in super().stream(request):
            if isinstance(event, TextDelta) and _INTERRUPT in event.text:
                before = event.text.split(_INTERRUPT, 1)[0]
                if before:
                    yield TextDelta(text=before)
                raise KeyboardInterrupt
            if isinstance(event, StreamDone) and _INTERRUPT in event.completion.text:
                raise KeyboardInterrupt
            yield event


_ERRORS: dict[str, Callable[[], ProviderError]] = {
    "provider": lambda: ProviderError("scripted failure", provider="fake", model="fake-model"),
    "timeout": lambda: ProviderTimeoutError("scripted timeout", provider="fake"),
    "too_long": lambda: ContextOverflowError("prompt is too long (scripted)", provider="fake"),
}


_PURPOSES = (None, "chat", "side_query")


def load_fake_script(path: Path) -> list[tuple[FakeReply, Any]]:
    """Replies for ``--provider fake`` from a JSON file (a testing aid).

    The file holds a list (or ``{"replies": [...]}``); each item is a reply text or an object::

        {"text": "...",             # the reply
         "purpose": "chat",         # or "side_query"; omitted: the next request of any kind
         "prompt_tokens": 90000,    # reported usage (omitted: the fake's own estimate)
         "output_tokens": 50,
         "finish_reason": "length", # or "stop" (default)
         "error": "provider",       # or "timeout", "too_long": raise instead of replying
         "interrupt": true}         # stream the text, then raise KeyboardInterrupt (Ctrl-C)

    Raises:
        ConfigError: the file is missing or malformed (names the file and the item).
    """
    try:
        data = jsonsafe.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{path}: cannot read AUTOCOMPACT_FAKE_SCRIPT: {exc}", file=str(path)
        ) from exc
    items = data.get("replies") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError(f"{path}: expected a list of replies", file=str(path))
    out: list[tuple[FakeReply, Any]] = []
    for n, item in enumerate(items):
        if isinstance(item, str):
            out.append((FakeReply(text=item), None))
            continue
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: reply {n} must be a string or an object", file=str(path))
        text = str(item.get("text", ""))
        if item.get("interrupt"):
            text += " " + _INTERRUPT
        error = item.get("error")
        if error is not None and error not in _ERRORS:
            raise ConfigError(
                f"{path}: reply {n}: unknown error {error!r}; use one of {', '.join(_ERRORS)}",
                file=str(path),
            )
        usage = None
        if "prompt_tokens" in item or "output_tokens" in item:
            try:
                usage = Usage(
                    prompt_tokens=item.get("prompt_tokens", 0),  # (1.5 is no count: not int())
                    output_tokens=item.get("output_tokens", 0),
                )
            except (TypeError, ValueError, OverflowError, ContentError):
                raise ConfigError(
                    f"{path}: reply {n}: prompt_tokens and output_tokens must be whole numbers "
                    f"of 0 or more, got {item.get('prompt_tokens')!r:.40} and "
                    f"{item.get('output_tokens')!r:.40}",
                    file=str(path),
                ) from None
        purpose = item.get("purpose")
        if purpose not in _PURPOSES:
            raise ConfigError(
                f"{path}: reply {n}: unknown purpose {purpose!r:.40}; use chat or side_query "
                "(or leave it out)",
                file=str(path),
            )
        try:
            finish = FinishReason(item.get("finish_reason", "stop"))
        except ValueError:
            raise ConfigError(
                f"{path}: reply {n}: unknown finish_reason {item.get('finish_reason')!r}",
                file=str(path),
            ) from None
        reply = FakeReply(
            text=text,
            usage=usage,
            finish_reason=finish,
            error=_ERRORS[error]() if error else None,
        )
        out.append((reply, purpose))
    return out
