"""``flatten_buffers``: n-d buffer accesses to 1-d row-major offsets.

Code generation addresses every buffer as a pointer to its first element; after
this pass each load and store has exactly one index, the element offset
``((i0 * s1 + i1) * s2 + i2) ...``. Buffers keep their n-d shape, which is what
the runtime checks arguments against and what ``Allocate`` sizes come from.
"""

from __future__ import annotations

import dataclasses

from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import BufferLoad, PrimExpr
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform
from compiler.ir.stmt import BufferStore
from compiler.lower.simplify import simplify_node


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    return dataclasses.replace(func, body=transform(func.body, _flatten_access))


def flat_index(buffer: Buffer, indices: tuple[PrimExpr, ...]) -> PrimExpr:
    """The row-major element offset of ``indices`` in ``buffer``."""
    if len(indices) != buffer.ndim:
        raise ValueError(
            f"access to buffer {buffer.name!r} has {len(indices)} indices but the buffer "
            f"has {buffer.ndim} dimensions"
        )
    if not indices:
        return E.const(0)
    offset = indices[0]
    for index, dim in zip(indices[1:], buffer.shape[1:], strict=True):
        offset = E._binary(E.Add, E._binary(E.Mul, offset, dim), index)
    return simplify_node(offset)


def _flatten_access(node: Node) -> Node | None:
    if isinstance(node, BufferLoad) and len(node.indices) != 1:
        return BufferLoad(node.buffer, (flat_index(node.buffer, node.indices),))
    if isinstance(node, BufferStore) and len(node.indices) != 1:
        return BufferStore(node.buffer, node.value, (flat_index(node.buffer, node.indices),))
    return None
