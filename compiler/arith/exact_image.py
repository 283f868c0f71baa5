"""Exact images of affine expressions: when does ``e`` take every value of its bounds?

``i_0 * 4 + i_1`` with ``i_1`` in ``[0, 4)`` takes each value of ``[i_0 * 4, i_0 * 4
+ 3]`` exactly once: the varying variables form a mixed-radix number. Bound
analysis only promises an enclosure; reverse_compute_at needs more, namely that
a producer writes *every* point of the region its consumer will read in the
same loop iteration, and this is the proof it uses.
"""

from __future__ import annotations

from collections.abc import Mapping

from compiler.arith.bounds import Interval
from compiler.arith.linear import Linear, from_linear, to_linear
from compiler.arith.rewrite import normalize
from compiler.ir.analysis import uses_var
from compiler.ir.expr import IntImm, PrimExpr, Range, Var


def dense_image(expr: PrimExpr, ranges: Mapping[Var, Range]) -> Interval | None:
    """``[lo, hi]`` when ``expr`` takes every integer value in it (and no other) as
    the variables of ``ranges`` run over their ranges; None when that is not shown.

    Holds for ``base + sum(c_k * x_k)`` where ``base`` uses none of the ranged
    variables and, with the terms sorted by coefficient, ``c_1 = 1`` and each
    ``c_{k+1} = c_k * extent_k`` (only the last extent may be symbolic).
    """
    lin = to_linear(normalize(expr))
    base = Linear(lin.dtype, lin.const)
    terms: list[tuple[int, Range]] = []
    for atom, coeff in lin.terms.values():
        dom = _range_of(atom, ranges)
        if dom is None:
            if any(uses_var(atom, v) for v in ranges):
                return None
            base.add_term(atom, coeff)
            continue
        bounds_vary = any(uses_var(dom.min, v) or uses_var(dom.extent, v) for v in ranges)
        if coeff <= 0 or bounds_vary:
            return None
        terms.append((coeff, dom))
        base.add(to_linear(normalize(dom.min)), coeff)
    terms.sort(key=lambda t: (t[0], _const_or_huge(t[1].extent)))
    stride = 1
    for k, (coeff, dom) in enumerate(terms):
        if coeff != stride:
            return None
        if k + 1 < len(terms):
            if not isinstance(dom.extent, IntImm):
                return None
            stride = coeff * dom.extent.value
    low = normalize(from_linear(base))
    if not terms:
        return Interval(low, low)
    coeff, dom = terms[-1]
    span = normalize(dom.extent * coeff)
    return Interval(low, normalize(low + span - 1))


def _range_of(atom: PrimExpr, ranges: Mapping[Var, Range]) -> Range | None:
    if not isinstance(atom, Var):
        return None
    return next((r for v, r in ranges.items() if v is atom), None)


def _const_or_huge(e: PrimExpr) -> int:
    return e.value if isinstance(e, IntImm) else 1 << 62
