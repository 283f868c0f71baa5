"""Replayed measurements: a fixed table of seconds per candidate, so searches are
tested end to end, deterministically, without timing anything.

Two spaces of a small matmul: a knob template (``small_space``) and a hand-written
schedule function that draws its choices with sampling instructions
(``small_trace_space``). ``synthetic_seconds`` and ``trace_seconds`` give every
candidate of each a cost that has the shape real ones have (a best tile size per
axis, a flag that helps, a penalty per decision off its best value, a little
fixed noise, and some candidates failing the way a build can) with one known
best. They read decision *values*, not positions, so the same rule prices a
space of another shape, which is what a transfer test needs. ``Replay``
answers the search's candidates from such a rule and counts every trace it was
asked to measure.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from compiler import te
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule
from tuner import space as spaces
from tuner.search import MeasureResult, SearchStrategy
from tuner.space import Decisions, Space, Template, TemplateSpace, TraceCandidate
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
    """384 points at the default shape: 8 x 6 tiles, 2 orders, 2 x 2 flags."""
    made = spaces.create("template", func=small_matmul(m, n, k), template=SMALL_TEMPLATE)
    assert isinstance(made, TemplateSpace)
    return made


def _parallel_k(cfg: ConfigEntity, sch: Schedule) -> None:
    cfg.define_knob("parallel_k", [False, True])
    if cfg["parallel_k"].val:
        sch.parallel(sch.get_loops(sch.get_block("C"))[2])


def sometimes_illegal_space() -> TemplateSpace:
    """Two points of an 8x8x4 matmul: the first legal, the second illegal (it makes
    the reduction loop parallel), to test what illegal decisions become."""
    return TemplateSpace(small_matmul(8, 8, 4), Template("parallel_k", _parallel_k, ("C",)))


def small_schedule(sch: Schedule) -> None:
    """Tiles of i and j drawn by ``sample_perfect_tile``, and a flag drawn by
    ``sample_categorical`` that the trace records (a choice the search must make)."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, k, i1, j1)
    sch.sample_categorical(candidates=[0, 1], probs=[1.0, 1.0])


def small_trace_space(m: int = 24, n: int = 32, k: int = 8) -> Space:
    """60 points at the default shape: 6 x 5 tiles, 2 flags; no index."""
    return spaces.create("schedule_fn", func=small_matmul(m, n, k), schedule_fn=small_schedule)


def synthetic_seconds(space: Space, candidate: TraceCandidate, seed: int = 7) -> float | None:
    """The replayed cost of a template candidate: lowest at inner tiles (4, 8),
    vectorized, j innermost, not unrolled; None (a failed build) when the inner tile
    is over 256."""
    knobs = space.describe(candidate)
    return _cost(
        knobs["tile_i"][-1],
        knobs["tile_j"][-1],
        off=(0.0 if knobs["vectorize"] else 0.9)
        + (0.3 if knobs["unroll"] else 0.0)
        + (0.0 if knobs["inner_order"] == (0, 1) else 0.5),
        seed=seed,
    )


def trace_seconds(space: Space, candidate: TraceCandidate, seed: int = 7) -> float | None:
    """The replayed cost of a ``small_schedule`` candidate, by the same rule: its
    decisions are the two tiles and the flag (best at 1)."""
    tile_i, tile_j, flag = candidate.decisions.values
    return _cost(tile_i[-1], tile_j[-1], off=0.0 if flag == 1 else 0.9, seed=seed)


def _cost(inner_i: int, inner_j: int, *, off: float, seed: int) -> float | None:
    if inner_i * inner_j > 64:
        return None
    cost = 1.0 + off
    cost += 0.35 * (math.log2(inner_i) - 2) ** 2
    cost += 0.25 * (math.log2(inner_j) - 3) ** 2
    noise = np.random.default_rng([seed, inner_i, inner_j]).random()
    return 1e-4 * (cost + 0.05 * noise)


def every_point(space: Space) -> Iterator[Decisions]:
    """Every point of a space's designs, whether or not the space numbers them."""
    for design in range(len(space.design_traces())):
        domains = space.decision_domains(design)
        for values in itertools.product(*(d.values for d in domains)):
            yield Decisions(design, values)


class Replay:
    """Answers candidates from ``seconds_of`` and counts what it measured, by trace."""

    def __init__(self, space: Space, seconds_of: Callable[[TraceCandidate], float | None]) -> None:
        self.space = space
        self.seconds_of = seconds_of
        self.measured: Counter[str] = Counter()

    def measure(self, candidates: Sequence[TraceCandidate]) -> list[MeasureResult]:
        results = []
        for candidate in candidates:
            self.measured[candidate.trace_hash] += 1
            seconds = self.seconds_of(candidate)
            error = None if seconds is not None else "replayed build error"
            results.append(MeasureResult(seconds, error))
        return results

    def fresh(self) -> Replay:
        return Replay(self.space, self.seconds_of)

    def exhaustive_best(self) -> TraceCandidate:
        """The fastest legal candidate, found by pricing them all."""
        best: tuple[float, TraceCandidate] | None = None
        for point in every_point(self.space):
            candidate = self.space.candidate(point)
            seconds = self.seconds_of(candidate)
            if seconds is not None and (best is None or seconds < best[0]):
                best = (seconds, candidate)
        assert best is not None
        return best[1]


def run(strategy: SearchStrategy, replay: Replay, stop_at: str | None = None) -> list[int]:
    """Drive the ask/tell loop to the end (or until the trace of hash ``stop_at`` is
    measured); returns the sizes of the batches asked for."""
    sizes = []
    while True:
        batch = strategy.generate_measure_candidates()
        if batch is None:
            return sizes
        sizes.append(len(batch))
        strategy.notify_runner_results(batch, replay.measure(batch))
        if stop_at is not None and any(c.trace_hash == stop_at for c in batch):
            return sizes


def trials_to(strategy: SearchStrategy, digest: str) -> int | None:
    """How many measured trials it took the strategy to measure the trace ``digest``."""
    measured = [o for o in strategy.history if o.candidate is not None]
    for position, observation in enumerate(measured, start=1):
        if observation.candidate is not None and observation.candidate.trace_hash == digest:
            return position
    return None


def counting_replays(space: Space, monkeypatch: pytest.MonkeyPatch) -> set[Decisions]:
    """The set that every point ``space`` replays from now on is added to."""
    replayed: set[Decisions] = set()
    replay_point = space.candidate

    def counted(decisions: Decisions) -> TraceCandidate:
        replayed.add(decisions)
        return replay_point(decisions)

    monkeypatch.setattr(space, "candidate", counted)
    return replayed
