"""Timing compiled kernels, the way TVM's ``time_evaluator`` does."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProfileResult:
    """Seconds per run, one entry per repeat, each the mean of ``number`` runs."""

    results: tuple[float, ...]
    number: int

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)


def time_raw(
    raw: Callable[..., Any],
    args: Sequence[Any],
    number: int,
    repeat: int,
    min_repeat_ms: float,
) -> ProfileResult:
    """Time ``raw(*args)``: one warm-up call, then ``repeat`` timed loops of ``number``
    calls each. With ``min_repeat_ms``, ``number`` first grows until one loop takes
    at least that long, so short kernels are not timed below the clock's resolution."""
    if number < 1 or repeat < 1:
        raise ValueError(f"number ({number}) and repeat ({repeat}) must be at least 1")
    raw(*args)
    results = []
    for _ in range(repeat):
        while True:
            elapsed = _time_loop(raw, args, number)
            if elapsed * 1e3 >= min_repeat_ms:
                break
            per_run_ms = max(elapsed * 1e3 / number, 1e-6)
            number = max(math.ceil(min_repeat_ms / per_run_ms * 1.1), math.ceil(number * 1.618))
        results.append(elapsed / number)
    return ProfileResult(tuple(results), number)


def _time_loop(raw: Callable[..., Any], args: Sequence[Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        raw(*args)
    return time.perf_counter() - start
