"""Reductions the threads of a GPU block share, as partial results and a
``ThreadAllReduce`` (TVM's LowerThreadAllreduce).

A reduction whose loop is bound to ``threadIdx.x`` (``compiler.schedule.primitives.
cross_thread`` says when that is legal) becomes, under that loop:

- a one-element local accumulator, set to the combiner's identity;
- the loops between the bound loop and the block, updating the accumulator: each
  thread reduces its own part, in a register;
- the accumulator combined over the threads (``ThreadAllReduce``: warp shuffles,
  and a shared array per warp beyond 32 threads, in code generation);
- the result stored by the loop's first thread, under the block's predicate on
  the loops outside the reduction.

It runs on the scheduled function, before blocks are lowered, so the partial
update is still a block whose bindings and predicate lowering knows how to expand.
"""

from __future__ import annotations

import dataclasses

from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IfThenElse,
    IterKind,
    Stmt,
    seq,
    true_predicate,
)
from compiler.schedule.primitives.cross_thread import (
    CrossThreadReduction,
    cross_thread_reduction,
)
from compiler.schedule.primitives.reducer import COMBINERS


def lower_thread_reductions(func: PrimFunc) -> PrimFunc:
    """``func`` with every reduction shared by the threads of a ``threadIdx.x`` loop
    written as partial results and a ``ThreadAllReduce``."""

    def rewrite(node: Node) -> Node | None:
        if not isinstance(node, For) or node.thread_binding != "threadIdx.x":
            return None
        shared = cross_thread_reduction(node)
        if isinstance(shared, str):
            return None
        return dataclasses.replace(node, body=_shared_reduction(shared))

    return dataclasses.replace(func, body=transform(func.body, rewrite))


def _shared_reduction(shared: CrossThreadReduction) -> Stmt:
    realize, reducer, loop = shared.realize, shared.reducer, shared.loop
    block = realize.block
    out = reducer.out
    accumulator = Buffer(f"{out.name}_thread", (E.const(1),), out.dtype, "local")
    first = (E.const(0),)
    partial = BlockRealize(
        realize.iter_values,
        true_predicate() if shared.step_guard is None else shared.step_guard,
        dataclasses.replace(
            block,
            name=f"{block.name}_partial",
            body=reducer.update(accumulator, first, reducer.value),
            init=None,
        ),
    )
    nest: Stmt = partial
    for inner in reversed(shared.inner):
        nest = dataclasses.replace(inner, body=nest)
    combined = E.ThreadAllReduce(accumulator[first], COMBINERS[reducer.combine], _extent(loop))
    spatial = {
        iv.var: value
        for iv, value in zip(block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.SPATIAL
    }
    indices = tuple(substitute(index, spatial) for index in reducer.indices)
    result = BufferStore(out, accumulator[first], indices)
    on_first_thread: E.PrimExpr = E.EQ(loop.loop_var, loop.min)
    if shared.result_guard is not None:
        on_first_thread = E.And(shared.result_guard, on_first_thread)
    body = seq(
        BufferStore(accumulator, reducer.identity(), first),
        nest,
        BufferStore(accumulator, combined, first),
        IfThenElse(on_first_thread, result),
    )
    holder = Block(f"{block.name}_cross_thread", (), body, alloc_buffers=(accumulator,))
    return BlockRealize((), true_predicate(), holder)


def _extent(loop: For) -> int:
    assert isinstance(loop.extent, E.IntImm)  # bind refuses any other
    return loop.extent.value
