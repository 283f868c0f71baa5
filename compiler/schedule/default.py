"""The schedule a PrimFunc gets when nobody wrote one: parallel outer loops, vector
inner loops, and reductions turned so that a spatial loop runs innermost.

It reads the loop nest, not the operator. First, every elementwise block whose
result only elementwise blocks read (a bias add before an activation) is inlined
into its readers (``_inline_elementwise``), so a chain of them is one pass over
memory. Then, for every block whose loops are a plain nest (each loop the whole
body of the one above, the block at the bottom) it makes up to eight moves, each
with the ordinary Schedule primitives, so each is checked for legality by the
primitive itself and recorded in the trace:

1. **Reorder.** When the innermost loop is a reduction (matmul's ``k``, a
   convolution's window), the innermost spatial loop along which the written
   buffer is contiguous, and every read streams (see ``_streams``), goes
   innermost: ``C[i, j] += A[i, k] * B[k, j]`` becomes ``i, k, j``, and a
   convolution runs its output row innermost. A softmax sum, which reads a row
   across its reduction, stays as it is, and so does a reduction of at most
   ``SMALL_REDUCTION`` steps (a 3x3 pooling window) unless move 3 gives it a
   register tile (a blocked depthwise convolution's window).
2. **Split for threads.** When no loop outside the innermost one has an iteration
   per thread (a 1-d elementwise op, a column reduction), the innermost spatial
   loop is split into whole-vector chunks and the loop over chunks moved
   outermost (a split that does not divide adds a guard).
3. **Register tile.** When that innermost loop is short (at most
   ``MAX_TILE_VECTORS`` vectors: the channel block of a blocked convolution), one
   vector of it is too little work to hide the latency of the multiply-adds; a
   few iterations of an outer spatial loop that reuses the vector operand (the
   convolution's output columns) move inside the reduction, so that a tile of
   accumulators fills the vector registers (see ``_tile_registers``). Where the
   broadcast operand is reused across a second loop (the output channel blocks),
   the tile spans a few iterations of it too (see ``_tile_channels``).
4. **Vectorize.** When the innermost loop is spatial and the written buffer is
   contiguous along it, it is vectorized whole (see ``_vectorize_inner`` for why
   it is not first split by the vector lanes).
5. **Parallelize.** The leading spatial loops are fused, outermost first, until
   there are ``PARALLEL_GRAIN`` iterations per thread, and the fused loop runs in
   parallel, when the nest does enough work to pay for starting the threads.
6. **Accumulate in registers.** A register tile accumulates in a local buffer,
   written back after the reduction, its rows unrolled, so that LLVM keeps it in
   registers.
7. **Fold the epilogue.** The elementwise block that reads the written-back tile
   (a bias add and activation) computes from the registers instead of from a
   buffer the tile was written to (see ``_fuse_epilogue``).
8. **Split the init.** A reduction whose innermost loop is now spatial gets its
   initialization as a block of its own (``decompose_reduction``), so the vector
   loop does not test for the first reduction step.

A move the primitives refuse (``ScheduleError``) is dropped whole and the next one
is tried: the result is always a legal schedule of the same computation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np

from compiler.arith import same_expr
from compiler.arith.linear import stride
from compiler.arith.simplifier import simplify
from compiler.ir import expr as E
from compiler.ir.analysis import block_accesses, find_block_realize, substitute, uses_var
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.layout_free import is_conversion, layout_free_params
from compiler.ir.node import Node, visit
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterKind
from compiler.schedule import primitives as P
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import BlockRV, LoopRV
from compiler.schedule.layout_rewrite import rewrite_layout_free
from compiler.schedule.partition import rows_outside_channels
from compiler.schedule.primitives import dataflow
from compiler.schedule.schedule import SCHEDULED_ATTR, Schedule
from compiler.schedule.tile_transform import is_tile_transform, schedule_tile_transform
from compiler.target.llvm import LLVMTarget

# Parallel iterations per thread that the fusion of outer loops aims for, so that
# the threads' static chunks come out nearly even.
PARALLEL_GRAIN = 8
# Fewer loop iterations than this in a whole nest run serially: starting the
# OpenMP team (1-2 us, far more when another process holds a core) would cost
# more than it saves.
MIN_PARALLEL_WORK = 2**16
# A reduction this short (iterations inside the spatial loop that would move in)
# stays innermost: LLVM unrolls it whole and vectorizes the loop outside by itself,
# and moving the spatial loop in would only reload the output for every step.
SMALL_REDUCTION = 16
# The largest step between the elements consecutive iterations of a vectorized loop
# read: a stride-2 convolution vectorizes well, a column of a matrix does not.
MAX_READ_STRIDE = 2
# The most vectors of the innermost loop a register tile keeps. A longer loop that
# splits into whole vectors (a matmul's row, a dense layer's weight panel) is split,
# its rest moved outside the reduction: left whole, each of its vectors was a load for
# one multiply-add, and the default dense of a BERT layer (128x768 by 768x768) ran at
# 93 GFLOP/s on an AVX-512 Xeon, 221 with the tile; GEMM 1024^3 at 27, then 82.
MAX_TILE_VECTORS = 2
# Accumulator vectors a register tile needs to hide the multiply-add latency (two
# pipes of four cycles each).
MIN_ACCUMULATORS = 8
# The most output channel blocks a register tile spans (``_tile_channels``), and the
# vector registers it leaves to LLVM besides the accumulators, the channel blocks'
# vector operands and the broadcast value: 2 blocks by 14 pixels (31 of 32 AVX-512
# registers) ran ResNet-18's 56x56 and 28x28 convolutions 1.3-1.4x faster than 4 by 4
# on an AVX-512 Xeon, and its 14x14 ones 1.2x.
MAX_CHANNEL_GROUP = 4
SPARE_REGISTERS = 1
# The farthest apart, in elements, that a channel tile's broadcast operand may be
# read from one tile column to the next (a blocked convolution's neighbouring pixels
# are one block apart): a matrix's rows a row apart made BERT's 3072-deep dense 8 %
# slower with the tile.
MAX_BROADCAST_STRIDE = 64
# Intrinsics the LLVM backend emits as plain libm calls, which its loop vectorizer
# cannot widen: a vectorized loop around one only earns a warning.
_SCALAR_CALLS = frozenset(["erf"])


@dataclass(frozen=True)
class _Nest:
    """The loops of one block, outermost first, and what each does to the block:
    ``spatial[k]`` is True when loop ``k`` binds no reduce variable."""

    loops: tuple[For, ...]
    realize: BlockRealize

    @cached_property
    def spatial(self) -> tuple[bool, ...]:
        block = self.realize.block
        reduce_values = [
            value
            for iv, value in zip(block.iter_vars, self.realize.iter_values, strict=True)
            if iv.kind is IterKind.REDUCE
        ]
        return tuple(
            not any(uses_var(value, loop.loop_var) for value in reduce_values)
            for loop in self.loops
        )

    def extent(self, k: int) -> int | None:
        extent = self.loops[k].extent
        return extent.value if isinstance(extent, E.IntImm) else None

    def product(self, positions: Iterable[int]) -> int | None:
        """The product of these loops' extents; None when one is symbolic."""
        total = 1
        for k in positions:
            extent = self.extent(k)
            if extent is None:
                return None
            total *= extent
        return total

    @cached_property
    def ranges(self) -> dict[Var, Range]:
        return {loop.loop_var: Range(loop.min, loop.extent) for loop in self.loops}

    def bound(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        """``indices`` in the loop variables (each block variable replaced by its
        binding), simplified under the loops' ranges: an index that a fused reshape or
        transpose wrote as divisions and remainders of a flat position comes out as
        the affine form the strides are read from."""
        block = self.realize.block
        mapping = {
            iv.var: value
            for iv, value in zip(block.iter_vars, self.realize.iter_values, strict=True)
        }
        return tuple(simplify(substitute(i, mapping), self.ranges) for i in indices)

    def writes(self) -> list[tuple[PrimExpr, ...]]:
        return [self.bound(s.indices) for s in _stores(self.realize)]

    def reads(self, *, skip: Iterable[Buffer] = ()) -> list[tuple[PrimExpr, ...]]:
        """The indices of every load, in loop variables; none of the buffers ``skip``."""
        skipped = {id(b) for b in skip}
        return [indices for buffer, indices in self.loads() if id(buffer) not in skipped]

    def loads(self) -> list[tuple[Buffer, tuple[PrimExpr, ...]]]:
        """Every load of the block: its buffer and its indices in loop variables."""
        found: list[tuple[Buffer, tuple[PrimExpr, ...]]] = []

        def collect(n: Node) -> bool | None:
            if isinstance(n, BlockRealize) and n is not self.realize:
                return False
            if isinstance(n, E.BufferLoad):
                found.append((n.buffer, self.bound(n.indices)))
            return None

        visit(self.realize.block.body, collect)
        return found


def default_schedule(
    func: PrimFunc,
    *,
    target: str | LLVMTarget = "llvm",
    min_parallel_work: int = MIN_PARALLEL_WORK,
) -> PrimFunc:
    """``func`` with the default schedule applied, marked as scheduled.

    ``target`` gives the thread count and vector width; ``min_parallel_work`` is the
    fewest loop iterations of a nest that make it worth running in parallel.
    """
    sch = schedule_by_default(func, target=target, min_parallel_work=min_parallel_work)
    return sch.mod["main"].with_attr(SCHEDULED_ATTR, True)


def apply_default_schedule(mod: IRModule, *, target: str | LLVMTarget = "llvm") -> IRModule:
    """``mod`` with every function that ``is_unscheduled`` given the default schedule;
    what ``compiler.build`` does unless told ``default_schedule=False``."""
    functions = {
        name: default_schedule(func, target=target) if is_unscheduled(func) else func
        for name, func in mod.items()
    }
    return IRModule(functions)


def is_unscheduled(func: PrimFunc) -> bool:
    """No Schedule primitive has transformed ``func`` (it lacks ``SCHEDULED_ATTR``) and
    nobody set a loop kind or annotation by hand: every loop is serial and plain."""
    if func.attrs.get(SCHEDULED_ATTR):
        return False
    plain = True

    def check(n: Node) -> bool | None:
        nonlocal plain
        if isinstance(n, For) and (
            n.kind is not ForKind.SERIAL or n.annotations or n.thread_binding is not None
        ):
            plain = False
        return plain

    visit(func.body, check)
    return plain


def schedule_by_default(
    func: PrimFunc,
    *,
    target: str | LLVMTarget = "llvm",
    min_parallel_work: int = MIN_PARALLEL_WORK,
) -> Schedule:
    """The Schedule of ``default_schedule``, whose trace replays it (a tuner's baseline)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"default_schedule takes a PrimFunc, not {type(func).__name__}")
    llvm_target = LLVMTarget.parse(target)
    sch = Schedule(func)
    _inline_elementwise(sch)
    for name in P.block_names(sch.mod["main"]):
        if name not in P.block_names(sch.mod["main"]):
            continue  # an epilogue fused into the write-back of a block before it
        block = sch.get_block(name)
        nest = _nest(sch, block)
        if nest is None or is_conversion(nest.realize.block):
            continue
        plan = _Plan(
            threads=llvm_target.threads,
            lanes=_vector_lanes(nest, llvm_target),
            parallel=llvm_target.threads > 1 and _work(nest) >= min_parallel_work,
            panel_bytes=llvm_target.capabilities.l2_bytes // 2,
            registers=llvm_target.vector_registers,
        )
        if is_tile_transform(nest.realize.block):
            sch = _attempt(sch, partial(_tile_transform, block=block, plan=plan))
            continue
        sch = _attempt(sch, partial(_reorder_reduction, block=block, plan=plan))
        if _sums_in_vectors(_nest(sch, block), plan):
            factored = _attempt(sch, partial(_vector_partial_sums, block=block, plan=plan))
            if factored is not sch:
                sch = factored
                continue
        sch = _attempt(sch, partial(_split_weight_panels, block=block, plan=plan))
        sch = _attempt(sch, partial(_rewrite_weights, block=block))
        sch = _attempt(sch, partial(_split_for_threads, block=block, plan=plan))
        sch = _attempt(sch, partial(_tile_registers, block=block, plan=plan))
        sch = _attempt(sch, partial(_vectorize_inner, block=block))
        for fused in _parallel_choices(sch, block, plan):
            before = sch
            sch = _attempt(sch, partial(_parallelize_outer, block=block, count=fused))
            if sch is not before:
                break
        sch = _attempt(sch, partial(_accumulate_in_registers, block=block))
        sch = _attempt(sch, partial(_fuse_epilogue, block=block))
        sch = _attempt(sch, partial(_split_init, block=block))
    return sch


@dataclass(frozen=True)
class _Plan:
    """What the target and the nest's size allow for one block."""

    threads: int
    lanes: int
    parallel: bool
    panel_bytes: int
    registers: int

    @property
    def want(self) -> int:
        return self.threads * PARALLEL_GRAIN


def _attempt(sch: Schedule, move: Callable[[Schedule], None]) -> Schedule:
    """``sch`` after ``move``, or ``sch`` itself when a primitive refused part of it."""
    trial = sch.copy()
    try:
        move(trial)
    except ScheduleError:
        return sch
    return trial


# the moves ---------------------------------------------------------------------------


def _inline_elementwise(sch: Schedule) -> None:
    """Inline each intermediate spatial block that only spatial blocks read, each at
    exactly the element it writes (a convolution's bias add read by its clip, GELU's
    steps): the chain becomes one loop nest that reads and writes memory once, where
    each block was a pass of its own. A value that a reduction reads (a padded
    input, a softmax's exponentials) or that is read across a window stays: inlined
    there it would be recomputed, or become a select, in the innermost loop. On
    MobileNetV2's default schedules: 0.905 of the time, ResNet-18 0.973, a BERT layer
    0.99 (its GELU 0.32 -> 0.09 ms)."""
    params = {id(b) for b in sch.mod["main"].params}
    for name in P.block_names(sch.mod["main"]):
        func = sch.mod["main"]
        realize = find_block_realize(func.body, name)
        if realize is None or not _is_spatial(realize.block):
            continue
        stores = _stores(realize)
        if len(stores) != 1 or id(stores[0].buffer) in params:
            continue
        if not _read_elementwise_by_spatial_blocks(func, stores[0].buffer):
            continue
        try:
            sch.compute_inline(sch.get_block(name))
        except ScheduleError:
            continue  # the primitive refused and left the schedule as it was


def _is_spatial(block: Block) -> bool:
    return block.init is None and all(iv.kind is not IterKind.REDUCE for iv in block.iter_vars)


def _read_elementwise_by_spatial_blocks(func: PrimFunc, buffer: Buffer) -> bool:
    """Whether some block reads ``buffer`` and every block that does is spatial and
    loads it only at its own block variables, in order (``Y[i, j] = f(X[i, j])``)."""
    readers: list[bool] = []

    def look(n: Node) -> bool | None:
        if not isinstance(n, BlockRealize) or n.block.name == "root":
            return None
        block = n.block
        own = [iv.var for iv in block.iter_vars]
        loads: list[E.BufferLoad] = []

        def collect(m: Node) -> bool | None:
            if isinstance(m, E.BufferLoad) and m.buffer is buffer:
                loads.append(m)
            return None

        visit(block.body, collect)
        if loads:
            at_own = all(
                len(load.indices) == len(own)
                and all(index is var for index, var in zip(load.indices, own, strict=True))
                for load in loads
            )
            readers.append(at_own and _is_spatial(block))
        return None

    visit(func.body, look)
    return bool(readers) and all(readers)


def _reorder_reduction(sch: Schedule, block: BlockRV, plan: _Plan) -> None:
    """Move the innermost spatial loop along which the block writes consecutive
    elements, and every read streams, inside the reduction loops. A constant weight
    (``compiler.ir.layout_free``) need not stream: it is then stored in the order the
    loops read it (dense's ``W[j, k]`` as ``W[k, j]``), converted once by the build."""
    nest = _nest(sch, block)
    if nest is None or nest.spatial[-1]:
        return
    weights = layout_free_params(sch.mod[block.func_name])
    writes, reads = nest.writes(), nest.reads(skip=weights)
    candidates = [
        k
        for k, loop in enumerate(nest.loops)
        if nest.spatial[k]
        and nest.extent(k) != 1
        and all(_contiguous(w, loop.loop_var) for w in writes)
        and all(_streams(r, loop.loop_var) for r in reads)
    ]
    if not candidates:
        return
    chosen = candidates[-1]
    inside = nest.product(range(chosen + 1, len(nest.loops)))
    if inside is not None and inside <= SMALL_REDUCTION and not _gets_tile(nest, chosen, plan):
        return
    order = [k for k in range(len(nest.loops)) if k != chosen] + [chosen]
    loops = sch.get_loops(block)
    sch.reorder(*(loops[k] for k in order))


def _sums_in_vectors(nest: _Nest | None, plan: _Plan) -> bool:
    """Whether the nest is a product summed along its innermost loop, with no spatial
    loop that could go inside it, and both factors rows along that loop
    (``C[i, j] = sum_k A[i, k] * B[j, k]``: an attention score's ``Q @ K^T``, the
    transpose fused into the reads), a whole number of vectors long and at least two."""
    if nest is None or nest.spatial[-1] or not any(nest.spatial):
        return False
    extent = nest.extent(len(nest.loops) - 1)
    if extent is None or extent % plan.lanes or extent < 2 * plan.lanes:
        return False
    k = nest.loops[-1].loop_var
    along = [r for r in nest.reads() if any(uses_var(i, k) for i in r)]
    return len(along) >= 2 and all(_contiguous(r, k) for r in along)


def _vector_partial_sums(sch: Schedule, block: BlockRV, plan: _Plan) -> None:
    """Sum a ``_sums_in_vectors`` nest one vector of partial results per output: its
    innermost loop split by the vector lanes, the inner piece factored out
    (``rfactor``) and vectorized, the outer spatial loops but the last in parallel,
    then the lanes added up. Run as written, the sum is a chain of scalar
    multiply-adds (a BERT layer's scores: 3.5 ms; 1.2 ms so)."""
    nest = _nest(sch, block)
    assert nest is not None, "_sums_in_vectors took a plain nest"
    leading = _leading_spatial(nest)
    loops = sch.get_loops(block)
    _, lanes = sch.split(loops[-1], [None, plan.lanes])
    factored = sch.get_loops(sch.rfactor(lanes, -1))
    sch.vectorize(factored[-1])
    outer = factored[: len(leading) - 1]
    if plan.parallel and outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])


def _split_weight_panels(sch: Schedule, block: BlockRV, plan: _Plan) -> None:
    """A reduction that reads a constant weight across its vector loop (``j``) and
    reuses it across outer rows (``i``) re-reads the whole weight for every row; when
    the weight is larger than half the L2 cache, split ``j`` into panels whose slice
    of the weight fits it and run the panels outermost, so each panel stays cached
    for all the rows (a GEMM's panel blocking)."""
    nest = _nest(sch, block)
    if nest is None or not nest.spatial[-1]:
        return
    inner = len(nest.loops) - 1
    along = nest.loops[inner].loop_var
    weights = [
        w for w in layout_free_params(sch.mod[block.func_name]) if _read_along(nest, w, along)
    ]
    if not weights:
        return
    width = nest.extent(inner)
    rows = nest.product(k for k in range(inner) if nest.spatial[k])
    depth = nest.product(k for k in range(inner) if not nest.spatial[k])
    if width is None or rows is None or depth is None or rows < 2:
        return
    element = max(np.dtype(w.dtype).itemsize for w in weights)
    if depth * width * element <= plan.panel_bytes:
        return
    fitting = plan.panel_bytes // (depth * element) // plan.lanes * plan.lanes
    panels = [p for p in range(fitting, plan.lanes - 1, -plan.lanes) if width % p == 0]
    if not panels:
        return
    loops = sch.get_loops(block)
    outer, _ = sch.split(loops[-1], [None, panels[0]])
    sch.reorder(outer, *loops[:-1])


def _rewrite_weights(sch: Schedule, block: BlockRV) -> None:
    """Store the constant weights the block reads in the order its loops read them."""
    rewrite_layout_free(sch, block.func_name, block=block.name)


def _read_along(nest: _Nest, buffer: Buffer, var: Var) -> bool:
    """Whether the block loads ``buffer`` at an index that moves with loop ``var``."""
    found = False

    def collect(n: Node) -> bool | None:
        nonlocal found
        if isinstance(n, E.BufferLoad) and n.buffer is buffer:
            bound = nest.bound(n.indices)
            found = found or any(uses_var(index, var) for index in bound)
        return None

    visit(nest.realize.block.body, collect)
    return found


def _split_for_threads(sch: Schedule, block: BlockRV, plan: _Plan) -> None:
    """When no loop outside the innermost one has an iteration for every thread (a
    1-d elementwise op, a column reduction), split the innermost spatial loop into
    chunks and move the loop over chunks outward, so that it can run in parallel.
    Chunks are a size that divides the loop (``_thread_chunk``)."""
    nest = _nest(sch, block)
    if nest is None or not plan.parallel or not nest.spatial[-1]:
        return
    outer = _leading_spatial(nest)[: len(nest.loops) - 1]
    outside = nest.product(outer)
    if outside is None or outside >= plan.threads:
        return
    extent = nest.extent(len(nest.loops) - 1)
    if extent is None or extent < 2 * plan.threads * plan.lanes:
        return
    parts = -(-plan.want // max(1, outside))
    chunk = _thread_chunk(extent, plan.lanes * -(-extent // (plan.lanes * parts)), plan)
    loops = sch.get_loops(block)
    chunks, _inner = sch.split(loops[-1], [None, chunk])
    rest = loops[len(outer) : -1]
    if rest:
        sch.reorder(chunks, *rest)


def _thread_chunk(extent: int, chunk: int, plan: _Plan) -> int:
    """A chunk of about ``chunk`` elements (whole vectors) of a loop of ``extent``: whole
    vectors that divide the loop where a nearby size does, larger or smaller; else
    the divisor nearest ``chunk`` that leaves every thread a chunk, its last vector
    partly full (a batch-1 dense into 1000 classes on AVX-512: chunks of 50, 40 us;
    of 64, each element tested against the end, 220 us); else ``chunk``, guarded."""
    lanes = plan.lanes
    nearby = [*range(chunk, 2 * chunk, lanes), *range(chunk - lanes, 0, -lanes)]
    dividing = [c for c in nearby if extent % c == 0]
    if dividing:
        return dividing[0]
    pairs = ((k, extent // k) for k in range(1, math.isqrt(extent) + 1) if extent % k == 0)
    divisors = [d for pair in pairs for d in pair if lanes <= d <= extent // plan.threads]
    return min(divisors, key=lambda d: (abs(d - chunk), -d), default=chunk)


def _tile_registers(sch: Schedule, block: BlockRV, plan: _Plan) -> None:
    """Give a reduction whose innermost loop is a vector loop (``v``: at most
    ``MAX_TILE_VECTORS`` vectors, or whole vectors) a register tile: ``d`` iterations
    of the innermost outer spatial loop ``r`` that reuses the operand read along ``v``
    move inside the reduction, just outside ``v`` (``r0 ... R ... r1 v``), and ``v``
    keeps ``w`` elements of its own there (the rest, ``v0``, moves out too). ``d`` and
    ``w`` fill the vector registers: ``d * w / lanes`` accumulators, plus ``w / lanes``
    for the operand loaded along ``v`` and one for the value broadcast along it. Two vectors
    wide come first (half the broadcasts per multiply-add) when that still gives
    ``MIN_ACCUMULATORS``; on AVX2 a blocked 3x3 convolution ran at 145-165 GFLOP/s
    with 4 columns by 16 channels, 90-106 with 2 by 16 or 1 by 16, and 116-153 with 7
    or 14 columns by 8 channels where the columns do not split by 4. The nest stays
    plain: the block accumulates in a local buffer, copied out at the root until
    ``_accumulate_in_registers`` moves the copy under the tile, after
    parallelization (``cache_write`` must come before the loops are fused)."""
    nest = _nest(sch, block)
    if nest is None or nest.realize.block.init is None or not nest.spatial[-1]:
        return
    inner = len(nest.loops) - 1
    width = nest.extent(inner)
    if width is None or False not in nest.spatial:
        return
    if width > MAX_TILE_VECTORS * plan.lanes and width % plan.lanes:
        return
    first_reduce = nest.spatial.index(False)
    if not all(not nest.spatial[k] for k in range(first_reduce, inner)):
        return
    rows = _reuse_rows(nest, nest.loops[inner].loop_var, range(first_reduce))
    if not rows:
        return
    row = rows[-1]
    # the tile leaves every thread an iteration of the loops outside it
    others = nest.product(k for k in range(first_reduce) if k != row) or 1
    least = -(-plan.threads // others) if plan.parallel else 1
    columns, vector = _register_tile(nest.extent(row) or 1, width, plan, least)
    vectors = -(-vector // plan.lanes)
    if _tile_channels(sch, block, nest, row, plan, _load_cost(vectors, columns)):
        return
    if columns == 1:
        return
    loops = sch.get_loops(block)
    _, row_inner = sch.split(loops[row], [None, columns])
    moved: list[LoopRV] = list(loops[row + 1 : first_reduce])
    vector_loop = loops[inner]
    if vector < width:
        vector_outer, vector_loop = sch.split(vector_loop, [None, vector])
        moved.append(vector_outer)
    sch.reorder(*moved, *loops[first_reduce:inner], row_inner, vector_loop)
    sch.cache_write(block, 0, "local")


def _tile_channels(
    sch: Schedule, block: BlockRV, nest: _Nest, row: int, plan: _Plan, to_beat: float
) -> bool:
    """Give the register tile a second dimension where one fits: ``g`` iterations of
    a loop that the operand read along the vector loop moves with and the broadcast
    operand does not (a blocked convolution's output channel blocks, ``_channel_loop``)
    move inside the reduction beside the ``d`` columns, so that each broadcast value
    feeds ``g`` multiply-adds and each vector operand ``d``: ``R... d g v``, a tile of
    ``g * d`` accumulators (``_channel_tile``). This is the shape of onnxruntime's
    NCHWc kernels (up to four channel blocks by a few pixels). The channel blocks run
    inside the columns, so that LLVM keeps the ``g`` vector operands in registers for
    the whole tile and each broadcast only for its ``g`` multiply-adds; the other way
    round it kept the ``d`` broadcasts instead, and a tile of 2 blocks by 14 columns
    spilled and ran at half the speed. It tiles only where its ``_load_cost`` is below
    ``to_beat``, the cost of the tile of columns alone. Returns whether it tiled; the
    block then accumulates in a local buffer, as ``_tile_registers`` leaves it."""
    first_reduce = nest.spatial.index(False)
    channel = _channel_loop(nest, row, first_reduce)
    if channel is None:
        return False
    others = nest.product(k for k in range(first_reduce) if k not in (row, channel)) or 1
    width = nest.extent(len(nest.loops) - 1) or 1
    tile = _channel_tile(
        nest.extent(row) or 1, nest.extent(channel) or 1, width, plan, others, to_beat
    )
    if tile is None:
        return False
    columns, group = tile
    loops = sch.get_loops(block)
    _, row_inner = sch.split(loops[row], [None, columns])
    _, channel_inner = sch.split(loops[channel], [None, group])
    loops = sch.get_loops(block)
    names = [loop.var.name for loop in loops]
    tiled = {channel_inner.var.name, row_inner.var.name, names[-1]}
    first = min(names.index(channel_inner.var.name), names.index(row_inner.var.name))
    moved_out = [loop for loop in loops[first:] if loop.var.name not in tiled]
    sch.reorder(*moved_out, row_inner, channel_inner, loops[-1])
    sch.cache_write(block, 0, "local")
    return True


def _channel_loop(nest: _Nest, row: int, first_reduce: int) -> int | None:
    """The innermost spatial loop outside the reduction, not ``row``, that the operand
    read along the vector loop moves with and the broadcast operand does not (a
    blocked convolution's output channel blocks), when the broadcast operand's
    consecutive rows lie close together (a convolution's neighbouring pixels, not a
    matrix's rows a whole row apart)."""
    along = nest.loops[-1].loop_var
    row_var = nest.loops[row].loop_var
    loads = nest.loads()
    vector_operands = [i for _, i in loads if any(uses_var(x, along) for x in i)]
    broadcast = [(b, i) for b, i in loads if not any(uses_var(x, along) for x in i)]
    if not broadcast or not vector_operands:
        return None
    for buffer, indices in broadcast:
        step = _element_stride(buffer, indices, row_var)
        if step is None or step > MAX_BROADCAST_STRIDE:
            return None
    found = None
    for k in range(first_reduce):
        var = nest.loops[k].loop_var
        if k == row or (nest.extent(k) or 1) < 2:
            continue
        moves_vector = any(any(uses_var(x, var) for x in i) for i in vector_operands)
        moves_broadcast = any(any(uses_var(x, var) for x in i) for _, i in broadcast)
        if moves_vector and not moves_broadcast:
            found = k
    return found


def _element_stride(buffer: Buffer, indices: tuple[PrimExpr, ...], var: Var) -> int | None:
    """Elements between the loads of consecutive ``var``; None when not constant."""
    total, inner = 0, 1
    for index, extent in zip(reversed(indices), reversed(buffer.shape), strict=True):
        step = stride(index, var)
        if step is None or not isinstance(extent, E.IntImm):
            return None
        total += step * inner
        inner *= extent.value
    return abs(total)


def _channel_tile(
    rows: int, channels: int, width: int, plan: _Plan, others: int, to_beat: float
) -> tuple[int, int] | None:
    """(columns, channel blocks) of ``_tile_channels``'s tile, or None when no tile
    of at least two blocks fits. Of the tiles whose accumulators (``blocks * columns``
    per vector of the ``width`` loop) reach ``MIN_ACCUMULATORS`` and, with a vector
    operand per block and the broadcast value, leave ``SPARE_REGISTERS``, and that
    leave the threads ``PARALLEL_GRAIN`` iterations each of the ``others`` loops and
    the tile's outer loops, and whose ``_load_cost`` is below ``to_beat``: the least
    ``_load_cost``, then the most accumulators."""
    vectors = -(-width // plan.lanes)
    budget = plan.registers - SPARE_REGISTERS - 1
    best: tuple[tuple[float, int], tuple[int, int]] | None = None
    for group in range(2, min(channels, MAX_CHANNEL_GROUP) + 1):
        for columns in range(1, rows + 1):
            accumulators = group * columns * vectors
            if channels % group or rows % columns or accumulators < MIN_ACCUMULATORS:
                continue
            if accumulators + group * vectors > budget:
                continue
            if plan.parallel and others * (channels // group) * (rows // columns) < plan.want:
                continue
            key = (_load_cost(group * vectors, columns), -accumulators)
            if key[0] >= to_beat:
                continue
            if best is None or key < best[0]:
                best = (key, (columns, group))
    return None if best is None else best[1]


def _load_cost(vectors: int, columns: int) -> float:
    """Loads per multiply-add of a register tile of ``columns`` by ``vectors`` vector
    accumulators, the vector loads counted twice. Each reduction step loads the
    ``vectors`` and broadcasts one value per column: the vector operands are a
    convolution's weights, streamed through the caches once per tile, where the
    broadcasts come from a few input rows that stay in the nearest one."""
    return (2 * vectors + columns) / (vectors * columns)


def _reuse_rows(nest: _Nest, along: Var, positions: Iterable[int]) -> list[int]:
    """The loops at ``positions`` (of more than one iteration) that some operand read
    along ``along`` does not move with: the rows a register tile reuses it across."""
    operands = [r for r in nest.reads() if any(uses_var(i, along) for i in r)]
    return [
        k
        for k in positions
        if (nest.extent(k) or 1) > 1
        and any(not any(uses_var(i, nest.loops[k].loop_var) for i in r) for r in operands)
    ]


def _gets_tile(nest: _Nest, chosen: int, plan: _Plan) -> bool:
    """Whether loop ``chosen``, moved innermost, gets a register tile
    (``_tile_registers``): a short reduction (a blocked depthwise convolution's or
    pooling's window) then need not stay innermost, as the tile's outputs stay in
    registers across it."""
    extent = nest.extent(chosen)
    if extent is None or extent > MAX_TILE_VECTORS * plan.lanes:
        return False
    others = [k for k in range(len(nest.loops)) if nest.spatial[k] and k != chosen]
    return bool(_reuse_rows(nest, nest.loops[chosen].loop_var, others))


def _register_tile(rows: int, width: int, plan: _Plan, least: int) -> tuple[int, int]:
    """(columns, elements of the vector loop) of ``_tile_registers``'s tile, leaving
    at least ``least`` iterations of the rows outside it."""
    options = []
    for vectors in range(min(MAX_TILE_VECTORS, max(1, width // plan.lanes)), 0, -1):
        elements = min(width, vectors * plan.lanes)
        if width % elements:
            continue
        most = (plan.registers - 1 - vectors) // vectors
        columns = max(
            (d for d in range(1, min(rows, most) + 1) if rows % d == 0 and rows // d >= least),
            default=1,
        )
        options.append((columns * vectors, columns, elements))
    if not options:
        return 1, width
    enough = [o for o in options if o[0] >= MIN_ACCUMULATORS]
    _, columns, elements = enough[0] if enough else max(options)
    return columns, elements


def _vectorize_inner(sch: Schedule, block: BlockRV) -> None:
    """Vectorize the innermost loop, whole, when it is spatial and the block writes
    consecutive elements along it. LLVM picks the vector width and handles the
    remainder; splitting by the lanes first, which would hand it loops of exactly
    one vector, made it fully unroll them and vectorize the loop outside with
    gathers instead (up to 18x slower on an AVX-512 host, 2x on AVX2)."""
    nest = _nest(sch, block)
    if nest is None or not nest.spatial[-1] or nest.extent(len(nest.loops) - 1) == 1:
        return
    inner = nest.loops[-1].loop_var
    if (
        all(_contiguous(w, inner) for w in nest.writes())
        and all(_streams(r, inner) for r in nest.reads())
        and not _calls_scalar(nest)
    ):
        sch.vectorize(sch.get_loops(block)[-1])


def _parallel_choices(sch: Schedule, block: BlockRV, plan: _Plan) -> list[int]:
    """How many leading loops to fuse and parallelize, best first: as few as reach
    ``PARALLEL_GRAIN`` iterations a thread, then fewer in case the primitives refuse."""
    nest = _nest(sch, block)
    if nest is None or not plan.parallel:
        return []
    leading = _leading_spatial(nest)
    if leading and nest.loops[len(leading) - 1].kind is not ForKind.SERIAL:
        leading = leading[:-1]  # the vectorized innermost loop
    product, count = 1, 0
    for k in leading:
        if product >= plan.want:
            break
        product, count = product * (nest.extent(k) or plan.want), count + 1
    if product < 2:
        return []
    return list(range(count, 0, -1))


def _parallelize_outer(sch: Schedule, block: BlockRV, count: int) -> None:
    loops = rows_outside_channels(sch, sch.get_loops(block)[:count])
    fused = sch.fuse(*loops) if count > 1 else loops[0]
    sch.parallel(fused)


def _tile_transform(sch: Schedule, block: BlockRV, plan: _Plan) -> None:
    """A Winograd transform: its loops over one tile innermost and unrolled, a blocked
    output's channel block vectorized below them (``compiler.schedule.tile_transform``),
    the loops over tiles fused in parallel."""
    outer = schedule_tile_transform(sch, block, vector_channels=True)
    if plan.parallel and outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])


def _accumulate_in_registers(sch: Schedule, block: BlockRV) -> None:
    """A register tile of ``_tile_registers`` (a reduction into a local buffer, its
    loops ending in ``R... r1 v`` or ``R... c1 r1 v``) gets its write-back right after
    its reduction, its initialization split out and its rows unrolled: LLVM then keeps
    the tile in vector registers instead of reloading the output for every reduction
    step."""
    nest = _nest(sch, block)
    if nest is None or nest.realize.block.init is None or len(nest.loops) < 3:
        return
    tiled = 3 if len(nest.loops) >= 4 and nest.spatial[-3] and not nest.spatial[-4] else 2
    if not all(nest.spatial[-tiled:]) or nest.spatial[-tiled - 1]:
        return
    stores = _stores(nest.realize)
    if not stores or stores[0].buffer.scope != "local":
        return
    siblings = sch.get_child_blocks(sch.get_block("root", block.func_name))
    names = [b.name for b in siblings]
    write_back = siblings[names.index(block.name) + 1]
    first_reduce = nest.spatial.index(False)
    loops = sch.get_loops(block)
    sch.reverse_compute_at(write_back, loops[first_reduce - 1])
    sch.decompose_reduction(block, loops[first_reduce])
    for loop in loops[-tiled:-1]:
        sch.unroll(loop)


def _fuse_epilogue(sch: Schedule, block: BlockRV) -> None:
    """The elementwise blocks that read a register tile's written-back result (a
    convolution's bias add and activation; a dense layer's bias add and then the GELU
    that reads the sum twice) are folded into the write-back one after another
    (``reverse_compute_inline``), whose rows are unrolled and whose vector loop is
    vectorized: the tile is stored once, finished, from the registers, instead of
    written whole to memory and read back by a pass of its own. Nothing happens
    unless ``_accumulate_in_registers`` gave the block a write-back.

    An epilogue that reads another tensor of the output's size (a residual add)
    stays a pass of its own: ResNet-18's 56x56 residual convolution ran 1.5x slower
    with it folded in, and the whole model 4 % slower. MobileNetV2's default
    schedules ran 0.79-0.81x onnxruntime's speed with the other epilogues folded in,
    0.64-0.66x before, ResNet-18's 0.83-0.84x against 0.82-0.86x, a BERT layer's
    unchanged (``-mcpu=znver5``, onnxruntime 1.32 beside each)."""
    func = sch.mod[block.func_name]
    realize = find_block_realize(func.body, block.name)
    stores = [] if realize is None else _stores(realize)
    if len(stores) != 1 or stores[0].buffer.scope != "local":
        return
    write_backs = [r for r in dataflow.readers(func, stores[0].buffer) if r is not realize]
    if len(write_backs) != 1 or len(_stores(write_backs[0])) != 1:
        return
    name = write_backs[0].block.name
    folded = False
    while (reader := _epilogue_of(sch, name, block.func_name)) is not None:
        sch.reverse_compute_inline(sch.get_block(reader, block.func_name))
        folded = True
    if not folded:
        return
    loops = sch.get_loops(sch.get_block(name, block.func_name))
    sch.vectorize(loops[-1])
    shared = {loop.var.name for loop in sch.get_loops(block)}
    for loop in loops[:-1]:
        if loop.var.name not in shared:
            sch.unroll(loop)


def _epilogue_of(sch: Schedule, write_back: str, func_name: str) -> str | None:
    """The name of the one block that reads what ``write_back`` writes, when it reads no
    other tensor of that size (``_fuse_epilogue``); an activation fused after a bias
    add (GELU) is the next one once the add is folded in."""
    func = sch.mod[func_name]
    realize = find_block_realize(func.body, write_back)
    stores = [] if realize is None else _stores(realize)
    if len(stores) != 1:
        return None
    written = stores[0].buffer
    readers = [r for r in dataflow.readers(func, written) if r is not realize]
    if len(readers) != 1:
        return None
    reader = readers[0].block
    others = [b for b in dataflow.reads_of(reader) if b is not written]
    if any(_elements(b) >= _elements(written) for b in others):
        return None
    points = [[r.min for r in a.region] for a in block_accesses(reader)[0] if a.buffer is written]
    if any(not all(map(same_expr, points[0], p)) for p in points[1:]):
        return None  # read across a window: not one element per point
    return reader.name


def _elements(buffer: Buffer) -> float:
    """Elements of ``buffer``; a symbolic extent counts as large."""
    extents = [e.value if isinstance(e, E.IntImm) else math.inf for e in buffer.shape]
    return math.prod(extents)


def _split_init(sch: Schedule, block: BlockRV) -> None:
    """A reduction with a spatial loop innermost would test "first step?" in every
    iteration of its vector loop; give the initialization its own loop nest, just
    outside the outermost reduction loop."""
    nest = _nest(sch, block)
    if nest is None or nest.realize.block.init is None or not nest.spatial[-1]:
        return
    first_reduce = nest.spatial.index(False) if False in nest.spatial else None
    if first_reduce is not None:
        sch.decompose_reduction(block, sch.get_loops(block)[first_reduce])


# reading the nest ----------------------------------------------------------------------


def _nest(sch: Schedule, block: BlockRV) -> _Nest | None:
    """The block's loops when they form a plain nest down to it, else None."""
    func = sch.mod[block.func_name]
    realize = find_block_realize(func.body, block.name)
    if realize is None:
        return None
    loops = tuple(P.loops_above(func, block.name))
    if not loops:
        return None
    for outer, inner in zip(loops, (*loops[1:], realize), strict=True):
        if outer.body is not inner:
            return None
    return _Nest(loops, realize)


def _leading_spatial(nest: _Nest) -> list[int]:
    """The positions of the serial spatial loops at the top of the nest."""
    leading = []
    for k, loop in enumerate(nest.loops):
        if not nest.spatial[k] or loop.kind not in (ForKind.SERIAL, ForKind.VECTORIZED):
            break
        leading.append(k)
    return leading


def _work(nest: _Nest) -> float:
    """Iterations of the whole nest; a symbolic extent counts as large."""
    total = nest.product(range(len(nest.loops)))
    return math.inf if total is None else total


def _vector_lanes(nest: _Nest, target: LLVMTarget) -> int:
    """Elements of the written buffer's dtype in one vector register."""
    stores = _stores(nest.realize)
    dtype = stores[0].buffer.dtype if stores else "float32"
    bits = 8 if dtype == "bool" else int("".join(c for c in dtype if c.isdigit()))
    return max(1, target.vector_bits // bits)


def _calls_scalar(nest: _Nest) -> bool:
    found = False

    def look(n: Node) -> bool | None:
        nonlocal found
        found = found or (isinstance(n, E.Call) and n.op in _SCALAR_CALLS)
        return not found

    visit(nest.realize.block.body, look)
    return found


def _stores(realize: BlockRealize) -> list[BufferStore]:
    found: list[BufferStore] = []

    def collect(n: Node) -> bool | None:
        if isinstance(n, BlockRealize) and n is not realize:
            return False
        if isinstance(n, BufferStore):
            found.append(n)
        return None

    visit(realize.block.body, collect)
    return found


def _contiguous(indices: tuple[PrimExpr, ...], var: Var) -> bool:
    """Consecutive values of ``var`` touch consecutive elements (row-major)."""
    if not indices:
        return False
    *outer, last = indices
    return stride(last, var) == 1 and all(stride(i, var) == 0 for i in outer)


def _streams(indices: tuple[PrimExpr, ...], var: Var) -> bool:
    """Consecutive values of ``var`` read the same element, or elements at most
    ``MAX_READ_STRIDE`` apart in the last dimension: vector loads and shuffles, not
    gathers."""
    if not indices:
        return True
    *outer, last = indices
    step = stride(last, var)
    return (
        step is not None
        and 0 <= step <= MAX_READ_STRIDE
        and all(stride(i, var) == 0 for i in outer)
    )
