"""An access's offset is emitted once per basic block and values of its index's
variables: in an unrolled loop most accesses repeat one of another copy. The kept
offset must follow the variables, must not outlive its basic block (its SSA name
does not reach the blocks beside it), and an index that reads memory must never be
kept, since a store can change what it reads."""

from __future__ import annotations

import numpy as np

import compiler
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    Stmt,
    seq,
    true_predicate,
)

TARGET = "llvm -mcpu=haswell -num-cores=1"


def kernel(params: tuple[Buffer, ...], body: Stmt) -> PrimFunc:
    root = BlockRealize((), true_predicate(), Block("root", (), body))
    return PrimFunc(params, root, {"global_symbol": "main"})


def loop(var: Var, start: int, extent: int, body: Stmt, kind: ForKind) -> For:
    return For(var, E.const(start), E.const(extent), kind, body)


def test_one_index_in_two_unrolled_loops_addresses_each_loops_elements(rng):
    """The same index node under two unrolled loops of one variable, in one basic
    block: the first loop's offsets must not be handed to the second."""
    values = rng.standard_normal(8).astype("float32")
    i = Var("i")
    index = i * 2 + 1
    x, out = Buffer("x", (E.const(8),)), Buffer("out", (E.const(8),))
    first = loop(i, 0, 2, BufferStore(out, x[index], (index,)), ForKind.UNROLLED)
    second = loop(i, 2, 2, BufferStore(out, x[index] * 2.0, (index,)), ForKind.UNROLLED)
    got = np.zeros(8, "float32")
    compiler.build(kernel((x, out), seq(first, second)), target=TARGET)(values, got)
    want = np.zeros(8, "float32")
    want[[1, 3]] = values[[1, 3]]
    want[[5, 7]] = 2 * values[[5, 7]]
    np.testing.assert_array_equal(got, want)


def test_an_offset_emitted_in_a_branch_is_emitted_again_in_the_next(rng):
    """``for i: for u in unrolled(2): if i > u: out[3i + 1] += x[i]``: each unrolled copy
    has its own branch, and the offset the first one computed does not reach the second
    (LLVM would refuse the module: an instruction that does not dominate its use)."""
    values = rng.standard_normal(4).astype("float32")
    i, u = Var("i"), Var("u")
    index = i * 3 + 1
    x, out = Buffer("x", (E.const(4),)), Buffer("out", (E.const(12),))
    add = BufferStore(out, out[index] + x[i], (index,))
    body = loop(u, 0, 2, IfThenElse(E.GT(i, u), add), ForKind.UNROLLED)
    got = np.zeros(12, "float32")
    compiler.build(kernel((x, out), loop(i, 0, 4, body, ForKind.SERIAL)), target=TARGET)(
        values, got
    )
    want = np.zeros(12, "float32")
    want[[1, 4, 7, 10]] = values * np.array([0, 1, 2, 2], "float32")
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_index_that_reads_memory_follows_the_stores_before_it(rng):
    """``where[0] = k; out[where[0]] = x[k]`` unrolled over k: the index has no
    variables and reads the slot each copy has just written, so each copy must store
    to its own element, not to the first copy's."""
    values = rng.standard_normal(4).astype("float32")
    k = Var("k")
    zero = E.const(0)
    where = Buffer("where", (E.const(1),), "int32")
    x, out = Buffer("x", (E.const(4),)), Buffer("out", (E.const(4),))
    body = seq(BufferStore(where, k, (zero,)), BufferStore(out, x[k], (where[zero],)))
    func = kernel((where, x, out), loop(k, 0, 4, body, ForKind.UNROLLED))
    got = np.zeros(4, "float32")
    compiler.build(func, target=TARGET)(np.zeros(1, "int32"), values, got)
    np.testing.assert_array_equal(got, values)
