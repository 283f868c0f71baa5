"""Simulated annealing over the decisions of one design, scored by a cost model
(AutoTVM's optimizer).

A point is a row of positions, one per sampling instruction, into its domain of
decisions. Many chains walk the space at once: each step changes one decision of
each chain's point at random, and a chain moves to the new point with probability
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
    visited: Set[tuple[int, ...]],
    rng: np.random.Generator,
    temperature: float = 1.0,
    patience: int = 16,
) -> list[tuple[float, tuple[int, ...]]]:
    """The ``keep`` best-scored points not in ``visited`` that chains started at
    ``starts`` (one row of positions each; ``dims`` are the domain sizes) met in
    ``steps`` steps, best first, as (score, positions). Stops early when the best
    ``keep`` have not changed for ``patience`` steps."""
    sizes = np.array(dims)
    movable = np.flatnonzero(sizes > 1)
    points = starts.copy()
    scores = score(points)
    best: list[tuple[float, tuple[int, ...]]] = []
    seen: set[tuple[int, ...]] = set()
    _offer(best, seen, points, scores, keep, visited)
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
        changed = _offer(best, seen, candidates, new_scores, keep, visited)
        unchanged = 0 if changed else unchanged + 1
        if unchanged >= patience:
            break
    return sorted(best, reverse=True)


def _neighbours(
    points: np.ndarray, sizes: np.ndarray, movable: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Each point with one decision (among those with a choice) set to another value."""
    moved = points.copy()
    knobs = movable[rng.integers(len(movable), size=len(points))]
    shift = 1 + rng.integers(sizes[knobs] - 1)
    rows = np.arange(len(points))
    moved[rows, knobs] = (moved[rows, knobs] + shift) % sizes[knobs]
    return moved


def _offer(
    best: list[tuple[float, tuple[int, ...]]],
    seen: set[tuple[int, ...]],
    points: np.ndarray,
    scores: np.ndarray,
    keep: int,
    visited: Set[tuple[int, ...]],
) -> bool:
    """Push the new, unvisited points into the min-heap ``best`` of size ``keep``."""
    changed = False
    for row, value in zip(points.tolist(), scores.tolist(), strict=True):
        point = tuple(row)
        if point in seen or point in visited:
            continue
        entry = (float(value), point)
        if len(best) < keep:
            heapq.heappush(best, entry)
        elif entry > best[0]:
            heapq.heapreplace(best, entry)
        else:
            continue
        seen.add(point)
        changed = True
    return changed
