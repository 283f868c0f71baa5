"""Vectorized loops written as LLVM vector instructions (``codegen.llvm_vector``): the
results equal numpy's on random data, the emitted IR holds the vectors, and every loop
whose lanes are not plain keeps the loop form."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import numpy as np
import pytest
from emitted_ir import emitted_ir as emitted_ir_for
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler
from compiler import te
from compiler.codegen.llvm_stmt import STACK_LIMIT_BYTES
from compiler.codegen.llvm_vector import plan_vector_loops, rolled_vector_loops, vector_stores
from compiler.ir import IRModule
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.stmt import Allocate, BufferStore, For, ForKind, SeqStmt, Stmt

# 256-bit registers, 8 float32 lanes; every x86-64 host with AVX2 runs it.
AVX2 = "llvm -mcpu=haswell -num-cores=1"
LOOP_VECTORIZER = '!"llvm.loop.vectorize.enable", i1 true'


def emitted_ir(func: IRModule, folder: pathlib.Path) -> str:
    return emitted_ir_for(func, folder, AVX2)


def tiled_matmul(m: int, k: int, n: int, lanes: int, accumulator: bool = True) -> IRModule:
    """``C = A @ B`` with the columns split by ``lanes`` and the inner split vectorized
    inside the reduction: the register tile of a GEMM micro-kernel. With
    ``accumulator`` the tile accumulates in a local buffer (``cache_write``) that
    vector loops initialize and write back, else in ``C`` itself."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    sch = compiler.Schedule(te.create_prim_func([a, b, c]))
    block = sch.get_block("C")
    local = sch.cache_write(block, 0, "local") if accumulator else None
    i, j, reduction = sch.get_loops(block)
    outer, inner = sch.split(j, [None, lanes])
    sch.reorder(i, outer, reduction, inner)
    if local is not None:
        sch.reverse_compute_at(local, outer)
        sch.vectorize(sch.get_loops(local)[-1])
    init = sch.decompose_reduction(block, reduction)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(inner)
    return sch.mod


def matmul_result(module: IRModule, m: int, k: int, n: int, rng: np.random.Generator) -> None:
    """Build ``module`` for AVX2 and compare its product with numpy's."""
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    compiler.build(module, target=AVX2)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("m", "k", "n", "lanes"), [(13, 29, 40, 8), (5, 17, 48, 16)])
def test_a_register_tile_is_vector_instructions_and_matches_numpy(tmp_path, rng, m, k, n, lanes):
    func = tiled_matmul(m, k, n, lanes)
    ir = emitted_ir(func, tmp_path)
    assert f"load <{lanes} x float>" in ir
    assert f"fmul contract <{lanes} x float>" in ir
    assert f"shufflevector <{lanes} x float>" in ir  # A's element, broadcast
    assert LOOP_VECTORIZER not in ir
    matmul_result(func, m, k, n, rng)


def test_padding_branches_around_the_vector_load(tmp_path, rng):
    """Channels-last padding: the condition is the same for every lane, so the load
    of a whole vector is guarded by one branch and never reads out of bounds."""
    data = te.placeholder((5, 6, 16), name="data")
    padded = te.compute(
        (7, 8, 16),
        lambda y, x, c: te.if_then_else(
            (y >= 1) & (y < 6) & (x >= 1) & (x < 7), data[y - 1, x - 1, c], 0.0
        ),
        name="padded",
    )
    sch = compiler.Schedule(te.create_prim_func([data, padded]))
    sch.vectorize(sch.get_loops(sch.get_block("padded"))[-1])
    assert "phi <16 x float>" in emitted_ir(sch.mod, tmp_path)
    d = rng.standard_normal((5, 6, 16)).astype("float32")
    got = np.full((7, 8, 16), np.nan, "float32")
    compiler.build(sch.mod, target=AVX2)(d, got)
    np.testing.assert_array_equal(got, np.pad(d, ((1, 1), (1, 1), (0, 0))))


OPERATIONS = {
    "add": (lambda x, y: x + y, np.add),
    "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply),
    "div": (lambda x, y: x / (y * y + 1.0), lambda x, y: x / (y * y + np.float32(1.0))),
    "min": (te.min, np.minimum),
    "max": (te.max, np.maximum),
}


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(st.sampled_from(sorted(OPERATIONS)), min_size=1, max_size=4),
    lanes=st.sampled_from([8, 16, 24, 64]),
    rows=st.integers(1, 4),
    through_float64=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_lane_wise_arithmetic_matches_numpy(ops, lanes, rows, through_float64, seed):
    """Random chains of float arithmetic on a row and a broadcast column, with an
    optional round trip through float64, vectorized over the row."""
    x = te.placeholder((rows, lanes), name="x")
    y = te.placeholder((rows, lanes), name="y")
    s = te.placeholder((rows,), name="s")

    def value(i, j):
        v = x[i, j]
        for k, op in enumerate(ops):
            other = y[i, j] if k % 2 == 0 else s[i]
            v = OPERATIONS[op][0](v, other)
        if through_float64:
            v = (v.astype("float64") * 2.0).astype("float32")
        return v

    out = te.compute((rows, lanes), value, name="out")
    sch = compiler.Schedule(te.create_prim_func([x, y, s, out]))
    sch.vectorize(sch.get_loops(sch.get_block("out"))[-1])
    rng = np.random.default_rng(seed)
    xs, ys = rng.standard_normal((2, rows, lanes)).astype("float32")
    ss = rng.standard_normal(rows).astype("float32")
    want = xs
    for k, op in enumerate(ops):
        want = OPERATIONS[op][1](want, ys if k % 2 == 0 else ss[:, None])
    if through_float64:
        want = (want.astype("float64") * 2.0).astype("float32")
    got = np.full((rows, lanes), np.nan, "float32")
    compiler.build(sch.mod, target=AVX2)(xs, ys, ss, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def vector_loop_over(body_of: Callable[[Var], Stmt], lanes: int = 8) -> For:
    var = Var("v", "int64")
    return For(var, E.const(0, "int64"), E.const(lanes, "int64"), ForKind.VECTORIZED, body_of(var))


def test_loops_whose_lanes_are_not_plain_keep_the_loop_form():
    a = Buffer("a", (64,))
    b = Buffer("b", (64,))
    kept = {
        "narrower than a register": vector_loop_over(
            lambda v: BufferStore(a, E.BufferLoad(b, (v,)), (v,)), lanes=4
        ),
        "a lane reads its neighbour's element": vector_loop_over(
            lambda v: BufferStore(a, E.BufferLoad(a, (v + 1,)), (v,))
        ),
        "every other element": vector_loop_over(
            lambda v: BufferStore(a, E.BufferLoad(b, (v * 2,)), (v,))
        ),
        "a condition by lane": vector_loop_over(
            lambda v: BufferStore(
                a, E.Select(v < 3, E.BufferLoad(b, (v,)), E.const(0.0, "float32")), (v,)
            )
        ),
        "the lane as a value": vector_loop_over(
            lambda v: BufferStore(a, E.Cast("float32", v), (v,))
        ),
    }
    for reason, loop in kept.items():
        assert vector_stores(loop, 256) is None, reason
    plain = vector_loop_over(lambda v: BufferStore(a, E.BufferLoad(b, (v,)) * 2.0, (v,)))
    assert vector_stores(plain, 256) is not None
    assert vector_stores(plain, 0) is None


def test_a_kept_loop_still_computes_what_numpy_does(tmp_path, rng):
    """Four lanes on AVX2 is half a register: LLVM's vectorizer gets the loop."""
    func = tiled_matmul(6, 9, 12, 4)
    assert LOOP_VECTORIZER in emitted_ir(func, tmp_path)
    matmul_result(func, 6, 9, 12, rng)


def test_accumulating_into_a_parameter_keeps_the_loop_form(tmp_path, rng):
    """A tile that adds into the output itself, over the reduction loop around it, is
    left to LLVM: written as vectors, default convolutions of that shape ran 1.3-1.5x
    slower. Its initialization, a plain store, is still written as vectors."""
    func = tiled_matmul(7, 11, 24, 8, accumulator=False)
    ir = emitted_ir(func, tmp_path)
    assert LOOP_VECTORIZER in ir
    assert "store <8 x float>" in ir
    matmul_result(func, 7, 11, 24, rng)


def accumulating_tile(init_kind: ForKind, elements: int = 16) -> Allocate:
    """An accumulator tile of ``elements``: its initialization loop of ``init_kind``,
    then a vector loop that accumulates ``b`` into its first 16, then a vector loop
    that writes those to ``c``."""
    acc, b, c = Buffer("acc", (elements,)), Buffer("b", (16,)), Buffer("c", (16,))
    init = Var("i", "int64")
    return Allocate(
        acc,
        SeqStmt(
            (
                For(
                    init,
                    E.const(0, "int64"),
                    E.const(16, "int64"),
                    init_kind,
                    BufferStore(acc, E.const(0.0, "float32"), (init,)),
                ),
                vector_loop_over(
                    lambda v: BufferStore(
                        acc, E.BufferLoad(acc, (v,)) + E.BufferLoad(b, (v,)), (v,)
                    ),
                    lanes=16,
                ),
                vector_loop_over(lambda v: BufferStore(c, E.BufferLoad(acc, (v,)), (v,)), lanes=16),
            )
        ),
    )


def test_an_accumulator_touched_element_by_element_keeps_its_loops():
    """LLVM keeps an allocated tile in vector registers only when every access to it is
    a vector: a scalar initialization loop beside vector loops made a BERT dense tile
    14x slower, so then none of the tile's loops is written as vectors."""
    assert plan_vector_loops(accumulating_tile(ForKind.SERIAL), 512, STACK_LIMIT_BYTES) == {}
    planned = plan_vector_loops(accumulating_tile(ForKind.VECTORIZED), 512, STACK_LIMIT_BYTES)
    assert len(planned) == 3
    on_the_heap = plan_vector_loops(accumulating_tile(ForKind.VECTORIZED), 512, stack_bytes=32)
    assert len(on_the_heap) == 2  # not the loop that accumulates


def test_an_accumulator_larger_than_the_registers_keeps_its_vector_loops():
    """A tile larger than 32 vector registers lives in memory whatever its accesses'
    widths, so a scalar loop beside its vector loops leaves them written as vectors:
    left to LLVM, unrolled copies of such a loop became thousands of scalar accesses
    that took seconds to optimize."""
    fits = plan_vector_loops(accumulating_tile(ForKind.SERIAL, 512), 512, STACK_LIMIT_BYTES)
    assert fits == {}
    larger = plan_vector_loops(accumulating_tile(ForKind.SERIAL, 513), 512, STACK_LIMIT_BYTES)
    assert len(larger) == 2  # the loops that accumulate and write back; not the scalar one


def test_an_accumulator_off_the_stack_is_vectors_only_in_an_unrolled_tile():
    """Adding into a parameter: right inside a serial loop (a default convolution's
    reduction) the loop stays LLVM's; right inside an unrolled loop (a register tile
    whose accumulators are too many for the stack) it is written as vectors."""
    c, b = Buffer("c", (64,)), Buffer("b", (16,))
    for kind, planned in ((ForKind.SERIAL, 0), (ForKind.UNROLLED, 1)):
        row = Var("u", "int64")
        inner = vector_loop_over(
            lambda v, row=row: BufferStore(
                c, E.BufferLoad(c, (row * 16 + v,)) + E.BufferLoad(b, (v,)), (row * 16 + v,)
            ),
            lanes=16,
        )
        tile = For(row, E.const(0, "int64"), E.const(4, "int64"), kind, inner)
        assert len(plan_vector_loops(tile, 512, STACK_LIMIT_BYTES)) == planned, kind


def unrolled_vector_loop(copies: list[ForKind | int], lanes: int = 32) -> For:
    """A vector loop of ``lanes`` inside loops of the given kinds and extents, outermost
    first (an int is an unrolled loop of that extent, a kind a loop of 4 of that kind)."""
    a, b = Buffer("a", (1 << 20,)), Buffer("b", (1 << 20,))
    loop: For = vector_loop_over(lambda v: BufferStore(a, E.BufferLoad(b, (v,)), (v,)), lanes)
    for outer in reversed(copies):
        kind, extent = (ForKind.UNROLLED, outer) if isinstance(outer, int) else (outer, 4)
        loop = For(Var("u", "int64"), E.const(0, "int64"), E.const(extent, "int64"), kind, loop)
    return loop


def innermost(loop: Stmt) -> For:
    while isinstance(loop, For) and isinstance(loop.body, For):
        loop = loop.body
    assert isinstance(loop, For)
    return loop


@pytest.mark.parametrize(
    ("around", "lanes", "rolled"),
    [
        ([64], 32, True),  # a Winograd GEMM's reduction unrolled 64 times: 2,048 lanes
        ([8, 8], 32, True),
        ([14], 32, False),  # 448 lanes: LLVM's unrolling made such a tile 3.2x faster
        ([8, 8], 16, False),  # 1,024: the limit itself
        ([8, ForKind.SERIAL, 8], 32, False),  # the serial loop is the body LLVM analyses
        ([], 2048, True),
    ],
)
def test_a_vector_loop_left_to_llvm_stays_rolled_past_a_thousand_unrolled_lanes(
    around, lanes, rolled
):
    tile = unrolled_vector_loop(around, lanes)
    expected = {id(innermost(tile))} if rolled else set()
    assert rolled_vector_loops(tile, written=set()) == expected
    assert rolled_vector_loops(tile, written={id(innermost(tile))}) == set()


def padding_copy(v: Var) -> Stmt:
    """A padding copy's lane: the source index clamped, the value selected."""
    a, b = Buffer("a", (1 << 20,)), Buffer("b", (1 << 20,))
    clamped = E.Min(E.Max(v - 1, E.const(0, "int64")), E.const(55, "int64"))
    inside = E.And(v >= 1, v < 57)
    return BufferStore(a, E.Select(inside, E.BufferLoad(b, (clamped,)), E.const(0.0)), (v,))


def gather(v: Var) -> Stmt:
    """A channels-last accumulator's lane written back to NCHW: a load 64 elements apart."""
    a, b = Buffer("a", (1 << 20,)), Buffer("b", (1 << 20,))
    return BufferStore(a, E.BufferLoad(b, (v * 64,)), (v,))


@pytest.mark.parametrize(
    ("lane", "copies", "rolled"),
    [
        (padding_copy, 58, True),  # 16 lanes x 58 copies x (1 + min, max, select): 3,712
        (padding_copy, 8, False),  # 512
        (gather, 56, False),  # 896: a gather is an access like any other
    ],
    ids=["padding 58", "padding 8", "gather 56"],
)
def test_a_vector_loop_of_selects_and_clamps_counts_each_as_a_copy_more(
    lane: Callable[[Var], Stmt], copies: int, rolled: bool
) -> None:
    vector = vector_loop_over(lane, lanes=16)
    tile = For(
        Var("u", "int64"), E.const(0, "int64"), E.const(copies, "int64"), ForKind.UNROLLED, vector
    )
    assert rolled_vector_loops(tile, written=set()) == ({id(vector)} if rolled else set())


def test_a_rolled_vector_loop_is_marked_and_still_computes_what_numpy_does(tmp_path, rng):
    """An int32 product (its lanes are LLVM's to vectorize) whose reduction is unrolled
    64 times around 32 lanes: LLVM is told not to unroll the vector loop."""
    m, k, n = 3, 128, 64
    a = te.placeholder((m, k), "int32", name="A")
    b = te.placeholder((k, n), "int32", name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    sch = compiler.Schedule(te.create_prim_func([a, b, c]))
    block = sch.get_block("C")
    i, j, reduction = sch.get_loops(block)
    j_outer, j_inner = sch.split(j, [None, 32])
    r_outer, r_inner = sch.split(reduction, [None, 64])
    sch.reorder(i, j_outer, r_outer, r_inner, j_inner)
    sch.unroll(r_inner)
    sch.vectorize(j_inner)
    ir = emitted_ir(sch.mod, tmp_path)
    assert '!"llvm.loop.unroll.disable"' in ir
    x = rng.integers(-50, 50, (m, k), dtype="int32")
    y = rng.integers(-50, 50, (k, n), dtype="int32")
    out = np.full((m, n), -1, "int32")
    compiler.build(sch.mod, target=AVX2)(x, y, out)
    np.testing.assert_array_equal(out, x @ y)
