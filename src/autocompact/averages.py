"""The mean and the median of a non-empty sequence of numbers, as :mod:`statistics` gives them.

:func:`statistics.fmean` and :func:`statistics.median` computed the same way (``math.fsum``
over the count; the middle value, or the mean of the two middle ones), without importing
:mod:`statistics`, which brings :mod:`fractions` and :mod:`decimal` with it: the replay and the
compaction accounting need these two averages only, and every command start paid for the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["fmean", "median"]


def fmean(values: Sequence[float]) -> float:
    """The arithmetic mean as a float, ``statistics.fmean(values)``.

    Raises:
        ValueError: ``values`` is empty (``statistics.StatisticsError`` is a ``ValueError``).
    """
    if not values:
        raise ValueError("fmean requires at least one data point")
    return math.fsum(values) / len(values)


def median(values: Sequence[float]) -> float:
    """The middle value, or the mean of the two middle values, ``statistics.median(values)``.

    Raises:
        ValueError: ``values`` is empty.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no median for empty data")
    if n % 2 == 1:
        return ordered[n // 2]
    i = n // 2
    return (ordered[i - 1] + ordered[i]) / 2
