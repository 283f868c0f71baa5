"""Sampling instructions: sample_perfect_tile and sample_categorical draw valid values,
reproducibly from a seed, validate given decisions, and feed split directly."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func

from compiler import te
from compiler.ir import expr as E
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Evaluate, For, ForKind
from compiler.schedule import ExprRV, Schedule, ScheduleError
from compiler.schedule.primitives import sample_categorical, sample_perfect_tile

FAST = settings(max_examples=40, deadline=None)


def loop_of(extent: int | E.PrimExpr) -> For:
    return For(E.Var("i"), E.const(0), E.convert(extent), ForKind.SERIAL, Evaluate(E.const(0)))


def matmul(m: int, n: int, k: int) -> PrimFunc:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


# sample_perfect_tile ---------------------------------------------------------------


@FAST
@given(
    extent=st.integers(1, 720),
    n=st.integers(1, 4),
    max_innermost=st.integers(1, 64),
    seed=st.integers(0, 2**16),
)
def test_perfect_tile_multiplies_to_the_extent(
    extent: int, n: int, max_innermost: int, seed: int
) -> None:
    loop = loop_of(extent)
    feasible = any(
        extent % d == 0 and d <= max_innermost and (n > 1 or d == extent)
        for d in range(1, extent + 1)
    )
    if not feasible:
        with pytest.raises(ScheduleError, match="cannot be tiled"):
            sample_perfect_tile(random.Random(seed), loop, n, max_innermost, None)
        return
    factors = sample_perfect_tile(random.Random(seed), loop, n, max_innermost, None)
    assert len(factors) == n
    assert all(isinstance(f, int) and f >= 1 for f in factors)
    assert math.prod(factors) == extent
    assert factors[-1] <= max_innermost
    again = sample_perfect_tile(random.Random(seed), loop, n, max_innermost, None)
    assert again == factors
    assert sample_perfect_tile(random.Random(seed + 1), loop, n, max_innermost, factors) == factors


def test_perfect_tile_draws_different_tilings() -> None:
    rng = random.Random(0)
    seen = {tuple(sample_perfect_tile(rng, loop_of(64), 3, 16, None)) for _ in range(200)}
    assert len(seen) > 10
    assert all(t[-1] <= 16 for t in seen)


@pytest.mark.parametrize(
    "decision, match",
    [
        ([2, 6], "has 2 factors"),
        ([2, 2, 2], "product is 12"),
        ([5, 1, 2], "product is 12"),
        ([1, 1, 12], "above max_innermost_factor"),
        ([3, -2, -2], "positive"),
        ([3, 2.0, 2], "list of ints"),
        (6, "list of ints"),
        ([3, True, 4], "list of ints"),
    ],
)
def test_perfect_tile_rejects_bad_decisions(decision: Any, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        sample_perfect_tile(random.Random(0), loop_of(12), 3, 8, decision)


def test_perfect_tile_rejects_symbolic_extents_and_bad_arguments() -> None:
    with pytest.raises(ScheduleError, match="not a positive constant"):
        sample_perfect_tile(random.Random(0), loop_of(E.Var("n")), 2, 16, None)
    with pytest.raises(ScheduleError, match="n must be"):
        sample_perfect_tile(random.Random(0), loop_of(8), 0, 16, None)
    with pytest.raises(ScheduleError, match="max_innermost_factor must be"):
        sample_perfect_tile(random.Random(0), loop_of(8), 2, 0, None)


@FAST
@given(
    m=st.integers(1, 12),
    n=st.integers(1, 12),
    k=st.integers(1, 12),
    parts=st.integers(2, 3),
    seed=st.integers(0, 1000),
)
def test_sampled_tiles_split_loops(m: int, n: int, k: int, parts: int, seed: int) -> None:
    func = matmul(m, n, k)
    sch = Schedule(func, seed=seed)
    for loop in sch.get_loops(sch.get_block("C")):
        factors = sch.sample_perfect_tile(loop=loop, n=parts, max_innermost_factor=4)
        assert all(isinstance(v, ExprRV) for v in factors)
        sch.split(loop=loop, factors=factors)
    a, b, c = random_args(func)
    run_func(sch.mod, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_schedule_sampling_is_reproducible_from_the_seed() -> None:
    def decisions(seed: int) -> list[Any]:
        sch = Schedule(matmul(48, 36, 60), seed=seed)
        for loop in sch.get_loops(sch.get_block("C")):
            sch.sample_perfect_tile(loop=loop, n=3)
        sch.sample_categorical(candidates=[1, 2, 4, 8], probs=[1, 1, 1, 1])
        return list(sch.trace.decisions.values())

    assert decisions(7) == decisions(7)
    assert any(decisions(7) != decisions(s) for s in range(8, 12))


def test_rejected_sampling_leaves_the_schedule_unchanged() -> None:
    sch = Schedule(matmul(6, 6, 6), seed=0)
    i, j, _k = sch.get_loops(sch.get_block("C"))
    before = (sch.mod, str(sch.trace))
    with pytest.raises(ScheduleError):
        sch.sample_perfect_tile(loop=i, n=2, decision=[4, 2])
    assert (sch.mod, str(sch.trace)) == before
    first = sch.copy().sample_perfect_tile(loop=j, n=2)
    second = sch.sample_perfect_tile(loop=j, n=2)
    assert [v.value for v in first] == [v.value for v in second]


# sample_categorical ----------------------------------------------------------------


def test_categorical_follows_the_weights() -> None:
    rng = random.Random(1)
    counts = Counter(
        sample_categorical(rng, [10, 20, 30], [0.2, 0.0, 0.8], None) for _ in range(2000)
    )
    assert counts[1] == 0
    assert 300 < counts[0] < 500
    assert counts[0] + counts[2] == 2000


def test_categorical_in_a_schedule_returns_the_candidate() -> None:
    sch = Schedule(matmul(4, 4, 4), seed=3)
    value = sch.sample_categorical(candidates=[16, 32, 64], probs=[1, 1, 1])
    index = sch.trace.decisions[0]
    assert value.value == [16, 32, 64][index]
    fixed = sch.sample_categorical(candidates=[16, 32, 64], probs=[1, 1, 1], decision=2)
    assert fixed.value == 64


@pytest.mark.parametrize(
    "candidates, probs, decision, match",
    [
        ([1, 2], [1.0], None, "as long as"),
        ([], [], None, "non-empty"),
        ([1, 2], [-1.0, 2.0], None, "non-negative"),
        ([1, 2], [0.0, 0.0], None, "not all zero"),
        ([1, 2], [float("inf"), 1.0], None, "finite"),
        ([1.5, 2], [1.0, 1.0], None, "must be ints"),
        ([1, 2], [1.0, 1.0], 2, "index in"),
        ([1, 2], [1.0, 1.0], -1, "index in"),
        ([1, 2], [1.0, 1.0], "0", "index in"),
        ([1, 2], [0.0, 1.0], 0, "probability is 0"),
    ],
)
def test_categorical_rejects_bad_input(
    candidates: Any, probs: Any, decision: Any, match: str
) -> None:
    with pytest.raises(ScheduleError, match=match):
        sample_categorical(random.Random(0), candidates, probs, decision)
