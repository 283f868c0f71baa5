"""rfactor: factor a reduction over one of its loops into partial results (TensorIR).

A reduction ``out[s] = combine over r of value`` whose loop ``l`` (a reduction
loop, usually from a split of the reduction axis) is factored becomes two blocks:
``<name>_rf`` computes ``out_rf[s with l inserted at factor_axis]``, one partial
per value of ``l`` with ``l`` now a spatial variable, and the original block,
moved into copies of the spatial loops and ``l`` placed right after the nest,
combines the partials into ``out``. The partials are independent, so the loop
over them can run in parallel, which is the point: a reduction with few output
points still uses every core.

The rewrite is exact for an associative and commutative combiner whose init is
its identity (``compiler.schedule.primitives.reducer``), when the nest from the
outermost reduction loop down holds only the block, no loop binds both kinds of
variable, and every partial is started from the init (its first step is not cut
away by the block's predicate).
"""

from __future__ import annotations

import dataclasses

from compiler.arith import can_prove, normalize
from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform_pre
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterKind,
    IterVar,
    SeqStmt,
    Stmt,
    seq,
    true_predicate,
)
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.dataflow import (
    BlockSite,
    buffer_names,
    conjuncts,
    copy_loops,
    fresh_name,
    is_true,
    leaf_realizes,
    locate,
    replace,
    replace_in_func,
    taken_block_names,
    uses_any,
)
from compiler.schedule.primitives.reducer import Reducer, match_reducer


@dataclasses.dataclass(frozen=True)
class _Nest:
    """The loops of the block split by what they bind."""

    site: BlockSite
    reduce: list[For]  # loops that reduction bindings use, outermost first
    top: int  # index in site.loops of the outermost one

    def copied(self, factored: For) -> list[For]:
        """The loops of the write-back nest: those under ``top`` not bound to a
        reduction variable, and the factored loop."""
        inner = self.site.loops[self.top :]
        return [lp for lp in inner if lp is factored or all(lp is not r for r in self.reduce)]


def rfactor(func: PrimFunc, loop: For, factor_axis: int) -> tuple[PrimFunc, str]:
    """Factor the reduction of the one block under ``loop`` over that loop; the new
    function and the name of the block computing the partials."""
    realizes = leaf_realizes(loop)
    if len(realizes) != 1:
        names = ", ".join(repr(r.block.name) for r in realizes) or "none"
        raise ScheduleError(
            f"rfactor at loop {loop.loop_var.name!r}: it must hold exactly one block, "
            f"it holds {names}"
        )
    block = realizes[0].block
    site = locate(func, block, "rfactor")
    prefix = f"rfactor of block {block.name!r} at loop {loop.loop_var.name!r}"
    reducer = match_reducer(block)
    if isinstance(reducer, str):
        raise ScheduleError(f"{prefix}: {reducer}")
    if not any(lp is loop for lp in site.loops):
        names = ", ".join(lp.loop_var.name for lp in site.loops) or "none"
        raise ScheduleError(f"{prefix}: the loop does not enclose the block; its loops are {names}")
    ndim = len(reducer.indices)
    if not isinstance(factor_axis, int) or isinstance(factor_axis, bool):
        raise ScheduleError(f"{prefix}: factor_axis must be an int, got {factor_axis!r}")
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise ScheduleError(
            f"{prefix}: factor_axis {factor_axis} is out of range; {reducer.out.name} has "
            f"{ndim} dimension(s), so it must lie in [{-(ndim + 1)}, {ndim}]"
        )
    axis = factor_axis if factor_axis >= 0 else factor_axis + ndim + 1
    nest = _classify(site, loop, prefix)
    _check_nest(nest, loop, prefix)
    _check_first_step(nest, loop, prefix)

    rf_buffer = _rf_buffer(func, reducer.out, loop, axis)
    rf_name = fresh_name(f"{block.name}_rf", taken_block_names(func))
    rf_realize = _rf_block(site, nest, loop, reducer, rf_buffer, axis, rf_name)
    write_back = _write_back_nest(site, nest, loop, reducer, rf_buffer, axis)

    top = site.loops[nest.top]
    rf_nest = replace(top, site.realize, rf_realize)
    new_scope = dataclasses.replace(
        site.scope,
        body=_followed_by(site.scope.body, top, rf_nest, write_back),
        alloc_buffers=(*site.scope.alloc_buffers, rf_buffer),
    )
    return replace_in_func(func, site.scope, new_scope), rf_name


def _followed_by(root: Stmt, old: Stmt, first: Stmt, second: Stmt) -> Stmt:
    """``root`` with ``old`` replaced by ``first`` then ``second``, in one sequence."""

    def edit(n: Node) -> Node | None:
        if isinstance(n, SeqStmt) and any(s is old for s in n.seq):
            return seq(*(seq(first, second) if s is old else s for s in n.seq))
        if n is old:
            return seq(first, second)
        return None

    return transform_pre(root, edit)


# checks ---------------------------------------------------------------------------


def _classify(site: BlockSite, loop: For, prefix: str) -> _Nest:
    realize = site.realize
    pairs = list(zip(realize.block.iter_vars, realize.iter_values, strict=True))
    spatial = [value for iv, value in pairs if iv.kind is IterKind.SPATIAL]
    reduce_values = [value for iv, value in pairs if iv.kind is IterKind.REDUCE]
    reduce = [lp for lp in site.loops if any(uses_any(v, [lp.loop_var]) for v in reduce_values)]
    if all(lp is not loop for lp in reduce):
        raise ScheduleError(
            f"{prefix}: the loop is not a reduction loop of the block (no reduction variable "
            "is bound to it); split the reduction axis and factor one of its loops"
        )
    both = next((lp for lp in reduce if any(uses_any(v, [lp.loop_var]) for v in spatial)), None)
    if both is not None:
        raise ScheduleError(
            f"{prefix}: loop {both.loop_var.name!r} binds both spatial and reduction variables "
            "(a fuse across them); factor before fusing"
        )
    top = next(k for k, lp in enumerate(site.loops) if lp is reduce[0])
    return _Nest(site, reduce, top)


def _check_nest(nest: _Nest, loop: For, prefix: str) -> None:
    """From the outermost reduction loop down, a chain of loops around the block
    alone, with ranges that the write-back nest can copy."""
    loops = nest.site.loops[nest.top :]
    for outer, inner in zip(loops, [*loops[1:], nest.site.realize], strict=True):
        if outer.body is not inner:
            raise ScheduleError(
                f"{prefix}: loop {outer.loop_var.name!r} holds other statements than the block's "
                "loops (other blocks are bound to it); rfactor needs the block alone under its "
                "reduction loops"
            )
    reduce_vars = [lp.loop_var for lp in nest.reduce]
    for lp in nest.copied(loop):
        others = [v for v in reduce_vars if v is not lp.loop_var]
        if uses_any(lp.min, others) or uses_any(lp.extent, others):
            raise ScheduleError(
                f"{prefix}: the range of loop {lp.loop_var.name!r} depends on a reduction loop"
            )
    inner_vars = [lp.loop_var for lp in loops]
    if uses_any(loop.min, inner_vars) or uses_any(loop.extent, inner_vars):
        raise ScheduleError(f"{prefix}: the loop's range depends on the loops around it")


def _check_first_step(nest: _Nest, loop: For, prefix: str) -> None:
    """Every partial must see the reduction's first step, where its init runs: the
    predicate's conditions on reduction loops hold with the other reduction loops
    at their start, whatever the factored and spatial loops are."""
    others = {lp.loop_var: lp.min for lp in nest.reduce if lp is not loop}
    known = {lp.loop_var: Range(lp.min, lp.extent) for lp in nest.site.loops}
    for cond in conjuncts(nest.site.realize.predicate):
        if is_true(cond) or not uses_any(cond, [lp.loop_var for lp in nest.reduce]):
            continue
        if not can_prove(substitute(cond, others), known):
            raise ScheduleError(
                f"{prefix}: the block's predicate {cond} may skip the first reduction step of "
                "a partial result, which would then never be initialised"
            )


# the new blocks -------------------------------------------------------------------


def _rf_buffer(func: PrimFunc, out: Buffer, loop: For, axis: int) -> Buffer:
    shape = list(out.shape)
    shape.insert(axis, loop.extent)
    return Buffer(fresh_name(f"{out.name}_rf", buffer_names(func)), tuple(shape), out.dtype)


def _rf_block(
    site: BlockSite,
    nest: _Nest,
    loop: For,
    reducer: Reducer,
    rf_buffer: Buffer,
    axis: int,
    name: str,
) -> BlockRealize:
    """The block of the partials: the block's spatial variables, one spatial variable
    for the factored loop and one reduction variable per other reduction loop."""
    realize = site.realize
    iter_vars: list[IterVar] = []
    values: list[PrimExpr] = []
    mapping: dict[Var, PrimExpr] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if iv.kind is IterKind.SPATIAL:
            fresh = IterVar(Var(iv.var.name, iv.var.dtype), iv.dom, iv.kind)
            iter_vars.append(fresh)
            values.append(value)
            mapping[iv.var] = fresh.var
    by_loop: dict[Var, PrimExpr] = {}
    factored: Var | None = None
    for lp in nest.reduce:
        kind = IterKind.SPATIAL if lp is loop else IterKind.REDUCE
        var = Var(f"v_{lp.loop_var.name}", lp.loop_var.dtype)
        iter_vars.append(IterVar(var, Range(lp.min, lp.extent), kind))
        values.append(lp.loop_var)
        by_loop[lp.loop_var] = var
        factored = var if lp is loop else factored
    assert factored is not None, "the factored loop is one of the reduction loops"
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if iv.kind is IterKind.REDUCE:
            mapping[iv.var] = substitute(value, by_loop)
    indices = _rf_indices(reducer, mapping, normalize(factored - loop.min), axis)
    value = substitute(reducer.value, mapping)
    condition = None if reducer.condition is None else substitute(reducer.condition, mapping)
    partial = dataclasses.replace(reducer, condition=condition)
    block = Block(
        name,
        tuple(iter_vars),
        partial.update(rf_buffer, indices, value),
        init=BufferStore(rf_buffer, reducer.identity(), indices),
    )
    return BlockRealize(tuple(values), realize.predicate, block)


def _rf_indices(
    reducer: Reducer, mapping: dict[Var, PrimExpr], position: PrimExpr, axis: int
) -> tuple[PrimExpr, ...]:
    indices = [substitute(i, mapping) for i in reducer.indices]
    indices.insert(axis, position)
    return tuple(indices)


def _write_back_nest(
    site: BlockSite, nest: _Nest, loop: For, reducer: Reducer, rf_buffer: Buffer, axis: int
) -> Stmt:
    """The original block, now combining the partials into ``out`` under copies of
    the spatial loops below the outermost reduction loop and the factored loop."""
    realize = site.realize
    block = realize.block
    copied = nest.copied(loop)
    loop_map: dict[Var, Var] = {
        lp.loop_var: Var(f"{lp.loop_var.name}_wb", lp.loop_var.dtype) for lp in copied
    }
    spatial = [
        (iv, value)
        for iv, value in zip(block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.SPATIAL
    ]
    factored = IterVar(
        Var(f"v_{loop.loop_var.name}", loop.loop_var.dtype),
        Range(loop.min, loop.extent),
        IterKind.REDUCE,
    )
    iter_vars = (*(iv for iv, _ in spatial), factored)
    values = (*(substitute(v, loop_map) for _, v in spatial), loop_map[loop.loop_var])
    indices = _rf_indices(reducer, {}, normalize(factored.var - loop.min), axis)
    combine = dataclasses.replace(reducer, condition=None)
    body = combine.update(reducer.out, reducer.indices, E.BufferLoad(rf_buffer, indices))
    new_block = dataclasses.replace(block, iter_vars=iter_vars, body=body)
    reduce_vars = [lp.loop_var for lp in nest.reduce]
    kept = [
        substitute(cond, loop_map)
        for cond in conjuncts(realize.predicate)
        if not is_true(cond) and not uses_any(cond, reduce_vars)
    ]
    predicate = kept[0] if kept else true_predicate()
    for cond in kept[1:]:
        predicate = predicate & cond
    # The partials are combined into one point: a race if that loop ran in parallel.
    serial = [
        dataclasses.replace(lp, kind=ForKind.SERIAL, thread_binding=None) if lp is loop else lp
        for lp in copied
    ]
    return copy_loops(serial, loop_map, BlockRealize(values, predicate, new_block))
