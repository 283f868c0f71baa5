"""The evolutionary search's location sweep: the fastest point's neighbours in one
compute location (a convolution's padding inline, at the root or at a tile loop) are
proposed first, so every location of its blocks gets measured within a few asks,
where mutation alone seldom moves one."""

from __future__ import annotations

import random

import pytest
from replay_measurements import Replay

from compiler.workload.spec import workload_from_spec
from tuner import search
from tuner.search.base import SearchError, replays
from tuner.search.evolutionary import COMPUTE_LOCATION
from tuner.space import GeneratedSpace, Space, TraceCandidate
from tuner.space.base import Decisions

AVX512_TARGET = "llvm -mcpu=znver4 -num-cores=2"
BATCH = 8


@pytest.fixture(scope="module")
def space() -> Space:
    shape = {"batch": 1, "channels": 16, "height": 12, "width": 12, "kernel": 3, "padding": 1}
    func = workload_from_spec({"op": "depthwise_conv2d_nchw", "args": shape})
    return GeneratedSpace(func, target=AVX512_TARGET)


def locations(space: Space, point: Decisions) -> set[int]:
    domains = space.decision_domains(point.design)
    return {k for k, d in enumerate(domains) if d.kind == COMPUTE_LOCATION}


def location_blind(space: Space) -> Replay:
    """Seconds set by every decision but the compute locations: a point and its
    location neighbours tie, so the first of them measured stays the fastest."""

    def seconds(candidate: TraceCandidate) -> float:
        point = candidate.decisions
        moved = locations(space, point)
        kept = tuple(v for k, v in enumerate(point.values) if k not in moved)
        return 1e-4 * (1 + hash((point.design, kept)) % 997 / 100)

    return Replay(space, seconds)


def test_the_neighbours_differ_in_one_location_by_every_other_value(space: Space) -> None:
    rng = random.Random(0)
    point = next(p for p in (space.sample(rng).decisions for _ in range(50)) if locations(space, p))
    domains = space.decision_domains(point.design)
    near = list(space.neighbours(point, kind=COMPUTE_LOCATION))
    assert len(near) == sum(len(domains[k]) - 1 for k in locations(space, point))
    for neighbour in near:
        pairs = enumerate(zip(point.values, neighbour.values, strict=True))
        changed = [k for k, (a, b) in pairs if a != b]
        assert len(changed) == 1 and changed[0] in locations(space, point)
        assert neighbour.design == point.design


def swept_per_ask(space: Space, sweep_share: float) -> list[tuple[int, int]]:
    """After the warmup batch, per model-guided ask: how many of the fastest point's
    unvisited location neighbours that replay the batch took, and how many there were."""
    strategy = search.create(
        "evolutionary",
        space=space,
        max_trials=4 * BATCH,
        batch_size=BATCH,
        seed=3,
        epsilon=0.0,
        features="decision",
        sweep_share=sweep_share,
    )
    replay = location_blind(space)
    counts = []
    for ask in range(4):
        open_ = set()
        if ask:
            fastest = strategy.measured()[0].decisions
            open_ = {
                p
                for p in space.neighbours(fastest, kind=COMPUTE_LOCATION)
                if not strategy.is_visited(p) and replays(space, p)
            }
        batch = strategy.generate_measure_candidates()
        assert batch is not None
        if ask:
            hashes = {c.trace_hash for c in batch}
            taken = sum(space.candidate(p).trace_hash in hashes for p in open_)
            counts.append((taken, len(open_)))
        strategy.notify_runner_results(batch, replay.measure(batch))
    return counts


def test_each_ask_takes_its_share_of_the_fastest_points_location_neighbours(
    space: Space,
) -> None:
    swept = swept_per_ask(space, 0.5)
    assert all(taken == min(BATCH // 2, open_) for taken, open_ in swept), swept
    assert sum(taken for taken, _ in swept) >= BATCH, swept
    assert sum(taken for taken, _ in swept_per_ask(space, 0.0)) < BATCH // 2


def test_a_sweep_share_outside_zero_to_one_is_refused(space: Space) -> None:
    with pytest.raises(SearchError, match="sweep_share"):
        search.create("evolutionary", space=space, max_trials=8, sweep_share=1.5)
