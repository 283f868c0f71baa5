"""Replays a TE schedule's stages as block-schedule primitives.

TE semantics are declarative (an axis keeps existing after ``compute_at``), while
block primitives act in order (``compute_at`` regenerates the moved block's
loops). The replay bridges the two: it visits stages from consumers to producers;
for each it first applies the attachment (``compute_at`` or ``compute_inline``),
then maps the stage's axes to the loops that now bind its block variables, then
replays the stage's own splits, fuses and reorders in call order. Loop kinds
(vectorize, parallel, unroll) come last, once every loop exists and every stage
has its place, so no split or compute_at meets an already parallel loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.ir.analysis import find_block_realize, uses_var
from compiler.ir.stmt import IterVar
from compiler.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from compiler.te.tensor import Operation

if TYPE_CHECKING:
    from compiler.te.schedule import Stage, Step, TESchedule

LOOP_KINDS = ("vectorize", "parallel", "unroll")

Axis = IterVar


class Replay:
    """Applies a TESchedule's stages to a block Schedule (see the module docstring)."""

    def __init__(self, sch: Schedule, block_names: dict[Operation, str]) -> None:
        self.sch = sch
        self.block_names = block_names
        self.loops: dict[int, LoopRV | None] = {}
        self.blocks: dict[Operation, BlockRV] = {}

    def run(self, schedule: TESchedule) -> None:
        stages = schedule.stages
        for stage in stages:
            self.blocks[stage.op] = self.sch.get_block(self.block_names[stage.op])
        for stage in stages:
            self.map_axes(stage, self.sch.get_loops(self.blocks[stage.op]))
        for stage in reversed(stages):
            self.attach(stage)
            for step in stage.steps():
                if step.kind not in LOOP_KINDS:
                    self.apply(stage, step)
        for stage, step in schedule.steps:
            if step.kind in LOOP_KINDS:
                self.apply(stage, step)

    def attach(self, stage: Stage) -> None:
        attach = stage.attach
        block = self.blocks[stage.op]
        if attach.kind == "inline":
            self.sch.compute_inline(block)
        elif attach.kind == "at":
            assert attach.parent is not None and attach.axis is not None
            if id(attach.axis) not in self.loops:
                raise ScheduleError(
                    f"compute_at of {stage.op.name!r}: its target axis "
                    f"{attach.axis.var.name!r} of stage {attach.parent.op.name!r} was split or "
                    "fused; attach to one of the axes that call returned"
                )
            target = self.loop(attach.parent, attach.axis, f"compute_at of {stage.op.name!r}")
            self.sch.compute_at(block, target, preserve_unit_loops=True)
            loops = self.sch.get_loops(block)
            below = loops[[rv.var for rv in loops].index(target.var) + 1 :]
            self.map_axes(stage, below)

    def map_axes(self, stage: Stage, loops: list[LoopRV]) -> None:
        """Bind each root axis of ``stage`` to the loop among ``loops`` that its block
        variable is bound to (None where no loop is left, a unit extent)."""
        func = self.sch.mod["main"]
        realize = find_block_realize(func.body, self.block_names[stage.op])
        assert realize is not None
        axes = [*stage.op.axis, *stage.op.reduce_axis]
        for axis, value in zip(axes, realize.iter_values, strict=True):
            found = [rv for rv in loops if uses_var(value, rv.var)]
            if len(found) > 1:
                raise ScheduleError(
                    f"stage {stage.op.name!r}: axis {axis.var.name!r} is bound to several "
                    f"loops {[rv.var.name for rv in found]}; a TE stage needs one loop per axis"
                )
            self.loops[id(axis)] = found[0] if found else None

    def loop(self, stage: Stage, axis: Axis, what: str) -> LoopRV:
        if id(axis) not in self.loops:
            raise ScheduleError(
                f"{what} on stage {stage.op.name!r}: axis {axis.var.name!r} was split or "
                "fused away before this point; use the axes that call returned"
            )
        rv = self.loops[id(axis)]
        if rv is None:
            raise ScheduleError(
                f"{what} on stage {stage.op.name!r}: axis {axis.var.name!r} has extent 1 "
                "where the stage is computed, so it has no loop"
            )
        return rv

    def apply(self, stage: Stage, step: Step) -> None:
        loops = [self.loop(stage, axis, step.kind) for axis in step.axes]
        if step.kind == "split":
            factors = [None, step.factor] if step.factor is not None else [step.nparts, None]
            outs = self.sch.split(loops[0], factors)
            self.replace(step, outs)
        elif step.kind == "fuse":
            self.replace(step, [self.sch.fuse(*loops)])
        elif step.kind == "reorder":
            self.sch.reorder(*loops)
        else:
            getattr(self.sch, step.kind)(loops[0])

    def replace(self, step: Step, outs: list[LoopRV]) -> None:
        for axis in step.axes:
            del self.loops[id(axis)]
        for axis, rv in zip(step.outputs, outs, strict=True):
            self.loops[id(axis)] = rv
