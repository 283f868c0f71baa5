"""cache_read and cache_write: results match numpy (reference interpreter and LLVM),
the copy blocks land where they must, names stay unique, the caches combine with
compute_at / reverse_compute_at under tile loops, illegal uses raise ScheduleError
and change nothing, and traces replay."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import run_func
from schedule_checks import assert_refused, assert_replays
from workloads import matmul, mm_relu, softmax, softmax_ref

import compiler
from compiler import te
from compiler.ir.analysis import find_block_realize
from compiler.ir.function import PrimFunc
from compiler.schedule.primitives.common import block_names, replace_node
from compiler.schedule.schedule import Schedule


def two_readers(m: int, n: int) -> PrimFunc:
    """B = A * 2; C = B + A: A has two readers."""
    a = te.placeholder((m, n), name="A")
    b = te.compute((m, n), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((m, n), lambda i, j: b[i, j] + a[i, j], name="C")
    return te.create_prim_func([a, c])


def inputs(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def results(sch: Schedule, args: list[np.ndarray], out_shape: tuple[int, ...]) -> list[np.ndarray]:
    """The output computed by the reference interpreter and by LLVM."""
    outs = []
    for runner in (run_func, compiler.build(sch.mod)["main"]):
        out = np.full(out_shape, np.nan, dtype="float32")
        if runner is run_func:
            run_func(sch.mod["main"], *[x.copy() for x in args], out)
        else:
            runner(*[x.copy() for x in args], out)
        outs.append(out)
    return outs


def assert_close(sch: Schedule, args: list[np.ndarray], expected: np.ndarray) -> None:
    for got in results(sch, args, expected.shape):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def alloc_of(sch: Schedule, name: str):
    return next(b for b in sch.mod["main"].root_block.alloc_buffers if b.name == name)


# cache_read ------------------------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(
    m=st.integers(1, 7),
    n=st.integers(1, 7),
    k=st.integers(1, 9),
    index=st.integers(0, 1),
    scope=st.sampled_from(["global", "local"]),
)
def test_cache_read_matmul_inputs(m: int, n: int, k: int, index: int, scope: str) -> None:
    func = matmul(m, n, k)
    sch = Schedule(func)
    cache = sch.cache_read(sch.get_block("C"), index, scope)
    name = ("A", "B")[index] + "_" + scope
    assert cache.name == name
    assert block_names(sch.mod["main"]) == [name, "C"]
    assert alloc_of(sch, name).scope == scope
    a, b = inputs((m, k), (k, n), seed=m + 10 * n + 100 * k)
    assert_close(sch, [a, b], a @ b)
    assert_replays(sch, func)


def test_cache_read_of_an_intermediate_follows_its_producer() -> None:
    func = mm_relu(5, 7, 3)
    sch = Schedule(func)
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert block_names(sch.mod["main"]) == ["Y", "Y_local", "C"]
    a, b = inputs((5, 3), (3, 7))
    assert_close(sch, [a, b], np.maximum(a @ b, 0))


def test_cache_read_redirects_only_the_given_block() -> None:
    func = two_readers(3, 5)
    sch = Schedule(func)
    sch.cache_read(sch.get_block("C"), 1, "global")
    script = sch.mod.script()
    assert "A_global[v_i, v_j] * T.float32(2.0)" not in script
    assert "A[v_i, v_j] * T.float32(2.0)" in script
    assert "B[v_i, v_j] + A_global[v_i, v_j]" in script
    sch.cache_read(sch.get_block("B"), 0, "global")
    assert block_names(sch.mod["main"]) == ["A_global_1", "A_global", "B", "C"]
    (a,) = inputs((3, 5))
    assert_close(sch, [a], a * 2 + a)
    assert_replays(sch, func)


def test_cache_read_numbering_skips_the_written_buffer() -> None:
    """C's accumulator is loaded first in its body, yet index 0 is A."""
    sch = Schedule(matmul(3, 4, 5))
    assert sch.cache_read(sch.get_block("C"), 0, "local").name == "A_local"


def test_cache_read_softmax_under_compute_at() -> None:
    m, n = 5, 6
    func = softmax(m, n)
    sch = Schedule(func)
    o = sch.get_block("O")
    cache = sch.cache_read(o, 0, "local")
    sch.compute_at(cache, sch.get_loops(o)[0])
    (a,) = inputs((m, n))
    assert_close(sch, [a], softmax_ref(a))
    assert_replays(sch, func)


@pytest.mark.parametrize("index", [-1, 2, True])
def test_cache_read_bad_index_lists_the_inputs(index: int) -> None:
    sch = Schedule(matmul(3, 4, 5))
    assert_refused(
        sch, sch.cache_read, sch.get_block("C"), index, "local", match="'C'.*0 = A, 1 = B"
    )


def test_cache_read_bad_scope_lists_the_scopes() -> None:
    sch = Schedule(matmul(3, 4, 5))
    assert_refused(
        sch,
        sch.cache_read,
        sch.get_block("C"),
        0,
        "texture",
        match="'texture'.*global, shared, local",
    )


def test_cache_read_refuses_a_producer_in_the_same_nest() -> None:
    sch = Schedule(mm_relu(4, 6, 3))
    c = sch.get_block("C")
    sch.compute_at(sch.get_block("Y"), sch.get_loops(c)[1])
    assert_refused(sch, sch.cache_read, c, 0, "local", match="'Y' writes Y inside the same")


# cache_write -------------------------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(m=st.integers(1, 7), n=st.integers(1, 7), k=st.integers(1, 9))
def test_cache_write_matmul(m: int, n: int, k: int) -> None:
    func = matmul(m, n, k)
    sch = Schedule(func)
    back = sch.cache_write(sch.get_block("C"), 0, "local")
    assert back.name == "C_local"
    assert block_names(sch.mod["main"]) == ["C", "C_local"]
    script = sch.mod.script()
    assert "C_local[v_i, v_j] = C_local[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]" in script
    assert "C[v0, v1] = C_local[v0, v1]" in script
    a, b = inputs((m, k), (k, n), seed=m + 10 * n + 100 * k)
    assert_close(sch, [a, b], a @ b)
    assert_replays(sch, func)


def test_cache_write_of_an_intermediate_and_twice() -> None:
    func = mm_relu(5, 3, 7)
    sch = Schedule(func)
    y = sch.get_block("Y")
    sch.cache_write(y, 0, "global")
    sch.cache_write(y, 0, "local")
    assert block_names(sch.mod["main"]) == ["Y", "Y_global_local", "Y_global", "C"]
    a, b = inputs((5, 7), (7, 3))
    assert_close(sch, [a, b], np.maximum(a @ b, 0))
    assert_replays(sch, func)


def test_cache_write_then_reverse_compute_at_under_a_tile() -> None:
    """The MetaSchedule pattern: local accumulator, tiled, write-back per tile."""
    m, n, k = 7, 5, 9
    func = matmul(m, n, k)
    sch = Schedule(func)
    c = sch.get_block("C")
    back = sch.cache_write(c, 0, "local")
    i, j, r = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 2])
    j0, j1 = sch.split(j, [None, 2])
    sch.reorder(i0, j0, r, i1, j1)
    sch.reverse_compute_at(back, j0)
    a_cache = sch.cache_read(c, 0, "local")
    sch.compute_at(a_cache, r)
    sch.decompose_reduction(c, r)
    a, b = inputs((m, k), (k, n))
    assert_close(sch, [a, b], a @ b)
    assert_replays(sch, func)


@pytest.mark.parametrize("factor", [3, 5])
def test_cache_write_after_split_of_an_output(factor: int) -> None:
    """A split keeps the block writing all of C, dividing (5) or not (3)."""
    func = matmul(5, 4, 6)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, _, r = sch.get_loops(c)
    sch.split(i, [None, factor])
    sch.split(r, [None, 4])
    sch.cache_write(c, 0, "local")
    a, b = inputs((5, 6), (6, 4))
    assert_close(sch, [a, b], a @ b)


def test_cache_write_after_nested_non_dividing_splits() -> None:
    """i = 7 split by 3, its outer loop split by 2: predicates on both levels."""
    func = matmul(7, 3, 4)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, j, _ = sch.get_loops(c)
    i0, _ = sch.split(i, [None, 3])
    sch.split(i0, [None, 2])
    sch.split(j, [2, 2])
    sch.cache_write(c, 0, "local")
    a, b = inputs((7, 4), (4, 3))
    assert_close(sch, [a, b], a @ b)
    assert_replays(sch, func)


def test_cache_write_refuses_an_unproven_cover_of_an_output() -> None:
    sch = Schedule(matmul(4, 6, 3))
    c = sch.get_block("C")
    i, j, _ = sch.get_loops(c)
    sch.fuse(i, j)
    assert_refused(sch, sch.cache_write, c, 0, "local", match="cannot prove it writes all of C")


def test_cache_write_refuses_a_predicate_that_skips_outputs() -> None:
    """A block guarded by ``i < 2`` leaves rows of C alone; copying back all of a
    cache would overwrite them."""
    func = matmul(4, 3, 2)
    realize = find_block_realize(func.body, "C")
    i_var = realize.iter_values[0]
    sch = Schedule(replace_node(func, realize, dataclasses.replace(realize, predicate=i_var < 2)))
    assert_refused(
        sch, sch.cache_write, sch.get_block("C"), 0, "local", match="predicate .* may skip"
    )


def test_cache_write_refuses_a_reader_in_the_same_nest() -> None:
    sch = Schedule(mm_relu(4, 6, 3))
    y = sch.get_block("Y")
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(y)[1])
    assert_refused(sch, sch.cache_write, y, 0, "local", match="'C' uses Y inside the same")


def test_cache_write_bad_index_and_scope() -> None:
    sch = Schedule(matmul(3, 4, 5))
    c = sch.get_block("C")
    assert_refused(sch, sch.cache_write, c, 1, "local", match="'C'.*1 buffer.*0 = C")
    assert_refused(sch, sch.cache_write, c, 0, "texture", match="global, shared, local")


def test_cache_write_softmax_reductions() -> None:
    m, n = 4, 7
    func = softmax(m, n)
    sch = Schedule(func)
    sch.cache_write(sch.get_block("M"), 0, "local")
    sch.cache_write(sch.get_block("S"), 0, "local")
    sch.cache_write(sch.get_block("O"), 0, "global")
    (a,) = inputs((m, n))
    assert_close(sch, [a], softmax_ref(a))
    assert_replays(sch, func)


def test_cache_read_and_write_with_symbolic_shape() -> None:
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 3.0, name="B")
    func = te.create_prim_func([a, b])
    sch = Schedule(func)
    blk = sch.get_block("B")
    sch.cache_read(blk, 0, "local")
    sch.cache_write(blk, 0, "local")
    (x,) = inputs((11,))
    out = np.full(11, np.nan, dtype="float32")
    run_func(sch.mod["main"], x, out)
    np.testing.assert_allclose(out, x * 3, rtol=1e-6)
    out[:] = np.nan
    compiler.build(sch.mod)["main"](x, out)
    np.testing.assert_allclose(out, x * 3, rtol=1e-6)
