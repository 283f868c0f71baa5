"""TVM's TE-style schedules (te.create_schedule): the first tutorials' flows, checked
against numpy through the LLVM build and the reference interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import run_func

import compiler
from compiler import te
from compiler.ir.analysis import find_block_realize
from compiler.ir.stmt import For, ForKind
from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule, ScheduleError

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def loops_of(func: Any) -> list[For]:
    found: list[For] = []

    def collect(node: Any) -> None:
        if isinstance(node, For):
            found.append(node)

    from compiler.ir.node import visit

    visit(func.body, collect)
    return found


def vector_add() -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def test_vector_add_split_parallel_vectorize() -> None:
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    kinds = [loop.kind for loop in loops_of(s.to_prim_func([A, B, C]))]
    assert kinds == [ForKind.PARALLEL, ForKind.VECTORIZED]
    lib = compiler.build(s, [A, B, C], target="llvm", name="vadd")
    for n in (1, 7, 8, 67):
        a, b, c = rand(n), rand(n), np.zeros(n, "float32")
        lib["vadd"](a, b, c)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_split_by_nparts_and_symbolic_guards_in_the_interpreter() -> None:
    A, B, C = vector_add()
    s = te.create_schedule([C.op])
    outer, _inner = s[C].split(C.op.axis[0], nparts=3)
    assert [int(outer.dom.extent)] == [3]
    assert loops_of(s.to_prim_func([A, B, C]))[0].extent.value == 3  # type: ignore[attr-defined]
    func = s.to_prim_func([A, B, C])
    for n in (1, 2, 5, 13):
        a, b, c = rand(n), rand(n), np.zeros(n, "float32")
        run_func(func, a, b, c)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def matmul(m: int, k: int, n: int) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    kk = te.reduce_axis((0, k), "k")
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    C = te.compute((m, n), lambda x, y: te.sum(A[x, kk] * B[kk, y], axis=kk), name="C")
    return A, B, C


def test_matmul_tile_reorder_vectorize_unroll() -> None:
    M, K, N = 67, 45, 53
    A, B, C = matmul(M, K, N)
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], x_factor=8, y_factor=8)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    s[C].vectorize(yi)
    s[C].unroll(ki)
    s[C].parallel(xo)
    assert s[C].leaf_iter_vars == [xo, yo, ko, ki, xi, yi]
    func = s.to_prim_func([A, B, C])
    extents = [loop.extent.value for loop in loops_of(func)]  # type: ignore[attr-defined]
    assert extents == [9, 7, 12, 4, 8, 8]
    lowered = compiler.lower(s, [A, B, C], simple_mode=True)
    assert "T.vectorized(8)" in lowered.script()
    lib = compiler.build(s, [A, B, C], target="llvm")
    a, b, c = rand(M, K), rand(K, N), np.zeros((M, N), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def add_then_double(n: int = 13) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((n,), lambda i: B[i] * 2.0, name="C")
    return A, B, C


def check_add_then_double(s: te.TESchedule, args: list[te.Tensor]) -> Any:
    func = s.to_prim_func(args)
    a, c = rand(13), np.zeros(13, "float32")
    run_func(func, a, c)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    return func


def test_compute_at_puts_the_producer_inside_the_consumer_loop() -> None:
    A, B, C = add_then_double()
    s = te.create_schedule(C.op)
    xo, _xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    func = check_add_then_double(s, [A, C])
    outer = loops_of(func)[0]
    assert find_block_realize(outer, "B") is not None
    assert find_block_realize(outer, "C") is not None
    lib = compiler.build(s, [A, C])
    a, c = rand(13), np.zeros(13, "float32")
    lib["main"](a, c)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_compute_at_then_schedule_the_producer_in_any_order() -> None:
    A, B, C = add_then_double()
    first = te.create_schedule(C.op)
    xo, _ = first[C].split(C.op.axis[0], factor=4)
    first[B].compute_at(first[C], xo)
    first[B].vectorize(first[B].op.axis[0])
    second = te.create_schedule(C.op)
    second[B].vectorize(B.op.axis[0])
    xo2, _ = second[C].split(C.op.axis[0], factor=4)
    second[B].compute_at(second[C], xo2)
    assert structural_equal(first.to_prim_func([A, C]), second.to_prim_func([A, C]))
    check_add_then_double(first, [A, C])


def test_compute_inline_and_compute_root() -> None:
    A, B, C = add_then_double()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    func = check_add_then_double(s, [A, C])
    assert find_block_realize(func.body, "B") is None
    s[B].compute_root()
    unscheduled = te.create_prim_func([A, C])
    assert structural_equal(s.to_prim_func([A, C]), unscheduled)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].compute_root()
    assert structural_equal(s.to_prim_func([A, C]), unscheduled)
    s[B].compute_root()  # never moved: nothing to do
    assert structural_equal(s.to_prim_func([A, C]), unscheduled)


def test_intermediate_as_argument_and_stage_lookup_by_op() -> None:
    A, B, C = add_then_double()
    s = te.create_schedule(C.op)
    assert s[B.op] is s[B]
    s[B].split(B.op.axis[0], factor=5)
    func = s.to_prim_func([A, B, C])
    a, b, c = rand(13), np.zeros(13, "float32"), np.zeros(13, "float32")
    run_func(func, a, b, c)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_mm_relu_reduction_computed_at_the_relu_rows() -> None:
    M, K, N = 9, 7, 11
    A, B, Y = matmul(M, K, N)
    C = te.compute((M, N), lambda i, j: te.max(Y[i, j], 0.0), name="relu")
    s = te.create_schedule(C.op)
    io, _ii = s[C].split(C.op.axis[0], factor=4)
    s[Y].compute_at(s[C], io)
    jo, ji = s[Y].split(Y.op.axis[1], factor=3)
    s[Y].reorder(Y.op.reduce_axis[0], jo, ji)
    func = s.to_prim_func([A, B, C])
    a, b, c = rand(M, K), rand(K, N), np.zeros((M, N), "float32")
    run_func(func, a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)
    c2 = np.zeros((M, N), "float32")
    compiler.build(s, [A, B, C])["main"](a, b, c2)
    np.testing.assert_allclose(c2, c, rtol=1e-5, atol=1e-6)


def test_fuse_then_split_then_parallel() -> None:
    A = te.placeholder((5, 7), name="A")
    B = te.compute((5, 7), lambda i, j: A[i, j] * 3.0, name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(*B.op.axis)
    assert fused.dom.extent.value == 35  # type: ignore[attr-defined]
    outer, inner = s[B].split(fused, factor=4)
    s[B].parallel(outer)
    assert s[B].fuse(inner) is inner
    func = s.to_prim_func([A, B])
    assert [loop.kind for loop in loops_of(func)] == [ForKind.PARALLEL, ForKind.SERIAL]
    a, b = rand(5, 7), np.zeros((5, 7), "float32")
    run_func(func, a, b)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)


def test_the_schedule_is_a_replayable_trace() -> None:
    M, K, N = 6, 5, 7
    A, B, C = matmul(M, K, N)
    s = te.create_schedule(C.op)
    xo, _yo, _xi, _yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 3)
    s[C].parallel(xo)
    sch = s.to_schedule([A, B, C])
    replay = Schedule(te.create_prim_func([A, B, C]))
    sch.trace.apply_to_schedule(replay)
    assert structural_equal(replay.mod, sch.mod)
    assert structural_equal(sch.mod["main"], s.to_prim_func([A, B, C]))


# errors ------------------------------------------------------------------------------


def test_bad_uses_raise_schedule_error_and_change_nothing() -> None:
    A, B, C = add_then_double()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    before = s.to_prim_func([A, C])
    leaves = s[C].leaf_iter_vars

    cases = [
        (lambda: s[C].split(C.op.axis[0], factor=2), "replaced by an earlier split"),
        (lambda: s[C].split(B.op.axis[0], factor=2), "belongs to stage 'B'"),
        (lambda: s[C].split(xo, factor=2, nparts=2), "exactly one of factor= or nparts="),
        (lambda: s[C].split(xo), "exactly one of factor= or nparts="),
        (lambda: s[C].split(xo, factor=0), "must be positive"),
        (lambda: s[C].split(xo, factor=2.5), "positive int"),
        (lambda: s[C].split("i", factor=2), "expected an axis"),
        (lambda: s[C].fuse(xi, xo), "adjacent and outermost first"),
        (lambda: s[C].fuse(), "at least one axis"),
        (lambda: s[C].reorder(xo, xo), "repeated"),
        (lambda: s[C].compute_inline(), "output"),
        (lambda: s[C].compute_at(s[C], xo), "itself"),
        (lambda: s[B].compute_at(s[C], C.op.axis[0]), "replaced by an earlier split"),
        (lambda: s[B].compute_at(C, xo), "must be a stage"),
        (lambda: s[A], "placeholder"),
        (lambda: s[te.compute((3,), lambda i: i * 1.0)], "not computed by"),
        (lambda: te.create_schedule(A.op), "compute operations"),
        (lambda: s.to_ir_module(None), "arguments"),
        (lambda: s.to_ir_module([A, B]), "stages ['C']"),
    ]
    for call, message in cases:
        with pytest.raises(ScheduleError, match=message.replace("[", r"\[").replace("(", r"\(")):
            call()
        assert s[C].leaf_iter_vars == leaves
        assert structural_equal(s.to_prim_func([A, C]), before)


def test_an_illegal_primitive_is_refused_where_it_is_written() -> None:
    A = te.placeholder((6,), name="A")
    C1 = te.compute((6,), lambda i: A[i] * 2.0, name="C1")
    C2 = te.compute((6,), lambda i: A[i] * 3.0, name="C2")
    s = te.create_schedule([C1.op, C2.op])
    s[C2].split(C2.op.axis[0], factor=4)
    before = s.to_prim_func([A, C1, C2])
    # C2 does not read C1, so C1 cannot be computed inside C2's loop.
    with pytest.raises(ScheduleError):
        s[C1].compute_at(s[C2], s[C2].leaf_iter_vars[0])
    assert structural_equal(s.to_prim_func([A, C1, C2]), before)
    outer, inner = s[C1].split(C1.op.axis[0], factor=4)
    s[C1].vectorize(inner)
    with pytest.raises(ScheduleError, match="already set to vectorize; split it before"):
        s[C1].split(inner, factor=2)
    assert s[C1].leaf_iter_vars == [outer, inner]


def test_an_inlined_stage_has_no_loops() -> None:
    _A, B, C = add_then_double()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    with pytest.raises(ScheduleError, match="inlined"):
        s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="inlined"):
        s[B].compute_at(s[C], C.op.axis[0])
    s[B].compute_root()
    s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="already transformed"):
        s[B].compute_inline()


def test_splitting_an_attach_target_afterwards_is_refused() -> None:
    _A, B, C = add_then_double()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="target axis 'i' of stage 'C' was split"):
        s[C].split(C.op.axis[0], factor=4)
    assert s[C].leaf_iter_vars == list(C.op.axis)


# random schedules --------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from(["none", "inline", "at_outer", "at_inner"]),
)
def test_random_schedules_compute_the_same(
    fx: int, fy: int, fk: int, swap: bool, attach: str
) -> None:
    M, K, N = 5, 3, 6
    A, B, Y = matmul(M, K, N)
    D = te.compute((M, N), lambda i, j: Y[i, j] + 1.0, name="D")
    C = te.compute((M, N), lambda i, j: D[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, _yi = s[C].tile(C.op.axis[0], C.op.axis[1], fx, fy)
    if swap:
        s[C].reorder(yo, xo)
    _ko, _ki = s[Y].split(Y.op.reduce_axis[0], factor=fk)
    if attach == "inline":
        s[D].compute_inline()
    elif attach == "at_outer":
        s[D].compute_at(s[C], yo if swap else xo)
    elif attach == "at_inner":
        s[D].compute_at(s[C], xi)
    func = s.to_prim_func([A, B, C])
    a, b, c = rand(M, K), rand(K, N), np.zeros((M, N), "float32")
    run_func(func, a, b, c)
    np.testing.assert_allclose(c, (a @ b + 1) * 2, rtol=1e-4, atol=1e-5)
