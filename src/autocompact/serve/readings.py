"""A worker's readings of its conversations' requests, and the decision a reading allows.

The fast reading (:mod:`autocompact.serve.fastpath`) of each conversation's last request is
kept, so the next request of that conversation reads only what it adds. A request of a
conversation the worker holds no reading of is first read without counting what JSON escaping
adds to its strings (about a third of a full reading's time at 1M tokens): the request's
size bounds it (:func:`~autocompact.serve.walk.escape_bound`), which gives the lowest and the
highest estimate the request can have. When both fall in the same tier below *auto*, that tier
is the one the exact estimate has, and the request goes out on it; the exact estimate (which
the calibration learns from and the log reports) is made when it is first asked for, after the
request was forwarded: what escaping adds counted over the strings the reading kept, one pass,
and the reading, then exact, kept for the conversation's next request. Otherwise the request
is made exact at once. Pure.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from autocompact.content import CharStats
from autocompact.guard import GuardState
from autocompact.serve.fastpath import Sizing, bounds, estimate, read
from autocompact.thresholds import Tier, compute_thresholds, tier_of

__all__ = ["AT_AUTO", "SIZING_BYTES", "Reading", "Readings"]

SIZING_BYTES = 64 * 1024 * 1024
"""The request bytes whose readings a worker keeps (each conversation's last request, the
decoded messages held about 3-4 times their size in memory) so the next request of the same
conversation reads only what it adds."""

AT_AUTO = (Tier.AUTO, Tier.HARD)
"""The tiers at which a request is compacted, not forwarded as it came."""


class Reading:
    """A request's tier below *auto* and its exact estimate, made once when first asked for.

    Args:
        tier: the tier (the exact estimate's, decided before it was made).
        measure: makes the exact estimate and the statistics of what was sent.
    """

    __slots__ = ("_measure", "_measured", "tier")

    def __init__(self, tier: Tier, measure: Callable[[], tuple[int, CharStats]]) -> None:
        self.tier = tier
        self._measure: Callable[[], tuple[int, CharStats]] | None = measure
        self._measured: tuple[int, CharStats] = (0, CharStats())

    def exact(self) -> tuple[int, CharStats]:
        """The engine's estimate of the request and the statistics of what was sent."""
        if self._measure is not None:
            self._measured = self._measure()
            self._measure = None
        return self._measured


class Readings:
    """Each conversation's last exact reading, at most :data:`SIZING_BYTES` of requests (the
    oldest dropped), and the decisions they allow."""

    def __init__(self) -> None:
        self._sizings: OrderedDict[str, Sizing] = OrderedDict()
        self._bytes = 0

    def read(
        self,
        key: str,
        protocol: str,
        body: Mapping[str, Any],
        messages: Sequence[Any],
        size: int,
    ) -> Sizing | None:
        """The request (``size`` bytes) read from its decoded JSON (``None``: only the full
        path can read it): exactly, resuming from the conversation's last reading (only what
        the request adds is read), when there is one; else bounded."""
        previous = self._sizings.get(key)
        exact = previous is not None
        sizing = read(protocol, body, messages, previous=previous, weight=size, exact=exact)
        if sizing is not None and exact:
            self._keep(key, sizing)
        return sizing

    def decide(
        self,
        key: str,
        sizing: Sizing,
        state: GuardState,
        window: int,
    ) -> Reading | None:
        """The request's reading when it is below *auto* (``None``: at or above it, or a reading
        that cannot be made: the full path decides)."""
        thresholds = compute_thresholds(window)
        if not sizing.walk.exact:
            span = bounds(sizing, state)
            if span is not None:
                tier = tier_of(span[0], thresholds)
                if tier not in AT_AUTO and tier_of(span[1], thresholds) == tier:
                    return Reading(tier, lambda: estimate(self._exact(key, sizing).stats, state))
            sizing = self._exact(key, sizing)
        tokens, sent = estimate(sizing.stats, state)
        tier = tier_of(tokens, thresholds)
        if tier in AT_AUTO:
            return None
        return Reading(tier, lambda: (tokens, sent))

    def _exact(self, key: str, sizing: Sizing) -> Sizing:
        """A bounded reading made exact (what escaping adds counted over the strings it kept),
        kept as the conversation's last reading."""
        walk = sizing.walk
        walk.make_exact()
        exact = replace(sizing, stats=walk.result(sizing.stats.system, sizing.stats.tools))
        self._keep(key, exact)
        return exact

    def _keep(self, key: str, sizing: Sizing) -> None:
        old = self._sizings.pop(key, None)
        if old is not None:
            self._bytes -= old.weight
        if sizing.weight > SIZING_BYTES:
            return
        self._sizings[key] = sizing
        self._bytes += sizing.weight
        while self._bytes > SIZING_BYTES:
            _, dropped = self._sizings.popitem(last=False)
            self._bytes -= dropped.weight
