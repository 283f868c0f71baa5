"""Selects on the indices of unrolled loops fold to a constant while they are emitted,
and each folded constant is remembered by its select and the values of the select's
variables (a Winograd transform's coefficients, looked up once per index value). The
remembered value must follow the variables, and a select that reads memory must never
be remembered, since a store can change what it reads."""

from __future__ import annotations

import numpy as np
from emitted_ir import emitted_ir

import compiler
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, seq, true_predicate

TARGET = "llvm -mcpu=haswell -num-cores=1"


def kernel(params: tuple[Buffer, ...], body: For) -> PrimFunc:
    root = BlockRealize((), true_predicate(), Block("root", (), body))
    return PrimFunc(params, root, {"global_symbol": "main"})


def unrolled(var: Var, start: int, extent: int, body: BufferStore | For) -> For:
    return For(var, E.const(start), E.const(extent), ForKind.UNROLLED, body)


def table(index: Var, values: list[float]) -> PrimExpr:
    """``values[index]`` as a chain of selects, the way Winograd's matrices are written."""
    chain: PrimExpr = E.const(values[-1], "float32")
    for k in reversed(range(len(values) - 1)):
        chain = E.Select(E.EQ(index, E.const(k)), E.const(values[k], "float32"), chain)
    return chain


def test_one_select_in_two_unrolled_loops_folds_to_each_loops_values(tmp_path, rng):
    """The same select node under two loops of one variable: the first loop's values
    of it must not be handed to the second."""
    values = [float(v) for v in rng.integers(1, 100, 6)]
    i = Var("i")
    lookup = table(i, values)
    out = Buffer("out", (E.const(6),))
    first = unrolled(i, 0, 3, BufferStore(out, lookup, (i,)))
    second = unrolled(i, 3, 3, BufferStore(out, lookup * 2.0, (i,)))
    func = kernel((out,), seq(first, second))
    ir = emitted_ir(func, tmp_path, TARGET)
    assert "select" not in ir and "fcmp" not in ir  # every select folded
    got = np.full(6, np.nan, "float32")
    compiler.build(func, target=TARGET)(got)
    np.testing.assert_array_equal(got, np.array(values[:3] + [2 * v for v in values[3:]]))


def test_a_select_that_reads_memory_sees_each_store_before_it(rng):
    """``x[0] = values[i]; out[k, i] = k == 0 ? x[0] : -1`` in unrolled loops over k
    and i: the select folds to the load, and the load to the constant the store before
    it left. Each copy must read its own store's constant, not the first copy's."""
    values = [float(v) for v in rng.integers(1, 100, 3)]
    x = Buffer("x", (E.const(1),))
    out = Buffer("out", (E.const(2), E.const(3)))
    i, k = Var("i"), Var("k")
    zero = E.const(0)
    picked = E.Select(E.EQ(k, zero), x[zero], E.const(-1.0, "float32"))
    body = seq(BufferStore(x, table(i, values), (zero,)), BufferStore(out, picked, (k, i)))
    func = kernel((x, out), unrolled(k, 0, 2, unrolled(i, 0, 3, body)))
    got = np.full((2, 3), np.nan, "float32")
    compiler.build(func, target=TARGET)(np.zeros(1, "float32"), got)
    np.testing.assert_array_equal(got, np.array([values, [-1.0] * 3], "float32"))
