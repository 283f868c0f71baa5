"""A generated space has several designs (a GEMM: tiled with or without a write
cache, packed, with its epilogue fused at one level or another). The random points
take the designs in turns, and the evolutionary search shares its batches among the
designs fastest so far, halving them as measurements come in (successive halving,
once per equal share of the budget), so that a design whose first random points were
slow still gets bred from."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from replay_measurements import Replay, small_matmul

from tuner import search
from tuner.search.base import design_rotation, replays
from tuner.search.evolutionary import DESIGN_HALVING_TRIALS
from tuner.space import GeneratedSpace, Space, TraceCandidate

AVX512_TARGET = "llvm -mcpu=znver4 -num-cores=2"


@pytest.fixture(scope="module")
def space() -> Space:
    made = GeneratedSpace(small_matmul(64, 64, 64), target=AVX512_TARGET)
    assert made.design_count >= 4, made.design_count
    return made


def by_design(space: Space) -> Replay:
    """Design d runs d + 1 times slower than design 0, whatever its decisions (which
    set a small, fixed spread within a design)."""

    def seconds(candidate: TraceCandidate) -> float:
        spread = hash(candidate.decisions.values) % 97 / 1000
        return 1e-4 * (candidate.decisions.design + 1) * (1 + spread)

    return Replay(space, seconds)


def test_the_rotation_gives_every_design_once_a_turn() -> None:
    rotation = design_rotation(range(5), random.Random(3))
    turns = [[next(rotation) for _ in range(5)] for _ in range(4)]
    assert all(sorted(turn) == list(range(5)) for turn in turns)
    assert len({tuple(turn) for turn in turns}) > 1  # shuffled each turn


def test_random_points_take_the_designs_in_turns_and_replay(space: Space) -> None:
    """About a third of this space's random points are illegal; a design's turn draws
    until one replays, so every design gets its share of legal points."""
    strategy = search.create("random", space=space, max_trials=64)
    drawn = strategy.random_unvisited()
    points = [next(drawn) for _ in range(4 * space.design_count)]
    assert Counter(point.design for point in points) == {d: 4 for d in range(space.design_count)}
    assert all(replays(space, point) for point in points)
    illegal = 0
    rng = random.Random(0)
    for _ in range(100):
        illegal += not replays(space, space.random_decisions(rng))
    assert illegal >= 10, illegal  # the retry is what the second assertion checks


@pytest.mark.parametrize("batches", [5, 12])
def test_the_designs_a_batch_is_shared_among_halve_fastest_first(
    space: Space, batches: int
) -> None:
    """Batch 1 is random (every design); then the batch goes to the faster half of the
    designs before, down to the fastest, once per equal share of the budget (at least
    DESIGN_HALVING_TRIALS measured): a budget of 5 batches halves after each batch
    but the first, one of 12 after every third (this space's designs need three
    halvings, and the last design gets a stretch to itself)."""
    replay = by_design(space)
    count = space.design_count
    halvings_needed = math.ceil(math.log2(count))
    assert halvings_needed == 3, count  # the intervals below assume it
    strategy = search.create(
        "evolutionary",
        space=space,
        max_trials=batches * DESIGN_HALVING_TRIALS,
        batch_size=DESIGN_HALVING_TRIALS,
        seed=1,
        epsilon=0.0,
        features="decision",
    )
    seen = []
    while (batch := strategy.generate_measure_candidates()) is not None:
        seen.append({candidate.decisions.design for candidate in batch})
        strategy.notify_runner_results(batch, replay.measure(batch))
    budget = batches * DESIGN_HALVING_TRIALS
    interval = max(DESIGN_HALVING_TRIALS, budget // (halvings_needed + 1))
    expected = [
        set(range(math.ceil(count / 2 ** (k * DESIGN_HALVING_TRIALS // interval))))
        for k in range(batches)
    ]
    assert seen == expected, (seen, expected)
    assert seen[-1] == {0}


def test_a_search_that_learned_from_other_workloads_keeps_every_design(space: Space) -> None:
    """With another workload's records (a model's task after the first), the model they
    taught judges every design from the first ask: no design is left out, and the
    batches are not shared out in turns."""
    other = GeneratedSpace(small_matmul(32, 64, 64), target=AVX512_TARGET)
    assert not space.shares_points_with(other)
    rng = random.Random(5)
    records = [(other.sample(rng).trace, 1e-4 * (1 + k % 7)) for k in range(24)]
    alone = search.create("evolutionary", space=space, max_trials=64, features="decision")
    taught = search.create("evolutionary", space=space, max_trials=64, features="decision")
    assert taught.learn_from(other, records) == 24
    assert alone._kept_designs() == list(range(space.design_count))
    assert taught._kept_designs() is None
