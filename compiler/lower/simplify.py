"""``simplify``: statement clean-up, every expression simplified under its loops' ranges.

Lowering leaves behind index arithmetic that only the loop ranges make simple
(``(j_0 * 16 + j_1) // 16`` is ``j_0`` while ``j_1`` runs over ``[0, 16)``),
``v_k == 0`` tests on unit loops, conditions that the ranges decide, and loops
and branches left empty. This pass walks the statements top-down, tells a
``compiler.arith.Simplifier`` the range ``[min, min + extent)`` of each loop
while it is inside that loop, and hands it every expression. The statement
rules live here: a constant condition picks its branch, a loop of extent 1
becomes its body, and empty loops, branches, sequences and allocations go.
Every expression rule lives in ``compiler.arith``, once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from compiler.arith import Simplifier
from compiler.arith.simplifier import RangeMap
from compiler.ir.analysis import substitute
from compiler.ir.expr import IntImm, PrimExpr, Range
from compiler.ir.function import PrimFunc
from compiler.ir.node import N, Node, transform_pre
from compiler.ir.stmt import Allocate, For, IfThenElse, SeqStmt, Stmt


def simplify(func: PrimFunc) -> PrimFunc:
    return dataclasses.replace(func, body=simplify_node(func.body))


def simplify_node(node: N, ranges: RangeMap | None = None) -> N:
    """Simplify an expression or a statement tree; ``ranges`` holds what is known
    about variables bound outside ``node`` (loops inside it add their own)."""
    return _Walker(Simplifier(ranges)).node(node)


def empty_stmt() -> SeqStmt:
    """The statement that does nothing; what a removed statement becomes."""
    return SeqStmt(())


def is_empty(stmt: Stmt) -> bool:
    return isinstance(stmt, SeqStmt) and not stmt.seq


class _Walker:
    def __init__(self, simplifier: Simplifier) -> None:
        self.simplify = simplifier

    def node(self, node: Any) -> Any:
        if isinstance(node, PrimExpr):
            return self.simplify(node)
        rule = _STMT_RULES.get(type(node))
        return self.children(node) if rule is None else rule(self, node)

    def children(self, node: Node) -> Node:
        """``node`` with each child simplified; for nodes without a rule of their own."""
        return transform_pre(node, lambda child: None if child is node else self.node(child))

    def loop(self, s: For) -> Stmt:
        start, extent = self.simplify(s.min), self.simplify(s.extent)
        count = _const(extent)
        if count is not None and count <= 0:
            return empty_stmt()
        if count == 1 and s.thread_binding is None:
            return self.node(substitute(s.body, {s.loop_var: start}))
        with self.simplify.bind(s.loop_var, Range(start, extent)):
            body = self.node(s.body)
        if is_empty(body):
            return empty_stmt()
        if start is s.min and extent is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, min=start, extent=extent, body=body)

    def branch(self, s: IfThenElse) -> Stmt:
        condition = self.simplify(s.condition)
        value = _const(condition)
        if value is not None:
            chosen = s.then_case if value else s.else_case
            return empty_stmt() if chosen is None else self.node(chosen)
        then_case = self.node(s.then_case)
        else_case = None if s.else_case is None else self.node(s.else_case)
        if else_case is not None and is_empty(else_case):
            else_case = None
        if is_empty(then_case) and else_case is None:
            return empty_stmt()
        unchanged = condition is s.condition and then_case is s.then_case
        if unchanged and else_case is s.else_case:
            return s
        return IfThenElse(condition, then_case, else_case)

    def sequence(self, s: SeqStmt) -> Stmt:
        simplified = [self.node(child) for child in s.seq]
        kept = tuple(child for child in simplified if not is_empty(child))
        if len(kept) == 1:
            return kept[0]
        if len(kept) == len(s.seq) and all(a is b for a, b in zip(kept, s.seq, strict=True)):
            return s
        return SeqStmt(kept)

    def allocate(self, s: Allocate) -> Stmt:
        body = self.node(s.body)
        if is_empty(body):
            return empty_stmt()
        return s if body is s.body else Allocate(s.buffer, body)


_STMT_RULES: dict[type, Callable[[_Walker, Any], Stmt]] = {
    For: _Walker.loop,
    IfThenElse: _Walker.branch,
    SeqStmt: _Walker.sequence,
    Allocate: _Walker.allocate,
}


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None
