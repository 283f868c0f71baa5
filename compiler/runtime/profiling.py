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
    *,
    warmup: int = 1,
    before_repeat: Callable[[], None] | None = None,
) -> ProfileResult:
    """Time ``raw(*args)``: ``warmup`` untimed calls, then ``repeat`` timed loops of
    ``number`` calls each. With ``min_repeat_ms``, ``number`` first grows (in untimed
    loops, which warm up too) until one loop takes at least that long, so short
    kernels are not timed below the clock's resolution. ``before_repeat`` runs before
    each timed loop, outside the timing: a tuner's runner flushes the caches there."""
    return time_loops(
        lambda: raw(*args),
        lambda count: _time_loop(raw, args, count),
        number,
        repeat,
        min_repeat_ms,
        warmup=warmup,
        before_repeat=before_repeat,
    )


def time_loops(
    run_once: Callable[[], Any],
    loop_seconds: Callable[[int], float],
    number: int,
    repeat: int,
    min_repeat_ms: float,
    *,
    warmup: int = 1,
    before_repeat: Callable[[], None] | None = None,
) -> ProfileResult:
    """``time_raw`` for any kernel: ``run_once`` runs it untimed, ``loop_seconds(n)``
    times a loop of ``n`` runs by whatever clock suits it (CUDA events on a GPU)."""
    if number < 1 or repeat < 1:
        raise ValueError(f"number ({number}) and repeat ({repeat}) must be at least 1")
    if warmup < 0:
        raise ValueError(f"warmup must not be negative, got {warmup}")
    for _ in range(warmup):
        run_once()
    number = _calibrate(loop_seconds, number, min_repeat_ms)
    results = []
    for _ in range(repeat):
        if before_repeat is not None:
            before_repeat()
        results.append(loop_seconds(number) / number)
    return ProfileResult(tuple(results), number)


def _calibrate(loop_seconds: Callable[[int], float], number: int, min_ms: float) -> int:
    """The smallest ``number`` (from the given one up) whose loop takes ``min_ms``."""
    if min_ms <= 0:
        return number
    while True:
        elapsed = loop_seconds(number)
        if elapsed * 1e3 >= min_ms:
            return number
        per_call_ms = max(elapsed * 1e3 / number, 1e-6)
        number = max(math.ceil(min_ms / per_call_ms * 1.1), math.ceil(number * 1.618))


def _time_loop(raw: Callable[..., Any], args: Sequence[Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        raw(*args)
    return time.perf_counter() - start
