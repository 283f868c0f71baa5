"""Simulated annealing over knob choices, scored by a cost model (AutoTVM's optimizer).

Many chains walk the space at once: each step changes one knob of each chain's
point at random, and a chain moves to the new point with probability
``exp((new - old) / temperature)``, so it climbs the model's score and, early on
while the temperature is high, also crosses valleys. Every point the chains
visit competes for the ``keep`` best unvisited ones, which are what the search
measures next.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Set

import numpy as np

Scorer = Callable[[np.ndarray], np.ndarray]


def anneal(
    dims: tuple[int, ...],
    score: Scorer,
    starts: np.ndarray,
    *,
    steps: int,
    keep: int,
    visited: Set[int],
    rng: np.random.Generator,
    temperature: float = 1.0,
    patience: int = 16,
) -> list[tuple[float, int, tuple[int, ...]]]:
    """The ``keep`` best-scored points not in ``visited`` (by config index) that
    chains started at ``starts`` (one row of knob choices each) met in ``steps``
    steps, best first, as (score, index, choices). Stops early when the best
    ``keep`` have not changed for ``patience`` steps."""
    strides = _strides(dims)
    sizes = np.array(dims)
    movable = np.flatnonzero(sizes > 1)
    points = starts.copy()
    scores = score(points)
    best: list[tuple[float, int, tuple[int, ...]]] = []
    seen: set[int] = set()
    _offer(best, seen, points, scores, strides, keep, visited)
    if not len(movable):
        return sorted(best, reverse=True)
    unchanged = 0
    for step in range(steps):
        heat = temperature * (1 - step / steps) + 1e-9
        candidates = _neighbours(points, sizes, movable, rng)
        new_scores = score(candidates)
        accept = rng.random(len(points)) < np.exp(np.minimum(0, new_scores - scores) / heat)
        points[accept] = candidates[accept]
        scores[accept] = new_scores[accept]
        changed = _offer(best, seen, candidates, new_scores, strides, keep, visited)
        unchanged = 0 if changed else unchanged + 1
        if unchanged >= patience:
            break
    return sorted(best, reverse=True)


def _neighbours(
    points: np.ndarray, sizes: np.ndarray, movable: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Each point with one knob (among those with a choice) set to another value."""
    moved = points.copy()
    knobs = movable[rng.integers(len(movable), size=len(points))]
    shift = 1 + rng.integers(sizes[knobs] - 1)
    rows = np.arange(len(points))
    moved[rows, knobs] = (moved[rows, knobs] + shift) % sizes[knobs]
    return moved


def _offer(
    best: list[tuple[float, int, tuple[int, ...]]],
    seen: set[int],
    points: np.ndarray,
    scores: np.ndarray,
    strides: list[int],
    keep: int,
    visited: Set[int],
) -> bool:
    """Push the new, unvisited points into the min-heap ``best`` of size ``keep``."""
    changed = False
    for row, value in zip(points.tolist(), scores.tolist(), strict=True):
        index = sum(c * s for c, s in zip(row, strides, strict=True))
        if index in seen or index in visited:
            continue
        entry = (float(value), index, tuple(row))
        if len(best) < keep:
            heapq.heappush(best, entry)
        elif entry > best[0]:
            heapq.heapreplace(best, entry)
        else:
            continue
        seen.add(index)
        changed = True
    return changed


def _strides(dims: tuple[int, ...]) -> list[int]:
    """Index strides of the knobs: the first knob varies fastest."""
    strides = []
    step = 1
    for dim in dims:
        strides.append(step)
        step *= dim
    return strides
