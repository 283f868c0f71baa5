"""TVM's tensor-expression schedules (``te.create_schedule``) over the block Schedule.

A TE schedule is written before the function's arguments are known:
``s = te.create_schedule(C.op)``, then ``s[C].split(C.op.axis[0], factor=32)`` and
so on, and only ``compiler.build(s, [A, B, C])`` says which tensors are parameters.
So a stage records its operations as steps on axis handles, and
``to_schedule(args)`` replays them as primitives of a ``compiler.schedule.Schedule``
over ``te.create_prim_func(args)``: the result is an ordinary schedule with a
trace, which the tuner, the database and the builder understand.

``compiler.te.stage_replay`` explains how the declarative TE steps (an axis outlives
``compute_at``) become block primitives, which act in order.

Every operation is also replayed at once on a probe function (all placeholders
and the outputs as arguments), so an illegal step raises ``ScheduleError`` where
it is written and leaves the schedule as it was.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr, Range, Var
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.stmt import IterKind, IterVar
from compiler.schedule import Schedule, ScheduleError
from compiler.te.prim_func import lower_tensors, topological_order
from compiler.te.stage_replay import LOOP_KINDS, Replay
from compiler.te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor

Axis = IterVar


@dataclass(frozen=True, eq=False)
class Step:
    """One loop operation of a stage: ``kind`` on ``axes``, producing ``outputs``."""

    kind: str
    axes: tuple[Axis, ...]
    outputs: tuple[Axis, ...] = ()
    factor: int | None = None
    nparts: int | None = None


@dataclass
class Attach:
    """Where a stage is computed: at the root, at ``axis`` of ``parent``, or inlined."""

    kind: str = "root"
    parent: Stage | None = None
    axis: Axis | None = None


@dataclass
class _StageState:
    leaf: list[Axis]
    attach: Attach = field(default_factory=Attach)


class Stage:
    """The schedule of one compute operation (TVM's ``s[C]``)."""

    def __init__(self, schedule: TESchedule, op: ComputeOp) -> None:
        self._schedule = schedule
        self.op = op
        self._state = _StageState(leaf=[*op.axis, *op.reduce_axis])
        self._owned: dict[int, Axis] = {id(a): a for a in self._state.leaf}

    def __repr__(self) -> str:
        return f"Stage({self.op.name})"

    @property
    def leaf_iter_vars(self) -> list[Axis]:
        """The stage's current axes, outermost first."""
        return list(self._state.leaf)

    # loop operations ------------------------------------------------------------

    def split(
        self, parent: Axis, factor: int | None = None, nparts: int | None = None
    ) -> tuple[Axis, Axis]:
        """Split ``parent`` into (outer, inner), with inner extent ``factor`` or outer
        extent ``nparts``; a non-dividing split guards the block."""
        if (factor is None) == (nparts is None):
            raise ScheduleError(
                f"split of {self._name(parent)}: give exactly one of factor= or nparts="
            )
        count = _positive_int(factor if factor is not None else nparts, "split", self)
        self._check_live(parent, "split")
        self._check_no_kind(parent, "split")
        extent = parent.dom.extent
        if factor is not None:
            outer_extent, inner_extent = _ceil_div(extent, count), E.const(count)
        else:
            outer_extent, inner_extent = E.const(count), _ceil_div(extent, count)
        outer = _axis(f"{parent.var.name}.outer", outer_extent, parent.kind)
        inner = _axis(f"{parent.var.name}.inner", inner_extent, parent.kind)
        if factor is not None:
            step = Step("split", (parent,), (outer, inner), factor=count)
        else:
            step = Step("split", (parent,), (outer, inner), nparts=count)
        with self._schedule._transaction():
            self._record(step)
            position = _position(self._state.leaf, parent)
            self._state.leaf[position : position + 1] = [outer, inner]
        return outer, inner

    def tile(
        self, x_parent: Axis, y_parent: Axis, x_factor: int, y_factor: int
    ) -> tuple[Axis, Axis, Axis, Axis]:
        """Split two axes and order them (x_outer, y_outer, x_inner, y_inner)."""
        with self._schedule._transaction():
            xo, xi = self.split(x_parent, factor=x_factor)
            yo, yi = self.split(y_parent, factor=y_factor)
            self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: Axis) -> Axis:
        """Fuse adjacent axes (outermost first) into one."""
        if not axes:
            raise ScheduleError(f"fuse on stage {self.op.name!r} needs at least one axis")
        for axis in axes:
            self._check_live(axis, "fuse")
            self._check_no_kind(axis, "fuse")
        positions = [_position(self._state.leaf, a) for a in axes]
        if positions != list(range(positions[0], positions[0] + len(axes))):
            order = ", ".join(a.var.name for a in self._state.leaf)
            raise ScheduleError(
                f"fuse on stage {self.op.name!r}: axes {[a.var.name for a in axes]} must be "
                f"adjacent and outermost first; the current order is {order}"
            )
        if len(axes) == 1:
            return axes[0]
        extent: PrimExpr = axes[0].dom.extent
        for axis in axes[1:]:
            extent = _mul(extent, axis.dom.extent)
        kind = IterKind.REDUCE if any(a.kind is IterKind.REDUCE for a in axes) else IterKind.SPATIAL
        fused = _axis(".".join(a.var.name for a in axes) + ".fused", extent, kind)
        with self._schedule._transaction():
            self._record(Step("fuse", tuple(axes), (fused,)))
            self._state.leaf[positions[0] : positions[-1] + 1] = [fused]
        return fused

    def reorder(self, *axes: Axis) -> None:
        """Put ``axes`` in this order, in the positions they occupy now."""
        for axis in axes:
            self._check_live(axis, "reorder")
        if len({id(a) for a in axes}) != len(axes):
            raise ScheduleError(f"reorder on stage {self.op.name!r}: an axis is repeated")
        if len(axes) < 2:
            return
        with self._schedule._transaction():
            self._record(Step("reorder", tuple(axes)))
            slots = sorted(_position(self._state.leaf, a) for a in axes)
            for slot, axis in zip(slots, axes, strict=True):
                self._state.leaf[slot] = axis

    def vectorize(self, axis: Axis) -> None:
        self._loop_kind("vectorize", axis)

    def parallel(self, axis: Axis) -> None:
        self._loop_kind("parallel", axis)

    def unroll(self, axis: Axis) -> None:
        self._loop_kind("unroll", axis)

    def _loop_kind(self, kind: str, axis: Axis) -> None:
        self._check_live(axis, kind)
        with self._schedule._transaction():
            self._record(Step(kind, (axis,)))

    # attachment ------------------------------------------------------------------

    def compute_at(self, parent: Stage, scope: Axis) -> None:
        """Compute this stage inside the loop ``scope`` of stage ``parent``, only
        over the region that loop's iteration needs."""
        if not isinstance(parent, Stage) or parent._schedule is not self._schedule:
            raise ScheduleError(
                f"compute_at of {self.op.name!r}: the first argument must be a stage of "
                f"this schedule (s[C]), got {parent!r}"
            )
        if parent is self:
            raise ScheduleError(f"compute_at of {self.op.name!r}: cannot attach a stage to itself")
        parent._check_live(scope, "compute_at target")
        if parent._state.attach.kind == "inline":
            raise ScheduleError(
                f"compute_at of {self.op.name!r}: stage {parent.op.name!r} is inlined and "
                "has no loops"
            )
        self._check_not_inlined("compute_at")
        with self._schedule._transaction():
            self._state.attach = Attach("at", parent, scope)

    def compute_inline(self) -> None:
        """Replace every read of this stage by its expression."""
        name = self.op.name
        if self.op in self._schedule.outputs:
            raise ScheduleError(f"compute_inline of {name!r}: an output of the schedule stays")
        if self.steps():
            raise ScheduleError(
                f"compute_inline of {name!r}: its loops were already transformed; an "
                "inlined stage has no loops"
            )
        attached = [s.op.name for s in self._schedule._stages.values() if s._attached_to(self)]
        if attached:
            raise ScheduleError(
                f"compute_inline of {name!r}: stages {attached} are computed at its loops"
            )
        with self._schedule._transaction():
            self._state.attach = Attach("inline")

    def compute_root(self) -> None:
        """Undo ``compute_at``/``compute_inline``: compute the stage in its own loops."""
        with self._schedule._transaction():
            self._state.attach = Attach()

    # bookkeeping -------------------------------------------------------------------

    def _record(self, step: Step) -> None:
        self._check_not_inlined(step.kind)
        self._owned.update((id(a), a) for a in step.outputs)
        self._schedule._steps.append((self, step))

    def steps(self) -> list[Step]:
        """The loop operations recorded on this stage, in call order."""
        return [step for stage, step in self._schedule._steps if stage is self]

    @property
    def attach(self) -> Attach:
        """Where the stage is computed (root, at an axis of another stage, inlined)."""
        return self._state.attach

    def _attached_to(self, other: Stage) -> bool:
        return self._state.attach.kind == "at" and self._state.attach.parent is other

    def _check_not_inlined(self, what: str) -> None:
        if self._state.attach.kind == "inline":
            raise ScheduleError(
                f"{what} on stage {self.op.name!r}: the stage is inlined and has no loops; "
                "call compute_root() first"
            )

    def _check_no_kind(self, axis: Axis, what: str) -> None:
        kinds = [s.kind for s in self.steps() if s.kind in LOOP_KINDS and s.axes[0] is axis]
        if kinds:
            raise ScheduleError(
                f"{what} on stage {self.op.name!r}: axis {axis.var.name!r} is already set to "
                f"{kinds[-1]}; {what} it before choosing its loop kind"
            )

    def _check_live(self, axis: Any, what: str) -> None:
        if not isinstance(axis, IterVar):
            raise ScheduleError(
                f"{what} on stage {self.op.name!r}: expected an axis (op.axis[i], "
                f"op.reduce_axis[i] or one returned by split/fuse), got {axis!r}"
            )
        if any(a is axis for a in self._state.leaf):
            return
        if id(axis) in self._owned:
            raise ScheduleError(
                f"{what} on stage {self.op.name!r}: axis {axis.var.name!r} was replaced by "
                "an earlier split or fuse; use the axes that call returned"
            )
        owner = self._schedule._owner_of(axis)
        where = f"belongs to stage {owner.op.name!r}" if owner else "is not an axis of any stage"
        raise ScheduleError(
            f"{what} on stage {self.op.name!r}: axis {axis.var.name!r} {where}; use "
            f"s[{self.op.name}].op.axis or the axes its split/fuse returned"
        )

    def _name(self, axis: Any) -> str:
        name = axis.var.name if isinstance(axis, IterVar) else repr(axis)
        return f"axis {name!r} of stage {self.op.name!r}"


class TESchedule:
    """A schedule of tensor expressions (TVM's ``te.Schedule``); index it with a
    tensor or operation to get its Stage."""

    def __init__(self, outputs: Sequence[ComputeOp]) -> None:
        self.outputs = list(outputs)
        self._stages: dict[Operation, Stage] = {}
        self._placeholders: list[PlaceholderOp] = []
        for op in topological_order([o.output(0) for o in self.outputs]):
            if isinstance(op, ComputeOp):
                self._stages[op] = Stage(self, op)
            else:
                self._placeholders.append(op)
        self._steps: list[tuple[Stage, Step]] = []
        self._in_transaction = False

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if isinstance(op, PlaceholderOp):
            raise ScheduleError(f"{op.name!r} is a placeholder: it has no loops to schedule")
        stage = self._stages.get(op)
        if stage is None:
            name = getattr(op, "name", repr(op))
            raise ScheduleError(
                f"{name!r} is not computed by this schedule's outputs "
                f"{[o.name for o in self.outputs]}"
            )
        return stage

    @property
    def stages(self) -> list[Stage]:
        """Every compute stage, producers before consumers."""
        return list(self._stages.values())

    @property
    def steps(self) -> list[tuple[Stage, Step]]:
        """Every stage's loop operations, in call order."""
        return list(self._steps)

    # lowering ------------------------------------------------------------------------

    def to_schedule(self, args: Sequence[Tensor] | None) -> Schedule:
        """A block Schedule of ``te.create_prim_func(args)`` with every stage's
        operations applied (its trace replays them)."""
        if args is None:
            raise ScheduleError(
                "a TE schedule needs the function's arguments: compiler.build(s, [A, B, C])"
            )
        func, block_names = lower_tensors(args)
        missing = [op.name for op in self._stages if op not in block_names]
        if missing:
            raise ScheduleError(
                f"the arguments do not reach stages {missing}; pass the schedule's outputs "
                f"{[o.name for o in self.outputs]} among the arguments"
            )
        sch = Schedule(func)
        Replay(sch, block_names).run(self)
        return sch

    def to_prim_func(self, args: Sequence[Tensor] | None, name: str = "main") -> PrimFunc:
        func = self.to_schedule(args).mod["main"]
        return func.with_attr("global_symbol", name)

    def to_ir_module(self, args: Sequence[Tensor] | None, name: str = "main") -> IRModule:
        """The scheduled function as a module ``{name: func}``; what
        ``compiler.build(s, args)`` and ``compiler.lower(s, args)`` call."""
        return IRModule({name: self.to_prim_func(args, name)})

    # recording -------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """Run an operation; if it (or the replay it leads to) fails, restore the
        schedule to what it was and re-raise. Nested uses validate once."""
        if self._in_transaction:
            yield
            return
        saved_steps = list(self._steps)
        saved_states = {
            op: _StageState(list(stage._state.leaf), copy.copy(stage._state.attach))
            for op, stage in self._stages.items()
        }
        self._in_transaction = True
        try:
            yield
            self.to_schedule(self._probe_args())
        except BaseException:
            self._steps = saved_steps
            for op, state in saved_states.items():
                self._stages[op]._state = state
            raise
        finally:
            self._in_transaction = False

    def _probe_args(self) -> list[Tensor]:
        return [p.output(0) for p in self._placeholders] + [o.output(0) for o in self.outputs]

    def _owner_of(self, axis: Axis) -> Stage | None:
        return next((s for s in self._stages.values() if id(axis) in s._owned), None)


def create_schedule(ops: Operation | Tensor | Sequence[Operation | Tensor]) -> TESchedule:
    """A schedule computing ``ops`` (an operation or a list of them), every stage at
    the root and in its own loops to begin with."""
    items = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    outputs: list[ComputeOp] = []
    for item in items:
        op = item.op if isinstance(item, Tensor) else item
        if not isinstance(op, ComputeOp):
            what = f"placeholder {op.name!r}" if isinstance(op, PlaceholderOp) else repr(op)
            raise ScheduleError(f"create_schedule takes compute operations (C.op), got {what}")
        outputs.append(op)
    return TESchedule(outputs)


def _position(leaf: list[Axis], axis: Axis) -> int:
    """Where ``axis`` is in ``leaf``, by identity (``==`` on axes builds an expression)."""
    return next(k for k, a in enumerate(leaf) if a is axis)


def _axis(name: str, extent: PrimExpr, kind: IterKind) -> Axis:
    return IterVar(Var(name), Range(E.const(0), extent), kind)


def _ceil_div(extent: PrimExpr, by: int) -> PrimExpr:
    if isinstance(extent, E.IntImm):
        return E.const(-(-extent.value // by), extent.dtype)
    return (extent + (by - 1)) // by


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return E.const(a.value * b.value, a.dtype)
    return a * b


def _positive_int(value: Any, what: str, stage: Stage) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, E.IntImm)):
        raise ScheduleError(
            f"{what} on stage {stage.op.name!r}: the factor must be a positive int, got {value!r}"
        )
    number = int(value)
    if number <= 0:
        raise ScheduleError(
            f"{what} on stage {stage.op.name!r}: the factor {number} must be positive"
        )
    return number
