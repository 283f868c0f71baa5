"""decompose_reduction: split a reduction block's init into a block of its own.

A reduction block runs its init at the step where its reduce variables are at
their minimum. After decomposition an ``<name>_init`` block runs the init once
per spatial point right before ``loop``, and the original block is a pure
update. That is equivalent when every reduction step of a spatial point runs
inside one execution of ``loop`` (no loop above it binds a reduce variable),
the loops from ``loop`` down reach each spatial point and each reduction step
once (compute_at's overlapping tiles do not), and the first step of ``loop``'s
nest is the one at the reduce minimum.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping

from compiler.arith.linear import to_linear
from compiler.ir.analysis import substitute
from compiler.ir.expr import PrimExpr, Var, const
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block, BlockRealize, For, IterKind, IterVar, true_predicate
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.dataflow import (
    BlockSite,
    conjuncts,
    copy_loops,
    evaluate,
    fresh_name,
    insert_before,
    is_true,
    locate,
    replace_in_func,
    taken_block_names,
    uses_any,
)


def decompose_reduction(func: PrimFunc, block: Block, loop: For) -> tuple[PrimFunc, str]:
    """Move ``block``'s init into a new block ``<name>_init`` placed right before
    ``loop`` (an enclosing loop of ``block``), under copies of the loops from
    ``loop`` down that its spatial variables are bound to."""
    site = locate(func, block, "decompose_reduction")
    prefix = f"decompose_reduction of block {block.name!r} at loop {loop.loop_var.name!r}"
    if block.init is None:
        raise ScheduleError(
            f"{prefix}: the block has no init to split out (not a reduction, or already decomposed)"
        )
    at = next((k for k, lp in enumerate(site.loops) if lp is loop), None)
    if at is None:
        names = ", ".join(lp.loop_var.name for lp in site.loops) or "none"
        raise ScheduleError(f"{prefix}: the loop does not enclose the block; its loops are {names}")
    inner = site.loops[at:]
    spatial = _bindings(site, IterKind.SPATIAL)
    copied = [lp for lp in inner if any(uses_any(v, [lp.loop_var]) for _, v in spatial)]
    skipped = [lp for lp in inner if all(lp is not c for c in copied)]
    _check_loops(site, at, copied, skipped, prefix)
    loop_map = {lp.loop_var: Var(f"{lp.loop_var.name}_init", lp.loop_var.dtype) for lp in copied}
    reduce_vars = [iv.var for iv in block.iter_vars if iv.kind is IterKind.REDUCE]
    if uses_any(block.init, reduce_vars):
        raise ScheduleError(f"{prefix}: the init uses a reduction variable")

    name = fresh_name(f"{block.name}_init", taken_block_names(func))
    init_vars = [IterVar(Var(iv.var.name, iv.var.dtype), iv.dom, iv.kind) for iv, _ in spatial]
    body = substitute(
        block.init, {iv.var: nv.var for (iv, _), nv in zip(spatial, init_vars, strict=True)}
    )
    init_block = Block(name, tuple(init_vars), body)
    bindings = tuple(substitute(value, loop_map) for _, value in spatial)
    predicate = _init_predicate(site, skipped, loop_map, prefix)
    stmt = copy_loops(copied, loop_map, BlockRealize(bindings, predicate, init_block))
    result = insert_before(func, loop, [stmt])
    result = replace_in_func(result, block, dataclasses.replace(block, init=None))
    return result, name


def _bindings(site: BlockSite, kind: IterKind) -> list[tuple[IterVar, PrimExpr]]:
    realize = site.realize
    pairs = zip(realize.block.iter_vars, realize.iter_values, strict=True)
    return [(iv, value) for iv, value in pairs if iv.kind is kind]


def _check_loops(
    site: BlockSite, at: int, copied: list[For], skipped: list[For], prefix: str
) -> None:
    """The init ran exactly once per spatial point, at the point's first step,
    inside one run of ``loop``: no loop above ``loop`` binds a reduce variable,
    the copied loops reach each spatial point once and the others each
    reduction step once, and the first step is at the reduce minimum."""
    reduce = _bindings(site, IterKind.REDUCE)
    for outer in site.loops[:at]:
        if any(uses_any(value, [outer.loop_var]) for _, value in reduce):
            raise ScheduleError(
                f"{prefix}: loop {outer.loop_var.name!r} above it binds a reduction variable; "
                f"decompose at {outer.loop_var.name!r} or a loop above it"
            )
    for _, value in reduce:
        used = next((lp for lp in copied if uses_any(value, [lp.loop_var])), None)
        if used is not None:
            raise ScheduleError(
                f"{prefix}: loop {used.loop_var.name!r} binds both spatial and reduction variables"
            )
    _check_one_to_one(_bindings(site, IterKind.SPATIAL), copied, prefix)
    _check_one_to_one(reduce, skipped, prefix)
    starts: dict[Var, int] = {}
    for lp in skipped:
        start = evaluate(lp.min, {})
        bound = any(uses_any(v, [lp.loop_var]) for _, v in reduce)
        if start is None or (not bound and evaluate(lp.extent, {}) != 1):
            raise ScheduleError(
                f"{prefix}: loop {lp.loop_var.name!r} binds no block variable or has a "
                "symbolic start, so the reduction could repeat under it"
            )
        starts[lp.loop_var] = start
    for iv, value in reduce:
        if evaluate(value, starts) != evaluate(iv.dom.min, {}):
            raise ScheduleError(
                f"{prefix}: reduction variable {iv.var.name!r} (= {value}) is not at its "
                "minimum on the first step of the loops, so the init would move"
            )
    skipped_vars = [lp.loop_var for lp in skipped]
    for lp in copied:
        if uses_any(lp.min, skipped_vars) or uses_any(lp.extent, skipped_vars):
            raise ScheduleError(
                f"{prefix}: the range of loop {lp.loop_var.name!r} depends on a reduction loop"
            )


def _check_one_to_one(
    bindings: list[tuple[IterVar, PrimExpr]], loops: list[For], prefix: str
) -> None:
    """Each loop in ``loops`` feeds one binding, as a term ``c * loop``, and the
    terms of a binding are digits of a mixed-radix number (each coefficient at
    least the span of the smaller ones), so distinct iterations give distinct
    values."""
    by_id = {id(lp.loop_var): lp for lp in loops}
    owner: set[int] = set()
    for iv, value in bindings:
        digits: list[tuple[int, int | None]] = []
        for atom, coeff in to_linear(value).terms.values():
            loop = by_id.get(id(atom)) if isinstance(atom, Var) else None
            if loop is None:
                if uses_any(atom, [lp.loop_var for lp in loops]):
                    raise ScheduleError(
                        f"{prefix}: block variable {iv.var.name!r} is bound to {value}, "
                        "which is not affine in its loops"
                    )
                continue
            if id(atom) in owner:
                raise ScheduleError(
                    f"{prefix}: loop {loop.loop_var.name!r} binds two block variables"
                )
            owner.add(id(atom))
            digits.append((abs(coeff), evaluate(loop.extent, {})))
        digits.sort(key=lambda d: (d[0], d[1] != 1))  # unit loops first among equals
        for (low, extent), (high, _) in itertools.pairwise(digits):
            if extent is None or high < low * extent:
                raise ScheduleError(
                    f"{prefix}: block variable {iv.var.name!r} = {value} may take one value "
                    "at two iterations of its loops"
                )


def _init_predicate(
    site: BlockSite, skipped: list[For], loop_map: Mapping[Var, PrimExpr], prefix: str
) -> PrimExpr:
    """The block's predicate for the init: conjuncts over the copied and outer
    loops carry over; those over reduction-only loops must hold at their start."""
    skipped_vars = [lp.loop_var for lp in skipped]
    mins: dict[Var, int] = {}
    for lp in skipped:
        value = evaluate(lp.min, {})
        if value is not None:
            mins[lp.loop_var] = value
    kept: list[PrimExpr] = []
    for cond in conjuncts(site.realize.predicate):
        if is_true(cond):
            continue
        if not uses_any(cond, skipped_vars):
            kept.append(substitute(cond, loop_map))
            continue
        at_start = substitute(cond, {v: _const_like(v, mins[v]) for v in skipped_vars if v in mins})
        if uses_any(at_start, list(loop_map)) or evaluate(at_start, {}) is None:
            raise ScheduleError(
                f"{prefix}: the block's predicate {cond} mixes reduction and spatial loops"
            )
        if not evaluate(at_start, {}):
            raise ScheduleError(
                f"{prefix}: the block's predicate {cond} is false at the first reduction step"
            )
    if not kept:
        return true_predicate()
    result = kept[0]
    for cond in kept[1:]:
        result = result & cond
    return result


def _const_like(var: Var, value: int) -> PrimExpr:
    return const(value, var.dtype)
