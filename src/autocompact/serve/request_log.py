"""What follows each request the proxy answers: learning from the usage the upstream reported
(:func:`followed_by`), the request's line on the ``autocompact.serve`` log (:func:`log_request`)
and the ``X-Autocompact-*`` headers of its response (:func:`ours`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request

from autocompact.serve.decision import Decision
from autocompact.serve.planner import Planner
from autocompact.serve.protocol import reported_prompt_tokens, response_prompt_tokens

__all__ = ["followed_by", "log_request", "ours"]

logger = logging.getLogger("autocompact.serve")


def log_request(
    planner: Planner,
    request: Request,
    decision: Decision,
    status: int,
    added: float,
    error: str | None = None,
) -> None:
    """The request's log line: method, path, conversation, signal, estimate, tier, action, side
    queries, the upstream's status and the added latency, the exact estimate made first
    (:meth:`Planner.measured`) when the line is logged (``error``: why the proxy answered with
    an error of its own, logged as a warning)."""
    level = logging.INFO if error is None else logging.WARNING
    if not logger.isEnabledFor(level):
        return
    decision = planner.measured(decision)
    identity = decision.identity
    logger.log(
        level,
        "%s %s conversation=%s signal=%s tokens=%d tier=%s action=%s side_queries=%d "
        "status=%d added_ms=%.1f" + ("" if error is None else " error=%s"),
        request.method,
        request.url.path,
        identity.session_id if identity else "-",
        identity.signal if identity else "-",
        decision.tokens,
        decision.tier or "-",
        decision.action,
        decision.side_queries,
        status,
        added * 1000,
        *(() if error is None else (error,)),
    )


def followed_by(
    planner: Planner,
    request: Request,
    decision: Decision,
    status: int,
    added: float,
    usage: bytes | bytearray,
    learning: list[Callable[[], None]],
    *,
    whole: bool = False,
) -> Callable[[], Awaitable[None]]:
    """What follows the response, once its last byte went out (or the client hung up):
    learning from the usage the upstream reported (``usage``: where the response reported
    it, empty when there is nothing to learn; ``whole``: the whole response, not a stream's
    ends) and the log line. The exact estimate they need (:meth:`Planner.measured`) is made
    then, so no response waits for it; this worker's next request of the conversation
    waits for the learning (``learning``: the marks :meth:`Planner.following` made,
    cleared when it is done)."""

    async def then() -> None:
        try:
            if usage and decision.identity is not None:  # (a passthrough learns nothing)
                read = response_prompt_tokens if whole else reported_prompt_tokens
                await planner.learn(decision, read(bytes(usage)))
            log_request(planner, request, decision, status, added)
        finally:
            for finished in learning:
                finished()

    return then


def ours(decision: Decision) -> dict[str, str]:
    """The proxy's headers on the response: what it did, whether a compaction was applied, the
    tier and how many summary requests were made."""
    headers = {
        "x-autocompact-action": decision.action,
        "x-autocompact-compacted": "true" if decision.compacted else "false",
    }
    if decision.tier:
        headers["x-autocompact-tier"] = decision.tier
    if decision.side_queries:
        headers["x-autocompact-side-queries"] = str(decision.side_queries)
    return headers
