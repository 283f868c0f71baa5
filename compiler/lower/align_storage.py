"""``align_storage``: pad the allocations that ``storage_align`` asked for.

Runs after ``compact_buffers`` has sized each allocation. For a rule (axis,
factor, offset) the dimension inside ``axis`` grows until the stride of ``axis``
is ``factor * k + offset`` elements; indices stay as they are, so the padding is
memory nobody reads. Where the inner strides make that stride impossible (an
inner stride sharing a factor with ``factor`` that ``offset`` lacks) the buffer
keeps its shape: alignment is a speed hint, never a reason to refuse.
"""

from __future__ import annotations

import dataclasses
import math

from compiler.ir.analysis import replace_buffer
from compiler.ir.buffer import Buffer
from compiler.ir.expr import IntImm
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform_pre
from compiler.ir.stmt import Allocate
from compiler.schedule.primitives.storage_align import STORAGE_ALIGN_ATTR


def align_storage(func: PrimFunc) -> PrimFunc:
    rules: dict[str, list[list[int]]] = func.attrs.get(STORAGE_ALIGN_ATTR, {})
    if not rules:
        return func

    def pad(node: Node) -> Node | None:
        if not isinstance(node, Allocate) or node.buffer.name not in rules:
            return None
        padded = aligned_buffer(node.buffer, rules[node.buffer.name])
        if padded is node.buffer:
            return None
        body = transform_pre(replace_buffer(node.body, node.buffer, padded), pad)
        return Allocate(padded, body)

    return dataclasses.replace(func, body=transform_pre(func.body, pad))


def aligned_buffer(buffer: Buffer, rules: list[list[int]]) -> Buffer:
    """``buffer`` with each rule's inner dimension grown to align the stride."""
    shape = list(buffer.shape)
    for axis, factor, offset in rules:
        if axis >= len(shape) - 1 or not all(isinstance(d, IntImm) for d in shape[axis + 1 :]):
            continue
        inner = math.prod(d.value for d in shape[axis + 2 :] if isinstance(d, IntImm))
        rows = shape[axis + 1]
        assert isinstance(rows, IntImm)
        for grown in range(rows.value, rows.value + factor):
            if (grown * inner) % factor == offset:
                shape[axis + 1] = IntImm(grown, rows.dtype)
                break
    if all(a is b for a, b in zip(shape, buffer.shape, strict=True)):
        return buffer
    return dataclasses.replace(buffer, shape=tuple(shape))
