"""What the code generator knows of memory within one basic block: a load of an element
the block just stored or loaded reads that value, a store of the value an element
already holds is left out, and any store forgets it all. Unrolled reductions into one
element (a Winograd transform's terms) then add in registers; results still equal
numpy's, also where two different indices meet at run time."""

from __future__ import annotations

import numpy as np
from emitted_ir import emitted_ir

import compiler
from compiler import te
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, seq, true_predicate

TARGET = "llvm -mcpu=haswell -num-cores=1"
NEGATIVE_ZERO = "0x8000000000000000"


def kernel(params: tuple[Buffer, ...], body: For) -> PrimFunc:
    root = BlockRealize((), true_predicate(), Block("root", (), body))
    return PrimFunc(params, root, {"global_symbol": "main"})


def test_an_unrolled_reduction_into_one_element_never_loads_it(tmp_path, rng):
    """``out[i] = sum_r a[i, r] * w[r]`` with the reduction unrolled: each addition
    takes the sum so far from the store before it (and no branch is left on the
    constant conditions of the block's initialization)."""
    a = te.placeholder((5, 6), name="A")
    w = te.placeholder((6,), name="W")
    r = te.reduce_axis((0, 6), name="r")
    out = te.compute((5,), lambda i: te.sum(a[i, r] * w[r], axis=r), name="out")
    sch = compiler.Schedule(te.create_prim_func([a, w, out]))
    sch.unroll(sch.get_loops(sch.get_block("out"))[-1])
    ir = emitted_ir(sch.mod, tmp_path, TARGET)
    assert ir.count("load float") == 12  # A's and W's six elements each, never out's
    assert "br i1 true" not in ir and "br i1 false" not in ir
    x = rng.standard_normal((5, 6)).astype("float32")
    y = rng.standard_normal(6).astype("float32")
    got = np.full(5, np.nan, "float32")
    compiler.build(sch.mod, target=TARGET)(x, y, got)
    np.testing.assert_allclose(got, x @ y, rtol=1e-5, atol=1e-6)


def test_a_store_to_another_index_makes_the_next_load_read_memory(tmp_path):
    """``a[i] = 1 + i; a[j] = 10 + j; b[i, j] = a[i]``: where ``i == j`` the second store
    overwrote the first, which a value remembered by index text alone would miss."""
    a = Buffer("a", (E.const(4),))
    b = Buffer("b", (E.const(4), E.const(4)))
    i, j = Var("i"), Var("j")
    body = seq(
        BufferStore(a, E.Cast("float32", i) + 1.0, (i,)),
        BufferStore(a, E.Cast("float32", j) + 10.0, (j,)),
        BufferStore(b, a[i], (i, j)),
    )
    inner = For(j, E.const(0), E.const(4), ForKind.UNROLLED, body)
    func = kernel((a, b), For(i, E.const(0), E.const(4), ForKind.SERIAL, inner))
    got = np.zeros((4, 4), "float32")
    compiler.build(func, target=TARGET)(np.zeros(4, "float32"), got)
    rows, cols = np.indices((4, 4))
    np.testing.assert_array_equal(got, np.where(rows == cols, 10.0 + cols, 1.0 + rows))
    assert emitted_ir(func, tmp_path, TARGET).count("load float") == 4  # one per copy


def test_adding_negative_zero_is_left_out_and_keeps_every_value(tmp_path):
    """x + -0.0 is x for every x: +0.0, -0.0, infinities and NaN included."""
    a = Buffer("a", (E.const(6),))
    b = Buffer("b", (E.const(6),))
    i = Var("i")
    store = BufferStore(b, a[i] + E.const(-0.0, "float32"), (i,))
    func = kernel((a, b), For(i, E.const(0), E.const(6), ForKind.SERIAL, store))
    assert NEGATIVE_ZERO not in emitted_ir(func, tmp_path, TARGET)
    x = np.array([0.0, -0.0, 1.5, -np.inf, np.inf, np.nan], "float32")
    got = np.full(6, 7.0, "float32")
    compiler.build(func, target=TARGET)(x, got)
    np.testing.assert_array_equal(got.view("uint32"), (x + np.float32(-0.0)).view("uint32"))
