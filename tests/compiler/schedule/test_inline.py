"""compute_inline and reverse_compute_inline: results match numpy (through the reference
interpreter and through LLVM), the removed block and its buffer are gone, illegal
uses raise ScheduleError and change nothing, and traces replay."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import run_func
from schedule_checks import assert_refused, assert_replays
from workloads import mm_relu, softmax, softmax_ref

import compiler
from compiler import te
from compiler.ir import expr as E
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
    Stmt,
    seq,
    true_predicate,
)
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import block_names
from compiler.schedule.schedule import Schedule

SHAPES = st.integers(min_value=1, max_value=9)


# workloads ----------------------------------------------------------------------------


def chain(m: int, n: int) -> PrimFunc:
    """B = A + 1.5; C = B * B - A."""
    a = te.placeholder((m, n), name="A")
    b = te.compute((m, n), lambda i, j: a[i, j] + 1.5, name="B")
    c = te.compute((m, n), lambda i, j: b[i, j] * b[i, j] - a[i, j], name="C")
    return te.create_prim_func([a, c])


def chain_ref(a: np.ndarray) -> np.ndarray:
    b = a + np.float32(1.5)
    return b * b - a


def scaled_matmul(m: int, n: int, k: int) -> PrimFunc:
    """A2 = A * 2; C = A2 @ B."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    a2 = te.compute((m, k), lambda i, j: a[i, j] * 2.0, name="A2")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a2[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def transpose_chain(m: int, n: int) -> PrimFunc:
    """B = A * 2; C[j, i] = B[i, j] + 1."""
    a = te.placeholder((m, n), name="A")
    b = te.compute((m, n), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((n, m), lambda j, i: b[i, j] + 1.0, name="C")
    return te.create_prim_func([a, c])


def reversed_read(n: int) -> PrimFunc:
    """B = A + 1; C[i] = B[n - 1 - i]."""
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((n,), lambda i: b[n - 1 - i], name="C")
    return te.create_prim_func([a, c])


# helpers ------------------------------------------------------------------------------


def random_inputs(shapes: list[tuple[int, ...]], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def interpret(sch: Schedule, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> np.ndarray:
    out = np.full(out_shape, np.nan, dtype="float32")
    run_func(sch.mod["main"], *[x.copy() for x in inputs], out)
    return out


def built(sch: Schedule, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> np.ndarray:
    out = np.full(out_shape, np.nan, dtype="float32")
    compiler.build(sch.mod)["main"](*[x.copy() for x in inputs], out)
    return out


def root_allocs(sch: Schedule) -> list[str]:
    return [b.name for b in sch.mod["main"].root_block.alloc_buffers]


# compute_inline -----------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(m=SHAPES, n=SHAPES)
def test_compute_inline_elementwise_chain(m: int, n: int) -> None:
    func = chain(m, n)
    sch = Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    assert block_names(sch.mod["main"]) == ["C"]
    assert root_allocs(sch) == []
    (a,) = random_inputs([(m, n)], seed=m * 10 + n)
    np.testing.assert_allclose(interpret(sch, [a], (m, n)), chain_ref(a), rtol=1e-5, atol=1e-5)


def test_compute_inline_into_a_reduction_builds_with_llvm() -> None:
    m, n, k = 7, 5, 11
    func = scaled_matmul(m, n, k)
    sch = Schedule(func)
    sch.compute_inline(sch.get_block("A2"))
    assert block_names(sch.mod["main"]) == ["C"]
    a, b = random_inputs([(m, k), (k, n)])
    expected = (a * 2) @ b
    np.testing.assert_allclose(interpret(sch, [a, b], (m, n)), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(built(sch, [a, b], (m, n)), expected, rtol=1e-4, atol=1e-4)
    assert_replays(sch, func)


def test_compute_inline_into_two_consumers_of_softmax() -> None:
    m, n = 5, 9
    func = softmax(m, n)
    sch = Schedule(func)
    sch.compute_inline(sch.get_block("E"))
    assert block_names(sch.mod["main"]) == ["M", "S", "O"]
    assert "E" not in root_allocs(sch)
    (a,) = random_inputs([(m, n)])
    expected = softmax_ref(a)
    np.testing.assert_allclose(interpret(sch, [a], (m, n)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(built(sch, [a], (m, n)), expected, rtol=1e-5, atol=1e-6)


def test_compute_inline_after_split_of_producer() -> None:
    m, n = 7, 6
    func = chain(m, n)
    sch = Schedule(func)
    b = sch.get_block("B")
    i, _ = sch.get_loops(b)
    sch.split(i, [None, 3])
    sch.compute_inline(b)
    (a,) = random_inputs([(m, n)])
    np.testing.assert_allclose(interpret(sch, [a], (m, n)), chain_ref(a), rtol=1e-5, atol=1e-5)
    assert_replays(sch, func)


def test_compute_inline_refuses_a_reduction() -> None:
    sch = Schedule(mm_relu(3, 5, 7))
    assert_refused(sch, sch.compute_inline, sch.get_block("Y"), match="'Y'.*reduction")


def test_compute_inline_refuses_an_output_block() -> None:
    sch = Schedule(mm_relu(3, 5, 7))
    assert_refused(sch, sch.compute_inline, sch.get_block("C"), match="'C'.*parameter")


def test_compute_inline_refuses_when_an_input_changes_later() -> None:
    """B = A + 1; A = 0 (a later block overwrites A); C = B: inlining would read 0."""
    n = 5
    a = Buffer("A", (n,))
    b = Buffer("B", (n,))
    c = Buffer("C", (n,))
    body = seq(
        _nest("B", n, lambda v: (b, a[v] + 1.0)),
        _nest("Z", n, lambda v: (a, E.const(0.0))),
        _nest("C", n, lambda v: (c, b[v])),
    )
    func = _func((a, c), body, (b,))
    sch = Schedule(func)
    assert_refused(sch, sch.compute_inline, sch.get_block("B"), match="'Z' writes A")


def test_compute_inline_refuses_a_non_variable_store() -> None:
    """B[v // 2] = A[v]: B's element is not one block point."""
    n = 6
    a = Buffer("A", (n,))
    b = Buffer("B", (n,))
    c = Buffer("C", (n,))
    body = seq(
        _nest("B", n, lambda v: (b, a[v]), index=lambda v: v // 2),
        _nest("C", n, lambda v: (c, b[v])),
    )
    sch = Schedule(_func((a, c), body, (b,)))
    assert_refused(sch, sch.compute_inline, sch.get_block("B"), match="distinct block variables")


def test_compute_inline_refuses_the_only_block() -> None:
    n = 4
    a = Buffer("A", (n,))
    b = Buffer("B", (n,))
    sch = Schedule(_func((a,), _nest("B", n, lambda v: (b, a[v])), (b,)))
    assert_refused(sch, sch.compute_inline, sch.get_block("B"), match="only statement")


# reverse_compute_inline -------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(m=SHAPES, n=SHAPES)
def test_reverse_compute_inline_elementwise_chain(m: int, n: int) -> None:
    func = chain(m, n)
    sch = Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert block_names(sch.mod["main"]) == ["B"]
    assert root_allocs(sch) == []
    (a,) = random_inputs([(m, n)], seed=m * 10 + n)
    np.testing.assert_allclose(interpret(sch, [a], (m, n)), chain_ref(a), rtol=1e-5, atol=1e-5)


def test_reverse_compute_inline_transposing_consumer() -> None:
    m, n = 5, 7
    func = transpose_chain(m, n)
    sch = Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert block_names(sch.mod["main"]) == ["B"]
    (a,) = random_inputs([(m, n)])
    expected = (a * 2 + 1).T
    np.testing.assert_allclose(interpret(sch, [a], (n, m)), expected, rtol=1e-6)
    np.testing.assert_allclose(built(sch, [a], (n, m)), expected, rtol=1e-6)
    assert_replays(sch, func)


@pytest.mark.parametrize("factor", [2, 4])
def test_reverse_compute_inline_after_split_of_consumer(factor: int) -> None:
    """A split (dividing or not) keeps the consumer covering its domain."""
    m, n = 6, 5
    func = chain(m, n)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, j = sch.get_loops(c)
    sch.split(j, [None, factor])
    sch.split(i, [None, 4])
    sch.reverse_compute_inline(c)
    (a,) = random_inputs([(m, n)])
    np.testing.assert_allclose(interpret(sch, [a], (m, n)), chain_ref(a), rtol=1e-5, atol=1e-5)


def test_reverse_compute_inline_refuses_a_reduction_producer() -> None:
    sch = Schedule(mm_relu(3, 5, 7))
    assert_refused(
        sch, sch.reverse_compute_inline, sch.get_block("C"), match="'C'.*producer 'Y'.*reduction"
    )
    y = sch.get_block("Y")
    sch.decompose_reduction(y, sch.get_loops(y)[2])
    assert_refused(sch, sch.reverse_compute_inline, sch.get_block("C"), match="'Y_init', 'Y'")


def test_reverse_compute_inline_refuses_a_permuted_read() -> None:
    sch = Schedule(reversed_read(6))
    assert_refused(
        sch, sch.reverse_compute_inline, sch.get_block("C"), match="'C'.*own block variables"
    )


def test_reverse_compute_inline_refuses_two_producers() -> None:
    sch = Schedule(softmax(3, 4))
    assert_refused(sch, sch.reverse_compute_inline, sch.get_block("O"), match="several producers")


def test_reverse_compute_inline_refuses_a_buffer_with_two_readers() -> None:
    a = te.placeholder((4,), name="A")
    b = te.compute((4,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((4,), lambda i: b[i] * 2.0, name="C")
    d = te.compute((4,), lambda i: b[i] - 1.0, name="D")
    sch = Schedule(te.create_prim_func([a, c, d]))
    assert_refused(sch, sch.reverse_compute_inline, sch.get_block("C"), match="also read by.*'D'")


def test_reverse_compute_inline_refuses_a_reduction_consumer() -> None:
    sch = Schedule(softmax(3, 4))
    assert_refused(sch, sch.reverse_compute_inline, sch.get_block("S"), match="'S'.*reduction")


def test_reverse_compute_inline_refuses_an_unproven_cover() -> None:
    """After fuse the consumer's bindings are // and %, which the proof does not read."""
    sch = Schedule(chain(4, 6))
    c = sch.get_block("C")
    sch.fuse(*sch.get_loops(c))
    assert_refused(sch, sch.reverse_compute_inline, c, match="may not run over all")


def test_inline_both_ways_on_a_three_stage_chain() -> None:
    """B = A + 1.5 inlined into C, then C's relu consumer reverse-inlined."""
    m, n = 5, 3
    a = te.placeholder((m, n), name="A")
    b = te.compute((m, n), lambda i, j: a[i, j] + 1.5, name="B")
    c = te.compute((m, n), lambda i, j: b[i, j] * b[i, j] - a[i, j], name="C")
    d = te.compute((m, n), lambda i, j: te.max(c[i, j], 0.0), name="D")
    func = te.create_prim_func([a, d])
    sch = Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    sch.reverse_compute_inline(sch.get_block("D"))
    assert block_names(sch.mod["main"]) == ["C"]
    (x,) = random_inputs([(m, n)])
    expected = np.maximum(chain_ref(x), 0)
    np.testing.assert_allclose(interpret(sch, [x], (m, n)), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(built(sch, [x], (m, n)), expected, rtol=1e-5, atol=1e-5)
    assert_replays(sch, func)


def test_reverse_compute_inline_scaling_after_softmax() -> None:
    m, n = 4, 7
    a = te.placeholder((m, n), name="A")
    j = te.reduce_axis((0, n), name="j")
    mx = te.compute((m,), lambda i: te.max(a[i, j], axis=j), name="M")
    e = te.compute((m, n), lambda i, jj: te.exp(a[i, jj] - mx[i]), name="E")
    j2 = te.reduce_axis((0, n), name="j2")
    s = te.compute((m,), lambda i: te.sum(e[i, j2], axis=j2), name="S")
    o = te.compute((m, n), lambda i, jj: e[i, jj] / s[i], name="O")
    p = te.compute((m, n), lambda i, jj: o[i, jj] * 3.0 + a[i, jj], name="P")
    func = te.create_prim_func([a, p])
    sch = Schedule(func)
    sch.reverse_compute_inline(sch.get_block("P"))
    sch.compute_inline(sch.get_block("E"))
    assert block_names(sch.mod["main"]) == ["M", "S", "O"]
    (x,) = random_inputs([(m, n)])
    expected = softmax_ref(x) * 3 + x
    np.testing.assert_allclose(interpret(sch, [x], (m, n)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(built(sch, [x], (m, n)), expected, rtol=1e-5, atol=1e-6)
    assert_replays(sch, func)


STAGES = {
    "add": (lambda x, a: x + 1.5, lambda x, a: x + np.float32(1.5)),
    "half": (lambda x, a: x * 0.5, lambda x, a: x * np.float32(0.5)),
    "relu": (lambda x, a: te.max(x, 0.0), lambda x, a: np.maximum(x, 0)),
    "minus_input": (lambda x, a: x - a, lambda x, a: x - a),
}
MOVES = ("compute_inline", "reverse_compute_inline", "cache_read", "cache_write")


@settings(max_examples=25, deadline=None)
@given(
    m=SHAPES,
    n=SHAPES,
    stages=st.lists(st.sampled_from(sorted(STAGES)), min_size=2, max_size=4),
    moves=st.lists(st.tuples(st.sampled_from(MOVES), st.integers(0, 3)), max_size=5),
)
def test_random_moves_on_elementwise_chains(m: int, n: int, stages, moves) -> None:
    """Any sequence of moves either applies and keeps the result, or is refused and
    changes nothing."""
    a = te.placeholder((m, n), name="A")
    x = a
    for k, stage in enumerate(stages):
        x = _stage(STAGES[stage][0], x, a, f"S{k}")
    func = te.create_prim_func([a, x])
    sch = Schedule(func)
    for move, pick in moves:
        names = block_names(sch.mod["main"])
        block = sch.get_block(names[pick % len(names)])
        before = sch.mod.script()
        try:
            if move.startswith("cache"):
                getattr(sch, move)(block, 0, "local")
            else:
                getattr(sch, move)(block)
        except ScheduleError:
            assert sch.mod.script() == before
    (x_in,) = random_inputs([(m, n)], seed=m * 10 + n)
    expected = x_in
    for stage in stages:
        expected = STAGES[stage][1](expected, x_in)
    np.testing.assert_allclose(interpret(sch, [x_in], (m, n)), expected, rtol=1e-5, atol=1e-5)
    assert_replays(sch, func)


def _stage(fn, x: te.Tensor, a: te.Tensor, name: str) -> te.Tensor:
    return te.compute(x.shape, lambda i, j: fn(x[i, j], a[i, j]), name=name)


# hand-built IR for shapes te cannot make ----------------------------------------------------


def _nest(name: str, n: int, compute, index=None) -> Stmt:
    """``for i in range(n): block name: out[index(v)] = value(v)``."""
    loop = E.Var("i")
    v = IterVar(E.Var("v"), E.Range(E.const(0), E.const(n)), IterKind.SPATIAL)
    out, value = compute(v.var)
    at = v.var if index is None else index(v.var)
    store = BufferStore(out, value, (at,))
    realize = BlockRealize((loop,), true_predicate(), Block(name, (v,), store))
    return For(loop, E.const(0), E.const(n), ForKind.SERIAL, realize)


def _func(params: tuple[Buffer, ...], body: Stmt, allocs: tuple[Buffer, ...]) -> PrimFunc:
    root = Block("root", (), body, alloc_buffers=allocs)
    return PrimFunc(params, BlockRealize((), true_predicate(), root), {"global_symbol": "main"})
