"""The Schedule: primitives over an IRModule, each recorded as a trace instruction.

Each primitive here is a thin wrapper: it resolves handles to IR, calls a pure
function in ``compiler.schedule.primitives`` that returns a new PrimFunc (or
raises ``ScheduleError``), installs the result and hands out new handles. The
``instruction`` decorator records the call and restores the previous module
when the primitive raises, so an illegal move changes nothing.
"""

from __future__ import annotations

import functools
import inspect
import random
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from compiler.ir.analysis import find_block_realize, find_loop
from compiler.ir.expr import IntImm, PrimExpr
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.stmt import Block, For, ForKind
from compiler.schedule import primitives as P
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import BlockRV, ExprRV, InlineLocation, LoopRV, RootLocation
from compiler.schedule.index_map import IndexMap
from compiler.schedule.trace import INSTRUCTION_ATTR, SAMPLING_KINDS, Instruction, Trace

Params = ParamSpec("Params")
R = TypeVar("R")

# Every function a primitive has transformed carries this attribute (value True), so
# that compiler.build gives its default schedule only to functions that have none.
SCHEDULED_ATTR = "tensortune.scheduled"


def instruction(
    method: Callable[Concatenate[Schedule, Params], R],
) -> Callable[Concatenate[Schedule, Params], R]:
    """Record a call of ``method`` in the trace; undo the module on ScheduleError.

    A ``func_name`` left None is recorded as the function it resolved to, so the
    trace replays on the same function whatever the replaying schedule's default.
    """
    signature = inspect.signature(method)
    var_positional = next(
        (p.name for p in signature.parameters.values() if p.kind is p.VAR_POSITIONAL), None
    )
    samples = method.__name__ in SAMPLING_KINDS  # only sampling draws from the rng

    @functools.wraps(method)
    def run(self: Schedule, *args: Any, **kwargs: Any) -> Any:
        if var_positional and var_positional in kwargs:
            args = (*args, *kwargs.pop(var_positional))
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        inputs = {
            k: _snapshot(v) for k, v in bound.arguments.items() if k not in ("self", "decision")
        }
        if var_positional:
            inputs[var_positional] = list(inputs[var_positional])
        module = self._mod
        rng_state = self._rng.getstate() if samples else None
        self._decision = None
        try:
            result: Any = method(self, *args, **kwargs)
        except ScheduleError:
            self._mod = module
            if rng_state is not None:
                self._rng.setstate(rng_state)
            raise
        if inputs.get("func_name", "") is None:
            inputs["func_name"] = self._func_name
        is_list = isinstance(result, (list, tuple))
        outputs = tuple(result) if is_list else (() if result is None else (result,))
        self._trace.append(
            Instruction(method.__name__, inputs, outputs, self._decision, outputs_are_list=is_list)
        )
        return result

    setattr(run, INSTRUCTION_ATTR, True)
    return run


def _snapshot(value: Any) -> Any:
    """A copy of the lists in an input, so that a caller who later changes the list
    it passed (``factors``) does not change the recorded trace."""
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


class Schedule:
    """Schedules the functions of ``mod`` (an IRModule or a single PrimFunc).

    ``seed`` makes the sampling instructions reproducible.
    """

    def __init__(self, mod: IRModule | PrimFunc, seed: int | None = None) -> None:
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule takes an IRModule or a PrimFunc, not {type(mod).__name__}")
        self._original = mod
        self._mod = mod
        self._trace = Trace()
        self._rng = random.Random(seed)
        self._decision: Any = None
        self._func_name: str | None = (
            "main" if "main" in mod else (next(iter(mod)) if len(mod) == 1 else None)
        )

    # state -------------------------------------------------------------------

    @property
    def mod(self) -> IRModule:
        return self._mod

    @property
    def trace(self) -> Trace:
        return self._trace.copy()

    def copy(self) -> Schedule:
        other = Schedule(self._original)
        other._mod = self._mod
        other._trace = self._trace.copy()
        other._rng.setstate(self._rng.getstate())
        other._func_name = self._func_name
        return other

    def seed(self, seed: int) -> None:
        self._rng.seed(seed)

    def work_on(self, func_name: str) -> None:
        self._func(func_name)
        self._func_name = func_name

    @overload
    def get(self, rv: BlockRV) -> Block: ...
    @overload
    def get(self, rv: LoopRV) -> For: ...
    @overload
    def get(self, rv: ExprRV) -> int: ...
    def get(self, rv: BlockRV | LoopRV | ExprRV) -> Block | For | int:
        """The IR node (or sampled value) a handle stands for."""
        if isinstance(rv, ExprRV):
            return rv.value
        if isinstance(rv, BlockRV):
            return self._block(rv)
        return self._loop(rv)

    def _func(self, func_name: str | None) -> PrimFunc:
        if func_name is not None and not isinstance(func_name, str):
            raise ScheduleError(f"func_name must be a function name (str), got {func_name!r}")
        if func_name is None:
            raise ScheduleError(
                f"the module has several functions {sorted(self._mod)}; name one with "
                "func_name= or sch.work_on(name)"
            )
        if func_name not in self._mod:
            raise ScheduleError(f"no function {func_name!r}; the module has {sorted(self._mod)}")
        return self._mod[func_name]

    def _install(self, func_name: str, func: PrimFunc) -> None:
        self._mod = self._mod.with_function(func_name, func.with_attr(SCHEDULED_ATTR, True))

    def _block(self, rv: BlockRV) -> Block:
        if not isinstance(rv, BlockRV):
            raise ScheduleError(f"expected a block handle (BlockRV), got {rv!r}")
        realize = find_block_realize(self._func(rv.func_name).body, rv.name)
        if realize is None:
            raise ScheduleError(
                f"block {rv.name!r} is no longer in function {rv.func_name!r} "
                "(an earlier primitive such as compute_inline removed it)"
            )
        return realize.block

    def _loop(self, rv: LoopRV) -> For:
        if not isinstance(rv, LoopRV):
            raise ScheduleError(f"expected a loop handle (LoopRV), got {rv!r}")
        loop = find_loop(self._func(rv.func_name).body, rv.var)
        if loop is None:
            raise ScheduleError(
                f"loop {rv.var.name!r} is no longer in function {rv.func_name!r} "
                "(an earlier split or fuse replaced it); use the handles that primitive returned"
            )
        return loop

    def _same_func(self, *rvs: BlockRV | LoopRV) -> str:
        for rv in rvs:
            if not isinstance(rv, (BlockRV, LoopRV)):
                raise ScheduleError(f"expected a block or loop handle, got {rv!r}")
        names = {rv.func_name for rv in rvs}
        if len(names) != 1:
            raise ScheduleError(
                f"handles {list(rvs)} belong to different functions {sorted(names)}"
            )
        return names.pop()

    # lookups -----------------------------------------------------------------

    @instruction
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        func_name = func_name or self._func_name
        func = self._func(func_name)
        assert func_name is not None, "_func resolves only a named function"
        if find_block_realize(func.body, name) is None:
            raise ScheduleError(
                f"no block named {name!r} in function {func_name!r}; it has {P.block_names(func)}"
            )
        return BlockRV(name, func_name)

    @instruction
    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        self._block(block)
        func = self._func(block.func_name)
        return [LoopRV(loop.loop_var, block.func_name) for loop in P.loops_above(func, block.name)]

    @instruction
    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        node = self.get(block_or_loop)  # validates the handle
        names = P.child_block_names(node)
        return [BlockRV(name, block_or_loop.func_name) for name in names]

    # loop transformations ----------------------------------------------------------

    @instruction
    def split(
        self,
        loop: LoopRV,
        factors: Sequence[int | ExprRV | PrimExpr | None],
        preserve_unit_iters: bool = True,
    ) -> list[LoopRV]:
        target = self._loop(loop)
        if not isinstance(factors, (list, tuple)):
            raise ScheduleError(
                f"split of loop {loop.var.name!r}: factors must be a list, got {factors!r}"
            )
        values = [None if f is None else _factor_value(f, loop) for f in factors]
        func, new_vars = P.split(self._func(loop.func_name), target, values)
        self._install(loop.func_name, func)
        return [LoopRV(v, loop.func_name) for v in new_vars]

    @instruction
    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        if not loops:
            raise ScheduleError("fuse needs at least one loop")
        func_name = self._same_func(*loops)
        targets = [self._loop(rv) for rv in loops]
        func, fused = P.fuse(self._func(func_name), targets)
        self._install(func_name, func)
        return LoopRV(fused, func_name)

    @instruction
    def reorder(self, *ordered_loops: LoopRV) -> None:
        if not ordered_loops:
            raise ScheduleError("reorder needs at least one loop")
        func_name = self._same_func(*ordered_loops)
        targets = [self._loop(rv) for rv in ordered_loops]
        self._install(func_name, P.reorder(self._func(func_name), targets))

    def _set_kind(self, loop: LoopRV, kind: ForKind) -> None:
        target = self._loop(loop)
        self._install(loop.func_name, P.set_loop_kind(self._func(loop.func_name), target, kind))

    @instruction
    def parallel(self, loop: LoopRV) -> None:
        self._set_kind(loop, ForKind.PARALLEL)

    @instruction
    def vectorize(self, loop: LoopRV) -> None:
        self._set_kind(loop, ForKind.VECTORIZED)

    @instruction
    def unroll(self, loop: LoopRV) -> None:
        self._set_kind(loop, ForKind.UNROLLED)

    @instruction
    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Run ``loop``'s iterations on a GPU thread axis (``"blockIdx.x"``,
        ``"threadIdx.y"``, ``"vthread.x"`` ...); see ``primitives.loops.bind``."""
        target = self._loop(loop)
        self._install(loop.func_name, P.bind(self._func(loop.func_name), target, thread_axis))

    @instruction
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Store ``ann_key: ann_val`` on a block or loop. A sampled value (ExprRV) is
        stored as its int and recorded as the variable, so a trace replayed with
        another decision annotates the new value (how a space hands its sampled
        parallel, vector and unroll sizes to the steps that realise them)."""
        node = self.get(block_or_loop)
        func_name = block_or_loop.func_name
        value = ann_val.value if isinstance(ann_val, ExprRV) else ann_val
        func = P.annotate(self._func(func_name), node, ann_key, value)
        self._install(func_name, func)

    # compute location ----------------------------------------------------------------

    @instruction
    def compute_at(
        self,
        block: BlockRV,
        loop: LoopRV | RootLocation | InlineLocation,
        preserve_unit_loops: bool = False,
    ) -> None:
        if isinstance(loop, RootLocation):
            return
        if isinstance(loop, InlineLocation):
            target = self._block(block)
            self._install(block.func_name, P.compute_inline(self._func(block.func_name), target))
            return
        func_name = self._same_func(block, loop)
        func = P.compute_at(
            self._func(func_name), self._block(block), self._loop(loop), preserve_unit_loops
        )
        self._install(func_name, func)

    @instruction
    def reverse_compute_at(
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False
    ) -> None:
        func_name = self._same_func(block, loop)
        func = P.reverse_compute_at(
            self._func(func_name), self._block(block), self._loop(loop), preserve_unit_loops
        )
        self._install(func_name, func)

    @instruction
    def compute_inline(self, block: BlockRV) -> None:
        target = self._block(block)
        self._install(block.func_name, P.compute_inline(self._func(block.func_name), target))

    @instruction
    def reverse_compute_inline(self, block: BlockRV) -> None:
        target = self._block(block)
        func = P.reverse_compute_inline(self._func(block.func_name), target)
        self._install(block.func_name, func)

    # caches and reductions -------------------------------------------------------

    @instruction
    def cache_read(
        self, block: BlockRV, read_buffer_index: int, storage_scope: str = "global"
    ) -> BlockRV:
        target = self._block(block)
        func, name = P.cache_read(
            self._func(block.func_name), target, read_buffer_index, storage_scope
        )
        self._install(block.func_name, func)
        return BlockRV(name, block.func_name)

    @instruction
    def cache_write(
        self, block: BlockRV, write_buffer_index: int, storage_scope: str = "global"
    ) -> BlockRV:
        target = self._block(block)
        func, name = P.cache_write(
            self._func(block.func_name), target, write_buffer_index, storage_scope
        )
        self._install(block.func_name, func)
        return BlockRV(name, block.func_name)

    @instruction
    def storage_align(
        self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
    ) -> None:
        """Pad the ``buffer_index``-th buffer ``block`` writes so that the stride of
        ``axis`` is ``factor * k + offset`` elements (shared-memory bank conflicts);
        see ``primitives.storage_align``."""
        target = self._block(block)
        func = P.storage_align(
            self._func(block.func_name), target, buffer_index, axis, factor, offset
        )
        self._install(block.func_name, func)

    @instruction
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        func_name = self._same_func(block, loop)
        func, name = P.decompose_reduction(
            self._func(func_name), self._block(block), self._loop(loop)
        )
        self._install(func_name, func)
        return BlockRV(name, func_name)

    @instruction
    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor the reduction of the one block under ``loop`` over that loop into
        partial results (a new block, returned) and a write-back into the output."""
        target = self._loop(loop)
        func, name = P.rfactor(self._func(loop.func_name), target, factor_axis)
        self._install(loop.func_name, func)
        return BlockRV(name, loop.func_name)

    @instruction
    def transform_layout(
        self, block: BlockRV, buffer: tuple[str, int] | list[Any] | str, index_map: str
    ) -> BlockRV | None:
        """Store one buffer of ``block`` (``("read", k)``, ``("write", k)`` or its name)
        in the layout ``index_map`` gives it, such as ``"n, c, h, w -> n, c // 16, h,
        w, c % 16"``; for a parameter, returns the block that converts it.

        The map is text so that the trace keeps it as data (see ``IndexMap``)."""
        target = self._block(block)
        layout = IndexMap.parse(index_map)
        spec = tuple(buffer) if isinstance(buffer, list) else buffer
        func, name = P.transform_layout(self._func(block.func_name), target, spec, layout)
        self._install(block.func_name, func)
        return None if name is None else BlockRV(name, block.func_name)

    # sampling -------------------------------------------------------------------

    @instruction
    def sample_perfect_tile(
        self,
        loop: LoopRV,
        n: int,
        max_innermost_factor: int = 16,
        decision: Sequence[int] | None = None,
    ) -> list[ExprRV]:
        target = self._loop(loop)
        chosen = P.sample_perfect_tile(self._rng, target, n, max_innermost_factor, decision)
        self._decision = chosen
        return [ExprRV(v) for v in chosen]

    @instruction
    def sample_categorical(
        self,
        candidates: Sequence[int],
        probs: Sequence[float],
        decision: int | None = None,
    ) -> ExprRV:
        index = P.sample_categorical(self._rng, candidates, probs, decision)
        self._decision = index
        return ExprRV(int(candidates[index]))

    @instruction
    def sample_compute_location(
        self, block: BlockRV, decision: int | None = None
    ) -> LoopRV | RootLocation | InlineLocation:
        """A loop to compute ``block`` at; decision -1 is the root, -2 is inline,
        k >= 0 the k-th legal loop (outermost first)."""
        target = self._block(block)
        func = self._func(block.func_name)
        index, loop = P.sample_compute_location(self._rng, func, target, decision)
        self._decision = index
        if index == -1:
            return RootLocation()
        if index == -2:
            return InlineLocation()
        assert loop is not None, "a loop decision (k >= 0) comes with its loop"
        return LoopRV(loop.loop_var, block.func_name)


def _factor_value(factor: int | ExprRV | PrimExpr, loop: LoopRV) -> int:
    """The int a split factor stands for: an int, a sampled ExprRV or an IntImm."""
    if isinstance(factor, (ExprRV, IntImm)) or (
        isinstance(factor, int) and not isinstance(factor, bool)
    ):
        value = int(factor)
    else:
        raise ScheduleError(
            f"split of loop {loop.var.name!r}: factor {factor!r} is not an integer; give ints, "
            "None, or values from sample_perfect_tile"
        )
    if value <= 0:
        raise ScheduleError(f"split of loop {loop.var.name!r}: factor {value} must be positive")
    return value
