"""The context window the proxy assumes for a model, and when to ask the server for it again.

Unless ``--context-window`` gives it, a model the bundled table knows has its window; else an
OpenAI upstream is asked (llama.cpp ``/props``, ``/v1/models``, Ollama, LM Studio:
:func:`~autocompact.limits.query_server_limits`). A window the server reports is kept for good.
A lookup that gave none (the server was down, timed out, still loading its model, or does not
say) falls back to the assumed window and is tried again on a later request: after
:data:`RETRY_FIRST` seconds, then twice as long each time up to :data:`RETRY_LONGEST`, so a dead
endpoint is not asked on every request.

A window the upstream states when it rejects a request as too long (llama-server's ``n_ctx``,
OpenAI's "maximum context length is N tokens"), smaller than the one in use, is believed from
then on for that model, ``--context-window`` notwithstanding (:meth:`ModelWindows.stated`): the
server knows what it accepts, and a reactive compaction sized on a larger window cannot fit.

What a lookup learned is logged once per (upstream, model) at INFO level, and again only when
it changes (the window and where it came from): a server asked again while it says no window
adds no line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import anyio

from autocompact.limits import ServerReport, ask_server_limits, known_limits, resolve_limits
from autocompact.serve.config import shown_url

__all__ = ["MIN_STATED_WINDOW", "RETRY_FIRST", "RETRY_LONGEST", "ModelWindows"]

RETRY_FIRST = 30.0
"""Seconds after a lookup that gave no window before the server is asked again."""
RETRY_LONGEST = 30 * 60.0
"""The longest wait between two lookups that give no window."""
MIN_STATED_WINDOW = 1024
"""A window stated in an error below this is not believed (the engine's rule for ``n_ctx``)."""

logger = logging.getLogger("autocompact.serve")

Lookup = Callable[[str, str], ServerReport]


def _ask_server(base: str, model: str) -> ServerReport:
    return ask_server_limits(base, model, kind="openai-compatible")


@dataclass(frozen=True, kw_only=True)
class _Known:
    window: int
    retry_at: float | None  # None: the server's own, kept for good
    wait: float  # the wait after the last lookup that found none (doubled after the next)


class ModelWindows:
    """The window per (upstream, model), looked up once, again later while it is not found.

    Args:
        upstreams: the upstreams' base URLs by name.
        clock: a monotonic clock.
        lookup: asks a server for a model's limits (what it said, or why it said none);
            blocking, run in a worker thread.
    """

    def __init__(
        self,
        upstreams: Mapping[str, str],
        *,
        clock: Callable[[], float],
        lookup: Lookup = _ask_server,
    ) -> None:
        self.upstreams = upstreams
        self.clock = clock
        self.lookup = lookup
        self._known: dict[tuple[str, str], _Known] = {}
        self._stated: dict[tuple[str, str], int] = {}
        self._said: dict[tuple[str, str], tuple[int, str]] = {}  # the window logged, its source

    def stated(self, upstream: str, model: str) -> int | None:
        """The window the upstream stated for ``model`` when it rejected a request (``None``:
        it stated none)."""
        return self._stated.get((upstream, model)) if self._stated else None

    def learn(self, upstream: str, model: str, window: int, used: int) -> bool:
        """Believe ``window``, stated by the upstream in a "too long" error, when it is
        smaller than the window ``used`` and not implausibly small; whether it was."""
        if not MIN_STATED_WINDOW <= window < used:
            return False
        self._stated[upstream, model] = window
        return True

    async def window(self, upstream: str, model: str) -> int:
        """The window of ``model`` behind ``upstream``."""
        key = (upstream, model)
        known = self._known.get(key)
        now = self.clock()
        if known is not None and (known.retry_at is None or now < known.retry_at):
            return known.window
        if known is not None:  # asked again: meanwhile the others use the window known so far
            self._known[key] = replace(known, retry_at=now + known.wait)
        report = None
        asks = known_limits(model) is None and upstream == "openai"
        if asks:
            base = self.upstreams[upstream]
            report = await anyio.to_thread.run_sync(lambda: self.lookup(base, model))
        limits = resolve_limits(model, server=report.limits if report else None)
        window = limits.context_window
        if asks and limits.source != "server":
            wait = RETRY_FIRST if known is None else min(2 * known.wait, RETRY_LONGEST)
            self._known[key] = _Known(window=window, retry_at=self.clock() + wait, wait=wait)
        else:
            self._known[key] = _Known(window=window, retry_at=None, wait=0.0)
        self._say(upstream, model, limits.source, window, report)
        return window

    def _say(
        self, upstream: str, model: str, source: str, window: int, report: ServerReport | None
    ) -> None:
        """Log the window found for ``model``, unless it is the one last logged."""
        key = (upstream, model)
        if self._said.get(key) == (window, source):
            return
        self._said[key] = (window, source)
        base = shown_url(self.upstreams.get(upstream, ""))
        if source == "server":
            how = f"reported by the server at {base}"
        elif source == "known":
            how = "the bundled model table's"
        elif report is not None:
            how = (
                f"assumed: the server at {base} did not report it ({report.reason}); it is "
                "asked again later; --context-window N gives the server's context size"
            )
        else:
            how = f"assumed: the {upstream} upstream is not asked; --context-window N gives it"
        logger.info(
            "the window of %r behind the %s upstream is %d tokens (%s)",
            model,
            upstream,
            window,
            how,
        )
