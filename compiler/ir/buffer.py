"""Buffers: named, typed, multi-dimensional storage that loads and stores index."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from compiler.ir.expr import BufferLoad, IntImm, PrimExpr, byte_size, check_dtype, convert
from compiler.ir.node import Node


@dataclass(frozen=True, eq=False, repr=False)
class Buffer(Node):
    """A row-major buffer. ``scope`` is "global" for function parameters and
    intermediates, "local" for per-thread caches made by the schedule."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"
    scope: str = "global"
    is_leaf = True

    def __post_init__(self) -> None:
        check_dtype(self.dtype)
        object.__setattr__(self, "shape", tuple(convert(s) for s in self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def static_nbytes(self) -> int:
        """Bytes of the buffer, counting only its constant dimensions."""
        count = math.prod(d.value for d in self.shape if isinstance(d, IntImm))
        return count * byte_size(self.dtype)

    def __getitem__(self, indices: Any) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(convert(i) for i in indices))

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__
