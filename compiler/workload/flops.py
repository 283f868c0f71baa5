"""How many floating-point operations a PrimFunc performs, for GFLOP/s figures.

The count is exact arithmetic, not a model: every Add, Sub, Mul, Div, Min and
Max whose result is a float counts 1 (so a multiply-add counts 2), every math
intrinsic (``exp``, ``erf``, ``sqrt``, ...) on floats counts 1, and integer index
arithmetic, comparisons, casts, loads and selects count nothing. Each statement's
count is multiplied by how often it runs: the product of the extents of the loops
around it. A reduction's update statement therefore counts its combiner once per
reduction step, and its ``init`` runs once per output element: the instances of
the block divided by the extents of its reduce variables.

Two kinds of block count otherwise. A constant weight's conversion
(``compiler.ir.layout_free``) counts nothing: a build runs it once, not per call. A
block that states its count in the ``FLOPS_ATTR`` annotation (``compiler.ir.annotations``)
counts that many per element it writes: the stages of Winograd's convolution state the
direct convolution's count (2 * channels * 9 per output element, nothing for the
transforms), as TVM counts them, so that its GFLOP/s compare with the direct algorithm's.

A split that does not divide its loop guards the excess iterations with a
predicate; those iterations are counted too, so the count of such a scheduled
function is an upper bound. Workloads (unscheduled functions) count exactly.
"""

from __future__ import annotations

import math

from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.annotations import FLOPS_ATTR
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import is_conversion
from compiler.ir.node import Node, children, visit
from compiler.ir.stmt import Block, BlockRealize, For, IterKind, Stmt

_ARITHMETIC = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max)


class FlopCountError(CompilerError, ValueError):
    """A function whose operation count is not a number: a symbolic loop extent."""


def flop_count(func: PrimFunc) -> int:
    """The floating-point operations one call of ``func`` performs."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"flop_count takes a PrimFunc, not {type(func).__name__}")
    return _count_stmt(func.body, 1)


def expr_flops(expr: Node) -> int:
    """The floating-point operations of one evaluation of ``expr``."""
    total = 0

    def count(n: Node) -> None:
        nonlocal total
        if isinstance(n, (*_ARITHMETIC, E.Call)) and E.is_float(n.dtype):
            total += 1

    visit(expr, count)
    return total


def _count_stmt(stmt: Node, times: int) -> int:
    """The operations of ``stmt`` when it runs ``times`` times."""
    if isinstance(stmt, For):
        return _count_stmt(stmt.body, times * _extent(stmt))
    if isinstance(stmt, BlockRealize):
        return expr_flops(stmt.predicate) * times + _count_block(stmt.block, times)
    if isinstance(stmt, Block):
        return _count_block(stmt, times)
    total = 0
    for child in children(stmt):
        if isinstance(child, Stmt):
            total += _count_stmt(child, times)
        else:
            total += expr_flops(child) * times
    return total


def _count_block(block: Block, times: int) -> int:
    if is_conversion(block):
        return 0
    elements = max(1, times // max(1, _reduce_steps(block)))
    stated = block.annotations.get(FLOPS_ATTR)
    if isinstance(stated, int):
        return stated * elements
    total = _count_stmt(block.body, times)
    if block.init is not None:
        total += _count_stmt(block.init, elements)
    return total


def _reduce_steps(block: Block) -> int:
    return math.prod(
        _constant(iv.dom.extent, f"the reduce variable {iv.var.name} of block {block.name!r}")
        for iv in block.iter_vars
        if iv.kind is IterKind.REDUCE
    )


def _extent(loop: For) -> int:
    return _constant(loop.extent, f"loop {loop.loop_var.name!r}")


def _constant(extent: E.PrimExpr, what: str) -> int:
    if not isinstance(extent, E.IntImm):
        raise FlopCountError(
            f"flop_count: {what} has the symbolic extent {extent}; counting needs constant "
            "shapes, so build the workload with concrete sizes (e.g. from an operator spec)"
        )
    return extent.value
