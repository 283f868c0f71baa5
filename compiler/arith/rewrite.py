"""The rewrite rules of integer index expressions.

Schedules build index and bound expressions mechanically (``(i_0 * 4 + 3) -
i_0 * 4 + 1``, ``(j_0 * 16 + j_1) // 16`` with ``j_1`` in ``[0, 16)``); the rules
here rewrite them to a canonical affine form (``4``, ``j_0``), fold constants, and
remove ``min``/``max``/``//``/``%`` and comparisons whose outcome the values of
their operands decide. A ``Rewriter`` knows those values from constants alone
(``normalize``); the ``Simplifier`` (``compiler.arith.simplifier``) also from the
ranges of variables, through the bound analysis (``compiler.arith.bounds``), which
itself normalizes with the rules here.

Every rewrite keeps the value of the expression exactly for every assignment of
the variables inside their ranges: ``//`` and ``%`` floor, ``Div`` truncates, a
folded constant must fit the dtype, and float arithmetic is never folded (the IR
evaluates it in the dtype's precision, Python in double).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from compiler.arith.const_interval import Bounds, const_interval, fits
from compiler.arith.linear import Linear, from_linear, same_expr, to_linear
from compiler.ir import expr as E
from compiler.ir.expr import IntImm, PrimExpr
from compiler.ir.node import Node, transform, transform_pre


def normalize(expr: PrimExpr) -> PrimExpr:
    """``expr`` rewritten without range facts: affine collection and constant folding."""
    return Rewriter()(expr)


class Rewriter:
    """The rules, applied bottom up; ``interval`` is what a rule knows of the values
    an operand takes: here, what its constants say."""

    def __call__(self, expr: PrimExpr) -> PrimExpr:
        return self._visit(expr)

    def _visit(self, e: PrimExpr) -> PrimExpr:
        if type(e) in _AFFINE_OPS and E.is_int(e.dtype):
            return self._affine_root(e)
        return self._operands_then_rule(e)

    def _operands_then_rule(self, e: PrimExpr) -> PrimExpr:
        """``e`` with its operands simplified, then rewritten by the rule for its kind."""

        def operand(child: Node) -> Node | None:
            return self._visit(child) if child is not e and isinstance(child, PrimExpr) else None

        rebuilt = transform_pre(e, operand)
        rewritten = self._rewrite(rebuilt)
        return rebuilt if rewritten is None else rewritten

    def _affine_root(self, e: PrimExpr) -> PrimExpr:
        """A whole sum of terms at once: simplify each atom and collect the terms
        again (an atom may simplify to a sum), rather than rebuilding each partial
        sum on the way up."""
        collected = to_linear(e)
        lin = Linear(e.dtype, collected.const)
        for atom, coeff in collected.terms.values():
            # an atom that is itself a sum or product (``(i + 1) * j``) is one term
            affine_atom = type(atom) in _AFFINE_OPS
            simplified = self._operands_then_rule(atom) if affine_atom else self._visit(atom)
            lin.add(to_linear(simplified), coeff)
        emitted = _emit(lin)
        return transform(e, self._rewrite) if emitted is None else emitted

    def _rewrite(self, node: Node) -> PrimExpr | None:
        if isinstance(node, E.BinaryOp) and isinstance(node.a, IntImm):
            if isinstance(node.b, IntImm):
                return _fold(node, node.a.value, node.b.value)
        rule = _RULES.get(type(node))
        return None if rule is None else rule(self, node)

    def interval(self, e: PrimExpr) -> Bounds:
        """The smallest and largest value ``e`` may take (None where unknown)."""
        return const_interval(e)

    def difference(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """``a - b`` in affine normal form, for bound queries only (its constants
        may not fit the dtype)."""
        if a.dtype != b.dtype or not E.is_int(a.dtype):
            return self(a - b)
        lin = to_linear(a)
        lin.add(to_linear(b), -1)
        return from_linear(lin)

    # integer arithmetic ----------------------------------------------------------

    def affine(self, e: E.BinaryOp) -> PrimExpr | None:
        if not E.is_int(e.dtype):
            return _float_identity(e) if isinstance(e, E.Mul) else None
        return _emit(to_linear(e))

    def split_by(self, e: PrimExpr, divisor: int) -> tuple[Linear, Linear]:
        """``e = divisor * quotient + rest`` with the terms whose coefficients
        ``divisor`` divides in the quotient and ``0 <= rest.const < divisor``."""
        return _divide_terms(to_linear(e), divisor)

    def floordiv(self, e: E.FloorDiv) -> PrimExpr | None:
        b = _const(e.b)
        if not _int_operands(e) or b is None or b <= 0:
            return None
        if b == 1:
            return e.a
        if isinstance(e.a, E.FloorDiv):
            inner = _const(e.a.b)
            if inner is not None and inner > 0 and fits(inner * b, e.dtype):
                merged = E.FloorDiv(e.a.a, E.const(inner * b, e.dtype))
                rewritten = self.floordiv(merged)
                return merged if rewritten is None else rewritten
        quotient, rest = self.split_by(e.a, b)
        rest_expr = _emit(rest)
        if rest_expr is None:
            return None
        lo, hi = self.interval(rest_expr)
        if lo is not None and hi is not None and lo // b == hi // b:
            quotient.const += lo // b
            return _emit(quotient)
        split = self.split_coarse(rest, b)
        if split is not None:
            factor, coarse, _ = split
            smaller = E.FloorDiv(coarse, E.const(b // factor, e.dtype))
            quotient.add_term(_rewritten(self.floordiv(smaller), smaller), 1)
            return _emit(quotient)
        if quotient.is_const and quotient.const == 0:
            return None
        quotient.add_term(E.FloorDiv(rest_expr, e.b), 1)
        return _emit(quotient)

    def floormod(self, e: E.FloorMod) -> PrimExpr | None:
        b = _const(e.b)
        if not _int_operands(e) or b is None or b <= 0:
            return None
        if b == 1:
            return E.const(0, e.dtype)
        _, rest = self.split_by(e.a, b)
        rest_expr = _emit(rest)
        if rest_expr is None:
            return None
        lo, hi = self.interval(rest_expr)
        if lo is not None and hi is not None and lo // b == hi // b:
            rest.const -= (lo // b) * b
            return _emit(rest)
        split = self.split_coarse(rest, b)
        if split is not None:
            factor, coarse, fine = split
            smaller = E.FloorMod(coarse, E.const(b // factor, e.dtype))
            remainder = Linear(e.dtype)
            remainder.add_term(_rewritten(self.floormod(smaller), smaller), factor)
            remainder.add(fine)
            return _emit(remainder)
        if same_expr(rest_expr, e.a):
            return None
        return E.FloorMod(rest_expr, e.b)

    def split_coarse(self, e: Linear, divisor: int) -> tuple[int, PrimExpr, Linear] | None:
        """``e = factor * coarse + fine`` with ``factor`` a divisor of ``divisor``
        between 1 and it, ``coarse`` the terms whose coefficients ``factor`` divides and
        ``0 <= fine < factor`` in range: then ``e // divisor`` is
        ``coarse // (divisor / factor)`` and ``e % divisor`` is ``coarse % (divisor /
        factor) * factor + fine``. A vector lane's ``(4 * x + v) // 8`` with ``v`` in
        ``[0, 4)`` is ``x // 2``, and its ``% 8`` is ``x % 2 * 4 + v``: neighbouring
        lanes' offsets then differ by a constant, where code generation can join them.
        The largest such factor; None without one."""
        for factor in _proper_divisors(divisor):
            coarse, fine = _divide_terms(e, factor)
            coarse_expr, fine_expr = _emit(coarse), _emit(fine)
            if coarse.is_const or coarse_expr is None or fine_expr is None:
                continue
            lo, hi = self.interval(fine_expr)
            if lo is not None and hi is not None and 0 <= lo and hi < factor:
                return factor, coarse_expr, fine
        return None

    def truncdiv(self, e: E.Div) -> PrimExpr | None:
        """Truncating division of a value known to be non-negative is floor division;
        the rewrite is kept only where floor division then simplifies."""
        if not E.is_int(e.dtype):
            return _float_identity(e)
        b = _const(e.b)
        if not _int_operands(e) or b is None or b <= 0:
            return None
        if b == 1:
            return e.a
        lo, _ = self.interval(e.a)
        if lo is None or lo < 0:
            return None
        return self.floordiv(E.FloorDiv(e.a, e.b))

    def min_max(self, e: E.Min | E.Max) -> PrimExpr | None:
        if not _int_operands(e):
            return None
        if same_expr(e.a, e.b):
            return e.a
        lo, hi = self.interval(self.difference(e.b, e.a))
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
        lo, hi = self.interval(self.difference(large, small))
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
        """``True and x`` is x, ``False and x`` is False; dually for ``or``."""
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
        if value is None:
            return None
        if e.dtype == "bool":
            return _bool(value != 0)
        return _make_int(value, e.dtype) if E.is_int(e.dtype) else None


_RULES: dict[type, Callable[[Rewriter, Any], PrimExpr | None]] = {
    E.Add: Rewriter.affine,
    E.Sub: Rewriter.affine,
    E.Mul: Rewriter.affine,
    E.FloorDiv: Rewriter.floordiv,
    E.FloorMod: Rewriter.floormod,
    E.Div: Rewriter.truncdiv,
    E.Min: Rewriter.min_max,
    E.Max: Rewriter.min_max,
    E.LT: Rewriter.compare,
    E.LE: Rewriter.compare,
    E.GT: Rewriter.compare,
    E.GE: Rewriter.compare,
    E.EQ: Rewriter.compare,
    E.NE: Rewriter.compare,
    E.And: Rewriter.logical,
    E.Or: Rewriter.logical,
    E.Not: Rewriter.negation,
    E.Select: Rewriter.select,
    E.Cast: Rewriter.cast,
}


_AFFINE_OPS = (E.Add, E.Sub, E.Mul)


def _divide_terms(lin: Linear, divisor: int) -> tuple[Linear, Linear]:
    """``lin = divisor * quotient + rest``: the terms whose coefficients ``divisor``
    divides in the quotient, the others in the rest, ``0 <= rest.const < divisor``."""
    quotient, rest = Linear(lin.dtype), Linear(lin.dtype)
    for atom, coeff in lin.terms.values():
        if coeff % divisor == 0:
            quotient.add_term(atom, coeff // divisor)
        else:
            rest.add_term(atom, coeff)
    quotient.const, rest.const = divmod(lin.const, divisor)
    return quotient, rest


def _rewritten(rewritten: PrimExpr | None, original: PrimExpr) -> PrimExpr:
    return original if rewritten is None else rewritten


def _proper_divisors(n: int) -> list[int]:
    """The divisors of ``n`` other than 1 and ``n``, largest first."""
    small = [d for d in range(2, math.isqrt(n) + 1) if n % d == 0]
    both = {*small, *(n // d for d in small)} - {n}
    return sorted(both, reverse=True)


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


_FOLDS: dict[type, Callable[[int, int], int | None]] = {
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


def fold_ints(op: type[E.BinaryOp], a: int, b: int) -> int | None:
    """``a op b`` on two integer constants in the IR's semantics (floor division,
    truncating ``Div``; comparisons give 0 or 1), or None where it has no value (a
    zero divisor) or ``op`` is no integer operation."""
    fold = _FOLDS.get(op)
    value = None if fold is None else fold(a, b)
    return None if value is None else int(value)


def _fold(e: E.BinaryOp, a: int, b: int) -> PrimExpr | None:
    """Both operands constant: the value in the IR's semantics, if it fits the dtype."""
    value = _FOLDS[type(e)](a, b)
    return None if value is None else _make_int(int(value), e.dtype)


def _emit(lin: Linear) -> PrimExpr | None:
    """``from_linear(lin)``, or None when a constant in it would not fit the dtype
    (``from_linear`` writes negative coefficients as subtractions)."""
    if lin.is_const:
        return _make_int(lin.const, lin.dtype)
    if not fits(abs(lin.const), lin.dtype):
        return None
    if any(not fits(abs(coeff), lin.dtype) for _, coeff in lin.terms.values()):
        return None
    return from_linear(lin)


def _float_identity(e: E.BinaryOp) -> PrimExpr | None:
    """``x * 1.0`` and ``x / 1.0`` are exactly ``x``; ``x + 0.0`` is not (for -0.0)."""
    if _is_float_one(e.b) and e.a.dtype == e.dtype:
        return e.a
    if isinstance(e, E.Mul) and _is_float_one(e.a) and e.b.dtype == e.dtype:
        return e.b
    return None


def _int_operands(e: E.BinaryOp) -> bool:
    """An integer operation whose operands have its dtype, so that either operand
    may replace it."""
    return E.is_int(e.dtype) and e.a.dtype == e.dtype and e.b.dtype == e.dtype


def _is_float_one(e: PrimExpr) -> bool:
    return isinstance(e, E.FloatImm) and e.value == 1.0


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _make_int(value: int, dtype: str) -> IntImm | None:
    return IntImm(value, dtype) if fits(value, dtype) else None


def _bool(value: bool) -> IntImm:
    return IntImm(int(value), "bool")


def _decide(true_if: bool, false_if: bool) -> PrimExpr | None:
    if true_if:
        return _bool(True)
    if false_if:
        return _bool(False)
    return None
