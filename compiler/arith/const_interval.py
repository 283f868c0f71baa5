"""Constant bounds by plain interval arithmetic, and whether a constant fits a dtype.

The two cheapest questions the simplifier asks: what constants enclose an
expression when every variable is unbounded (``x % 4`` is in ``[0, 3]`` whatever
``x`` is), and whether a folded constant is representable in the expression's
dtype (folding ``2**31 - 1 + 1`` in int32 would change the program).
"""

from __future__ import annotations

from typing import TypeGuard

from compiler.ir import expr as E
from compiler.ir.expr import IntImm, PrimExpr

Bounds = tuple[int | None, int | None]


def fits(value: int, dtype: str) -> bool:
    """True when ``value`` is representable in the integer (or bool) ``dtype``."""
    if dtype == "bool":
        return value in (0, 1)
    if dtype == "uint8":
        return 0 <= value < 256
    if not E.is_int(dtype):
        return False
    bits = int(dtype.removeprefix("int"))
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def const_interval(e: PrimExpr) -> Bounds:
    """Constant bounds of ``e`` by plain interval arithmetic, every variable
    unbounded; ``None`` for a side that is not bounded by a constant."""
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, (E.Add, E.Sub)):
        a, b = const_interval(e.a), const_interval(e.b)
        if isinstance(e, E.Sub):
            b = _negate(b)
        return _plus(a[0], b[0]), _plus(a[1], b[1])
    if isinstance(e, E.Mul):
        return _times(const_interval(e.a), const_interval(e.b))
    if isinstance(e, E.FloorDiv) and _positive_const(e.b):
        lo, hi = const_interval(e.a)
        c = e.b.value
        return (None if lo is None else lo // c), (None if hi is None else hi // c)
    if isinstance(e, E.FloorMod) and _positive_const(e.b):
        lo, hi = const_interval(e.a)
        c = e.b.value
        if lo is not None and hi is not None and lo // c == hi // c:
            return lo % c, hi % c
        return 0, c - 1
    if isinstance(e, (E.Min, E.Max)):
        return _min_max(type(e), const_interval(e.a), const_interval(e.b))
    if isinstance(e, E.Select):
        return _hull(const_interval(e.true_value), const_interval(e.false_value))
    if isinstance(e, E.Cast) and E.is_int(e.dtype) and E.is_int(e.value.dtype):
        return const_interval(e.value)
    if e.dtype == "bool":
        return 0, 1
    return None, None


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _negate(b: Bounds) -> Bounds:
    return (None if b[1] is None else -b[1]), (None if b[0] is None else -b[0])


def _times(a: Bounds, b: Bounds) -> Bounds:
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    if a_lo is None or a_hi is None or b_lo is None or b_hi is None:
        for x, y in ((a, b), (b, a)):
            if x[0] is not None and x[0] == x[1]:
                c = x[0]
                if c == 0:
                    return 0, 0
                lo, hi = (_mul(c, y[0]), _mul(c, y[1]))
                return (lo, hi) if c > 0 else (hi, lo)
        return None, None
    corners = [a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi]
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


def _positive_const(e: PrimExpr) -> TypeGuard[IntImm]:
    return isinstance(e, IntImm) and e.value > 0
