"""The stores of a program, each with its loop nest and how its accesses move.

Program features are per store (Ansor's per-store features), and reading them
from the *scheduled* function, blocks and all, skips lowering: the block
bindings (``v_i = i_0 * 8 + i_1``) are composed with the block's indices here as
affine forms over the loops, which is what lowering would substitute, at a small
fraction of its cost. The same walk reads a lowered function too (flat indices,
``Allocate`` instead of block-allocated buffers), so a function made by any space
reads the same way.

An access is an int matrix ``coefficients`` (one row per buffer dimension, one
column per loop around the store, outermost first): how far each index moves per
step of each loop. Indices that are not affine in the loops (a fused loop's
``//`` and ``%``, a padding's clamp) count the loops they depend on as steps of
one, and mark those dimensions, whose extents are then capped by the buffer's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain

import numpy as np

from compiler.arith.linear import to_linear
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, children
from compiler.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    SeqStmt,
    Stmt,
)


@dataclass(frozen=True)
class _Affine:
    """An index as steps per loop position, and the loop positions it depends on
    in a way that is not affine."""

    steps: dict[int, int]
    other: frozenset[int]


_CONSTANT = _Affine({}, frozenset())


@dataclass(frozen=True)
class Access:
    """One buffer as one store reads or writes it; ``allocated`` when the function
    allocates the buffer (not an argument)."""

    buffer: Buffer
    coefficients: np.ndarray
    shape: np.ndarray
    allocated: bool

    @property
    def itemsize(self) -> int:
        return itemsize(self.buffer)


@dataclass(frozen=True)
class StoreNest:
    """A store and its ``loops``, whose ``extents`` and ``kinds`` are outermost first
    (a loop that only walks a reduction, around a reduction's init, counts as extent
    1: the init runs once per output); ``loads`` are the accesses of each other
    buffer the value reads, ``reads_itself`` whether it reads the stored buffer too
    (an accumulation); ``nodes`` every node of the stored value, of the indices
    and of the bindings of the block's variables (the operations it runs)."""

    store: BufferStore
    extents: np.ndarray
    kinds: tuple[ForKind, ...]
    write: Access
    loads: tuple[Access, ...]
    reads_itself: bool
    loops: tuple[For, ...]
    nodes: tuple[Node, ...]

    @property
    def iterations(self) -> int:
        return math.prod(int(e) for e in self.extents)


@dataclass(frozen=True)
class ProgramNests:
    """Every store of a function, and the buffers the function allocates."""

    stores: tuple[StoreNest, ...]
    allocated: tuple[Buffer, ...]


def program_nests(func: PrimFunc) -> ProgramNests:
    """The stores of ``func``, scheduled or lowered."""
    walk = _Walk()
    walk.stmt(func.body, ())
    return ProgramNests(tuple(walk.stores), tuple(walk.allocated))


class _Walk:
    """One pass over the statements, carrying the loops and the affine meaning of
    every variable in scope (loop variables and bound block variables)."""

    def __init__(self) -> None:
        self.stores: list[StoreNest] = []
        self.allocated: list[Buffer] = []
        self.allocated_set: set[Buffer] = set()
        self.env: dict[E.Var, _Affine] = {}
        self.bindings: tuple[E.PrimExpr, ...] = ()

    def stmt(
        self, stmt: Stmt, loops: tuple[For, ...], reduce_only: frozenset[int] = frozenset()
    ) -> None:
        if isinstance(stmt, For):
            self.env[stmt.loop_var] = _Affine({len(loops): 1}, frozenset())
            self.stmt(stmt.body, (*loops, stmt), reduce_only)
        elif isinstance(stmt, SeqStmt):
            for part in stmt.seq:
                self.stmt(part, loops, reduce_only)
        elif isinstance(stmt, IfThenElse):
            self.stmt(stmt.then_case, loops, reduce_only)
            if stmt.else_case is not None:
                self.stmt(stmt.else_case, loops, reduce_only)
        elif isinstance(stmt, Allocate):
            self.allocate((stmt.buffer,))
            self.stmt(stmt.body, loops, reduce_only)
        elif isinstance(stmt, BlockRealize):
            self.block(stmt, loops)
        elif isinstance(stmt, BufferStore):
            self.stores.append(self.store(stmt, loops, reduce_only))

    def block(self, realize: BlockRealize, loops: tuple[For, ...]) -> None:
        block: Block = realize.block
        self.allocate(block.alloc_buffers)
        reducing: set[int] = set()
        for iv, value in zip(block.iter_vars, realize.iter_values, strict=True):
            bound = self.affine(value)
            self.env[iv.var] = bound
            if iv.kind is IterKind.REDUCE:
                reducing.update(bound.steps, bound.other)
        spatial: set[int] = set()
        for iv in block.iter_vars:
            if iv.kind is IterKind.SPATIAL:
                spatial.update(self.env[iv.var].steps, self.env[iv.var].other)
        outer = self.bindings
        self.bindings = realize.iter_values
        if block.init is not None:
            self.stmt(block.init, loops, frozenset(reducing - spatial))
        self.stmt(block.body, loops)
        self.bindings = outer

    def allocate(self, buffers: tuple[Buffer, ...]) -> None:
        self.allocated.extend(buffers)
        self.allocated_set.update(buffers)

    def store(
        self, store: BufferStore, loops: tuple[For, ...], reduce_only: frozenset[int]
    ) -> StoreNest:
        extents = np.array(
            [1 if k in reduce_only else _extent(loop) for k, loop in enumerate(loops)],
            dtype=np.int64,
        )
        width = len(loops)
        nodes = subexpressions(store.value)
        loads: dict[Buffer, Access] = {}
        reads_itself = False
        for load in nodes:
            if not isinstance(load, E.BufferLoad):
                continue
            if load.buffer is store.buffer:
                reads_itself = True
            elif load.buffer not in loads:
                loads[load.buffer] = self.access(load.buffer, load.indices, width)
        return StoreNest(
            store=store,
            extents=extents,
            kinds=tuple(loop.kind for loop in loops),
            write=self.access(store.buffer, store.indices, width),
            loads=tuple(loads.values()),
            reads_itself=reads_itself,
            loops=loops,
            nodes=tuple(
                chain(nodes, *(subexpressions(e) for e in (*store.indices, *self.bindings)))
            ),
        )

    def access(self, buffer: Buffer, indices: tuple[E.PrimExpr, ...], width: int) -> Access:
        shape = np.array([_extent_of(dim) for dim in buffer.shape], dtype=np.int64)
        if len(indices) != len(shape):  # a flattened access: one index over all elements
            shape = np.array([math.prod(int(d) for d in shape)], dtype=np.int64)
        coefficients = np.zeros((len(indices), width), dtype=np.int64)
        for row, index in enumerate(indices):
            bound = self.affine(index)
            for position, step in bound.steps.items():
                coefficients[row, position] = abs(step)
            for position in bound.other:
                coefficients[row, position] = max(1, coefficients[row, position])
        return Access(buffer, coefficients, shape, buffer in self.allocated_set)

    def affine(self, index: E.PrimExpr) -> _Affine:
        if isinstance(index, E.Var):  # most indices of a scheduled block: a block variable
            return self.env.get(index, _CONSTANT)
        steps: dict[int, int] = {}
        other: set[int] = set()
        for atom, coeff in to_linear(index).terms.values():
            if isinstance(atom, E.Var):
                bound = self.env.get(atom)
                if bound is not None:
                    for position, step in bound.steps.items():
                        steps[position] = steps.get(position, 0) + coeff * step
                    other.update(bound.other)
            else:
                for node in subexpressions(atom):
                    bound = self.env.get(node) if isinstance(node, E.Var) else None
                    if bound is not None:
                        other.update(bound.steps, bound.other)
        return _Affine({k: v for k, v in steps.items() if v}, frozenset(other))


def itemsize(buffer: Buffer) -> int:
    """Bytes per element of ``buffer``."""
    digits = "".join(ch for ch in buffer.dtype if ch.isdigit())
    return max(1, int(digits) // 8) if digits else 1


def allocation_elements(buffer: Buffer) -> int:
    return math.prod(_extent_of(dim) for dim in buffer.shape)


def subexpressions(expr: Node) -> list[Node]:
    """Every node of an expression, pre-order: ``visit`` for expressions, several
    times faster (the features walk every expression of every candidate)."""
    found: list[Node] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, E.BinaryOp):
            stack.append(node.b)
            stack.append(node.a)
        elif isinstance(node, E.BufferLoad):
            stack.extend(reversed(node.indices))
        elif isinstance(node, E.Select):
            stack.extend((node.false_value, node.true_value, node.condition))
        elif isinstance(node, E.Cast):
            stack.append(node.value)
        elif isinstance(node, E.Not):
            stack.append(node.a)
        elif isinstance(node, E.Call):
            stack.extend(reversed(node.args))
        elif not isinstance(node, (E.Var, E.IntImm, E.FloatImm)):
            stack.extend(reversed(children(node)))
    return found


def _extent(loop: For) -> int:
    return loop.extent.value if isinstance(loop.extent, E.IntImm) else 1


def _extent_of(dim: E.PrimExpr) -> int:
    return dim.value if isinstance(dim, E.IntImm) else 1
