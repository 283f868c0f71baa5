"""Replayed measurements: a fixed table of seconds per config, so searches are tested
end to end, deterministically, without timing anything.

``synthetic_seconds`` gives every config of a small matmul space a cost that has
the shape real ones have (a best tile size per axis, vectorizing helps, a
penalty per knob that is off its best value, a little fixed noise, and some
configs failing the way a build can) with one known best config. It reads knob
*values*, not indices, so the same rule prices a space of another shape, which
is what a transfer test needs. ``Replay`` answers the search's candidates from
such a table and records every config it was asked to measure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from compiler import te
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule
from tuner.search import MeasureCandidate, MeasureResult, SearchStrategy
from tuner.space import Config, Template, TemplateSpace
from tuner.space.config import ConfigEntity


def small_matmul(m: int, n: int, k: int) -> PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def _small_template(cfg: ConfigEntity, sch: Schedule) -> None:
    """Tiles of i and j, the order of the inner tile loops, and its annotations."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    cfg.define_split("tile_i", i, num_outputs=2)
    cfg.define_split("tile_j", j, num_outputs=2)
    cfg.define_reorder("inner_order", 2, policy="all")
    cfg.define_knob("vectorize", [False, True])
    cfg.define_knob("unroll", [False, True])
    i0, i1 = cfg["tile_i"].apply(sch, i)
    j0, j1 = cfg["tile_j"].apply(sch, j)
    inner = cfg["inner_order"].apply(sch, [i1, j1])
    sch.reorder(i0, j0, k, *inner)
    if cfg["vectorize"].val:
        sch.vectorize(inner[-1])
    if cfg["unroll"].val:
        sch.unroll(inner[0])


SMALL_TEMPLATE = Template("test.small_matmul", _small_template, ("C",))


def small_space(m: int = 24, n: int = 32, k: int = 8) -> TemplateSpace:
    """384 configs at the default shape: 8 x 6 tiles, 2 orders, 2 x 2 flags."""
    return TemplateSpace(small_matmul(m, n, k), SMALL_TEMPLATE)


def synthetic_seconds(space: TemplateSpace, config: Config, seed: int = 7) -> float | None:
    """The replayed cost of ``config``: lowest at inner tiles (4, 8), vectorized, j
    innermost, not unrolled; None (a failed build) when the inner tile is over 256."""
    knobs = space.describe(config)
    inner_i = knobs["tile_i"][-1]
    inner_j = knobs["tile_j"][-1]
    if inner_i * inner_j > 256:
        return None
    cost = 1.0
    cost += 0.35 * (math.log2(inner_i) - 2) ** 2
    cost += 0.25 * (math.log2(inner_j) - 3) ** 2
    cost += 0.0 if knobs["vectorize"] else 0.9
    cost += 0.3 if knobs["unroll"] else 0.0
    cost += 0.0 if knobs["inner_order"] == (0, 1) else 0.5
    noise = np.random.default_rng([seed, inner_i, inner_j]).random()
    return 1e-4 * (cost + 0.05 * noise)


class Replay:
    """Answers candidates from ``seconds_of`` and counts what it measured."""

    def __init__(self, space: TemplateSpace, seconds_of: Callable[[Config], float | None]):
        self.space = space
        self.seconds_of = seconds_of
        self.measured: Counter[int] = Counter()

    def measure(self, candidates: Sequence[MeasureCandidate]) -> list[MeasureResult]:
        results = []
        for candidate in candidates:
            self.measured[candidate.config.index] += 1
            seconds = self.seconds_of(candidate.config)
            error = None if seconds is not None else "replayed build error"
            results.append(MeasureResult(seconds, error))
        return results

    def exhaustive_best(self) -> int:
        """The index of the fastest legal config, found by pricing them all."""
        best: tuple[float, int] | None = None
        for index in range(self.space.size):
            seconds = self.seconds_of(self.space.config(index))
            if seconds is not None and (best is None or (seconds, index) < best):
                best = (seconds, index)
        assert best is not None
        return best[1]


def run(strategy: SearchStrategy, replay: Replay, stop_at: int | None = None) -> list[int]:
    """Drive the ask/tell loop to the end (or until config ``stop_at`` is measured);
    returns the sizes of the batches asked for."""
    sizes = []
    while True:
        batch = strategy.generate_measure_candidates()
        if batch is None:
            return sizes
        sizes.append(len(batch))
        strategy.notify_runner_results(batch, replay.measure(batch))
        if stop_at is not None and any(c.config.index == stop_at for c in batch):
            return sizes


def trials_to(strategy: SearchStrategy, index: int) -> int | None:
    """How many measured trials it took the strategy to measure config ``index``."""
    measured = [o for o in strategy.history if not o.invalid]
    for position, observation in enumerate(measured, start=1):
        if observation.config.index == index:
            return position
    return None
