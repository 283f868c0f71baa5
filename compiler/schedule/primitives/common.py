"""Lookups and tree edits that the schedule primitives share."""

from __future__ import annotations

import dataclasses

from compiler.ir.analysis import ancestors_of, find_block_realize, visit_statements
from compiler.ir.expr import IntImm, PrimExpr
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, replace_child, transform_pre, visit
from compiler.ir.stmt import Block, BlockRealize, For, Stmt


def block_names(func: PrimFunc) -> list[str]:
    """Names of every block but the root, in program order."""
    names: list[str] = []

    def collect(n: Node) -> None:
        if isinstance(n, Block) and n.name != "root":
            names.append(n.name)

    visit_statements(func.body, collect)
    return names


def loops_above(func: PrimFunc, block_name: str) -> list[For]:
    """The loops enclosing a block, outermost first, up to the enclosing block."""
    realize = _realize(func, block_name)
    loops: list[For] = []
    for node in ancestors_of(func.body, realize):
        if isinstance(node, Block):
            loops = []
        elif isinstance(node, For):
            loops.append(node)
    return loops


def child_block_names(node: Block | For) -> list[str]:
    """The blocks directly under a block or loop (not inside a nested block)."""
    names: list[str] = []
    start = node.body

    def collect(n: Node) -> bool | None:
        if isinstance(n, BlockRealize):
            names.append(n.block.name)
            return False
        return None

    visit(start, collect)
    return names


def _realize(func: PrimFunc, block_name: str) -> BlockRealize:
    found = find_block_realize(func.body, block_name)
    if found is None:
        raise LookupError(block_name)
    return found


def replace_node(func: PrimFunc, old: Node, new: Node) -> PrimFunc:
    """``func`` with the node ``old`` (by identity) replaced by ``new``. A statement is
    replaced along its path from the root, the rest of the tree shared."""
    if isinstance(old, PrimExpr):
        body = transform_pre(func.body, lambda n: new if n is old else None)
        return dataclasses.replace(func, body=body)
    child, replacement = old, new
    for parent in reversed(ancestors_of(func.body, old)):
        replacement = replace_child(parent, child, replacement)
        child = parent
    assert isinstance(replacement, Stmt), "a function body is replaced by a statement"
    return dataclasses.replace(func, body=replacement)


def const_int(e: PrimExpr) -> int | None:
    """The value of an integer constant, or None for anything symbolic."""
    return e.value if isinstance(e, IntImm) else None
