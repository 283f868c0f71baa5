"""Simplification of integer index expressions under known variable ranges.

It is the compiler's one expression simplifier: schedule primitives call it with
the ranges of the loops they reason about, and the lowering pass ``simplify`` with
the ranges of the loops around each statement. The rules are those of
``compiler.arith.rewrite``; the ranges decide, through the bound analysis, the
``min``/``max``/``//``/``%`` and comparisons that constants alone cannot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from compiler.arith.bounds import Bounder, Interval
from compiler.arith.const_interval import Bounds, const_interval
from compiler.arith.rewrite import Rewriter
from compiler.ir.expr import IntImm, PrimExpr, Range, Var

RangeMap = Mapping[Var, Range | Interval]


def simplify(expr: PrimExpr, ranges: RangeMap | None = None) -> PrimExpr:
    """``expr`` rewritten; ``ranges`` maps variables to a ``Range`` or an ``Interval``
    that they are known to lie in (loop variables and their loops' ranges)."""
    return Simplifier(ranges)(expr)


def can_prove(condition: PrimExpr, ranges: RangeMap | None = None) -> bool:
    """True when ``condition`` holds for every value of the variables in ``ranges``."""
    result = simplify(condition, ranges)
    return isinstance(result, IntImm) and bool(result.value)


class Simplifier(Rewriter):
    """The rewriter behind ``simplify``, kept across many expressions.

    A pass that walks into loops simplifies every expression it meets under the
    ranges of the loops around it; ``bind`` adds a loop's range for the duration
    of a ``with`` block, so the range facts are converted once, not once per
    expression.
    """

    def __init__(self, ranges: RangeMap | None = None) -> None:
        self._bounder: Bounder | None = Bounder(ranges) if ranges else None

    @contextmanager
    def bind(self, var: Var, dom: Range | Interval) -> Iterator[None]:
        """Inside the ``with`` block, ``var`` is known to lie in ``dom``."""
        if self._bounder is None:
            self._bounder = Bounder({})
        previous = self._bounder.bind(var, dom)
        try:
            yield
        finally:
            self._bounder.restore(var, previous)

    def interval(self, e: PrimExpr) -> Bounds:
        if self._bounder is None or not self._bounder.ranges:
            return const_interval(e)
        return self._bounder.const_bound(e)
