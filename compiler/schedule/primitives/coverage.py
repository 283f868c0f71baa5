"""A proof that a block runs at every point of its spatial domain.

cache_write copies a whole buffer back and reverse_compute_inline makes the
producer write every point it computes, so both are only equivalent when the
block they rewrite provably wrote all of its domain. The proof handles the
bindings that split and reorder make: each spatial variable is a mixed-radix
number over loops of its own (``(i0 * 3 + i1) * 4 + i2``), and each predicate
conjunct either cuts the overhang of such a number (``i0 * 3 + i1 < 5``) or only
involves other loops and holds at their start. Anything else (fuse's ``//`` and
``%``, loops moved by compute_at) is reported as unproven.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.arith import same_expr
from compiler.arith.linear import to_linear
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.stmt import For, IterKind
from compiler.schedule.primitives.dataflow import (
    BlockSite,
    conjuncts,
    evaluate,
    is_true,
    uses_any,
)

Linear = tuple[dict[int, int], int]


@dataclass(frozen=True)
class _Digits:
    """A spatial binding ``offset + sum(coeff * loop)`` over loops starting at 0."""

    coeffs: dict[int, int]
    offset: int
    end: int  # one past the largest in-domain value of the variable


def covers_spatial_domain(site: BlockSite) -> str | None:
    """None when the block provably runs at every point of its spatial domain,
    else the reason it may not."""
    realize = site.realize
    loops = {id(loop.loop_var): loop for loop in site.loops}
    used: set[int] = set()
    numbers: list[_Digits] = []
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if iv.kind is not IterKind.SPATIAL:
            continue
        form = _linear(value)
        name = iv.var.name
        if form is None or any(k not in loops or k in used for k in form[0]):
            return f"block variable {name!r} is bound to {value}, not to loops of its own"
        used.update(form[0])
        if not form[0]:
            if evaluate(iv.dom.extent, {}) == 1 and evaluate(iv.dom.min, {}) == form[1]:
                continue
            return f"block variable {name!r} is bound to the constant {value}"
        if _is_exact_loop(form, loops, iv.dom):
            continue
        number = _digits(form, loops, iv.dom)
        if number is None:
            return f"block variable {name!r} is bound to {value}, which may miss its domain"
        numbers.append(number)
    used_vars = [loops[k].loop_var for k in used]
    for cond in conjuncts(realize.predicate):
        if not is_true(cond) and not _harmless(cond, used_vars, numbers, site.loops):
            return f"its predicate {cond} may skip points of its domain"
    return None


def _linear(e: PrimExpr) -> Linear | None:
    """``e`` as (coefficient by variable id, constant), or None if not affine in
    plain variables."""
    form = to_linear(e)
    if not all(isinstance(atom, Var) for atom, _ in form.terms.values()):
        return None
    return {id(atom): coeff for atom, coeff in form.terms.values()}, form.const


def _is_exact_loop(form: Linear, loops: dict[int, For], dom: E.Range) -> bool:
    """Whether the binding is one loop (plus a constant) whose range is the
    domain; extents may be symbolic, compared by structure."""
    coeffs, offset = form
    if len(coeffs) != 1:
        return False
    ((key, coeff),) = coeffs.items()
    loop = loops[key]
    loop_min = evaluate(loop.min, {})
    dom_min = evaluate(dom.min, {})
    exact_start = loop_min is not None and dom_min is not None and loop_min + offset == dom_min
    return coeff == 1 and exact_start and same_expr(loop.extent, dom.extent)


def _digits(form: Linear, loops: dict[int, For], dom: E.Range) -> _Digits | None:
    """The binding as a mixed-radix number over constant loops that reaches the
    whole domain, or None when it may leave points of the domain out."""
    coeffs, offset = form
    dom_min = evaluate(dom.min, {})
    if dom_min is None:
        return None
    dom_extent = evaluate(dom.extent, {})
    if dom_extent is None:
        return None
    expected = 1
    # A unit loop adds nothing; among equal coefficients it goes first, so that it
    # does not stand between a digit and the next (``i_1 * 1 + i_2`` with i_2 in [0, 1)).
    by_coeff = sorted(
        coeffs.items(), key=lambda kv: (kv[1], evaluate(loops[kv[0]].extent, {}) != 1)
    )
    for key, coeff in by_coeff:
        loop = loops[key]
        loop_min = evaluate(loop.min, {})
        extent = evaluate(loop.extent, {})
        if coeff != expected or loop_min != 0 or extent is None or extent <= 0:
            return None
        expected *= extent
    if offset != dom_min or expected < dom_extent:
        return None
    return _Digits(coeffs, offset, dom_min + dom_extent)


def _harmless(
    cond: PrimExpr, used_vars: list[Var], numbers: list[_Digits], loops: tuple[For, ...]
) -> bool:
    """Whether ``cond`` holds at every in-domain point of the spatial variables."""
    if not uses_any(cond, used_vars):
        starts: dict[Var, int] = {}
        for loop in loops:
            start = evaluate(loop.min, {})
            if start is not None:
                starts[loop.loop_var] = start
        return bool(evaluate(cond, starts))
    if not isinstance(cond, E.LT):
        return False
    bound = evaluate(cond.b, {})
    form = _linear(cond.a)
    if bound is None or form is None or not form[0]:
        return False
    return any(_cuts_overhang(form, bound, number) for number in numbers)


def _cuts_overhang(form: Linear, bound: int, number: _Digits) -> bool:
    """``form < bound`` where ``form`` is ``(number - offset) // s`` plus a constant
    (the top digits of the number), true for every in-domain value."""
    coeffs, constant = form
    if any(k not in number.coeffs for k in coeffs):
        return False
    s = min(number.coeffs[k] for k in coeffs)
    for k, c in number.coeffs.items():
        if (k in coeffs) != (c >= s):
            return False
        if k in coeffs and c != s * coeffs[k]:
            return False
    largest = (number.end - 1 - number.offset) // s + constant
    return largest < bound
