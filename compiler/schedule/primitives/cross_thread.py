"""Reductions that the threads of a GPU block share: a reduction loop bound to
``threadIdx.x``.

Binding a loop that a reduction block reduces over (TVM's way, and MetaSchedule's
CrossThreadReduction) makes its iterations the block's threads: each thread reduces
its own part into a register, then the threads combine their partial results,
every one of them getting the whole (``compiler.lower.thread_reduction`` writes
that, with warp shuffles). It computes what the serial loops compute when the
combiner is associative and commutative and the init its identity (the block's
``Reducer``), and when the bound loop holds all of the reduction that the block
does there: nothing but serial loops between the loop and the block, spatial
variables that do not depend on those loops, and reduce variables that depend on
nothing else. This module checks that shape and names what breaks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.ir import expr as E
from compiler.ir.analysis import free_vars
from compiler.ir.expr import PrimExpr
from compiler.ir.stmt import BlockRealize, For, ForKind, IterKind
from compiler.schedule.primitives.reducer import Reducer, match_reducer

# The loops that may lie between the bound loop and the block: run by each thread.
_PER_THREAD_KINDS = (ForKind.SERIAL, ForKind.UNROLLED)


@dataclass(frozen=True)
class CrossThreadReduction:
    """The bound ``loop``, the loops ``inner`` between it and the reduction block's
    ``realize`` (outermost first), the block's ``reducer``, and its predicate split
    into the part that guards each step (``step_guard``, on the loops of the
    reduction) and the part that guards the result (``result_guard``, on the loops
    outside; None when there is none)."""

    loop: For
    inner: tuple[For, ...]
    realize: BlockRealize
    reducer: Reducer
    step_guard: PrimExpr | None
    result_guard: PrimExpr | None


def cross_thread_reduction(loop: For) -> CrossThreadReduction | str:
    """The reduction whose reduce variables ``loop`` binds and that binding it to
    ``threadIdx.x`` shares among the block's threads, or why there is none."""
    inner: list[For] = []
    node = loop.body
    while isinstance(node, For):
        if node.kind not in _PER_THREAD_KINDS:
            return (
                f"loop {node.loop_var.name!r} between it and the reduction is "
                f"{node.kind.value}; only serial and unrolled loops may lie between"
            )
        inner.append(node)
        node = node.body
    if not isinstance(node, BlockRealize):
        return "the reduction it runs must be the only statement of the loops under it"
    block = node.block
    reducer = match_reducer(block)
    if isinstance(reducer, str):
        return f"block {block.name!r} is not a reduction threads can share: {reducer}"
    own = {id(loop.loop_var), *(id(x.loop_var) for x in inner)}
    binds = False
    for iv, value in zip(block.iter_vars, node.iter_values, strict=True):
        used = {id(v) for v in free_vars(value)}
        if iv.kind is IterKind.SPATIAL and used & own:
            return (
                f"the spatial variable {iv.var.name} of block {block.name!r} depends on "
                "the loops of the reduction, so the threads would write different elements"
            )
        if iv.kind is IterKind.REDUCE and used - own:
            return (
                f"block {block.name!r} also reduces over loops outside it ({iv.var.name} = "
                f"{value}); fuse the reduction loops and bind a piece of the fused loop"
            )
        binds = binds or (iv.kind is IterKind.REDUCE and id(loop.loop_var) in used)
    if not binds:
        return f"it binds none of block {block.name!r}'s reduce variables"
    guards = _split_predicate(node.predicate, own)
    if isinstance(guards, str):
        return f"block {block.name!r}'s predicate {guards}"
    step_guard, result_guard = guards
    return CrossThreadReduction(loop, tuple(inner), node, reducer, step_guard, result_guard)


def _split_predicate(
    predicate: PrimExpr, own: set[int]
) -> tuple[PrimExpr | None, PrimExpr | None] | str:
    """``predicate``'s conjuncts on the reduction's loops and on the others."""
    steps: list[PrimExpr] = []
    results: list[PrimExpr] = []
    for term in _conjuncts(predicate):
        if isinstance(term, E.IntImm) and term.value:
            continue
        used = {id(v) for v in free_vars(term)}
        if used & own and used - own:
            return f"{term} mixes the loops of the reduction with the loops outside it"
        (steps if used & own else results).append(term)
    return _all_of(steps), _all_of(results)


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, E.And):
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    return [e]


def _all_of(terms: list[PrimExpr]) -> PrimExpr | None:
    if not terms:
        return None
    combined = terms[0]
    for term in terms[1:]:
        combined = E.And(combined, term)
    return combined
