"""What goes out again when the upstream rejects the request the proxy sent (one retry at most).

- **Too long** (:func:`~autocompact.serve.protocol.looks_like_overflow`), for a request sent as
  the client's or a stored substitution made it (``forward``, ``substituted``,
  ``compaction-failed``): the request is planned again on a smaller window, then, if that
  changed nothing, with a reactive compaction. The window the upstream states in its error is
  believed for the model from then on (:meth:`~autocompact.serve.windows.ModelWindows.learn`);
  stated or not, the rejection says the window is below what the rejected request measured, so
  it is planned on at most the engine's estimate of that request less
  :data:`~autocompact.compaction.fallback.SIZE_MARGIN` (at *hard*: the rescue, then the
  guarantee's trimming). A retry that would be the very bytes rejected is not sent: the client
  gets the upstream's error.
- **Another 4xx** (:data:`FALLBACK_STATUSES`: a validation error) for a request the proxy
  rewrote (substituted, compacted, trimmed): the client's own bytes go out once, as they would
  have without the proxy, and the rejection is logged with its reason. The rewrite is then not
  made again (``Planner.refuse``): a stored substitution is marked refused, a fresh compaction
  counts as failed, and a request only trimmed marks the conversation's trimmed requests
  refused (later ones go out as the client sent them, ``trim-refused``). 401, 403, 404, 429
  and 5xx are not the rewrite's doing and go back to the client as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from autocompact.compaction.fallback import SIZE_MARGIN
from autocompact.serve.decision import Decision
from autocompact.serve.engine_log import rewrite_rejected, too_long_unchanged
from autocompact.serve.planner import Planner
from autocompact.serve.protocol import stated_window
from autocompact.serve.windows import ModelWindows

__all__ = [
    "FALLBACK_STATUSES",
    "REACTIVE_ACTIONS",
    "REWRITE_REJECTED",
    "client_bytes",
    "reads_rejection",
    "retry_too_long",
    "window_below",
]

logger = logging.getLogger("autocompact.serve")

REACTIVE_ACTIONS = frozenset({"forward", "substituted", "compaction-failed"})
"""The decisions whose "too long" rejection is planned again (the others were already sized
anew, or are not the proxy's to size)."""
FALLBACK_STATUSES = frozenset({400, 422})
"""The statuses of a rejection a rewrite may have caused (the request's content was refused)."""
_READ_STATUSES = frozenset({400, 413, 422})
REWRITE_REJECTED = "rewrite-rejected"
"""The action of a request sent as the client sent it after its rewrite was rejected."""

Planning = Callable[[dict[str, Any]], Awaitable[Decision]]


def reads_rejection(status: int, decision: Decision, raw: bytes) -> bool:
    """Whether an upstream answer of ``status`` to ``decision`` is read before it goes back:
    a "too long" one may be retried, and any rejection of a rewritten request."""
    if status not in _READ_STATUSES:
        return False
    return decision.action in REACTIVE_ACTIONS or decision.body != raw


def window_below(tokens: int, window: int) -> int | None:
    """The window to plan on after a "too long" rejection of a request the engine estimated at
    ``tokens``, when smaller than ``window``: the real window is below what the upstream counted
    for it, and so below the estimate on this conversation's scale; less the margin the engine
    keeps over a learned scale (``None``: no estimate, or none smaller than ``window``)."""
    if tokens <= 0:
        return None
    below = int(tokens / (1 + SIZE_MARGIN))
    return below if 0 < below < window else None


async def retry_too_long(
    planning: Planning,
    planner: Planner,
    windows: ModelWindows,
    plan: dict[str, Any],
    rejected: Decision,
    error: bytes,
) -> Decision | None:
    """The request to send after the upstream rejected ``rejected`` as too long (``error``: its
    body; ``plan``: the planner's arguments it was planned with, ``planning``: the app's
    planning), or ``None`` when nothing smaller than ``rejected`` can be sent (the client gets
    the upstream's error)."""
    await planner.release(rejected)
    upstream, model, used = plan["protocol"].upstream, plan["provider"].model, plan["window"]
    stated = _learned(windows, upstream, model, error, used)
    # Below what the rejected request measured, too: the engine's estimate may be short of the
    # upstream's count (another tokenizer), and a window it states is then no bound on it.
    below = window_below(planner.measured(rejected).tokens, stated or used)
    window = below or stated
    decision = rejected
    if window is not None:
        # Planned as any request on that window: at hard, the rescue, then the guarantee's
        # trimming (a failed reactive compaction sends the request unchanged, over it).
        plan = {**plan, "window": window}
        decision = await planning(plan)
    if decision.action in REACTIVE_ACTIONS:
        if decision is not rejected:
            await planner.release(decision)
        decision = await planning({**plan, "reactive": True})
    if decision.body == rejected.body:
        await planner.release(decision)
        identity = decision.identity or rejected.identity
        too_long_unchanged(identity.session_id if identity is not None else "-", error)
        return None
    return decision


def client_bytes(decision: Decision, raw: bytes, status: int, error: bytes) -> Decision:
    """The client's own request, to send after the upstream rejected ``decision`` (a rewrite
    of it) with ``status`` and ``error``; the rejection is logged with its reason."""
    session = decision.identity.session_id if decision.identity is not None else "-"
    rewrite_rejected(session, decision.action, status, error)
    return replace(
        decision,
        body=raw,
        action=REWRITE_REJECTED,
        record=None,
        lease=None,
        state=None,
        sent=None,
        reading=None,
    )


def _learned(
    windows: ModelWindows, upstream: str, model: str, error: bytes, used: int
) -> int | None:
    """The window an upstream's "too long" error states, believed from now on when smaller
    than the one ``used`` (:meth:`ModelWindows.learn`); ``None`` when it is not."""
    stated = stated_window(error)
    if stated is None or not windows.learn(upstream, model, stated, used):
        return None
    logger.warning(
        "the %s upstream says the window of %r is %d tokens, not %d: using it from now on",
        upstream,
        model,
        stated,
        used,
    )
    return stated
