"""``hoist_conditions``: a condition that a loop does not change goes outside the loop.

A block's predicate (``T.where``) lands on the innermost statement: the Winograd
inverse transform's ``y < 14 and x < 14`` sits inside its four unrolled loops, so
the code generator wrote it 576 times, each a branch of its own, and the unrolled
reduction into one output element could not stay in a register across them.
``for i: if c: body``, with ``c`` free of ``i`` and of memory reads, is
``if c: for i: body`` (both do nothing when ``c`` is false or the loop is empty).
The pass works bottom-up, so a condition rises through every loop it does not
depend on. Only serial and unrolled loops are crossed: a parallel, vectorized or
thread-bound loop keeps its shape, which later steps read.
"""

from __future__ import annotations

import dataclasses

from compiler.ir.analysis import reads_memory, uses_var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform
from compiler.ir.stmt import For, ForKind, IfThenElse

_CROSSED = (ForKind.SERIAL, ForKind.UNROLLED)


def hoist_conditions(func: PrimFunc) -> PrimFunc:
    return dataclasses.replace(func, body=transform(func.body, _hoisted))


def _hoisted(node: Node) -> Node | None:
    if not isinstance(node, For) or node.kind not in _CROSSED:
        return None
    guard = node.body
    if not isinstance(guard, IfThenElse) or guard.else_case is not None:
        return None
    if uses_var(guard.condition, node.loop_var) or reads_memory(guard.condition):
        return None
    return IfThenElse(guard.condition, dataclasses.replace(node, body=guard.then_case))
