"""``simplify``: constant folding and a few algebraic identities.

A small rule set that cleans up what lowering leaves behind (``v_k == 0`` tests on
unit loops, ``i * 1 + 0`` indices, conditions on constants). Every rule keeps the
value of the expression exactly: integer folding uses the IR's semantics
(``//`` and ``%`` floor, ``Div`` truncates) and is skipped when the result would
not fit the dtype; float arithmetic is never folded, since the IR evaluates it in
the dtype's precision and Python in double.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable

from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.expr import IntImm, PrimExpr
from compiler.ir.function import PrimFunc
from compiler.ir.node import N, Node, transform
from compiler.ir.stmt import Allocate, For, IfThenElse, SeqStmt, Stmt


def simplify(func: PrimFunc) -> PrimFunc:
    return dataclasses.replace(func, body=simplify_node(func.body))


def simplify_node(node: N) -> N:
    """Simplify an expression or a statement tree bottom-up."""
    return transform(node, _rewrite)


def empty_stmt() -> SeqStmt:
    """The statement that does nothing; what a removed statement becomes."""
    return SeqStmt(())


def is_empty(stmt: Stmt) -> bool:
    return isinstance(stmt, SeqStmt) and not stmt.seq


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


_INT_FOLDS: dict[type, Callable[[int, int], int | bool | None]] = {
    E.Add: operator.add,
    E.Sub: operator.sub,
    E.Mul: operator.mul,
    E.FloorDiv: lambda a, b: a // b if b else None,
    E.FloorMod: lambda a, b: a % b if b else None,
    E.Div: lambda a, b: _trunc_div(a, b) if b else None,
    E.Min: min,
    E.Max: max,
    E.EQ: operator.eq,
    E.NE: operator.ne,
    E.LT: operator.lt,
    E.LE: operator.le,
    E.GT: operator.gt,
    E.GE: operator.ge,
    E.And: lambda a, b: bool(a) and bool(b),
    E.Or: lambda a, b: bool(a) or bool(b),
}


def _rewrite(node: Node) -> Node | None:
    rule = _RULES.get(type(node))
    return rule(node) if rule is not None else None


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _fits(value: int, dtype: str) -> bool:
    if dtype == "bool":
        return value in (0, 1)
    if dtype == "uint8":
        return 0 <= value < 256
    if not E.is_int(dtype):
        return False
    bits = int(dtype.removeprefix("int"))
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def _make_int(value: int, dtype: str) -> IntImm | None:
    return IntImm(int(value), dtype) if _fits(int(value), dtype) else None


def _binary(e: E.BinaryOp) -> PrimExpr | None:
    a, b = _const(e.a), _const(e.b)
    if a is not None and b is not None:
        folded = _INT_FOLDS[type(e)](a, b)
        return None if folded is None else _make_int(folded, e.dtype)
    if isinstance(e, (E.And, E.Or)):
        return _logical(e, a, b)
    if not E.is_int(e.dtype) or e.a.dtype != e.dtype or e.b.dtype != e.dtype:
        return _float_identity(e)
    return _int_identity(e, a, b)


def _logical(e: E.BinaryOp, a: int | None, b: int | None) -> PrimExpr | None:
    """``True and x`` is x, ``False and x`` is False; dually for ``or``."""
    absorbing = 0 if isinstance(e, E.And) else 1
    for known, other in ((a, e.b), (b, e.a)):
        if known is None:
            continue
        if bool(known) == bool(absorbing):
            return IntImm(absorbing, "bool")
        if other.dtype == "bool":
            return other
    return None


def _int_identity(e: E.BinaryOp, a: int | None, b: int | None) -> PrimExpr | None:
    x = e.a
    if isinstance(e, E.Add) and a == 0:
        return e.b
    if isinstance(e, (E.Add, E.Sub)) and b == 0:
        return x
    if isinstance(e, E.Mul) and (a == 0 or b == 0):
        return IntImm(0, e.dtype)
    if isinstance(e, E.Mul) and a == 1:
        return e.b
    if isinstance(e, (E.Mul, E.FloorDiv, E.Div)) and b == 1:
        return x
    if isinstance(e, E.FloorMod) and b == 1:
        return IntImm(0, e.dtype)
    if b is not None and isinstance(e, (E.Add, E.Sub)):
        return _merge_offsets(e, b if isinstance(e, E.Add) else -b)
    if b is not None and isinstance(e, E.Mul) and isinstance(x, E.Mul):
        inner = _const(x.b)
        if inner is not None and _fits(inner * b, e.dtype):
            return E.Mul(x.a, IntImm(inner * b, e.dtype))
    return None


def _merge_offsets(e: E.BinaryOp, offset: int) -> PrimExpr | None:
    """``(x + c1) + c2`` becomes ``x + (c1 + c2)``, for any mix of + and -."""
    inner = e.a
    if not isinstance(inner, (E.Add, E.Sub)):
        return None
    c = _const(inner.b)
    if c is None or inner.a.dtype != e.dtype:
        return None
    total = offset + (c if isinstance(inner, E.Add) else -c)
    if not _fits(total, e.dtype) or not _fits(-total, e.dtype):
        return None
    if total == 0:
        return inner.a
    if total > 0:
        return E.Add(inner.a, IntImm(total, e.dtype))
    return E.Sub(inner.a, IntImm(-total, e.dtype))


def _float_identity(e: E.BinaryOp) -> PrimExpr | None:
    """``x * 1.0`` and ``x / 1.0`` are exactly ``x``; adding 0.0 is not (for -0.0)."""
    one = isinstance(e.b, E.FloatImm) and e.b.value == 1.0 and e.a.dtype == e.dtype
    if one and isinstance(e, (E.Mul, E.Div)):
        return e.a
    if isinstance(e, E.Mul) and isinstance(e.a, E.FloatImm) and e.a.value == 1.0:
        return e.b if e.b.dtype == e.dtype else None
    return None


def _not(e: E.Not) -> PrimExpr | None:
    value = _const(e.a)
    return None if value is None else IntImm(int(not value), "bool")


def _select(e: E.Select) -> PrimExpr | None:
    value = _const(e.condition)
    if value is None:
        return None
    chosen = e.true_value if value else e.false_value
    return chosen if chosen.dtype == e.dtype else None


def _cast(e: E.Cast) -> PrimExpr | None:
    if e.value.dtype == e.dtype:
        return e.value
    value = _const(e.value)
    if value is None or not (E.is_int(e.dtype) or e.dtype == "bool"):
        return None
    if e.dtype == "bool":
        return IntImm(int(value != 0), "bool")
    return _make_int(value, e.dtype)


def _if_then_else(s: IfThenElse) -> Stmt | None:
    value = _const(s.condition)
    if value is not None:
        chosen = s.then_case if value else s.else_case
        return empty_stmt() if chosen is None else chosen
    if s.else_case is not None and is_empty(s.else_case):
        return IfThenElse(s.condition, s.then_case)
    if is_empty(s.then_case) and s.else_case is None:
        return empty_stmt()
    return None


def _for(s: For) -> Stmt | None:
    extent = _const(s.extent)
    if is_empty(s.body) or (extent is not None and extent <= 0):
        return empty_stmt()
    if extent == 1 and s.thread_binding is None:
        return simplify_node(substitute(s.body, {s.loop_var: s.min}))
    return None


def _seq(s: SeqStmt) -> Stmt | None:
    kept = tuple(child for child in s.seq if not is_empty(child))
    if len(kept) == len(s.seq):
        return None
    return kept[0] if len(kept) == 1 else SeqStmt(kept)


def _allocate(s: Allocate) -> Stmt | None:
    return empty_stmt() if is_empty(s.body) else None


_RULES: dict[type, Callable[..., Node | None]] = {
    **{cls: _binary for cls in _INT_FOLDS},
    E.Not: _not,
    E.Select: _select,
    E.Cast: _cast,
    IfThenElse: _if_then_else,
    For: _for,
    SeqStmt: _seq,
    Allocate: _allocate,
}
