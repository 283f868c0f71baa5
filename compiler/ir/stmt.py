"""Statements of the loop IR: loops, blocks, stores, sequences and conditions.

A *block* is the unit that schedules move around, as in TVM's TensorIR: it has
block variables (spatial or reduce) with domains, an optional ``init`` statement
for reductions, a body, and buffers it allocates. A ``BlockRealize`` binds the
block variables to expressions of the surrounding loop variables, under an
optional predicate (which non-dividing splits need).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from compiler.ir.buffer import Buffer
from compiler.ir.expr import ExprOp, IntImm, PrimExpr, Range, Var
from compiler.ir.node import TEXT_FORMS, Node


class Stmt(Node):
    def __str__(self) -> str:
        return TEXT_FORMS["stmt"](self)

    __repr__ = __str__


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


class IterKind(enum.Enum):
    SPATIAL = "S"
    REDUCE = "R"


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(ExprOp, Node):
    """A block variable with its domain and kind; also a tensor-expression axis
    (``C.op.axis[0]``, ``te.reduce_axis``), usable in arithmetic like its variable."""

    var: Var
    dom: Range
    kind: IterKind = IterKind.SPATIAL

    def as_expr(self) -> Var:
        return self.var

    __hash__ = Node.__hash__

    def __str__(self) -> str:
        return f"{self.var.name}:{self.kind.value}[{self.dom.min}, {self.dom.extent}]"

    __repr__ = __str__


@dataclass(frozen=True, eq=False, repr=False)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_binding: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    value: PrimExpr


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """Every thread of a GPU block waits here until all have arrived, and sees what
    the others wrote to memory before it (``__syncthreads``). Only GPU lowering
    makes one, where threads pass data through shared memory."""


@dataclass(frozen=True, eq=False, repr=False)
class Block(Stmt):
    name: str
    iter_vars: tuple[IterVar, ...]
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def is_reduction(self) -> bool:
        return any(iv.kind is IterKind.REDUCE for iv in self.iter_vars)


@dataclass(frozen=True, eq=False, repr=False)
class BlockRealize(Stmt):
    iter_values: tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """Storage for ``buffer`` that lives while ``body`` runs; made by lowering."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class BufferRegion(Node):
    """A rectangular region of a buffer, used for block reads and writes."""

    buffer: Buffer
    region: tuple[Range, ...]


def seq(*stmts: Stmt) -> Stmt:
    """A sequence, flattening nested sequences; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def true_predicate() -> IntImm:
    return IntImm(1, "bool")
