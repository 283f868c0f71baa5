"""Simplification of integer index expressions, optionally under known variable ranges.

Schedules build index and bound expressions mechanically (``(i_0 * 4 + 3) -
i_0 * 4 + 1``); this rewrites them to a canonical affine form (``4``), folds
constants, and removes ``min``/``max``/``//``/``%`` and comparisons whose outcome
the ranges decide. Every rewrite keeps the value of the expression exactly for
every assignment of the variables inside their ranges. Float arithmetic is never
rewritten: the IR evaluates it in the dtype's precision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Union

from compiler.arith.linear import Linear, from_linear, same_expr, to_linear
from compiler.ir import expr as E
from compiler.ir.expr import IntImm, PrimExpr, Range, Var
from compiler.ir.node import Node, transform

if TYPE_CHECKING:
    from compiler.arith.bounds import Interval

Bounds = tuple[int | None, int | None]
RangeMap = Mapping[Var, Union[Range, "Interval"]]


def simplify(expr: PrimExpr, ranges: RangeMap | None = None) -> PrimExpr:
    """``expr`` rewritten; ``ranges`` maps variables to a ``Range`` or an ``Interval``
    that they are known to lie in (loop variables and their loops' ranges)."""
    return _Simplifier(ranges).run(expr)


def normalize(expr: PrimExpr) -> PrimExpr:
    """``simplify`` without range facts: affine collection and constant folding."""
    return _Simplifier(None).run(expr)


def can_prove(condition: PrimExpr, ranges: RangeMap | None = None) -> bool:
    """True when ``condition`` holds for every value of the variables in ``ranges``."""
    result = simplify(condition, ranges)
    return isinstance(result, IntImm) and bool(result.value)


def const_interval(expr: PrimExpr) -> Bounds:
    """Constant bounds of ``expr`` by plain interval arithmetic, every variable
    unbounded; ``None`` for a side that is not bounded by a constant."""
    return _const_interval(expr)


def _const_interval(e: PrimExpr) -> Bounds:
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _const_interval(e.a), _const_interval(e.b)
        if isinstance(e, E.Sub):
            b = _negate(b)
        return _plus(a[0], b[0]), _plus(a[1], b[1])
    if isinstance(e, E.Mul):
        return _times(_const_interval(e.a), _const_interval(e.b))
    if isinstance(e, E.FloorDiv) and _positive_const(e.b):
        lo, hi = _const_interval(e.a)
        c = e.b.value  # type: ignore[attr-defined]
        return (None if lo is None else lo // c), (None if hi is None else hi // c)
    if isinstance(e, E.FloorMod) and _positive_const(e.b):
        lo, hi = _const_interval(e.a)
        c = e.b.value  # type: ignore[attr-defined]
        if lo is not None and hi is not None and lo // c == hi // c:
            return lo % c, hi % c
        return 0, c - 1
    if isinstance(e, (E.Min, E.Max)):
        return _min_max(type(e), _const_interval(e.a), _const_interval(e.b))
    if isinstance(e, E.Select):
        return _hull(_const_interval(e.true_value), _const_interval(e.false_value))
    if isinstance(e, E.Cast) and E.is_int(e.dtype) and E.is_int(e.value.dtype):
        return _const_interval(e.value)
    if e.dtype == "bool":
        return 0, 1
    return None, None


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _negate(b: Bounds) -> Bounds:
    return (None if b[1] is None else -b[1]), (None if b[0] is None else -b[0])


def _times(a: Bounds, b: Bounds) -> Bounds:
    if None in a or None in b:
        for x, y in ((a, b), (b, a)):
            if x[0] is not None and x[0] == x[1]:
                c = x[0]
                if c == 0:
                    return 0, 0
                lo, hi = (_mul(c, y[0]), _mul(c, y[1]))
                return (lo, hi) if c > 0 else (hi, lo)
        return None, None
    corners = [p * q for p in a for q in b]  # type: ignore[operator]
    return min(corners), max(corners)


def _mul(c: int, x: int | None) -> int | None:
    return None if x is None else c * x


def _min_max(kind: type, a: Bounds, b: Bounds) -> Bounds:
    """Bounds of min(a, b) or max(a, b); a missing side is -inf (low) or +inf (high)."""
    pick = min if kind is E.Min else max
    both_lo = None if a[0] is None or b[0] is None else pick(a[0], b[0])
    both_hi = None if a[1] is None or b[1] is None else pick(a[1], b[1])
    if kind is E.Min:
        known_hi = [x for x in (a[1], b[1]) if x is not None]
        return both_lo, (min(known_hi) if known_hi else None)
    known_lo = [x for x in (a[0], b[0]) if x is not None]
    return (max(known_lo) if known_lo else None), both_hi


def _hull(a: Bounds, b: Bounds) -> Bounds:
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return lo, hi


def _positive_const(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value > 0


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _bool(value: bool) -> IntImm:
    return IntImm(int(value), "bool")


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


class _Simplifier:
    def __init__(self, ranges: RangeMap | None) -> None:
        self.ranges = ranges or None
        self.rules: dict[type, Callable[..., PrimExpr | None]] = {
            E.Add: self.affine,
            E.Sub: self.affine,
            E.Mul: self.affine,
            E.FloorDiv: self.floordiv,
            E.FloorMod: self.floormod,
            E.Div: self.truncdiv,
            E.Min: self.min_max,
            E.Max: self.min_max,
            E.LT: self.compare,
            E.LE: self.compare,
            E.GT: self.compare,
            E.GE: self.compare,
            E.EQ: self.compare,
            E.NE: self.compare,
            E.And: self.logical,
            E.Or: self.logical,
            E.Not: self.negation,
            E.Select: self.select,
            E.Cast: self.cast,
        }

    def run(self, expr: PrimExpr) -> PrimExpr:
        return transform(expr, self.rewrite)

    def rewrite(self, node: Node) -> Node | None:
        rule = self.rules.get(type(node))
        return None if rule is None else rule(node)

    def interval(self, e: PrimExpr) -> Bounds:
        if self.ranges is None:
            return _const_interval(e)
        from compiler.arith.bounds import const_bound

        return const_bound(e, self.ranges)

    # integer arithmetic ----------------------------------------------------------

    def affine(self, e: E.BinaryOp) -> PrimExpr | None:
        if not E.is_int(e.dtype):
            return None
        return from_linear(to_linear(e))

    def split_by(self, e: PrimExpr, divisor: int) -> tuple[Linear, Linear]:
        """``e = divisor * quotient + rest`` with the terms whose coefficients
        ``divisor`` divides in the quotient and ``0 <= rest.const < divisor``."""
        lin = to_linear(e)
        quotient, rest = Linear(e.dtype), Linear(e.dtype)
        for atom, coeff in lin.terms.values():
            if coeff % divisor == 0:
                quotient.add_term(atom, coeff // divisor)
            else:
                rest.add_term(atom, coeff)
        quotient.const, rest.const = divmod(lin.const, divisor)
        return quotient, rest

    def floordiv(self, e: E.FloorDiv) -> PrimExpr | None:
        a, b = _const(e.a), _const(e.b)
        if not E.is_int(e.dtype) or b is None or b <= 0:
            return None
        if a is not None:
            return E.const(a // b, e.dtype)
        if b == 1:
            return e.a
        inner_divisor = _const(e.a.b) if isinstance(e.a, E.FloorDiv) else None
        if isinstance(e.a, E.FloorDiv) and inner_divisor is not None and inner_divisor > 0:
            return self.run(E.FloorDiv(e.a.a, E.const(inner_divisor * b, e.dtype)))
        quotient, rest = self.split_by(e.a, b)
        rest_expr = from_linear(rest)
        lo, hi = self.interval(rest_expr)
        if lo is not None and hi is not None and lo // b == hi // b:
            quotient.const += lo // b
            return from_linear(quotient)
        if quotient.is_const and quotient.const == 0:
            return None
        quotient.add_term(E.FloorDiv(rest_expr, E.const(b, e.dtype)), 1)
        return from_linear(quotient)

    def floormod(self, e: E.FloorMod) -> PrimExpr | None:
        a, b = _const(e.a), _const(e.b)
        if not E.is_int(e.dtype) or b is None or b <= 0:
            return None
        if a is not None:
            return E.const(a % b, e.dtype)
        if b == 1:
            return E.const(0, e.dtype)
        _, rest = self.split_by(e.a, b)
        rest_expr = from_linear(rest)
        lo, hi = self.interval(rest_expr)
        if lo is not None and hi is not None and lo // b == hi // b:
            rest.const -= (lo // b) * b
            return from_linear(rest)
        if same_expr(rest_expr, e.a):
            return None
        return E.FloorMod(rest_expr, e.b)

    def truncdiv(self, e: E.Div) -> PrimExpr | None:
        a, b = _const(e.a), _const(e.b)
        if not E.is_int(e.dtype) or b is None or b <= 0:
            return None
        if a is not None:
            return E.const(_trunc_div(a, b), e.dtype)
        lo, _ = self.interval(e.a)
        if lo is None or lo < 0:
            return None
        as_floor = E.FloorDiv(e.a, e.b)
        rewritten = self.floordiv(as_floor)
        return as_floor if rewritten is None else rewritten

    def min_max(self, e: E.Min | E.Max) -> PrimExpr | None:
        if not E.is_int(e.dtype):
            return None
        a, b = _const(e.a), _const(e.b)
        if a is not None and b is not None:
            return E.const(min(a, b) if isinstance(e, E.Min) else max(a, b), e.dtype)
        if same_expr(e.a, e.b):
            return e.a
        lo, hi = self.interval(self.run(e.b - e.a))
        a_smaller = lo is not None and lo >= 0
        b_smaller = hi is not None and hi <= 0
        if a_smaller or b_smaller:
            want_a = a_smaller if isinstance(e, E.Min) else b_smaller
            return e.a if want_a else e.b
        return None

    # conditions ------------------------------------------------------------------

    def compare(self, e: E.CmpOp) -> PrimExpr | None:
        if not (E.is_int(e.a.dtype) and E.is_int(e.b.dtype)):
            return None
        small, large = (e.b, e.a) if isinstance(e, (E.GT, E.GE)) else (e.a, e.b)
        lo, hi = self.interval(self.run(large - small))
        if isinstance(e, (E.LT, E.GT)):
            return _decide(lo is not None and lo > 0, hi is not None and hi <= 0)
        if isinstance(e, (E.LE, E.GE)):
            return _decide(lo is not None and lo >= 0, hi is not None and hi < 0)
        equal = lo == 0 and hi == 0
        differ = (lo is not None and lo > 0) or (hi is not None and hi < 0)
        if isinstance(e, E.EQ):
            return _decide(equal, differ)
        return _decide(differ, equal)

    def logical(self, e: E.And | E.Or) -> PrimExpr | None:
        absorbing = 0 if isinstance(e, E.And) else 1
        for known, other in ((_const(e.a), e.b), (_const(e.b), e.a)):
            if known is None:
                continue
            if bool(known) == bool(absorbing):
                return _bool(bool(absorbing))
            if other.dtype == "bool":
                return other
        return None

    def negation(self, e: E.Not) -> PrimExpr | None:
        value = _const(e.a)
        return None if value is None else _bool(not value)

    def select(self, e: E.Select) -> PrimExpr | None:
        value = _const(e.condition)
        if value is not None:
            chosen = e.true_value if value else e.false_value
            return chosen if chosen.dtype == e.dtype else None
        if same_expr(e.true_value, e.false_value) and e.true_value.dtype == e.dtype:
            return e.true_value
        return None

    def cast(self, e: E.Cast) -> PrimExpr | None:
        if e.value.dtype == e.dtype:
            return e.value
        value = _const(e.value)
        if value is not None and E.is_int(e.dtype) and E.is_int(e.value.dtype):
            return E.const(value, e.dtype)
        return None


def _decide(true_if: bool, false_if: bool) -> PrimExpr | None:
    if true_if:
        return _bool(True)
    if false_if:
        return _bool(False)
    return None
