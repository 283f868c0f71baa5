"""Whether a loop's iterations touch disjoint memory, proved on its flat indices.

LLVM's loop passes ask LoopAccessAnalysis whether a loop carries a dependence
through memory, and that analysis compares every pair of accesses to the same
buffer. A register tile unrolled inside a loop that keeps its accumulators in
memory gives a body of thousands of accesses, and LoopLoadElimination then spent
1.3-3.0 s of a 2-3 s build on such candidates (a quarter of ResNet-18's random
points, znver5). A loop whose iterations are proved independent here, one element
apart, carries ``llvm.loop.parallel_accesses``, and LLVM skips that comparison for it
(``FunctionEmitter._loop_with`` says why one element apart).

The proof reads each flat index as mixed-radix digits. For each buffer the loop
writes, every access to it (load or store) must have the index
``a*v + small + big + o``: ``v`` the loop's variable, with one stride ``a`` for
all of them; ``small`` the terms of loops inside whose coefficients are smaller
than ``|a|``, and the constant, all of them within one window narrower than
``|a|``; ``big`` the same terms of loops inside for all of them, each coefficient
larger than everything below it can span; ``o`` the same expression of values
fixed during the loop for all of them. Then the big digits of two equal indices
are equal, and ``a*v1 - a*v2`` would be less than ``|a|`` apart: ``v1 == v2``.
Anything else (a stride that depends on where it is, an index read from memory,
a buffer allocated inside the loop and reused by every iteration) is not proved,
and the loop stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from compiler.arith.linear import to_linear
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.node import Node, visit
from compiler.ir.stmt import BufferStore, For


@dataclass(frozen=True)
class _Access:
    """An access's flat index as ``stride*v + [low, high] + big + outer``; ``big``
    holds the (coefficient, first, last) of each term larger than ``|stride|``."""

    stride: int
    low: int
    high: int
    big: tuple[tuple[int, int, int], ...]
    outer: frozenset[tuple[Hashable, int]]

    @property
    def shape(self) -> tuple[int, tuple[tuple[int, int, int], ...], frozenset[Any]]:
        """What every access to a buffer must share for the proof."""
        return self.stride, self.big, self.outer


def disjoint_stride(loop: For, storage: Callable[[Buffer], Hashable]) -> int | None:
    """When no element that an iteration of ``loop`` writes is read or written by
    another iteration, the largest number of elements its written accesses move by
    per iteration; ``storage`` names the memory a buffer is (two buffers of one
    pointer are one storage). None when the loop writes nothing or it is not proved."""
    inner: dict[int, tuple[int, int]] = {}
    bound: set[int] = {id(loop.loop_var)}
    accesses: dict[Hashable, list[PrimExpr]] = {}
    written: set[Hashable] = set()

    def collect(n: Node) -> None:
        if isinstance(n, For):
            bound.add(id(n.loop_var))
            low, extent = _const(n.min), _const(n.extent)
            if low is not None and extent is not None and extent > 0:
                inner[id(n.loop_var)] = (low, low + extent - 1)
        elif isinstance(n, (BufferStore, E.BufferLoad)) and len(n.indices) == 1:
            key = storage(n.buffer)
            accesses.setdefault(key, []).append(n.indices[0])
            if isinstance(n, BufferStore):
                written.add(key)
        elif isinstance(n, (BufferStore, E.BufferLoad)):
            written.add(None)  # not flattened: nothing to prove it with

    visit(loop.body, collect)
    if not written or None in written:
        return None
    strides = []
    for key in written:
        stride = _disjoint_stride(accesses[key], loop, inner, bound)
        if stride is None:
            return None
        strides.append(stride)
    return max(strides)


def _disjoint_stride(
    indices: list[PrimExpr], loop: For, inner: dict[int, tuple[int, int]], bound: set[int]
) -> int | None:
    accesses = [_access(index, loop.loop_var, inner, bound) for index in indices]
    found = [a for a in accesses if a is not None]
    if len(found) < len(accesses) or len({a.shape for a in found}) != 1:
        return None
    stride, big = abs(found[0].stride), found[0].big
    span = max(a.high for a in found) - min(a.low for a in found)
    if stride == 0 or span >= stride:
        return None
    if big:
        extent = _const(loop.extent)
        if extent is None:
            return None
        span += stride * (extent - 1)
    for coeff, first, last in sorted(big, key=lambda term: abs(term[0])):
        if abs(coeff) <= span:
            return None
        span += abs(coeff) * (last - first)
    return stride


def _access(
    index: PrimExpr, var: Var, inner: dict[int, tuple[int, int]], bound: set[int]
) -> _Access | None:
    linear = to_linear(index)
    stride = next((c for atom, c in linear.terms.values() if atom is var), 0)
    low = high = linear.const
    big: list[tuple[int, int, int]] = []
    outer: list[tuple[Hashable, int]] = []
    for key, (atom, coeff) in linear.terms.items():
        if atom is var:
            continue
        if isinstance(atom, Var) and id(atom) in inner:
            first, last = inner[id(atom)]
            if abs(coeff) > abs(stride):
                big.append((coeff, first, last))
            else:
                low += min(coeff * first, coeff * last)
                high += max(coeff * first, coeff * last)
        elif _fixed_during_loop(atom, bound):
            outer.append((key, coeff))
        else:
            return None
    return _Access(stride, low, high, tuple(sorted(big)), frozenset(outer))


def _fixed_during_loop(atom: PrimExpr, bound: set[int]) -> bool:
    """Whether ``atom`` reads no memory and no variable of the loop or a loop in it."""
    fixed = True

    def check(n: Node) -> None:
        nonlocal fixed
        if isinstance(n, E.BufferLoad) or (isinstance(n, Var) and id(n) in bound):
            fixed = False

    visit(atom, check)
    return fixed


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None
