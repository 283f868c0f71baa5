"""Where the values a model's steps make live: values whose lives do not overlap
share one block of memory, so a run cycles through a few blocks that stay in the
caches instead of writing every value to memory of its own.

A value lives from the step that makes it to the last step that reads it or a view
of it (a reshape, ``compiler.graph.plan.View``); the model's outputs live to the
end. Steps take blocks in order, each the smallest free block large enough for its
output, else the largest free one (grown to fit), else a new one; a block is free
again after the last read of the value in it. Inputs and weights keep memory of
their own. This is the greedy planner of TVM's graph executor, and what
onnxruntime's arena does. MobileNetV2's 54 values take 3 blocks, 8 MiB, instead of
25.5 MiB; ResNet-18's 23 values 4.6 MiB instead of 10.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.graph.ir import TensorType
from compiler.graph.plan import Plan

# Blocks start at a cache line, so a kernel's vector loads of a row never straddle two.
ALIGNMENT = 64


@dataclass(frozen=True)
class StoragePlan:
    """``sizes[b]`` bytes for block ``b``; ``blocks[value]``: the block of each step's
    output."""

    sizes: tuple[int, ...]
    blocks: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)


def plan_storage(plan: Plan) -> StoragePlan:
    """The blocks that the steps' outputs of ``plan`` share."""
    roots = _view_roots(plan)
    last_read = _last_reads(plan, roots)
    sizes: list[int] = []
    blocks: dict[str, int] = {}
    free: list[int] = []
    for position, step in enumerate(plan.steps):
        blocks[step.output] = _take(free, sizes, _nbytes(plan.types[step.output]))
        touched = {roots.get(v, v) for v in step.inputs} | {step.output}
        ending = [v for v in touched if v in blocks and last_read.get(v, position) == position]
        free.extend(blocks[v] for v in sorted(ending))
    return StoragePlan(tuple(sizes), blocks)


def allocate(plan: Plan, storage: StoragePlan) -> dict[str, np.ndarray]:
    """An array for every step's output of ``plan``, in the blocks of ``storage``."""
    memory = [_aligned_bytes(size) for size in storage.sizes]
    arrays = {}
    for step in plan.steps:
        kind = plan.types[step.output]
        block = memory[storage.blocks[step.output]]
        arrays[step.output] = block[: _nbytes(kind)].view(kind.dtype).reshape(kind.shape)
    return arrays


def _view_roots(plan: Plan) -> dict[str, str]:
    """Each view's value whose memory it is (a step's output, a weight or an input)."""
    roots: dict[str, str] = {}
    for view in plan.views:
        roots[view.output] = roots.get(view.source, view.source)
    return roots


def _last_reads(plan: Plan, roots: dict[str, str]) -> dict[str, int | float]:
    """The position of the last step that reads each value or a view of it; the
    model's outputs are read after the last step (``math.inf``)."""
    last: dict[str, int | float] = {}
    for position, step in enumerate(plan.steps):
        for value in step.inputs:
            last[roots.get(value, value)] = position
    for value in plan.outputs:
        last[roots.get(value, value)] = math.inf
    return last


def _take(free: list[int], sizes: list[int], need: int) -> int:
    """A free block for ``need`` bytes, taken off ``free`` (grown if it is too small),
    or a new block."""
    if not free:
        sizes.append(need)
        return len(sizes) - 1
    fitting = [b for b in free if sizes[b] >= need]
    block = min(fitting, key=lambda b: sizes[b]) if fitting else max(free, key=lambda b: sizes[b])
    free.remove(block)
    sizes[block] = max(sizes[block], need)
    return block


def _nbytes(kind: TensorType) -> int:
    return math.prod(kind.shape) * np.dtype(kind.dtype).itemsize


def _aligned_bytes(size: int) -> np.ndarray:
    raw = np.empty(size + ALIGNMENT, np.uint8)
    offset = -raw.ctypes.data % ALIGNMENT
    return raw[offset : offset + size]
