"""A guarded load (``cond ? x[i] : c``) is emitted as a ``select``, reading ``x[i]``
whatever the condition, only when ``i`` is inside ``x`` for every value of its loops
and the condition changes between the copies of an unrolled loop (a Winograd input
transform reading padded input at clamped indices). Otherwise it keeps its branches:
a load that might leave its buffer must never run when its guard is false."""

from __future__ import annotations

import numpy as np
import pytest
from emitted_ir import emitted_ir

import compiler
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, true_predicate

TARGET = "llvm -mcpu=haswell -num-cores=1"
ROWS, COLS = 3, 4


def guarded_shift(condition: PrimExpr, column: PrimExpr, j: Var, k: Var) -> PrimFunc:
    """``for j: for k (unrolled): out[j, k] = condition ? x[j, column] : -1``."""
    x = Buffer("x", (E.const(ROWS), E.const(COLS)))
    out = Buffer("out", (E.const(ROWS), E.const(COLS)))
    value = E.Select(condition, x[j, column], E.const(-1.0, "float32"))
    inner = For(k, E.const(0), E.const(COLS), ForKind.UNROLLED, BufferStore(out, value, (j, k)))
    body = For(j, E.const(0), E.const(ROWS), ForKind.SERIAL, inner)
    root = BlockRealize((), true_predicate(), Block("root", (), body))
    return PrimFunc((x, out), root, {"global_symbol": "main"})


def expected(x: np.ndarray, condition, column) -> np.ndarray:
    """The kernel's result; ``x[j, c]`` is the element at row-major offset ``j * COLS + c``,
    as the kernel addresses it."""
    out = np.full((ROWS, COLS), -1.0, "float32")
    for j in range(ROWS):
        for k in range(COLS):
            if condition(j, k):
                out[j, k] = x.reshape(-1)[j * COLS + column(k)]
    return out


@pytest.mark.parametrize(
    ("case", "branches"),
    [("clamped index, condition varies", False), ("index may leave x", True)],
)
def test_a_load_is_speculated_only_when_its_index_stays_inside(tmp_path, rng, case, branches):
    j, k = Var("j"), Var("k")
    condition = E.GE(j + k, E.const(2))
    if branches:  # k - 1 is -1 at k = 0: x[j, -1] is x[j - 1, 3], or before x at j = 0
        column, shift = k - 1, lambda c: c - 1
    else:
        column, shift = E.Max(k - 1, E.const(0)), lambda c: max(c - 1, 0)
    func = guarded_shift(condition, column, j, k)
    ir = emitted_ir(func, tmp_path, TARGET)
    assert ("sel.then" in ir) is branches
    x = rng.standard_normal((ROWS, COLS)).astype("float32")
    got = np.full((ROWS, COLS), np.nan, "float32")
    compiler.build(func, target=TARGET)(x, got)
    np.testing.assert_array_equal(got, expected(x, lambda a, b: a + b >= 2, shift))


def test_a_condition_the_same_in_every_unrolled_copy_keeps_its_branches(tmp_path, rng):
    """LLVM merges the copies' identical branches into one and vectorizes the loads
    under it, which it does not do for selects."""
    j, k = Var("j"), Var("k")
    func = guarded_shift(E.GE(j, E.const(1)), E.Max(k - 1, E.const(0)), j, k)
    assert "sel.then" in emitted_ir(func, tmp_path, TARGET)
    x = rng.standard_normal((ROWS, COLS)).astype("float32")
    got = np.full((ROWS, COLS), np.nan, "float32")
    compiler.build(func, target=TARGET)(x, got)
    np.testing.assert_array_equal(got, expected(x, lambda a, b: a >= 1, lambda c: max(c - 1, 0)))
