"""Recognising a reduction block's combiner: ``out[v] = combine(out[v], value)``.

rfactor splits a reduction into partial results that a second block combines,
which is only equivalent for an associative and commutative combiner whose init
is its identity (starting each partial from anything else would count the init
once per partial). This module reads that shape off a block, or says why not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.arith import same_expr
from compiler.ir import expr as E
from compiler.ir.analysis import buffers_read
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr
from compiler.ir.stmt import Block, BufferStore

COMBINERS: dict[type[E.BinaryOp], str] = {
    E.Add: "sum",
    E.Mul: "product",
    E.Max: "max",
    E.Min: "min",
}


@dataclass(frozen=True)
class Reducer:
    """``out[indices] = combine(out[indices], value)``, under ``condition`` when the
    reduction has a ``where`` (false steps keep ``out`` as it is)."""

    combine: type[E.BinaryOp]
    out: Buffer
    indices: tuple[PrimExpr, ...]
    value: PrimExpr
    condition: PrimExpr | None

    def update(self, buffer: Buffer, indices: tuple[PrimExpr, ...], value: PrimExpr) -> BufferStore:
        """The same update applied to ``buffer[indices]`` with ``value`` combined in."""
        current = E.BufferLoad(buffer, indices)
        combined: PrimExpr = self.combine(current, value)
        if self.condition is not None:
            combined = E.Select(self.condition, combined, current)
        return BufferStore(buffer, combined, indices)

    def identity(self) -> PrimExpr:
        return identity(self.combine, self.out.dtype)


def match_reducer(block: Block) -> Reducer | str:
    """The block's reducer, or the reason it has none (a string for the caller's error)."""
    body, init = block.body, block.init
    if init is None:
        return "it is not a reduction (it has no init)"
    if not isinstance(body, BufferStore) or not isinstance(init, BufferStore):
        return "its body or init is not a single store"
    out, indices = body.buffer, body.indices
    if init.buffer is not out or not _same_indices(init.indices, indices):
        return "its init and body store to different places"
    condition: PrimExpr | None = None
    update = body.value
    if isinstance(update, E.Select):
        if not _is_load(update.false_value, out, indices):
            return f"its update {update} is not a combiner of {out.name}"
        condition, update = update.condition, update.true_value
    if type(update) not in COMBINERS:
        names = ", ".join(sorted(COMBINERS.values()))
        return f"its update {body.value} is not one of the known combiners ({names})"
    assert isinstance(update, E.BinaryOp)
    operands = (update.a, update.b)
    loads = [k for k, operand in enumerate(operands) if _is_load(operand, out, indices)]
    if not loads:
        return f"its update {body.value} does not combine into {out.name} at the stored point"
    value = operands[1 - loads[0]]
    rest = [value] if condition is None else [value, condition]
    if any(b is out for part in rest for b in buffers_read(part)):
        return f"its update reads {out.name} other than at the point it combines into"
    combine = type(update)
    if not _equal_constants(init.value, identity(combine, out.dtype)):
        return (
            f"its init {init.value} is not the identity of {COMBINERS[combine]}, so each "
            "partial result would start from it"
        )
    return Reducer(combine, out, indices, value, condition)


def identity(combine: type[E.BinaryOp], dtype: str) -> PrimExpr:
    """The value ``x`` with ``combine(x, y) == y`` for every ``y`` of ``dtype``."""
    if combine is E.Add:
        return E.const(0, dtype)
    if combine is E.Mul:
        return E.const(1, dtype)
    lowest = combine is E.Max
    if E.is_float(dtype):
        return E.const(-math.inf if lowest else math.inf, dtype)
    bits = int(dtype.removeprefix("uint").removeprefix("int"))
    if dtype.startswith("uint"):
        return E.const(0 if lowest else 2**bits - 1, dtype)
    return E.const(-(2 ** (bits - 1)) if lowest else 2 ** (bits - 1) - 1, dtype)


def _equal_constants(a: PrimExpr, b: PrimExpr) -> bool:
    constants = (E.IntImm, E.FloatImm)
    return isinstance(a, constants) and isinstance(b, constants) and a.value == b.value


def _same_indices(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> bool:
    return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b, strict=True))


def _is_load(e: PrimExpr, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> bool:
    return isinstance(e, E.BufferLoad) and e.buffer is buffer and _same_indices(e.indices, indices)
