"""autocompact.averages gives what statistics gives, on ints and floats, odd and even counts."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact.averages import fmean, median

_NUMBERS = st.one_of(
    st.lists(st.integers(min_value=-(10**9), max_value=10**9), min_size=1, max_size=40),
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=40),
)


@given(_NUMBERS)
def test_fmean_is_statistics_fmean(values: list[float]) -> None:
    assert fmean(values) == statistics.fmean(values)
    assert fmean(tuple(values)) == statistics.fmean(values)


@given(_NUMBERS)
def test_median_is_statistics_median(values: list[float]) -> None:
    got, want = median(values), statistics.median(values)
    assert got == want
    assert type(got) is type(want)


@pytest.mark.parametrize("average", [fmean, median], ids=["fmean", "median"])
def test_an_empty_sequence_is_refused_as_statistics_refuses_it(
    average: Callable[[list[float]], float],
) -> None:
    with pytest.raises(ValueError, match="data"):
        average([])
