"""The evolutionary search's sweep. First the fastest point's twins: the same
decisions in each other design with the same domains (a GEMM's accumulator written
back at one tile level or another), which mutations, keeping the design, never
reach. Then its neighbours in one compute location (a convolution's padding inline,
at the root or at a tile loop), so every location of its blocks gets measured within
a few asks, where mutation alone seldom moves one."""

from __future__ import annotations

import random

import pytest
from replay_measurements import Replay, small_matmul

from compiler.workload.spec import workload_from_spec
from tuner import search
from tuner.search.base import SearchError, SearchStrategy, replays
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


def sweeping(space: Space, sweep_share: float, *, asks: int, seed: int) -> SearchStrategy:
    """An evolutionary search of ``asks`` batches of BATCH, with the cheap decision
    features and no random share, so that its batches are the model's and the sweep's."""
    return search.create(
        "evolutionary",
        space=space,
        max_trials=asks * BATCH,
        batch_size=BATCH,
        seed=seed,
        epsilon=0.0,
        features="decision",
        sweep_share=sweep_share,
    )


def swept_per_ask(space: Space, sweep_share: float) -> list[tuple[int, int, int]]:
    """After the warmup batch, per model-guided ask: how many of the fastest point's
    unvisited location neighbours that replay the batch took, how many there were,
    and how many unvisited twins that replay it had (the sweep takes those first)."""
    strategy = sweeping(space, sweep_share, asks=4, seed=3)
    replay = location_blind(space)
    counts = []
    for ask in range(4):
        open_ = set()
        twins = 0
        if ask:
            fastest = strategy.measured()[0].decisions
            open_ = {
                p
                for p in space.neighbours(fastest, kind=COMPUTE_LOCATION)
                if not strategy.is_visited(p) and replays(space, p)
            }
            twins = sum(
                not strategy.is_visited(p) and replays(space, p) for p in space.twins(fastest)
            )
        batch = strategy.generate_measure_candidates()
        assert batch is not None
        if ask:
            hashes = {c.trace_hash for c in batch}
            taken = sum(space.candidate(p).trace_hash in hashes for p in open_)
            counts.append((taken, len(open_), twins))
        strategy.notify_runner_results(batch, replay.measure(batch))
    return counts


def test_each_ask_takes_its_share_of_the_fastest_points_location_neighbours(
    space: Space,
) -> None:
    swept = swept_per_ask(space, 0.5)
    share = BATCH // 2
    assert all(taken == min(share - min(twins, share), open_) for taken, open_, twins in swept)
    assert sum(taken for taken, _, _ in swept) >= BATCH, swept
    assert sum(taken for taken, _, _ in swept_per_ask(space, 0.0)) < BATCH // 2


def test_a_sweep_share_outside_zero_to_one_is_refused(space: Space) -> None:
    with pytest.raises(SearchError, match="sweep_share"):
        search.create("evolutionary", space=space, max_trials=8, sweep_share=1.5)


@pytest.fixture(scope="module")
def matmul_space() -> Space:
    return GeneratedSpace(small_matmul(64, 64, 64), target=AVX512_TARGET)


def twin_designs(space: Space, design: int) -> set[int]:
    domains = space.decision_domains(design)
    others = range(space.design_count)
    return {d for d in others if d != design and space.decision_domains(d) == domains}


def test_twins_are_the_point_in_every_other_design_with_its_domains(
    matmul_space: Space,
) -> None:
    space = matmul_space
    rng = random.Random(0)
    points = [space.random_decisions(rng, design) for design in range(space.design_count)]
    with_twins = [point for point in points if twin_designs(space, point.design)]
    assert with_twins, "the space should have designs that share their domains"
    for point in points:
        twins = list(space.twins(point))
        assert {twin.design for twin in twins} == twin_designs(space, point.design)
        assert all(twin.values == point.values for twin in twins)


def design_one_faster(space: Space) -> Replay:
    """Design 1, which has twins, runs at half the time of the others, whatever the
    decisions (which set a small, fixed spread)."""
    assert twin_designs(space, 1)

    def seconds(candidate: TraceCandidate) -> float:
        point = candidate.decisions
        spread = 1 + hash(point.values) % 97 / 1000
        return 1e-4 * spread * (1 if point.design == 1 else 2)

    return Replay(space, seconds)


def open_twins(space: Space, strategy: SearchStrategy, fastest: Decisions) -> set[str]:
    return {
        space.candidate(twin).trace_hash
        for twin in space.twins(fastest)
        if not strategy.is_visited(twin) and replays(space, twin)
    }


def test_each_ask_proposes_the_fastest_points_twins_first(matmul_space: Space) -> None:
    space = matmul_space
    strategy = sweeping(space, 0.5, asks=5, seed=1)
    replay = design_one_faster(space)
    proposed = 0
    for ask in range(5):
        expected: set[str] = set()
        if ask:
            expected = open_twins(space, strategy, strategy.measured()[0].decisions)
        batch = strategy.generate_measure_candidates()
        assert batch is not None
        hashes = [candidate.trace_hash for candidate in batch]
        assert len(expected) <= BATCH // 2
        assert expected <= set(hashes[: len(expected)]), ask
        proposed += len(expected)
        strategy.notify_runner_results(batch, replay.measure(batch))
    assert proposed >= 1
