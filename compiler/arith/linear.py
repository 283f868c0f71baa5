"""Affine normal form of integer expressions: ``c0 + sum(c_k * atom_k)``.

Collecting terms is what makes bounds of affine index expressions exact (the two
``i * 4`` in ``i * 4 + 3 - i * 4`` cancel before any interval is taken) and what
keeps the expressions that schedules generate readable. Anything that is not a
sum, a difference or a product with a constant is an *atom*, compared by
structure so that two equal ``x // 4`` terms merge.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from compiler.ir import expr as E
from compiler.ir.analysis import uses_var
from compiler.ir.expr import IntImm, PrimExpr, Var
from compiler.ir.node import Node


def structural_key(node: Node) -> Hashable:
    """A hashable key equal for structurally equal expressions (variables and
    buffers by identity)."""
    if isinstance(node, E.Var):
        return ("var", id(node))
    if isinstance(node, IntImm):
        return ("int", node.value, node.dtype)
    if isinstance(node, E.FloatImm):
        return ("float", node.value, node.dtype)
    if isinstance(node, E.BinaryOp):
        return (type(node).__name__, structural_key(node.a), structural_key(node.b))
    if isinstance(node, E.Not):
        return ("not", structural_key(node.a))
    if isinstance(node, E.Select):
        parts = (node.condition, node.true_value, node.false_value)
        return ("select", *(structural_key(p) for p in parts))
    if isinstance(node, E.Cast):
        return ("cast", node.dtype, structural_key(node.value))
    if isinstance(node, E.Call):
        return ("call", node.op, node.dtype, *(structural_key(a) for a in node.args))
    if isinstance(node, E.BufferLoad):
        return ("load", id(node.buffer), *(structural_key(i) for i in node.indices))
    return ("node", id(node))


def same_expr(a: PrimExpr, b: PrimExpr) -> bool:
    return a is b or structural_key(a) == structural_key(b)


@dataclass
class Linear:
    """``const + sum(coeff * atom)``; ``terms`` maps an atom's structural key to
    the atom and its coefficient, in order of first appearance."""

    dtype: str
    const: int = 0
    terms: dict[Hashable, tuple[PrimExpr, int]] = field(default_factory=dict)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add_term(self, atom: PrimExpr, coeff: int) -> None:
        key = structural_key(atom)
        _, old = self.terms.get(key, (atom, 0))
        total = old + coeff
        if total == 0:
            self.terms.pop(key, None)
        elif key in self.terms:
            self.terms[key] = (self.terms[key][0], total)
        else:
            self.terms[key] = (atom, total)

    def add(self, other: Linear, scale: int = 1) -> None:
        self.const += scale * other.const
        for atom, coeff in other.terms.values():
            self.add_term(atom, scale * coeff)

    def scaled(self, factor: int) -> Linear:
        out = Linear(self.dtype)
        if factor != 0:
            out.add(self, factor)
        return out


def to_linear(e: PrimExpr) -> Linear:
    """The affine normal form of an integer expression (atoms are kept as they are)."""
    out = Linear(e.dtype)
    _collect(e, 1, out)
    return out


def stride(index: PrimExpr, var: Var) -> int | None:
    """How far ``index`` moves when ``var`` grows by one; None when that depends on
    where it is (``var`` inside a division, a min, a load)."""
    if not uses_var(index, var):
        return 0
    linear = to_linear(index)
    key = structural_key(var)
    term = linear.terms.get(key)
    others = [atom for other, (atom, _) in linear.terms.items() if other != key]
    if term is None or any(uses_var(atom, var) for atom in others):
        return None
    return term[1]


def _collect(e: PrimExpr, scale: int, out: Linear) -> None:
    if isinstance(e, IntImm):
        out.const += scale * e.value
    elif isinstance(e, (E.Add, E.Sub)) and e.a.dtype == e.dtype and e.b.dtype == e.dtype:
        _collect(e.a, scale, out)
        _collect(e.b, scale if isinstance(e, E.Add) else -scale, out)
    elif isinstance(e, E.Mul) and isinstance(e.b, IntImm) and e.a.dtype == e.dtype:
        _collect(e.a, scale * e.b.value, out)
    elif isinstance(e, E.Mul) and isinstance(e.a, IntImm) and e.b.dtype == e.dtype:
        _collect(e.b, scale * e.a.value, out)
    else:
        out.add_term(e, scale)


def from_linear(lin: Linear) -> PrimExpr:
    """An expression for ``lin``: positive terms first, then the subtracted ones,
    then the constant (``i * 4 + j - k - 1``)."""
    result: PrimExpr | None = None
    for atom, coeff in lin.terms.values():
        if coeff > 0:
            term = atom if coeff == 1 else atom * coeff
            result = term if result is None else result + term
    for atom, coeff in lin.terms.values():
        if coeff < 0:
            term = atom if coeff == -1 else atom * -coeff
            result = E.const(0, lin.dtype) - term if result is None else result - term
    if result is None:
        return E.const(lin.const, lin.dtype)
    if lin.const > 0:
        return result + E.const(lin.const, result.dtype)
    if lin.const < 0:
        return result - E.const(-lin.const, result.dtype)
    return result
