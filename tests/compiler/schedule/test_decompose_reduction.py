"""decompose_reduction: the init block lands right before the chosen loop under copies
of the spatial loops, the update block keeps no init, results match numpy (reference
interpreter and LLVM), illegal uses raise ScheduleError and change nothing, and
traces replay."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import run_func
from schedule_checks import assert_refused, assert_replays
from workloads import matmul, mm_relu

import compiler
from compiler import te
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import For
from compiler.schedule.primitives.common import block_names
from compiler.schedule.schedule import Schedule


def row_max_sum(m: int, n: int) -> PrimFunc:
    """The softmax reductions: M = max_j A; S = sum_j exp(A - M)."""
    a = te.placeholder((m, n), name="A")
    j = te.reduce_axis((0, n), name="j")
    mx = te.compute((m,), lambda i: te.max(a[i, j], axis=j), name="M")
    j2 = te.reduce_axis((0, n), name="j2")
    s = te.compute((m,), lambda i: te.sum(te.exp(a[i, j2] - mx[i]), axis=j2), name="S")
    return te.create_prim_func([a, s])


def inputs(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def assert_close(sch: Schedule, args: list[np.ndarray], expected: np.ndarray) -> None:
    """Check the reference interpreter and the LLVM build against ``expected``."""
    out = np.full(expected.shape, np.nan, dtype="float32")
    run_func(sch.mod["main"], *[x.copy() for x in args], out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    out[...] = np.nan
    compiler.build(sch.mod)["main"](*[x.copy() for x in args], out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def loop_names_above(sch: Schedule, block_name: str) -> list[str]:
    return [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block(block_name))]


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 7), n=st.integers(1, 7), k=st.integers(1, 9), at=st.integers(0, 2))
def test_decompose_matmul_at_each_loop(m: int, n: int, k: int, at: int) -> None:
    func = matmul(m, n, k)
    sch = Schedule(func)
    c = sch.get_block("C")
    init = sch.decompose_reduction(c, sch.get_loops(c)[at])
    assert init.name == "C_init"
    assert block_names(sch.mod["main"]) == ["C_init", "C"]
    assert sch.get(c).init is None
    expected_loops = [["i_init", "j_init"], ["i", "j_init"], ["i", "j"]][at]
    assert loop_names_above(sch, "C_init") == expected_loops
    a, b = inputs((m, k), (k, n), seed=m + 10 * n + 100 * k)
    assert_close(sch, [a, b], a @ b)
    assert_replays(sch, func)


def test_decompose_places_init_before_the_loop_with_spatial_copies() -> None:
    sch = Schedule(matmul(3, 4, 5))
    c = sch.get_block("C")
    _, j, _ = sch.get_loops(c)
    sch.decompose_reduction(c, j)
    assert loop_names_above(sch, "C_init") == ["i", "j_init"]
    assert loop_names_above(sch, "C") == ["i", "j", "k"]
    i_loop = sch.get(sch.get_loops(c)[0])
    assert isinstance(i_loop, For)
    first, second = i_loop.body.seq  # type: ignore[attr-defined]
    assert first.loop_var.name == "j_init" and second.loop_var.name == "j"


def test_decompose_after_split_of_the_reduction() -> None:
    """Splits by 3 of k = 7 and i = 4 leave predicates; the init keeps only i's."""
    m, n, k = 4, 3, 7
    func = matmul(m, n, k)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, j, r = sch.get_loops(c)
    r0, r1 = sch.split(r, [None, 3])
    i0, i1 = sch.split(i, [None, 3])
    sch.reorder(i0, j, r0, i1, r1)
    sch.decompose_reduction(c, r0)
    init_text = sch.mod.script().split('T.block("C_init")')[1].split("T.block")[0]
    assert "T.where(i_0 * 3 + i_1_init < 4)" in init_text
    assert "k_" not in init_text.split("T.reads")[0]
    a, b = inputs((m, k), (k, n))
    assert_close(sch, [a, b], a @ b)
    assert_replays(sch, func)


def test_decompose_keeps_a_spatial_predicate() -> None:
    m, n, k = 5, 3, 4
    func = matmul(m, n, k)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, _, _ = sch.get_loops(c)
    i0, _ = sch.split(i, [None, 2])
    sch.decompose_reduction(c, i0)
    a, b = inputs((m, k), (k, n))
    assert_close(sch, [a, b], a @ b)


def test_decompose_softmax_reductions_and_chain() -> None:
    m, n = 5, 6
    func = row_max_sum(m, n)
    sch = Schedule(func)
    for name in ("M", "S"):
        blk = sch.get_block(name)
        sch.decompose_reduction(blk, sch.get_loops(blk)[1])
    assert block_names(sch.mod["main"]) == ["M_init", "M", "S_init", "S"]
    (a,) = inputs((m, n))
    expected = np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1)
    assert_close(sch, [a], expected)
    assert_replays(sch, func)


def test_decompose_then_inline_relu_consumer_stays_refused() -> None:
    func = mm_relu(3, 4, 5)
    sch = Schedule(func)
    y = sch.get_block("Y")
    sch.decompose_reduction(y, sch.get_loops(y)[0])
    a, b = inputs((3, 5), (5, 4))
    assert_close(sch, [a, b], np.maximum(a @ b, 0))


def test_decompose_refuses_a_loop_that_does_not_enclose_the_block() -> None:
    sch = Schedule(mm_relu(3, 4, 5))
    y = sch.get_block("Y")
    c_loop = sch.get_loops(sch.get_block("C"))[0]
    assert_refused(sch, sch.decompose_reduction, y, c_loop, match="'Y'.*does not enclose")


def test_decompose_refuses_a_reduce_loop_above() -> None:
    sch = Schedule(matmul(3, 4, 5))
    c = sch.get_block("C")
    i, j, r = sch.get_loops(c)
    sch.reorder(r, i, j)
    assert_refused(sch, sch.decompose_reduction, c, i, match="'k' above it binds a reduction")


def test_decompose_refuses_a_block_without_init() -> None:
    sch = Schedule(mm_relu(3, 4, 5))
    blk = sch.get_block("C")
    assert_refused(
        sch, sch.decompose_reduction, blk, sch.get_loops(blk)[0], match="'C'.*has no init"
    )
    y = sch.get_block("Y")
    sch.decompose_reduction(y, sch.get_loops(y)[2])
    assert_refused(sch, sch.decompose_reduction, y, sch.get_loops(y)[0], match="no init")


def test_decompose_names_stay_unique() -> None:
    """A block already called C_init makes the new init block C_init_1."""
    a = te.placeholder((3, 5), name="A")
    b = te.placeholder((5, 4), name="B")
    scaled = te.compute((3, 5), lambda i, j: a[i, j] * 2.0, name="C_init")
    r = te.reduce_axis((0, 5), name="k")
    c = te.compute((3, 4), lambda i, j: te.sum(scaled[i, r] * b[r, j], axis=r), name="C")
    func = te.create_prim_func([a, b, c])
    sch = Schedule(func)
    blk = sch.get_block("C")
    init = sch.decompose_reduction(blk, sch.get_loops(blk)[1])
    assert init.name == "C_init_1"
    assert block_names(sch.mod["main"]) == ["C_init", "C_init_1", "C"]
    x, y = inputs((3, 5), (5, 4))
    assert_close(sch, [x, y], (x * 2) @ y)
    assert_replays(sch, func)


def test_decompose_refuses_above_overlapping_recomputation() -> None:
    """compute_at makes Y's tiles overlap (C reads Y[i] and Y[i + 1]); hoisting the
    init above the tile loop would add the overlap twice. Below it is fine."""
    n, k = 9, 4
    a = te.placeholder((n, k), name="A")
    r = te.reduce_axis((0, k), name="k")
    y = te.compute((n,), lambda i: te.sum(a[i, r], axis=r), name="Y")
    c = te.compute((n - 1,), lambda i: y[i] + y[i + 1], name="C")
    func = te.create_prim_func([a, c])
    sch = Schedule(func)
    y_block = sch.get_block("Y")
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 2])
    sch.compute_at(y_block, i0)
    tile, inner, _ = sch.get_loops(y_block)
    assert_refused(
        sch, sch.decompose_reduction, y_block, tile, match="'v_i'.*one value at two iterations"
    )
    sch.decompose_reduction(y_block, inner)
    (x,) = inputs((n, k))
    sums = x.sum(axis=1)
    assert_close(sch, [x], sums[:-1] + sums[1:])
    assert_replays(sch, func)
