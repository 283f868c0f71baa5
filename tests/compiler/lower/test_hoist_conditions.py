"""``hoist_conditions``: a guard that a serial or unrolled loop does not change moves
outside it, and the program computes the same; every other guard stays where it is."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func

import compiler
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import BufferStore, For, ForKind, IfThenElse, Stmt
from compiler.lower.hoist_conditions import hoist_conditions

TARGET = "llvm -mcpu=haswell -num-cores=1"


def loop(var: Var, extent: int, body: Stmt, kind: ForKind = ForKind.SERIAL) -> For:
    return For(var, E.const(0), E.const(extent), kind, body)


def guarded_copy(
    rows: int, cols: int, condition: PrimExpr, j: Var, i: Var, *, inner: ForKind
) -> PrimFunc:
    """``for j: for i (inner): if condition: out[j, i] = x[j, i] * 2 + 1``."""
    x = Buffer("x", (E.const(rows), E.const(cols)))
    out = Buffer("out", (E.const(rows), E.const(cols)))
    store = BufferStore(out, x[j, i] * 2.0 + 1.0, (j, i))
    body = loop(j, rows, loop(i, cols, IfThenElse(condition, store), inner))
    return PrimFunc((x, out), body, {"global_symbol": "main"})


def same_results(before: PrimFunc, after: PrimFunc, seed: int) -> None:
    """Both functions, run by the interpreter on the same random inputs (outputs start
    random too, so an element a guard skips must keep its value), agree exactly."""
    args = random_args(before, seed=seed)
    expected = [a.copy() for a in args]
    run_func(before, *expected)
    got = [a.copy() for a in args]
    run_func(after, *got)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def test_a_guard_rises_through_the_loops_it_does_not_use():
    j, i = Var("j"), Var("i")
    func = guarded_copy(5, 4, E.LT(j, E.const(3)), j, i, inner=ForKind.UNROLLED)
    hoisted = hoist_conditions(func)
    outer = hoisted.body
    assert isinstance(outer, For) and outer.loop_var is j
    guard = outer.body
    assert isinstance(guard, IfThenElse) and isinstance(guard.then_case, For)
    assert guard.then_case.loop_var is i
    same_results(func, hoisted, seed=1)


def test_a_guard_that_reads_memory_stays_inside():
    """A loop may write what the guard reads, so the guard is evaluated where it was."""
    j, i = Var("j"), Var("i")
    x = Buffer("x", (E.const(3), E.const(4)))
    out = Buffer("out", (E.const(3), E.const(4)))
    limit = Buffer("limit", (E.const(1),), "int32")
    reads = IfThenElse(E.LT(limit[E.const(0)], E.const(5)), BufferStore(out, x[j, i], (j, i)))
    func = PrimFunc((x, out, limit), loop(j, 3, loop(i, 4, reads)), {"global_symbol": "m"})
    assert hoist_conditions(func).body.body.body is reads


def test_guards_that_must_stay_where_they_are():
    j, i = Var("j"), Var("i")
    uses_inner = guarded_copy(4, 4, E.LT(i, j), j, i, inner=ForKind.SERIAL)
    assert isinstance(hoist_conditions(uses_inner).body.body.body, IfThenElse)
    parallel = guarded_copy(4, 4, E.LT(j, E.const(2)), j, i, inner=ForKind.PARALLEL)
    assert isinstance(hoist_conditions(parallel).body.body.body, IfThenElse)
    vectorized = guarded_copy(4, 4, E.LT(j, E.const(2)), j, i, inner=ForKind.VECTORIZED)
    assert isinstance(hoist_conditions(vectorized).body.body.body, IfThenElse)
    store = uses_inner.body.body.body.then_case
    with_else = loop(j, 4, loop(i, 4, IfThenElse(E.LT(j, E.const(2)), store, store)))
    func = PrimFunc(uses_inner.params, with_else, {"global_symbol": "main"})
    assert isinstance(hoist_conditions(func).body.body.body, IfThenElse)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 6),
    cols=st.integers(1, 6),
    threshold=st.integers(-1, 7),
    on_rows=st.booleans(),
    inner=st.sampled_from([ForKind.SERIAL, ForKind.UNROLLED]),
    seed=st.integers(0, 1000),
)
def test_hoisting_keeps_the_results(rows, cols, threshold, on_rows, inner, seed):
    j, i = Var("j"), Var("i")
    guard = E.LT(j if on_rows else i, E.const(threshold))
    func = guarded_copy(rows, cols, guard, j, i, inner=inner)
    same_results(func, hoist_conditions(func), seed)


def test_a_tile_predicate_in_unrolled_loops_builds_and_matches_numpy(rng):
    """A split that does not divide its extent puts ``y_0 * 4 + y_1 < 10`` inside the
    unrolled loops of a reduction: the built kernel, guard hoisted, matches numpy."""
    from compiler import te

    a = te.placeholder((10, 6), name="A")
    r = te.reduce_axis((0, 6), name="r")
    c = te.compute((10,), lambda y: te.sum(a[y, r] * 2.0, axis=r), name="C")
    func = te.create_prim_func([a, c])
    sch = compiler.Schedule(func)
    block = sch.get_block("C")
    y, k = sch.get_loops(block)
    _, y_1 = sch.split(y, [None, 4])
    sch.unroll(y_1)
    sch.unroll(k)
    built = compiler.build(sch.mod, target=TARGET)
    x = rng.standard_normal((10, 6)).astype("float32")
    got = np.full(10, np.nan, "float32")
    built(x, got)
    np.testing.assert_allclose(got, (x * 2.0).sum(axis=1), rtol=1e-5)
