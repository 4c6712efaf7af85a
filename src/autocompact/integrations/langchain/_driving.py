"""Driving the engine's flows inside a LangChain hook: side queries to the summary provider,
the main request to the framework's own model call, its overflow error thrown into the flow as
the reactive step (and given back as the framework's own error when the engine gives up)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeAlias

from autocompact.errors import ContextOverflowError, ProviderError
from autocompact.integrations.langchain._provider import is_overflow
from autocompact.providers.base import ChatRequest, Completion, Provider

__all__ = ["Flow", "FrameworkOverflow", "adrive", "drive", "throw_overflow"]

Flow: TypeAlias = Generator[ChatRequest, Completion, Any]


class FrameworkOverflow(ContextOverflowError):
    """The framework's overflow error, carried through the engine's reactive step."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original), provider="langchain")
        self.original = original


def drive(
    flow: Flow,
    side: Provider,
    *,
    send: Callable[[ChatRequest], Completion] | None,
) -> None:
    """Answer side queries with the summary provider and main requests with ``send``.

    With ``send=None`` the flow is stopped at the main request (``before_model``).
    """
    provider = side
    try:
        request = next(flow)
        while True:
            if request.purpose == "side_query":
                try:
                    completion = provider.complete(request)
                except ProviderError as exc:
                    request = flow.throw(exc)
                    continue
                request = flow.send(completion)
                continue
            if send is None:
                flow.close()
                return
            try:
                completion = send(request)
            except Exception as exc:
                if not is_overflow(exc):
                    raise
                request = throw_overflow(flow, exc)
                continue
            request = flow.send(completion)
    except StopIteration:
        return
    except FrameworkOverflow as overflow:  # the engine gave up: the framework's own error
        raise overflow.original from None


async def adrive(
    flow: Flow,
    side: Provider,
    *,
    send: None = None,
    asend: Callable[[ChatRequest], Awaitable[Completion]] | None = None,
) -> None:
    """Async :func:`drive`."""
    provider = side
    try:
        request = next(flow)
        while True:
            if request.purpose == "side_query":
                try:
                    completion = await provider.acomplete(request)
                except ProviderError as exc:
                    request = flow.throw(exc)
                    continue
                request = flow.send(completion)
                continue
            if asend is None:
                flow.close()
                return
            try:
                completion = await asend(request)
            except Exception as exc:
                if not is_overflow(exc):
                    raise
                request = throw_overflow(flow, exc)
                continue
            request = flow.send(completion)
    except StopIteration:
        return
    except FrameworkOverflow as overflow:  # the engine gave up: the framework's own error
        raise overflow.original from None


def throw_overflow(flow: Flow, exc: Exception) -> ChatRequest:
    """Throw the overflow into the flow: the reactive step (the drivers turn an overflow the
    engine gives up on back into the framework's own error)."""
    return flow.throw(FrameworkOverflow(exc))
