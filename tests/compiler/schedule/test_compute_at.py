"""compute_at, reverse_compute_at and sample_compute_location.

Every legal move is checked against numpy twice, through the reference
interpreter and through compiler.build, on random inputs and odd shapes; every
illegal one must raise ScheduleError and leave the schedule as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import random_args, run_func
from schedule_checks import assert_refused

import compiler
from compiler import te
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var, const
from compiler.ir.function import PrimFunc
from compiler.ir.node import visit
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterVar, seq
from compiler.schedule import primitives as P
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import InlineLocation, LoopRV, RootLocation
from compiler.schedule.schedule import Schedule


def check(
    func: PrimFunc,
    expected: Callable[..., np.ndarray],
    sizes: dict[str, int] | None = None,
) -> None:
    """Run ``func`` on random inputs in the interpreter and compiled; the last
    parameter must equal ``expected(*inputs)``."""
    args = random_args(func, seed=7, sizes=sizes)
    want = expected(*args[:-1])
    run_func(func, *args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)
    args[-1][...] = np.nan
    compiler.build(func)["main"](*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)


def loop_names(sch: Schedule, block: str) -> list[str]:
    return [rv.var.name for rv in sch.get_loops(sch.get_block(block))]


def loop_extents(sch: Schedule, block: str) -> list[str]:
    loops = [sch.get(rv) for rv in sch.get_loops(sch.get_block(block))]
    return [str(loop.extent) for loop in loops if isinstance(loop, For)]


# workloads ---------------------------------------------------------------------------


def add_then_mul(shape: tuple[int, ...] = (13, 7)) -> PrimFunc:
    """TVM's classic: B = A + 1; C = B * 2."""
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda *i: A[i] + 1, name="B")
    C = te.compute(shape, lambda *i: B[i] * 2, name="C")
    return te.create_prim_func([A, C])


def mm_relu(m: int, n: int, k: int) -> PrimFunc:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    Y = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = te.compute((m, n), lambda i, j: te.max(Y[i, j], 0), name="C")
    return te.create_prim_func([A, B, C])


def mm_relu_expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a @ b, 0)


def padded_conv(h: int, w: int) -> PrimFunc:
    """A zero-padded 3x3 convolution: the pad block is a stencil's producer."""
    A = te.placeholder((h, w), name="A")
    W = te.placeholder((3, 3), name="W")
    pad = te.compute(
        (h + 2, w + 2),
        lambda i, j: te.if_then_else(
            te.all_of(i >= 1, i <= h, j >= 1, j <= w), A[i - 1, j - 1], te.const(0.0)
        ),
        name="pad",
    )
    ry = te.reduce_axis((0, 3), "ry")
    rx = te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (h, w),
        lambda i, j: te.sum(pad[i + ry, j + rx] * W[ry, rx], axis=[ry, rx]),
        name="conv",
    )
    return te.create_prim_func([A, W, out])


def padded_conv_expected(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    padded = np.pad(a, 1)
    h, wd = a.shape
    out = np.zeros_like(a)
    for dy in range(3):
        for dx in range(3):
            out += padded[dy : dy + h, dx : dx + wd] * w[dy, dx]
    return out


# compute_at ----------------------------------------------------------------------------


@pytest.mark.parametrize("loop_index", [0, 1])
def test_classic_compute_at_each_loop_of_the_consumer(loop_index: int) -> None:
    sch = Schedule(add_then_mul())
    loops = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), loops[loop_index])
    assert loop_names(sch, "B")[: loop_index + 1] == ["i0", "i1"][: loop_index + 1]
    if loop_index == 0:
        assert loop_extents(sch, "B") == ["13", "7"]
    else:
        assert loop_extents(sch, "B") == ["13", "7"]
        assert len(sch.get_loops(sch.get_block("B"))) == 2
    check(sch.mod["main"], lambda a: (a + 1) * 2)


def test_compute_at_keeps_unit_loops_when_asked() -> None:
    sch = Schedule(add_then_mul())
    _i, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j, preserve_unit_loops=True)
    assert loop_extents(sch, "B") == ["13", "7", "1", "1"]
    check(sch.mod["main"], lambda a: (a + 1) * 2)


@pytest.mark.parametrize("target", ["i", "j_0", "j_1"])
def test_compute_at_under_a_non_dividing_split(target: str) -> None:
    sch = Schedule(add_then_mul((11, 7)))
    i, j = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 3])
    loop = {"i": i, "j_0": j0, "j_1": j1}[target]
    sch.compute_at(sch.get_block("B"), loop)
    if target == "j_0":
        assert loop_extents(sch, "B") == ["11", "3", "3"]
        realize = _realize(sch, "B")
        assert str(realize.predicate) == "i1_0 * 3 + ax0 < 7"
    check(sch.mod["main"], lambda a: (a + 1) * 2)


def test_compute_at_matmul_under_the_relu_tile() -> None:
    m, n, k = 13, 18, 7
    sch = Schedule(mm_relu(m, n, k))
    i, j = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.compute_at(sch.get_block("Y"), j0)
    assert loop_names(sch, "Y")[:2] == ["i_0", "j_0"]
    assert loop_extents(sch, "Y")[2:] == ["4", "8", "7"]
    check(sch.mod["main"], mm_relu_expected)


def test_compute_at_matmul_at_the_outer_tile_loop() -> None:
    sch = Schedule(mm_relu(10, 9, 5))
    i, _j = sch.get_loops(sch.get_block("C"))
    i0, _i1 = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("Y"), i0)
    assert loop_extents(sch, "Y")[1:] == ["4", "9", "5"]
    check(sch.mod["main"], mm_relu_expected)


@pytest.mark.parametrize("where", ["i", "j_0"])
def test_compute_at_a_stencil_producer(where: str) -> None:
    h, w = 9, 11
    sch = Schedule(padded_conv(h, w))
    i, j, _ry, _rx = sch.get_loops(sch.get_block("conv"))
    if where == "i":
        sch.compute_at(sch.get_block("pad"), i)
        assert loop_extents(sch, "pad")[1:] == ["3", str(w + 2)]
    else:
        j0, _j1 = sch.split(j, [None, 4])
        sch.compute_at(sch.get_block("pad"), j0)
        assert loop_extents(sch, "pad")[2:] == ["3", "6"]
    check(sch.mod["main"], padded_conv_expected)


def test_compute_at_with_symbolic_shapes() -> None:
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] * 2, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    i, j = sch.get_loops(sch.get_block("C"))
    j0, _j1 = sch.split(j, [None, 4])
    sch.compute_at(sch.get_block("B"), j0)
    assert loop_extents(sch, "B")[2:] == ["4"]
    check(sch.mod["main"], lambda a: (a + 1) * 2, sizes={"n": 5, "m": 10})
    sch = Schedule(te.create_prim_func([A, C]))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    assert loop_extents(sch, "B")[1:] == ["m"]
    check(sch.mod["main"], lambda a: (a + 1) * 2, sizes={"n": 6, "m": 3})


def test_compute_at_twice_moves_the_block_inward() -> None:
    sch = Schedule(add_then_mul((6, 10)))
    i, j = sch.get_loops(sch.get_block("C"))
    j0, _j1 = sch.split(j, [None, 4])
    sch.compute_at(sch.get_block("B"), i)
    sch.compute_at(sch.get_block("B"), j0)
    assert loop_names(sch, "B")[:2] == ["i0", "i1_0"]
    check(sch.mod["main"], lambda a: (a + 1) * 2)


def test_compute_at_a_chain_of_producers() -> None:
    A = te.placeholder((7, 9), name="A")
    B = te.compute((7, 9), lambda i, j: A[i, j] * 3, name="B")
    C = te.compute((7, 9), lambda i, j: B[i, j] + A[i, j], name="C")
    D = te.compute((7, 9), lambda i, j: C[i, j] - 1, name="D")
    sch = Schedule(te.create_prim_func([A, D]))
    i, _j = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), i)
    _ci, cj = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), cj)
    check(sch.mod["main"], lambda a: a * 3 + a - 1)


# reverse_compute_at ----------------------------------------------------------------------


def test_reverse_compute_at_of_the_mm_relu_walkthrough() -> None:
    """TVM's TensorIR tutorial: split the matmul's j, reorder, move relu under j0."""
    sch = Schedule(mm_relu(128, 128, 128))
    block_y = sch.get_block("Y")
    _i, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    assert loop_names(sch, "C") == ["i", "j_0", "ax0"]
    assert loop_extents(sch, "C") == ["128", "32", "4"]
    realize = _realize(sch, "C")
    assert [str(v) for v in realize.iter_values] == ["i", "j_0 * 4 + ax0"]
    assert isinstance(realize.predicate, E.IntImm)
    args = random_args(sch.mod["main"], seed=3)
    compiler.build(sch.mod)["main"](*args)
    np.testing.assert_allclose(args[2], mm_relu_expected(*args[:2]), rtol=1e-4, atol=1e-4)


def test_reverse_compute_at_with_a_non_dividing_split() -> None:
    sch = Schedule(mm_relu(6, 18, 5))
    _i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    assert str(_realize(sch, "C").predicate) == "j_0 * 4 + ax0 < 18"
    check(sch.mod["main"], mm_relu_expected)


def test_reverse_compute_at_after_a_split_of_a_split_and_of_the_reduction() -> None:
    """The producer's guards come from a split of a split (``j_0_0 * 2 + j_0_1 < 5``
    guards the outer part of v_j) and from a non-dividing split of the reduction;
    both only cut points outside its domain."""
    sch = Schedule(mm_relu(5, 17, 7))
    _i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, _j1 = sch.split(j, [None, 4])
    j00, _j01 = sch.split(j0, [None, 2])
    _k0, _k1 = sch.split(k, [None, 3])
    sch.reverse_compute_at(sch.get_block("C"), j00)
    assert loop_extents(sch, "C")[2:] == ["8"]
    check(sch.mod["main"], mm_relu_expected)


@pytest.mark.parametrize("loop_index", [0, 1])
def test_reverse_compute_at_elementwise(loop_index: int) -> None:
    sch = Schedule(add_then_mul((5, 9)))
    loops = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), loops[loop_index])
    check(sch.mod["main"], lambda a: (a + 1) * 2)


def test_reverse_compute_at_with_symbolic_shapes() -> None:
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    B = te.compute((n, 6), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((n, 6), lambda i, j: B[i, j] * 2, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    i, _j = sch.get_loops(sch.get_block("B"))
    i0, _i1 = sch.split(i, [None, 4])
    sch.reverse_compute_at(sch.get_block("C"), i0)
    assert loop_extents(sch, "C")[1:] == ["4", "6"]
    check(sch.mod["main"], lambda a: (a + 1) * 2, sizes={"n": 7})


# illegal moves -------------------------------------------------------------------------------


def test_compute_at_of_an_output_block_is_refused() -> None:
    sch = Schedule(add_then_mul())
    i, _j = sch.get_loops(sch.get_block("B"))
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.compute_at(c, i), match="'C' at loop 'i0'")


def test_compute_at_under_its_own_loop_is_refused() -> None:
    sch = Schedule(add_then_mul())
    _i, j = sch.get_loops(sch.get_block("B"))
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.compute_at(b, j), match="already under the loop")


def test_compute_at_with_a_consumer_outside_the_loop_is_refused() -> None:
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    C = te.compute((8,), lambda i: B[i] * 2, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    sch = Schedule(te.create_prim_func([A, D]))
    (i,) = sch.get_loops(sch.get_block("C"))
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.compute_at(b, i), match="consumers 'D' are not under the loop")
    (d_loop,) = sch.get_loops(sch.get_block("D"))
    assert_refused(sch, lambda: sch.compute_at(b, d_loop), match="consumers 'C' are not under")


def test_reverse_compute_at_before_the_loop_is_refused() -> None:
    sch = Schedule(add_then_mul())
    i, _j = sch.get_loops(sch.get_block("C"))
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.reverse_compute_at(b, i), match="comes before the loop")


def test_reverse_compute_at_of_a_reduction_over_the_produced_buffer_is_refused() -> None:
    A = te.placeholder((6, 5), name="A")
    B = te.compute((6, 5), lambda i, j: A[i, j] * 2, name="B")
    r = te.reduce_axis((0, 5), "r")
    C = te.compute((6,), lambda i: te.sum(B[i, r], axis=r), name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    i, _j = sch.get_loops(sch.get_block("B"))
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_at(c, i), match="not at distinct spatial")


def test_reverse_compute_at_of_a_stencil_consumer_is_refused() -> None:
    """C reads B[i + 2], which a later iteration writes: C could not be computed
    from values written in its own iteration."""
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 2, name="B")
    C = te.compute((10,), lambda i: B[i] + B[i + 2], name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    (i,) = sch.get_loops(sch.get_block("B"))
    i0, _i1 = sch.split(i, [None, 4])
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_at(c, i0), match="not at distinct spatial")


def test_reverse_compute_at_under_a_reduction_loop_is_refused() -> None:
    sch = Schedule(mm_relu(5, 6, 3))
    _i, _j, k = sch.get_loops(sch.get_block("Y"))
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_at(c, k), match="runs part of the reduction")


def test_reverse_compute_at_after_a_fuse_like_binding_is_refused() -> None:
    """A producer whose binding does not visit a contiguous range in one iteration
    (here: every other point) would leave the consumer's reads unwritten."""
    n = 8
    a, b, c = (Buffer(name, (const(n),)) for name in ("A", "B", "C"))
    outer, inner = Var("i_0"), Var("i_1")
    v = Var("v")
    producer = Block(
        "Bp",
        (IterVar(v, Range(const(0), const(n))),),
        BufferStore(b, E.BufferLoad(a, (v,)) + E.const(1.0), (v,)),
    )
    p_nest = For(
        outer,
        const(0),
        const(2),
        ForKind.SERIAL,
        For(
            inner,
            const(0),
            const(4),
            ForKind.SERIAL,
            BlockRealize((inner * 2 + outer,), const(True), producer),
        ),
    )
    c_nest = _nest("Cb", c, lambda x: E.BufferLoad(b, (x,)) * E.const(2.0))
    root = Block("root", (), seq(p_nest, c_nest), alloc_buffers=(b,))
    func = PrimFunc((a, c), BlockRealize((), const(True), root))
    consumer = c_nest.body.block  # type: ignore[attr-defined]
    with pytest.raises(ScheduleError, match="contiguous range"):
        P.reverse_compute_at(func, consumer, p_nest, False)
    moved = P.reverse_compute_at(func, consumer, p_nest.body, False)  # type: ignore[arg-type]
    check(moved, lambda x: (x + 1) * 2)


def test_compute_at_across_a_writer_of_its_input_is_refused() -> None:
    """P reads X; W overwrites X after P; C reads P's output. Moving P under C's
    loop would make it read W's values."""
    n = 6
    x = Buffer("X", (const(n),))
    b = Buffer("B", (const(n),))
    a = Buffer("A", (const(n),))
    c = Buffer("C", (const(n),))
    p_nest = _nest("P", b, lambda v: E.BufferLoad(x, (v,)) + E.const(1.0))
    w_nest = _nest("W", x, lambda v: E.BufferLoad(a, (v,)) * E.const(3.0))
    c_nest = _nest("Cb", c, lambda v: E.BufferLoad(b, (v,)) + E.BufferLoad(x, (v,)))
    root = Block("root", (), seq(p_nest, w_nest, c_nest), alloc_buffers=(b,))
    func = PrimFunc((a, x, c), BlockRealize((), const(True), root))
    assert isinstance(c_nest, For)
    p_block = p_nest.body.block  # type: ignore[attr-defined]
    with pytest.raises(ScheduleError, match="block 'W' accesses 'X' in between"):
        P.compute_at(func, p_block, c_nest, False)


def _nest(name: str, out: Buffer, value: Callable[[PrimExpr], PrimExpr]) -> For:
    loop = Var("i")
    v = Var("v")
    iv = IterVar(v, Range(const(0), out.shape[0]))
    block = Block(name, (iv,), BufferStore(out, value(v), (v,)))
    realize = BlockRealize((loop,), const(True), block)
    return For(loop, const(0), out.shape[0], ForKind.SERIAL, realize)


def _realize(sch: Schedule, name: str) -> BlockRealize:
    from compiler.ir.analysis import find_block_realize

    realize = find_block_realize(sch.mod["main"].body, name)
    assert realize is not None
    return realize


# sample_compute_location ---------------------------------------------------------------------


def test_sample_compute_location_enumerates_the_legal_loops() -> None:
    func = add_then_mul()
    block = _realize(Schedule(func), "B").block
    loops = P.compute_location.compute_at_candidates(func, block)
    assert [loop.loop_var.name for loop in loops] == ["i0", "i1"]


@settings(max_examples=25, deadline=None)
@given(
    h=st.integers(4, 12),
    w=st.integers(4, 12),
    tile_h=st.sampled_from([1, 2, 3, 4]),
    tile_w=st.sampled_from([1, 2, 4]),
)
def test_the_iterations_at_each_location_are_those_of_the_moved_block(
    h: int, w: int, tile_h: int, tile_w: int
) -> None:
    """What a generated space weighs each compute location by, counted without building
    the program, is the product of the loop extents around the block once compute_at
    really moved it there: a stencil's pad block at every tile loop of its consumer."""
    sch = Schedule(padded_conv(h, w))
    i, j = sch.get_loops(sch.get_block("conv"))[:2]
    io, ii = sch.split(i, [None, tile_h])
    jo, ji = sch.split(j, [None, tile_w])
    sch.reorder(io, jo, ii, ji)
    func = sch.mod["main"]
    pad = _realize(sch, "pad").block
    loops = P.compute_location.compute_at_candidates(func, pad)
    assert loops
    for k, loop in enumerate(loops):
        moved = sch.copy()
        moved.compute_at(
            moved.get_block("pad"),
            moved.sample_compute_location(moved.get_block("pad"), decision=k),
        )
        extents = [
            moved.get(loop_rv).extent.value for loop_rv in moved.get_loops(moved.get_block("pad"))
        ]
        assert P.compute_location.compute_at_iterations(func, pad, loop) == np.prod(extents)


@pytest.mark.parametrize("decision", [-2, -1, 0, 1])
def test_each_compute_location_decision_gives_a_correct_program(decision: int) -> None:
    sch = Schedule(add_then_mul((7, 5)))
    b = sch.get_block("B")
    location = sch.sample_compute_location(b, decision=decision)
    if decision == -1:
        assert isinstance(location, RootLocation)
    elif decision == -2:
        assert isinstance(location, InlineLocation)
    sch.compute_at(b, location)
    assert sch.trace.instructions[-2].decision == decision
    check(sch.mod["main"], lambda a: (a + 1) * 2)


def test_sampled_compute_locations_are_reproducible_and_correct() -> None:
    seen = set()
    for seed in range(12):
        sch = Schedule(mm_relu(5, 6, 3), seed=seed)
        _i, j = sch.get_loops(sch.get_block("C"))
        sch.split(j, [None, 4])
        y = sch.get_block("Y")
        location = sch.sample_compute_location(y)
        sch.compute_at(y, location)
        seen.add(sch.trace.instructions[-2].decision)
        check(sch.mod["main"], mm_relu_expected)
    assert -2 not in seen
    assert len(seen) >= 3


def test_invalid_compute_location_decisions_are_refused() -> None:
    sch = Schedule(mm_relu(5, 6, 3))
    y = sch.get_block("Y")
    assert_refused(sch, lambda: sch.sample_compute_location(y, decision=-2), match="not one of")
    assert_refused(sch, lambda: sch.sample_compute_location(y, decision=5), match="not one of")


# random schedules --------------------------------------------------------------------------

WORKLOADS: dict[str, tuple[Callable[[], PrimFunc], Callable[..., np.ndarray]]] = {
    "add_then_mul": (lambda: add_then_mul((5, 7)), lambda a: (a + 1) * 2),
    "mm_relu": (lambda: mm_relu(5, 6, 3), mm_relu_expected),
    "padded_conv": (lambda: padded_conv(4, 5), padded_conv_expected),
}


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(sorted(WORKLOADS)), st.data())
def test_random_moves_compute_what_numpy_computes(name: str, data: st.DataObject) -> None:
    """Random splits, then compute_at and reverse_compute_at of random blocks at
    random loops: each move is either refused or keeps the result."""
    make, expected = WORKLOADS[name]
    sch = Schedule(make())
    blocks = P.block_names(sch.mod["main"])
    for _ in range(data.draw(st.integers(0, 2))):
        loops = sch.get_loops(sch.get_block(data.draw(st.sampled_from(blocks))))
        loop = data.draw(st.sampled_from(loops))
        sch.split(loop, [None, data.draw(st.integers(2, 4))])
    for _ in range(data.draw(st.integers(1, 3))):
        block = sch.get_block(data.draw(st.sampled_from(blocks)))
        all_loops = [LoopRV(loop.loop_var, "main") for loop in _all_loops(sch.mod["main"])]
        loop = data.draw(st.sampled_from(all_loops))
        move = data.draw(st.sampled_from([sch.compute_at, sch.reverse_compute_at]))
        before = sch.mod
        try:
            move(block, loop, preserve_unit_loops=data.draw(st.booleans()))
        except ScheduleError:
            assert sch.mod is before
    args = random_args(sch.mod["main"], seed=11)
    run_func(sch.mod["main"], *args)
    np.testing.assert_allclose(args[-1], expected(*args[:-1]), rtol=1e-5, atol=1e-5)


def _all_loops(func: PrimFunc) -> list[For]:
    found: list[For] = []

    def collect(n: object) -> None:
        if isinstance(n, For):
            found.append(n)

    visit(func.body, collect)  # type: ignore[arg-type]
    return found
