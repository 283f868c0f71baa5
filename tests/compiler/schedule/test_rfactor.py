"""rfactor: a reduction factored over one of its loops into partial results and a
write-back computes what numpy computes (reference interpreter and LLVM, also with
the partials' loop made parallel), illegal uses raise ScheduleError and change
nothing, and the trace replays from JSON."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func
from schedule_checks import assert_refused
from workloads import softmax, softmax_ref

import compiler
from compiler import te
from compiler.ir.function import PrimFunc
from compiler.schedule.primitives.common import block_names
from compiler.schedule.schedule import Schedule
from compiler.schedule.trace import Trace

REDUCERS: dict[str, tuple[Callable[..., object], Callable[..., np.ndarray]]] = {
    "sum": (te.sum, np.sum),
    "max": (te.max, np.max),
    "min": (te.min, np.min),
}


def row_reduce(kind: str, m: int, n: int) -> PrimFunc:
    a = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    reduce, _ = REDUCERS[kind]
    b = te.compute((m,), lambda i: reduce(a[i, k], axis=k), name="B")
    return te.create_prim_func([a, b])


def check(sch: Schedule, expected: Callable[[np.ndarray], np.ndarray], seed: int = 0) -> None:
    """The interpreter and the LLVM build write ``expected(A)`` into the output."""
    func = sch.mod["main"]
    args = random_args(func, seed=seed)
    want = expected(args[0])
    run_func(func, *args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-5)
    args[-1][...] = np.nan
    compiler.build(func)["main"](*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-5)


def replays(sch: Schedule, workload: PrimFunc) -> bool:
    fresh = Schedule(workload)
    Trace.from_json(sch.trace.to_json_string()).apply_to_schedule(fresh)
    return fresh.mod.script() == sch.mod.script()


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(sorted(REDUCERS)),
    m=st.integers(1, 6),
    n=st.integers(1, 13),
    factor=st.integers(1, 5),
    inner=st.booleans(),
    axis=st.sampled_from([0, 1, -1, -2]),
)
def test_rfactor_of_a_split_row_reduction(
    kind: str, m: int, n: int, factor: int, inner: bool, axis: int
) -> None:
    func = row_reduce(kind, m, n)
    sch = Schedule(func)
    _, k = sch.get_loops(sch.get_block("B"))
    outer_k, inner_k = sch.split(k, [None, factor])
    if inner and factor > n:
        # Partials past the row's end would never be initialised.
        assert_refused(sch, lambda: sch.rfactor(inner_k, axis), match="first reduction step")
        return
    rf = sch.rfactor(inner_k if inner else outer_k, axis)
    assert block_names(sch.mod["main"]) == [rf.name, "B"]
    _, numpy_reduce = REDUCERS[kind]
    check(sch, lambda a: numpy_reduce(a, axis=1), seed=m * 100 + n)
    assert replays(sch, func)


@pytest.mark.parametrize("n", [64, 1000, 37])
def test_parallel_partials_of_a_whole_vector_sum(n: int) -> None:
    """Few output points: the partials' loop carries the parallelism."""
    a = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    b = te.compute((1,), lambda _: te.sum(a[k], axis=k), name="B")
    func = te.create_prim_func([a, b])
    sch = Schedule(func)
    _, k_loop = sch.get_loops(sch.get_block("B"))
    outer, _ = sch.split(k_loop, [8, None])
    sch.rfactor(outer, 0)
    sch.parallel(outer)
    check(sch, lambda x: x.sum(keepdims=True).reshape(1))
    assert replays(sch, func)


def test_softmax_row_max_and_sum_through_parallel_partials() -> None:
    func = softmax(6, 40)
    sch = Schedule(func)
    for name in ("M", "S"):
        _, k = sch.get_loops(sch.get_block(name))
        outer, _ = sch.split(k, [4, None])
        sch.rfactor(outer, 0)
        sch.parallel(outer)
    check(sch, softmax_ref)
    assert replays(sch, func)


def test_rfactor_of_a_non_dividing_split() -> None:
    func = row_reduce("sum", 3, 10)
    sch = Schedule(func)
    _, k = sch.get_loops(sch.get_block("B"))
    outer, _ = sch.split(k, [None, 4])
    sch.rfactor(outer, 1)
    check(sch, lambda a: a.sum(axis=1))


def test_rfactor_of_a_matmul_reduction() -> None:
    a = te.placeholder((3, 8), name="A")
    w = te.placeholder((8, 5), name="W")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((3, 5), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="C")
    func = te.create_prim_func([a, w, c])
    sch = Schedule(func)
    _, _, k_loop = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(k_loop, [None, 2])
    sch.rfactor(inner, 2)
    args = random_args(sch.mod["main"], seed=4)
    want = args[0] @ args[1]
    compiler.build(sch.mod["main"])["main"](*args)
    np.testing.assert_allclose(args[2], want, rtol=1e-4, atol=1e-5)
    assert replays(sch, func)


def test_rfactor_of_a_block_computed_at_its_consumer() -> None:
    a = te.placeholder((3, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    b = te.compute((3,), lambda i: te.sum(a[i, k], axis=k), name="B")
    c = te.compute((3,), lambda i: b[i] + 1.0, name="C")
    sch = Schedule(te.create_prim_func([a, c]))
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    inner = sch.get_loops(sch.get_block("B"))[-1]
    sch.rfactor(inner, 0)
    args = random_args(sch.mod["main"], seed=2)
    run_func(sch.mod["main"], *args)
    np.testing.assert_allclose(args[1], args[0].sum(axis=1) + 1, rtol=1e-5)


# refusals ---------------------------------------------------------------------------


def test_rfactor_at_a_spatial_loop_is_refused() -> None:
    sch = Schedule(row_reduce("sum", 3, 6))
    i, _ = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.rfactor(i, 0), match="not a reduction loop")


def test_rfactor_of_an_elementwise_block_is_refused() -> None:
    a = te.placeholder((4,), name="A")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.rfactor(i, 0), match="not a reduction")


@pytest.mark.parametrize("axis", [2, -3, 7])
def test_rfactor_with_factor_axis_out_of_range_is_refused(axis: int) -> None:
    sch = Schedule(row_reduce("max", 3, 6))
    _, k = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.rfactor(k, axis), match="factor_axis .* out of range")


def test_rfactor_of_a_reduction_with_a_non_identity_init_is_refused() -> None:
    a = te.placeholder((3, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    b = te.compute((3,), lambda i: te.sum(a[i, k], axis=k, init=1.0), name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    _, k_loop = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.rfactor(k_loop, 0), match="not the identity")


def test_rfactor_at_a_loop_fused_across_kinds_is_refused() -> None:
    sch = Schedule(row_reduce("sum", 3, 6))
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    assert_refused(sch, lambda: sch.rfactor(fused, 0), match="binds both spatial and reduction")


def test_rfactor_at_a_loop_holding_two_blocks_is_refused() -> None:
    func = softmax(3, 6)
    sch = Schedule(func)
    i, _ = sch.get_loops(sch.get_block("E"))
    sch.compute_at(sch.get_block("M"), i)
    assert_refused(sch, lambda: sch.rfactor(i, 0), match="exactly one block")
