"""Tensors and the operations that produce them (placeholder, compute)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import CompilerError
from compiler.ir.expr import PrimExpr, convert
from compiler.ir.node import Node, visit
from compiler.ir.stmt import IterVar


class TensorError(CompilerError, ValueError):
    """A tensor expression that cannot be built: wrong arity, bad shape, misplaced reduction."""


class Operation:
    """Base of the operations that produce tensors."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str
    _output: Tensor

    def output(self, index: int = 0) -> Tensor:
        if index != 0:
            raise TensorError(f"operation {self.name!r} has one output, not {index + 1}")
        return self._output

    @property
    def input_tensors(self) -> list[Tensor]:
        return []


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[PrimExpr, ...], dtype: str) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self._output = Tensor(self)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"placeholder({self.name}, shape=({dims}), dtype={self.dtype})"


class ComputeOp(Operation):
    """``output[axis] = body``; ``body`` may be a ``Reduce`` over ``reduce_axis``."""

    def __init__(
        self,
        name: str,
        axis: tuple[IterVar, ...],
        body: PrimExpr,
        tag: str = "",
        attrs: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.axis = axis
        self.body = body
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.shape = tuple(iv.dom.extent for iv in axis)
        self.dtype = body.dtype
        self.reduce_axis: tuple[IterVar, ...] = body.axis if isinstance(body, Reduce) else ()
        self._output = Tensor(self)

    def __repr__(self) -> str:
        axes = ", ".join(iv.var.name for iv in (*self.axis, *self.reduce_axis))
        return f"compute({self.name}, [{axes}]: {self.body})"

    @property
    def input_tensors(self) -> list[Tensor]:
        found: list[Tensor] = []

        def collect(n: Node) -> None:
            if isinstance(n, ProducerLoad) and all(t is not n.tensor for t in found):
                found.append(n.tensor)

        visit(self.body, collect)
        return found


class ViewOp(Operation):
    """``source``'s elements in another shape or order, read in place: indexing the
    view reads ``source`` at ``element(*indices)``. A view makes no block and no
    buffer (a transpose or reshape folded into the computation that reads it), so it
    is never a function's argument."""

    def __init__(
        self,
        name: str,
        shape: tuple[PrimExpr, ...],
        source: Tensor,
        element: Callable[..., tuple[PrimExpr, ...]],
    ) -> None:
        self.name = name
        self.shape = shape
        self.dtype = source.dtype
        self.source = source
        self.element = element
        self._output = Tensor(self)

    @property
    def input_tensors(self) -> list[Tensor]:
        return [self.source]


class Tensor(Node):
    """The output of an operation; index it (``A[i, j]`` or ``A(i, j)``) to read it."""

    is_leaf = True

    def __init__(self, op: PlaceholderOp | ComputeOp | ViewOp) -> None:
        self.op = op

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[PrimExpr, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __call__(self, *indices: Any) -> ProducerLoad:
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise TensorError(
                f"tensor {self.name!r} has {self.ndim} dimensions but was indexed with "
                f"{len(indices)} indices"
            )
        converted = tuple(convert(i) for i in indices)
        if isinstance(self.op, ViewOp):
            return self.op.source(*self.op.element(*converted))
        return ProducerLoad(self, converted)

    def __getitem__(self, indices: Any) -> ProducerLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self(*indices)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tensor(name={self.name}, shape=({dims}), dtype={self.dtype})"


@dataclass(frozen=True, eq=False, repr=False)
class ProducerLoad(PrimExpr):
    """A read of a tensor inside a tensor expression; becomes a BufferLoad."""

    tensor: Tensor
    indices: tuple[PrimExpr, ...]
    dtype: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.tensor.dtype)

    def script_with(self, expr: Callable[[Any], str]) -> str:
        """``A[i, j]``; the IR printer calls this, as the IR does not know tensors."""
        return f"{self.tensor.name}[{', '.join(expr(i) for i in self.indices)}]"


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(PrimExpr):
    """A commutative reduction of ``source`` over ``axis``; only valid as the whole
    body of a ``te.compute``."""

    combiner: str
    source: PrimExpr
    axis: tuple[IterVar, ...]
    condition: PrimExpr | None = None
    init: PrimExpr | None = None
    dtype: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.source.dtype)

    def script_with(self, expr: Callable[[Any], str]) -> str:
        """``te.sum(A[i, k], axis=[k])``; the IR printer calls this."""
        parts = [expr(self.source), f"axis=[{', '.join(expr(a.var) for a in self.axis)}]"]
        if self.condition is not None:
            parts.append(f"where={expr(self.condition)}")
        if self.init is not None:
            parts.append(f"init={expr(self.init)}")
        return f"te.{self.combiner}({', '.join(parts)})"
