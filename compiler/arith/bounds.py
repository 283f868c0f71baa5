"""Interval (bound) analysis of integer index expressions.

``bound(i * 4 + j, {i: Range(0, 8), j: Range(0, 4)})`` is ``[0, 31]``: the
expression is first put in affine normal form, so affine expressions get exact
bounds even when a variable occurs several times; the rest (``//`` and ``%`` by
constants, ``min``, ``max``, ``select``, products of two variables) get
conservative ones. Bounds are expressions themselves: a variable without a
range is a symbol (the loop variables a schedule keeps fixed, symbolic shapes),
so the region a consumer reads in one iteration of a loop comes out as
``[i_0 * 4, i_0 * 4 + 3]``. A side that cannot be bounded is ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiler.arith.const_interval import const_interval
from compiler.arith.linear import Linear, from_linear, same_expr, to_linear
from compiler.arith.rewrite import normalize
from compiler.ir import expr as E
from compiler.ir.expr import IntImm, PrimExpr, Range, Var


@dataclass(frozen=True)
class Interval:
    """The closed interval ``[min, max]``; ``None`` is an unbounded side."""

    min: PrimExpr | None
    max: PrimExpr | None

    @staticmethod
    def point(e: PrimExpr) -> Interval:
        return Interval(e, e)

    @staticmethod
    def from_range(r: Range) -> Interval:
        """``Range(min, extent)`` as the closed ``[min, min + extent - 1]``."""
        if isinstance(r.min, IntImm) and isinstance(r.extent, IntImm):
            last = r.min.value + r.extent.value - 1
            return Interval(r.min, IntImm(last, E.promote(r.min.dtype, r.extent.dtype)))
        return Interval(r.min, normalize(r.min + r.extent - 1))

    @property
    def is_bounded(self) -> bool:
        return self.min is not None and self.max is not None

    def extent(self) -> PrimExpr | None:
        """``max - min + 1``, simplified; None when a side is unbounded."""
        if self.min is None or self.max is None:
            return None
        return normalize(self.max - self.min + 1)

    def union(self, other: Interval) -> Interval:
        lo = (
            None
            if self.min is None or other.min is None
            else normalize(E.Min(*_same(self.min, other.min)))
        )
        hi = (
            None
            if self.max is None or other.max is None
            else normalize(E.Max(*_same(self.max, other.max)))
        )
        return Interval(lo, hi)

    def __str__(self) -> str:
        return f"[{self.min}, {self.max}]"


Ranges = Mapping[Var, "Range | Interval"]


def bound(expr: PrimExpr, ranges: Ranges) -> Interval:
    """Conservative bounds of ``expr`` when each variable in ``ranges`` takes any
    value of its range (the others are symbols); exact for affine expressions."""
    return Bounder(ranges).bound(expr)


def const_bound(expr: PrimExpr, ranges: Ranges) -> tuple[int | None, int | None]:
    """Constant bounds of ``expr`` under ``ranges``; symbols without a range count
    as unbounded, so ``min(4, n - i)`` is at most 4."""
    return Bounder(ranges).const_bound(expr)


def _same(a: PrimExpr, b: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    """``a`` and ``b`` in one dtype, the wider of the two."""
    if a.dtype == b.dtype:
        return a, b
    common = E.promote(a.dtype, b.dtype)
    return (a if a.dtype == common else E.Cast(common, a)), (
        b if b.dtype == common else E.Cast(common, b)
    )


class Bounder:
    """Bound queries under one set of variable ranges, which ``bind`` and
    ``restore`` change in place (the simplifier binds loop ranges one loop at a
    time as a pass walks into a loop nest)."""

    def __init__(self, ranges: Ranges) -> None:
        self.ranges: dict[int, Interval | Range] = {}
        self.relaxing: set[int] = set()
        for var, dom in ranges.items():
            self.bind(var, dom)

    def bind(self, var: Var, dom: Range | Interval) -> Interval | Range | None:
        """Let ``var`` range over ``dom``; returns the range it had, for ``restore``.
        A ``Range`` becomes an ``Interval`` when a query first needs it: most
        loops a pass binds are never asked about."""
        previous = self.ranges.get(id(var))
        self.ranges[id(var)] = dom
        return previous

    def restore(self, var: Var, previous: Interval | Range | None) -> None:
        if previous is None:
            del self.ranges[id(var)]
        else:
            self.ranges[id(var)] = previous

    def const_bound(self, e: PrimExpr) -> tuple[int | None, int | None]:
        result = self.bound(e)
        lo = None if result.min is None else const_interval(result.min)[0]
        hi = None if result.max is None else const_interval(result.max)[1]
        return lo, hi

    def bound(self, e: PrimExpr) -> Interval:
        if not E.is_int(e.dtype):
            return Interval(E.const(0), E.const(1)) if e.dtype == "bool" else Interval(None, None)
        lin = to_linear(normalize(e))
        lo, hi = Linear(lin.dtype, lin.const), Linear(lin.dtype, lin.const)
        lo_ok = hi_ok = True
        for atom, coeff in lin.terms.values():
            part = self.atom(atom)
            low_side, high_side = (part.min, part.max) if coeff > 0 else (part.max, part.min)
            if low_side is None:
                lo_ok = False
            elif lo_ok:
                lo.add(to_linear(low_side), coeff)
            if high_side is None:
                hi_ok = False
            elif hi_ok:
                hi.add(to_linear(high_side), coeff)
        return Interval(
            normalize(from_linear(lo)) if lo_ok else None,
            normalize(from_linear(hi)) if hi_ok else None,
        )

    def atom(self, e: PrimExpr) -> Interval:
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, E.FloorDiv) and isinstance(e.b, IntImm) and e.b.value > 0:
            return self.floordiv(self.bound(e.a), e.b)
        if isinstance(e, E.Div) and isinstance(e.b, IntImm) and e.b.value > 0:
            inner = self.bound(e.a)
            low = None if inner.min is None else const_interval(inner.min)[0]
            return (
                self.floordiv(inner, e.b) if low is not None and low >= 0 else Interval(None, None)
            )
        if isinstance(e, E.FloorMod) and isinstance(e.b, IntImm) and e.b.value > 0:
            return self.floormod(e, e.b.value)
        if isinstance(e, (E.Min, E.Max)):
            return self.min_max(e)
        if isinstance(e, E.Select):
            return self.bound(e.true_value).union(self.bound(e.false_value))
        if isinstance(e, E.Mul):
            return self.product(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.Cast) and E.is_int(e.value.dtype):
            inner = self.bound(e.value)
            return Interval(
                *(
                    None if x is None else normalize(E.Cast(e.dtype, x))
                    for x in (inner.min, inner.max)
                )
            )
        return Interval(None, None)

    def var(self, v: Var) -> Interval:
        dom = self.ranges.get(id(v))
        if dom is None:
            return Interval.point(v)
        if isinstance(dom, Range):
            dom = self.ranges[id(v)] = Interval.from_range(dom)
        if type(dom.min) is IntImm and type(dom.max) is IntImm:
            return dom  # a loop's constant range, most queries' case: nothing to bound
        if id(v) in self.relaxing:
            return Interval(None, None)
        self.relaxing.add(id(v))
        try:
            lo = None if dom.min is None else self.bound(dom.min).min
            hi = None if dom.max is None else self.bound(dom.max).max
        finally:
            self.relaxing.discard(id(v))
        return Interval(lo, hi)

    def floordiv(self, inner: Interval, divisor: IntImm) -> Interval:
        return Interval(
            None if inner.min is None else normalize(E.FloorDiv(inner.min, divisor)),
            None if inner.max is None else normalize(E.FloorDiv(inner.max, divisor)),
        )

    def floormod(self, e: E.FloorMod, divisor: int) -> Interval:
        inner = self.bound(e.a)
        if inner.min is not None and inner.max is not None and same_expr(inner.min, inner.max):
            return Interval.point(normalize(E.FloorMod(inner.min, e.b)))
        lo = None if inner.min is None else const_interval(inner.min)[0]
        hi = None if inner.max is None else const_interval(inner.max)[1]
        if inner.min is not None and inner.max is not None and lo is not None and hi is not None:
            if lo // divisor == hi // divisor:
                offset = (lo // divisor) * divisor
                return Interval(normalize(inner.min - offset), normalize(inner.max - offset))
        return Interval(E.const(0, e.dtype), E.const(divisor - 1, e.dtype))

    def min_max(self, e: E.Min | E.Max) -> Interval:
        a, b = self.bound(e.a), self.bound(e.b)
        kind = type(e)

        def combine(
            x: PrimExpr | None, y: PrimExpr | None, absorbing_none: bool
        ) -> PrimExpr | None:
            if x is None or y is None:
                if absorbing_none:
                    return None
                return x if y is None else y
            return normalize(kind(*_same(x, y)))

        is_min = kind is E.Min
        return Interval(combine(a.min, b.min, is_min), combine(a.max, b.max, not is_min))

    def product(self, a: Interval, b: Interval) -> Interval:
        if not (a.is_bounded and b.is_bounded):
            return Interval(None, None)
        assert a.min is not None and a.max is not None and b.min is not None and b.max is not None
        corners = [normalize(x * y) for x in (a.min, a.max) for y in (b.min, b.max)]
        lo, hi = corners[0], corners[0]
        for c in corners[1:]:
            lo = normalize(E.Min(*_same(lo, c)))
            hi = normalize(E.Max(*_same(hi, c)))
        return Interval(lo, hi)
