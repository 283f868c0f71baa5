"""Evicting arrays from the caches leaves them as they were (what it does to the caches
is measured, not tested: see ``benchmarks/cold_weights.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.runtime.cache_eviction import evict_from_caches


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(0, 70_000),
    offset=st.integers(0, 17),
    dtype=st.sampled_from(["float32", "float64", "int8", "float16"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_evicted_arrays_keep_their_values(size: int, offset: int, dtype: str, seed: int) -> None:
    """Any length from empty up, starting anywhere in a cache line (a slice's start)."""
    values = np.random.default_rng(seed).uniform(-100, 100, size + offset).astype(dtype)
    array = values[offset:]
    before = array.copy()
    evict_from_caches([array, values])
    np.testing.assert_array_equal(array, before)


def test_a_strided_view_is_refused_with_the_fix() -> None:
    array = np.arange(64, dtype=np.float32).reshape(8, 8)
    with pytest.raises(ValueError, match=r"contiguous arrays.*view of"):
        evict_from_caches([array[:, ::2]])
