"""Loop primitives (split, fuse, reorder, loop kinds, annotate) and the reference
interpreter they are checked with.

Every legal schedule is run by tests/support/ir_interpreter.py on random inputs and
compared with numpy; every illegal one must raise ScheduleError and leave the
schedule's module and trace exactly as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import InterpreterError, random_args, run_func

from compiler import te
from compiler.ir import expr as E
from compiler.ir.analysis import replace_buffer
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterKind,
    IterVar,
    true_predicate,
)
from compiler.schedule import Schedule, ScheduleError
from compiler.schedule.primitives.common import replace_node

FAST = settings(max_examples=50, deadline=None)


# workloads -----------------------------------------------------------------------


def elementwise(*shape: Any) -> PrimFunc:
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda *i: A[i] * 2.0 + 1.0, name="B")
    return te.create_prim_func([A, B])


def matmul_relu(m: int, n: int, k: int) -> PrimFunc:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    Y = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = te.compute((m, n), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return te.create_prim_func([A, B, C])


def matmul_relu_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a @ b, 0)


def check(
    mod: Any,
    func: PrimFunc,
    reference: Callable[..., np.ndarray],
    sizes: dict[str, int] | None = None,
) -> None:
    """Run the scheduled ``mod`` on random inputs; its last argument must equal numpy's."""
    args = random_args(func, seed=1, sizes=sizes)
    run_func(mod, *args, sizes=sizes)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-5, atol=1e-5)


def assert_rejected(sch: Schedule, action: Callable[[], Any], match: str | None = None) -> None:
    """``action`` raises ScheduleError and changes neither the module nor the trace."""
    mod, script, trace = sch.mod, sch.mod.script(), str(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        action()
    assert sch.mod is mod
    assert sch.mod.script() == script
    assert str(sch.trace) == trace


# the interpreter -------------------------------------------------------------------


def test_interpreter_runs_matmul_relu() -> None:
    func = matmul_relu(5, 3, 7)
    check(func, func, matmul_relu_ref)


def test_interpreter_binds_symbolic_sizes_from_arrays() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i > 0, A[i - 1], 0.0) + A[i], name="B")
    func = te.create_prim_func([A, B])
    a = np.random.default_rng(0).standard_normal(7).astype("float32")
    b = np.zeros(7, "float32")
    run_func(func, a, b)
    np.testing.assert_allclose(b, np.concatenate([[0], a[:-1]]) + a, rtol=1e-6)


def test_interpreter_integer_division_semantics() -> None:
    A = te.placeholder((4,), "int32", name="A")
    B = te.compute((4,), lambda i: (A[i] - 5) // 3 + (A[i] - 5) % 3 * 10, name="B")
    C = te.compute((4,), lambda i: E.Div(A[i] - 5, E.const(3)), name="C")
    func = te.create_prim_func([A, B, C])
    a = np.array([0, 1, 7, 9], "int32")
    b, c = np.zeros(4, "int32"), np.zeros(4, "int32")
    run_func(func, a, b, c)
    np.testing.assert_array_equal(b, (a - 5) // 3 + (a - 5) % 3 * 10)
    np.testing.assert_array_equal(c, np.trunc((a - 5) / 3).astype("int32"))


def test_interpreter_rejects_out_of_bounds_access() -> None:
    A = te.placeholder((5,), name="A")
    B = te.compute((4,), lambda i: A[i + 1], name="B")
    in_bounds = te.create_prim_func([A, B])
    short = Buffer("A", (E.const(4),))
    func = replace_buffer(in_bounds, in_bounds.params[0], short)
    func = dataclasses.replace(func, params=(short, func.params[1]))
    with pytest.raises(InterpreterError, match="out of bounds"):
        run_func(func, *random_args(func))


def test_interpreter_shows_uninitialized_reads_as_nan() -> None:
    func = matmul_relu(3, 3, 3)
    body = func.root_block.body.seq  # type: ignore[attr-defined]
    without_producer = Block("root", (), body[1], alloc_buffers=func.root_block.alloc_buffers)
    broken = PrimFunc(func.params, BlockRealize((), true_predicate(), without_producer))
    args = random_args(broken)
    run_func(broken, *args)
    assert np.isnan(args[-1]).all()


def test_interpreter_checks_block_bindings_against_domains() -> None:
    func = elementwise(6)
    loop = func.root_block.body
    assert isinstance(loop, For)
    widened = replace_node(func, loop, dataclasses.replace(loop, extent=E.const(7)))
    with pytest.raises(InterpreterError, match="outside its domain"):
        run_func(widened, *random_args(widened))


# split -----------------------------------------------------------------------------


factor_lists = st.lists(st.integers(1, 6), min_size=2, max_size=3).flatmap(
    lambda fs: st.one_of(
        st.just(fs),
        st.integers(0, len(fs) - 1).map(
            lambda k: [None if j == k else f for j, f in enumerate(fs)]
        ),
    )
)


@FAST
@given(m=st.integers(1, 9), n=st.integers(1, 9), axis=st.integers(0, 1), factors=factor_lists)
def test_split_matches_numpy(m: int, n: int, axis: int, factors: list[int | None]) -> None:
    func = elementwise(m, n)
    sch = Schedule(func)
    loops = sch.get_loops(sch.get_block("B"))
    extent = (m, n)[axis]
    known = int(np.prod([f for f in factors if f is not None]))
    if None not in factors and known < extent:
        assert_rejected(sch, lambda: sch.split(loops[axis], factors), "less than the extent")
        return
    new = sch.split(loops[axis], factors)
    assert len(new) == len(factors)
    check(sch.mod, func, lambda a: a * 2 + 1)


@FAST
@given(k=st.integers(1, 11), factors=factor_lists)
def test_split_of_a_reduction_loop_that_does_not_divide(k: int, factors: list[int | None]) -> None:
    func = matmul_relu(3, 4, k)
    sch = Schedule(func)
    loops = sch.get_loops(sch.get_block("Y"))
    known = int(np.prod([f for f in factors if f is not None]))
    if None not in factors and known < k:
        return
    sch.split(loops[2], factors)
    check(sch.mod, func, matmul_relu_ref)


def test_split_of_a_symbolic_loop_needs_an_inferred_factor() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    func = te.create_prim_func([A, B])
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_rejected(sch, lambda: sch.split(i, [2, 4]), "symbolic")
    _i0, _i1, _i2 = sch.split(i, [2, None, 3])
    for size in (1, 5, 6, 13):
        check(sch.mod, func, lambda a: a * 2 + 1, sizes={"n": size})


@pytest.mark.parametrize("factors", [[3], [None, None], [0, 4], [2.5, 4], [True, 12], "ab"])
def test_split_rejects_bad_factors(factors: Any) -> None:
    sch = Schedule(elementwise(12))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_rejected(sch, lambda: sch.split(i, factors))


def test_split_retires_the_old_loop_handle() -> None:
    sch = Schedule(elementwise(12))
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [3, 4])
    assert_rejected(sch, lambda: sch.split(i, [2, 6]), "no longer in function")


# fuse ------------------------------------------------------------------------------


@FAST
@given(
    shape=st.lists(st.integers(1, 5), min_size=2, max_size=4),
    data=st.data(),
)
def test_fuse_matches_numpy(shape: list[int], data: st.DataObject) -> None:
    func = elementwise(*shape)
    sch = Schedule(func)
    loops = sch.get_loops(sch.get_block("B"))
    start = data.draw(st.integers(0, len(shape) - 2))
    stop = data.draw(st.integers(start + 2, len(shape)))
    fused = sch.fuse(*loops[start:stop])
    loop = sch.get(fused)
    assert isinstance(loop, For)
    assert E.IntImm is type(loop.extent) and loop.extent.value == np.prod(shape[start:stop])
    assert loop.loop_var.name == "_".join(f"i{k}" for k in range(start, stop)) + "_fused"
    check(sch.mod, func, lambda a: a * 2 + 1)


@FAST
@given(m=st.integers(1, 6), n=st.integers(1, 6), k=st.integers(1, 6), split_k=st.integers(1, 4))
def test_fuse_after_split_and_across_a_reduction(m: int, n: int, k: int, split_k: int) -> None:
    func = matmul_relu(m, n, k)
    sch = Schedule(func)
    _i, j, r = sch.get_loops(sch.get_block("Y"))
    r0, r1 = sch.split(r, [None, split_k])
    sch.fuse(j, r0, r1)
    c_loops = sch.get_loops(sch.get_block("C"))
    sch.fuse(*c_loops)
    check(sch.mod, func, matmul_relu_ref)


def test_fuse_of_symbolic_loops() -> None:
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    func = te.create_prim_func([A, B])
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(i, j)
    sch.split(f, [None, 4])
    for sizes in ({"m": 3, "n": 5}, {"m": 1, "n": 7}, {"m": 4, "n": 1}):
        check(sch.mod, func, lambda a: a * 2 + 1, sizes=sizes)


def test_fuse_rejects_loops_that_are_not_directly_nested() -> None:
    sch = Schedule(matmul_relu(4, 5, 6))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    assert_rejected(sch, lambda: sch.fuse(i, k), "not the whole body")
    assert_rejected(sch, lambda: sch.fuse(j, i), "not the whole body")
    assert_rejected(sch, lambda: sch.fuse(i, i), "listed twice")
    ci, _cj = sch.get_loops(sch.get_block("C"))
    assert_rejected(sch, lambda: sch.fuse(k, ci))


def test_fuse_rejects_loops_that_are_not_serial() -> None:
    sch = Schedule(elementwise(4, 5))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    assert_rejected(sch, lambda: sch.fuse(i, j), "parallel")


def triangular() -> PrimFunc:
    """B[i, j] = A[i, j] for j <= i, with the inner loop's extent depending on i."""
    A = Buffer("A", (E.const(4), E.const(4)))
    B = Buffer("B", (E.const(4), E.const(4)))
    i, j = E.Var("i"), E.Var("j")
    vi, vj = E.Var("v_i"), E.Var("v_j")
    block = Block(
        "T",
        (
            IterVar(vi, E.Range.from_min_extent(0, 4), IterKind.SPATIAL),
            IterVar(vj, E.Range.from_min_extent(0, 4), IterKind.SPATIAL),
        ),
        BufferStore(B, E.BufferLoad(A, (vi, vj)) * 3.0, (vi, vj)),
    )
    inner = For(j, E.const(0), i + 1, ForKind.SERIAL, BlockRealize((i, j), true_predicate(), block))
    outer = For(i, E.const(0), E.const(4), ForKind.SERIAL, inner)
    root = Block("root", (), outer)
    return PrimFunc((A, B), BlockRealize((), true_predicate(), root))


def triangular_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.tril(np.ones((4, 4), bool)), a * 3, b)


def test_fuse_and_reorder_reject_dependent_extents() -> None:
    func = triangular()
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("T"))
    assert_rejected(sch, lambda: sch.fuse(i, j), "depends on loop 'i'")
    assert_rejected(sch, lambda: sch.reorder(j, i), "loop 'j' depends on loop 'i'")
    sch.reorder(i, j)
    a, b = random_args(func)
    expected = triangular_ref(a, b.copy())
    run_func(sch.mod, a, b)
    np.testing.assert_allclose(b, expected)


# reorder ---------------------------------------------------------------------------


@FAST
@given(
    m=st.integers(1, 6),
    n=st.integers(1, 6),
    k=st.integers(1, 6),
    tiles=st.lists(st.integers(1, 4), min_size=3, max_size=3),
    data=st.data(),
)
def test_reorder_matches_numpy(
    m: int, n: int, k: int, tiles: list[int], data: st.DataObject
) -> None:
    func = matmul_relu(m, n, k)
    sch = Schedule(func)
    chain = []
    for loop, tile in zip(sch.get_loops(sch.get_block("Y")), tiles, strict=True):
        chain.extend(sch.split(loop, [None, tile]))
    chosen = data.draw(st.lists(st.sampled_from(range(6)), min_size=1, max_size=6, unique=True))
    order = data.draw(st.permutations(chosen))
    sch.reorder(*(chain[p] for p in order))
    loops_now = [sch.get(rv).loop_var for rv in sch.get_loops(sch.get_block("Y"))]  # type: ignore[union-attr]
    expected = [chain[p].var for p in range(6)]
    for position, p in zip(sorted(chosen), order, strict=True):
        expected[position] = chain[p].var
    assert loops_now == expected
    check(sch.mod, func, matmul_relu_ref)


def test_reorder_keeps_unlisted_loops_in_place() -> None:
    sch = Schedule(matmul_relu(4, 6, 5))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    _j0, _j1 = sch.split(j, [2, 3])
    sch.reorder(k, i)
    names = [sch.get(rv).loop_var.name for rv in sch.get_loops(sch.get_block("Y"))]  # type: ignore[union-attr]
    assert names == ["k", "j_0", "j_1", "i"]


def test_reorder_rejects_loops_of_different_nests_or_branches() -> None:
    sch = Schedule(matmul_relu(4, 5, 6))
    _i, _j, k = sch.get_loops(sch.get_block("Y"))
    ci, _cj = sch.get_loops(sch.get_block("C"))
    assert_rejected(sch, lambda: sch.reorder(k, ci), "not nested in one chain")
    assert_rejected(sch, lambda: sch.reorder(k, k), "listed twice")


# loop kinds ------------------------------------------------------------------------


def test_parallel_vectorize_unroll_of_spatial_loops() -> None:
    func = matmul_relu(5, 6, 7)
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i, j0, k, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    sch.unroll(k)
    kinds = [sch.get(rv).kind for rv in (i, j0, k, j1)]  # type: ignore[union-attr]
    assert kinds == [ForKind.PARALLEL, ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED]
    assert "T.parallel" in sch.mod.script() and "T.vectorized" in sch.mod.script()
    check(sch.mod, func, matmul_relu_ref)


def test_parallel_and_vectorize_reject_a_reduce_loop() -> None:
    sch = Schedule(matmul_relu(4, 5, 6))
    _i, j, k = sch.get_loops(sch.get_block("Y"))
    message = "cannot parallelize loop 'k': it binds the reduce variable v_k of block 'Y'"
    assert_rejected(sch, lambda: sch.parallel(k), message)
    assert_rejected(sch, lambda: sch.vectorize(k), "cannot vectorize loop 'k'")
    f = sch.fuse(j, k)
    assert_rejected(sch, lambda: sch.parallel(f), "reduce variable v_k")
    sch.unroll(f)


def test_parallel_rejects_a_loop_a_reduction_does_not_depend_on() -> None:
    func = matmul_relu(3, 4, 5)
    t = E.Var("t")
    nest = func.root_block.body.seq[0]  # type: ignore[attr-defined]
    root = func.root_block
    repeated = For(t, E.const(0), E.const(2), ForKind.SERIAL, nest)
    body = type(root.body)((repeated, *root.body.seq[1:]))  # type: ignore[attr-defined]
    new_root = Block("root", (), body, alloc_buffers=root.alloc_buffers)
    twice = PrimFunc(func.params, BlockRealize((), true_predicate(), new_root))
    sch = Schedule(twice)
    (t_rv, *_) = sch.get_loops(sch.get_block("Y"))
    assert_rejected(sch, lambda: sch.parallel(t_rv), "updates its output in place")
    (_t_c, _) = sch.get_loops(sch.get_block("C"))
    sch.unroll(t_rv)
    check(sch.mod, func, matmul_relu_ref)


def overlapping_sums() -> PrimFunc:
    """Z[i] = Y[i] + Y[i + 1] with Y a row sum: computed at a split of Z's loop, Y
    recomputes one element in neighbouring iterations."""
    A = te.placeholder((8, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    Y = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="Y")
    Z = te.compute((7,), lambda i: Y[i] + Y[i + 1], name="Z")
    return te.create_prim_func([A, Z])


def test_parallel_rejects_a_reduction_recomputed_in_overlapping_iterations() -> None:
    func = overlapping_sums()
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("Z"))
    i0, _i1 = sch.split(i, [None, 2])
    sch.compute_at(sch.get_block("Y"), i0)
    assert_rejected(sch, lambda: sch.parallel(i0), "may update the same elements")
    assert_rejected(sch, lambda: sch.vectorize(i0), "cannot vectorize loop 'i_0'")
    sch.unroll(i0)
    check(sch.mod, func, lambda a: a.sum(1)[:-1] + a.sum(1)[1:])


def test_parallel_rejects_a_fused_loop_that_repeats_a_reduction() -> None:
    X = te.placeholder((3, 5), name="X")
    j = te.reduce_axis((0, 5), "j")
    M = te.compute((3,), lambda i: te.max(X[i, j], axis=j), name="M")
    E2 = te.compute((3, 5), lambda i, c: X[i, c] - M[i], name="E")
    func = te.create_prim_func([X, E2])
    sch = Schedule(func)
    i, c = sch.get_loops(sch.get_block("E"))
    sch.compute_at(sch.get_block("M"), c)
    assert_rejected(sch, lambda: sch.parallel(c), "none of its variables depends on the loop")
    fused = sch.fuse(i, c)
    assert_rejected(sch, lambda: sch.parallel(fused), "may update the same elements")
    check(sch.mod, func, lambda x: x - x.max(1, keepdims=True))


def tiled_matmul(m: int, n: int, k: int, tile: int) -> tuple[PrimFunc, Schedule, Any]:
    func = matmul_relu(m, n, k)
    sch = Schedule(func)
    i, j, r = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    sch.reorder(i0, j0, i1, j1, r)
    return func, sch, sch.fuse(i0, j0)


@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_parallel_accepts_fused_tiles_and_splits_of_them(chunk: int) -> None:
    func, sch, fused = tiled_matmul(10, 9, 4, 3)
    outer, _ = sch.split(fused, [None, chunk])
    sch.parallel(outer)
    check(sch.mod, func, matmul_relu_ref)


def test_parallel_accepts_large_tiled_loops_quickly() -> None:
    _, sch, fused = tiled_matmul(1024, 1024, 1024, 16)
    sch.copy().parallel(fused)
    outer, _ = sch.split(fused, [None, 7])
    sch.parallel(outer)


def test_parallel_of_a_symbolic_loop() -> None:
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    k = te.reduce_axis((0, 3), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    sch = Schedule(func)
    (i, _r) = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 4])
    sch.parallel(i0)
    sch.vectorize(i1)
    check(sch.mod, func, lambda a: a.sum(1), sizes={"n": 9})


# annotate --------------------------------------------------------------------------


def test_annotate_blocks_and_loops() -> None:
    sch = Schedule(matmul_relu(3, 4, 5))
    block = sch.get_block("Y")
    i, j, k = sch.get_loops(block)
    sch.annotate(block, "meta.tile", [4, 2, 1])
    sch.annotate(i, "pragma_unroll", 8)
    sch.annotate(j, "note", "x")
    sch.annotate(k, "flag", True)
    assert sch.get(block).annotations == {"meta.tile": [4, 2, 1]}  # type: ignore[union-attr]
    assert sch.get(i).annotations == {"pragma_unroll": 8}  # type: ignore[union-attr]
    assert sch.get(k).annotations == {"flag": True}  # type: ignore[union-attr]
    assert "meta.tile" in sch.mod.script()


def test_annotate_with_a_sampled_value_replays_with_the_new_decision() -> None:
    sch = Schedule(elementwise(3))
    block = sch.get_block("B")
    size = sch.sample_categorical([4, 16], [0.5, 0.5], decision=0)
    sch.annotate(block, "size", size)
    assert sch.get(block).annotations == {"size": 4}
    other = Schedule(elementwise(3))
    sch.trace.apply_to_schedule(other, {1: 1})
    assert other.get(other.get_block("B")).annotations == {"size": 16}


@pytest.mark.parametrize("value", [{"a": 1}, None, float("nan"), object(), [1, {2}]])
def test_annotate_rejects_values_that_are_not_json_data(value: Any) -> None:
    sch = Schedule(elementwise(3))
    block = sch.get_block("B")
    assert_rejected(sch, lambda: sch.annotate(block, "key", value), "not JSON data")


def test_annotate_rejects_a_bad_key() -> None:
    sch = Schedule(elementwise(3))
    block = sch.get_block("B")
    assert_rejected(sch, lambda: sch.annotate(block, "", 1), "non-empty string")


def test_reorder_refuses_a_loop_that_fuses_spatial_and_reduce_iterations() -> None:
    """Found by the property test: with the pieces of fuse(j, k) permuted, output
    Y[j] is first visited at k != 0, and the init then wipes the partial sum."""
    A = te.placeholder((1, 3), name="A")
    B = te.placeholder((3, 2), name="B")
    r = te.reduce_axis((0, 3), "k")
    Y = te.compute((1, 2), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    sch = Schedule(te.create_prim_func([A, B, Y]))
    _i, j, k = sch.get_loops(sch.get_block("Y"))
    outer, inner = sch.split(sch.fuse(j, k), [3, 2])
    before = (sch.mod.script(), len(sch.trace))
    with pytest.raises(ScheduleError, match="binds both spatial and reduce"):
        sch.reorder(inner, outer)
    assert (sch.mod.script(), len(sch.trace)) == before


@pytest.mark.parametrize(
    ("factors", "product"),
    [
        ([None, 2**63], 2**63),
        ([None, 2**40], 2**40),
        ([None, 10**30], 10**30),
        ([2**20, 2**20], 2**40),
    ],
)
def test_split_refuses_factors_the_loop_type_cannot_hold(factors, product) -> None:
    sch = Schedule(elementwise(64))
    (loop,) = sch.get_loops(sch.get_block("B"))
    message = rf"split of loop 'i0' \(extent 64\): factors .* multiply to {product}, more than"
    with pytest.raises(ScheduleError, match=message):
        sch.split(loop, factors)


def test_split_of_a_symbolic_loop_refuses_factors_its_type_cannot_hold() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i], name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    (loop,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="more than its type int32 holds"):
        sch.split(loop, [None, 2**31 - 1, 2])


def test_fuse_refuses_loops_whose_product_the_type_cannot_hold() -> None:
    A = te.placeholder((65536, 65536), name="A")
    B = te.compute((65536, 65536), lambda i, j: A[i, j], name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="4294967296 iterations"):
        sch.fuse(i, j)


def test_sample_perfect_tile_refuses_an_absurd_number_of_factors() -> None:
    sch = Schedule(elementwise(64))
    (loop,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"n must be an int in \[1, 16\], got 1000000000"):
        sch.sample_perfect_tile(loop, n=10**9, max_innermost_factor=4)
