"""``lower_blocks``: block IR to plain loops.

Blocks carry scheduling information (iteration domains, reduction init, buffer
ownership) that code generation does not need. This pass replaces each
``BlockRealize`` by its body with the block variables bound to their values, so
every later pass and the code generator see only loops, conditions and stores.
"""

from __future__ import annotations

import dataclasses
from functools import reduce

from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.expr import PrimExpr
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform
from compiler.ir.stmt import Allocate, BlockRealize, IfThenElse, IterKind, Stmt, seq


def lower_blocks(func: PrimFunc) -> PrimFunc:
    """Replace every block by loops-free statements in place of its realize."""
    return dataclasses.replace(func, body=transform(func.body, _lower_realize))


def _lower_realize(node: Node) -> Node | None:
    if not isinstance(node, BlockRealize):
        return None
    block = node.block
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, node.iter_values, strict=True)}
    body = substitute(block.body, bindings)
    if block.init is not None:
        init = substitute(block.init, bindings)
        body = seq(_first_reduction_step(node, init), body)
    if not _is_true(node.predicate):
        body = IfThenElse(node.predicate, body)
    for buffer in reversed(block.alloc_buffers):
        body = Allocate(buffer, body)
    return body


def _first_reduction_step(realize: BlockRealize, init: Stmt) -> Stmt:
    """Run ``init`` when every reduce variable is at the start of its domain.

    Testing the bindings rather than hoisting ``init`` out of the reduce loops
    keeps this correct for any loop order the schedule chose.
    """
    conditions: list[PrimExpr] = [
        E._binary(E.EQ, value, iv.dom.min)
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.REDUCE
    ]
    if not conditions:
        return init
    return IfThenElse(reduce(E.And, conditions), init)


def _is_true(predicate: PrimExpr) -> bool:
    return isinstance(predicate, E.IntImm) and bool(predicate.value)
