"""Refusing loads and stores that provably leave their buffer.

Generated code does not check its indices: an index past a buffer's end reads
garbage or crashes the process that runs it. So every access is checked when a
function is made and again after it is scheduled and lowered, and one that some
iteration certainly makes outside its buffer is an ``IndexBoundsError``.

"Certainly" matters: a schedule that tiles a loop by a factor that does not divide
it guards the tail with a condition, and a padded compute loads under a select;
those accesses are not checked. An index is judged only where the range it runs
over is exact (every value in it is attained): affine sums of independent loop
variables and their ``//`` and ``%`` by constants. Symbolic sizes and data-dependent
indices cannot be proved either way and are left to run. One walk over the
function, no simplification: it runs on every build the tuner makes.
"""

from __future__ import annotations

from compiler.arith.linear import to_linear
from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import IntImm, PrimExpr, Range, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, children
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, IfThenElse, Stmt

# An exact integer range and the ids of the variables it depends on.
_Span = tuple[int, int, frozenset[int]]


class IndexBoundsError(CompilerError, IndexError):
    """A load or store whose index some iteration makes outside its buffer."""


def check_accesses(func: PrimFunc) -> PrimFunc:
    """``func`` unchanged, once no access in it provably leaves its buffer; raises
    ``IndexBoundsError`` naming the first one that does."""
    _AccessChecker().stmt(func.body, "main")
    return func


class _AccessChecker:
    def __init__(self) -> None:
        self.ranges: dict[int, tuple[int, int]] = {}

    def stmt(self, s: Stmt, where: str) -> None:
        if isinstance(s, For):
            self._loop(s, where)
        elif isinstance(s, Block):
            self._block(s)
        elif isinstance(s, BlockRealize):
            self.exprs(s.iter_values, where)
            if _is_true(s.predicate):
                self.stmt(s.block, where)
        elif isinstance(s, IfThenElse):
            self.expr(s.condition, where)
        elif isinstance(s, BufferStore):
            self.access(s.buffer, s.indices, where)
            self.expr(s.value, where)
        else:
            for child in children(s):
                self.node(child, where)

    def node(self, n: Node, where: str) -> None:
        if isinstance(n, Stmt):
            self.stmt(n, where)
        elif isinstance(n, PrimExpr):
            self.expr(n, where)

    def exprs(self, es: tuple[PrimExpr, ...], where: str) -> None:
        for e in es:
            self.expr(e, where)

    def expr(self, e: PrimExpr, where: str) -> None:
        if isinstance(e, E.BufferLoad):
            self.access(e.buffer, e.indices, where)
        elif isinstance(e, E.Select):
            self.expr(e.condition, where)  # the branches run only where it holds
        else:
            for child in children(e):
                if isinstance(child, PrimExpr):
                    self.expr(child, where)

    def access(self, buffer: Buffer, indices: tuple[PrimExpr, ...], where: str) -> None:
        self.exprs(indices, where)
        for axis, (index, extent) in enumerate(zip(indices, buffer.shape, strict=False)):
            span = self._span(index)
            if span is None or not isinstance(extent, IntImm):
                continue
            low, high, _ = span
            if low < 0 or high >= extent.value:
                raise IndexBoundsError(
                    f"{where}: index {axis} of buffer {buffer.name!r} is {index}, which runs "
                    f"over [{low}, {high}], but the buffer's extent there is {extent.value} "
                    f"(valid indices [0, {extent.value - 1}]); fix the index expression or "
                    "the buffer's shape"
                )

    def _loop(self, loop: For, where: str) -> None:
        self.expr(loop.min, where)
        self.expr(loop.extent, where)
        if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm):
            if loop.extent.value <= 0:
                return  # the body never runs
            first = loop.min.value
            self._bound(loop.loop_var, (first, first + loop.extent.value - 1))
        self.stmt(loop.body, where)

    def _block(self, block: Block) -> None:
        where = f"block {block.name!r}"
        for iv in block.iter_vars:
            dom = _const_range(iv.dom)
            if dom is not None and dom[0] > dom[1]:
                return
            if dom is not None:
                self._bound(iv.var, dom)
        if block.init is not None:
            self.stmt(block.init, where)
        self.stmt(block.body, where)

    def _bound(self, var: Var, dom: tuple[int, int]) -> None:
        self.ranges[id(var)] = dom

    def _span(self, e: PrimExpr) -> _Span | None:
        """The exact range of ``e``: every value in it is taken in some iteration."""
        if isinstance(e, IntImm):
            return (e.value, e.value, frozenset())
        if isinstance(e, Var):
            dom = self.ranges.get(id(e))
            return None if dom is None else (dom[0], dom[1], frozenset((id(e),)))
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            return self._div_mod(e)
        if not isinstance(e, (E.Add, E.Sub, E.Mul)):
            return None
        return self._affine(e)

    def _affine(self, e: PrimExpr) -> _Span | None:
        """A sum of terms over disjoint variables attains every sum of their extremes."""
        lin = to_linear(e)
        low = high = lin.const
        used: frozenset[int] = frozenset()
        for atom, coeff in lin.terms.values():
            if isinstance(atom, (E.Add, E.Sub, E.Mul)):
                return None
            span = self._span(atom)
            if span is None or used & span[2]:
                return None
            lo, hi = (span[0] * coeff, span[1] * coeff)
            low += min(lo, hi)
            high += max(lo, hi)
            used |= span[2]
        return (low, high, used)

    def _div_mod(self, e: E.FloorDiv | E.FloorMod) -> _Span | None:
        inner = self._span(e.a)
        if inner is None or not isinstance(e.b, IntImm) or e.b.value <= 0:
            return None
        low, high, used = inner
        divisor = e.b.value
        if isinstance(e, E.FloorDiv):
            return (low // divisor, high // divisor, used)
        if low // divisor == high // divisor:
            return (low % divisor, high % divisor, used)
        if isinstance(e.a, Var):  # takes every value, so it wraps through them all
            return (0, divisor - 1, used)
        return None


def _const_range(r: Range) -> tuple[int, int] | None:
    if isinstance(r.min, IntImm) and isinstance(r.extent, IntImm):
        return (r.min.value, r.min.value + r.extent.value - 1)
    return None


def _is_true(predicate: PrimExpr) -> bool:
    return isinstance(predicate, IntImm) and predicate.value != 0
