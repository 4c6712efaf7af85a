"""What the engine did for a conversation, on the proxy's log: a compaction that failed and why
(or found nothing to do, at info level), the breaker opening and closing; and what the upstream
refused of what the proxy sent (a rewritten request rejected, a "too long" request nothing
smaller could replace, a conversation whose trimmed requests are refused), with the upstream's
reason.

The request's own line says only ``action=compaction-failed`` (or ``trimmed``) and how many
summary requests were made; an operator needs the reason (the upstream refused the summary
request, the reply was truncated, the summarizer's window cannot hold one) to mend it. The
engine says it in its event records (:mod:`autocompact.events`); :func:`engine_log` is the hook
that writes them under the ``autocompact.serve`` logger, with the conversation's store session
id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionFailed,
    CompactionSkipped,
    CompactionSucceeded,
    Event,
)
from autocompact.jsonsafe import loads

__all__ = [
    "compactions_refused",
    "engine_log",
    "over_window_sent",
    "rewrite_rejected",
    "substitution_refused",
    "too_long_unchanged",
    "trims_refused_logged",
    "upstream_reason",
]

logger = logging.getLogger("autocompact.serve")


def engine_log(session_id: str) -> Callable[[Event], None]:
    """The hook that logs ``session_id``'s failed and skipped compactions and breaker changes."""

    def hook(event: Event) -> None:
        match event:
            case CompactionFailed(info=info):
                logger.warning(
                    "conversation=%s compaction failed (%s, trigger=%s, side_queries=%d): %s",
                    session_id,
                    info.status.value,
                    info.trigger.value,
                    info.side_queries,
                    info.error or "no reason given",
                )
            case CompactionSkipped(info=info):
                logger.info(
                    "conversation=%s compaction skipped (trigger=%s): %s",
                    session_id,
                    info.trigger.value,
                    info.error or "nothing to compact",
                )
            case CompactionSucceeded(info=info) if info.summary_failure is not None:
                logger.warning(
                    "conversation=%s old tool output cleared, but the summary failed (%s, "
                    "side_queries=%d): %s",
                    session_id,
                    info.summary_failure.value,
                    info.side_queries,
                    info.error or "no reason given",
                )
            case BreakerOpened(consecutive_failures=failures):
                logger.warning(
                    "conversation=%s breaker opened after %d failed compactions in a row: "
                    "automatic compaction pauses",
                    session_id,
                    failures,
                )
            case BreakerClosed():
                logger.info("conversation=%s breaker closed: a compaction succeeded", session_id)
            case _:
                pass

    return hook


def upstream_reason(error: bytes) -> str:
    """The message of an upstream's error body (its ``error.message`` or ``message``, else the
    body's first characters)."""
    try:
        body = loads(error[:65536])
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        if isinstance(message, str) and message:
            return message[:300]
    return error[:300].decode("utf-8", "replace") or "no reason given"


def rewrite_rejected(session_id: str, action: str, status: int, error: bytes) -> None:
    """Log that the upstream rejected the request as the proxy rewrote it (``action``), so the
    client's own request goes out instead."""
    logger.warning(
        "conversation=%s the upstream rejected the %s request with HTTP %d (%s): sending the "
        "client's own request instead",
        session_id,
        action,
        status,
        upstream_reason(error),
    )


def substitution_refused(session_id: str, prefix_len: int, status: int) -> None:
    """Log, once per record, that the upstream refused a stored substitution (``prefix_len``:
    the messages it replaced) and took the client's own request (``status``), so the record is
    no longer used."""
    logger.warning(
        "conversation=%s the upstream refused the stored substitution of its first %d "
        "messages (the client's own request got HTTP %d): it is no longer used; later "
        "requests are planned from the client's own messages",
        session_id,
        prefix_len,
        status,
    )


def compactions_refused(session_id: str, failures: int) -> None:
    """Log, once, that the breaker opened because the upstream refused ``failures`` compacted
    requests in a row (and took the client's own), so the conversation is no longer compacted
    automatically."""
    logger.warning(
        "conversation=%s breaker opened after %d failed compactions in a row: the upstream "
        "refused the compacted requests and took the client's own; automatic compaction "
        "pauses and requests go out without it",
        session_id,
        failures,
    )


def trims_refused_logged(session_id: str, status: int) -> None:
    """Log, once per conversation, that the upstream refused a request the guarantee only
    trimmed and answered the client's own (``status``), so its later trimmed requests go out
    as the client sent them."""
    logger.warning(
        "conversation=%s the upstream refused the trimmed request and answered the client's "
        "own with HTTP %d: its trimmed requests are refused, so from now on those the "
        "guarantee would trim go out as the client sent them (action=trim-refused)",
        session_id,
        status,
    )


def over_window_sent(session_id: str, why: str | None) -> None:
    """Log a request that goes out although the engine finds it over the window even with every
    earlier turn left out, compacted first when that could be done (``why``: the engine's
    reason; ``None``: it fits, nothing is logged). The upstream's window may be larger than the
    proxy's: the upstream decides."""
    if why is not None:
        logger.info("conversation=%s sending a request over the window: %s", session_id, why)


def too_long_unchanged(session_id: str, error: bytes) -> None:
    """Log that a request the upstream rejected as too long cannot be made smaller, so the
    upstream's error goes to the client."""
    logger.warning(
        "conversation=%s the upstream rejected the request as too long (%s) and the proxy "
        "cannot send a smaller one: the client gets the upstream's error",
        session_id,
        upstream_reason(error),
    )
