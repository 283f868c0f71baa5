"""Sampling instructions: random choices that a trace records as decisions.

Each sampler either validates a given decision (a replay or a tuner's mutation) or
draws one from ``rng``, a ``random.Random`` owned by the Schedule, so a seed
reproduces every draw. An invalid decision is a ScheduleError, which lets a search
discard a mutation that no longer fits.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from compiler.ir.stmt import For
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int

# More tile levels than any loop nest uses; a larger n only asks for a list of n ints.
MAX_TILE_FACTORS = 16


def sample_perfect_tile(
    rng: random.Random,
    loop: For,
    n: int,
    max_innermost_factor: int,
    decision: Sequence[int] | None,
) -> list[int]:
    """``n`` factors whose product is exactly the loop's constant extent, the
    innermost at most ``max_innermost_factor``; usable as ``split`` factors."""
    name = loop.loop_var.name
    if not _is_int(n) or not 1 <= n <= MAX_TILE_FACTORS:
        raise ScheduleError(
            f"sample_perfect_tile of loop {name!r}: n must be an int in [1, "
            f"{MAX_TILE_FACTORS}], got {n!r}"
        )
    if not _is_int(max_innermost_factor) or max_innermost_factor < 1:
        raise ScheduleError(
            f"sample_perfect_tile of loop {name!r}: max_innermost_factor must be an int >= 1, "
            f"got {max_innermost_factor!r}"
        )
    extent = const_int(loop.extent)
    if extent is None or extent < 1:
        raise ScheduleError(
            f"sample_perfect_tile of loop {name!r}: its extent {loop.extent} is not a positive "
            "constant; tile a symbolic loop with split(factors=[None, ...])"
        )
    if decision is not None:
        return _checked_tile(name, decision, n, extent, max_innermost_factor)
    innermost_choices = [d for d in _divisors(extent) if d <= max_innermost_factor]
    if n == 1:
        innermost_choices = [d for d in innermost_choices if d == extent]
    if not innermost_choices:
        raise ScheduleError(
            f"sample_perfect_tile of loop {name!r}: extent {extent} cannot be tiled into {n} "
            f"factors with the innermost at most {max_innermost_factor}"
        )
    innermost = rng.choice(innermost_choices)
    factors = [1] * (n - 1) + [innermost]
    for prime in prime_factors(extent // innermost):
        factors[rng.randrange(n - 1)] *= prime
    return factors


def _checked_tile(
    name: str, decision: Sequence[int], n: int, extent: int, max_innermost_factor: int
) -> list[int]:
    where = f"sample_perfect_tile of loop {name!r}: decision {decision!r}"
    if not isinstance(decision, (list, tuple)) or not all(_is_int(d) for d in decision):
        raise ScheduleError(f"{where} must be a list of ints")
    factors = [int(d) for d in decision]
    if len(factors) != n:
        raise ScheduleError(f"{where} has {len(factors)} factors; the instruction asks for {n}")
    if any(f < 1 for f in factors) or math.prod(factors) != extent:
        raise ScheduleError(f"{where} must be positive factors whose product is {extent}")
    if factors[-1] > max_innermost_factor:
        raise ScheduleError(
            f"{where} has innermost factor {factors[-1]}, above max_innermost_factor "
            f"{max_innermost_factor}"
        )
    return factors


def perfect_tile_choices(extent: int, n: int, max_innermost_factor: int) -> list[tuple[int, ...]]:
    """Every decision ``sample_perfect_tile`` accepts for a loop of ``extent``: the
    ordered ``n``-factorizations, the innermost at most ``max_innermost_factor``."""
    if n == 1:
        return [(extent,)] if extent <= max_innermost_factor else []
    found: list[tuple[int, ...]] = []
    for inner in _divisors(extent):
        if inner <= max_innermost_factor:
            found.extend((*rest, inner) for rest in _factorizations(extent // inner, n - 1))
    return sorted(found)


def _factorizations(extent: int, n: int) -> list[tuple[int, ...]]:
    if n == 1:
        return [(extent,)]
    return [(*rest, d) for d in _divisors(extent) for rest in _factorizations(extent // d, n - 1)]


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def prime_factors(n: int) -> list[int]:
    """The primes whose product is ``n``, smallest first, repeated as often as they
    divide it (none for 1)."""
    primes = []
    p = 2
    while p * p <= n:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    if n > 1:
        primes.append(n)
    return primes


def sample_categorical(
    rng: random.Random,
    candidates: Sequence[int],
    probs: Sequence[float],
    decision: int | None,
) -> int:
    """The index of one of ``candidates``, drawn with weights ``probs`` (which need
    not sum to one), or the validated ``decision``."""
    if not isinstance(candidates, (list, tuple)) or not candidates:
        raise ScheduleError(
            f"sample_categorical: candidates must be a non-empty list, got {candidates!r}"
        )
    if not all(_is_int(c) for c in candidates):
        raise ScheduleError(f"sample_categorical: candidates must be ints, got {candidates!r}")
    if not isinstance(probs, (list, tuple)) or len(probs) != len(candidates):
        raise ScheduleError(
            f"sample_categorical: probs {probs!r} must be a list as long as the "
            f"{len(candidates)} candidates"
        )
    if not all(_is_number(p) and math.isfinite(p) and p >= 0 for p in probs) or sum(probs) <= 0:
        raise ScheduleError(
            f"sample_categorical: probs {probs!r} must be finite, non-negative and not all zero"
        )
    if decision is None:
        return rng.choices(range(len(candidates)), weights=probs)[0]
    if not _is_int(decision) or not 0 <= decision < len(candidates):
        raise ScheduleError(
            f"sample_categorical: decision {decision!r} must be an index in "
            f"[0, {len(candidates)}) of candidates {list(candidates)}"
        )
    if probs[decision] == 0:
        raise ScheduleError(
            f"sample_categorical: decision {decision} picks candidate {candidates[decision]}, "
            "whose probability is 0"
        )
    return int(decision)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
