"""Helpers the templates share: reading loops and blocks, constant weights, and
parallelizing."""

from __future__ import annotations

import itertools

from compiler.ir.expr import IntImm
from compiler.ir.layout_free import layout_free_params
from compiler.schedule import BlockRV, LoopRV, Schedule
from compiler.schedule.partition import rows_outside_channels
from compiler.schedule.primitives.dataflow import readers, writes_of
from compiler.target.llvm import LLVMTarget
from tuner.space.base import SpaceError
from tuner.space.config import ConfigEntity

# The micro-kernel's rows: with a panel of two vectors this many rows keep their
# accumulators in the 16 vector registers of AVX2.
MAX_KERNEL_ROWS = 8
# The widest vectorized panel, in vector registers.
MAX_PANEL_VECTORS = 8


def cpu_target(cfg: ConfigEntity) -> LLVMTarget:
    """The CPU a CPU template schedules for (the registry gives it only CPU targets)."""
    target = cfg.target
    assert isinstance(target, LLVMTarget), f"a CPU template got the target {target}"
    return target


def extent(sch: Schedule, loop: LoopRV) -> int:
    """The constant extent of ``loop``: templates tile loops of known trip count."""
    loop_extent = sch.get(loop).extent
    if not isinstance(loop_extent, IntImm):
        raise SpaceError(
            f"loop {loop.var.name!r} has extent {loop_extent}, not a constant; "
            "templates tile only workloads of constant shape"
        )
    return loop_extent.value


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def blocks_after(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    """The blocks that follow ``block`` at the root: a fused epilogue (bias, activation)."""
    blocks = sch.get_child_blocks(sch.get_block("root"))
    names = [b.name for b in blocks]
    return blocks[names.index(block.name) + 1 :]


def fold_epilogues(sch: Schedule, epilogues: list[BlockRV]) -> None:
    """Fold the elementwise blocks after a product (``blocks_after``) into the block
    that writes the product back. A chain, each block reading the one before, is
    reverse-inlined block by block. An activation that reads an earlier result twice
    (GELU reads the bias add's sum twice) makes no chain: every block but the last is
    inlined into its readers, and the last, which then reads the product alone, is
    reverse-inlined."""
    if _is_chain(sch, epilogues):
        for epilogue in epilogues:
            sch.reverse_compute_inline(epilogue)
        return
    for epilogue in epilogues[:-1]:
        sch.compute_inline(epilogue)
    sch.reverse_compute_inline(epilogues[-1])


def _is_chain(sch: Schedule, blocks: list[BlockRV]) -> bool:
    """Whether each of ``blocks`` but the last is read by the next one alone."""
    func = sch.mod["main"]
    for block, after in itertools.pairwise(blocks):
        read_by = {
            realize.block.name
            for buffer in writes_of(sch.get(block))
            for realize in readers(func, buffer)
        }
        if read_by != {after.name}:
            return False
    return True


def blocks_named(sch: Schedule, prefix: str) -> list[BlockRV]:
    return [b for b in sch.get_child_blocks(sch.get_block("root")) if b.name.startswith(prefix)]


def has_constant_weights(sch: Schedule) -> bool:
    """Whether the workload marks a parameter constant (``compiler.ir.layout_free``):
    a template may then offer to store it in the layout its tiling reads
    (``compiler.schedule.layout_rewrite``), converted once at build time."""
    return bool(layout_free_params(sch.mod["main"]))


# The choices of a template's ``parallel`` knob: how many chunks of the parallel loop
# each thread gets at least (0: no parallel loop).
PARALLEL_GRAINS = (1, 4, 16)


def parallelize(sch: Schedule, leading: list[LoopRV], grain: int, threads: int) -> None:
    """Fuse the fewest outermost of ``leading`` whose iterations give every one of
    ``threads`` at least ``grain`` chunks (all of them when even that is too few), and
    run the fused loop in parallel. Counting iterations, not loops, keeps a unit loop
    (a batch of one) from ever being the whole parallel loop, which ran a convolution
    on one core in a third of its space."""
    if grain == 0 or not leading:
        return
    leading = rows_outside_channels(sch, leading)
    chosen: list[LoopRV] = []
    iterations = 1
    for loop in leading:
        chosen.append(loop)
        iterations *= extent(sch, loop)
        if iterations >= grain * threads:
            break
    fused = sch.fuse(*chosen) if len(chosen) > 1 else chosen[0]
    sch.parallel(fused)


def kernel_tiles(total: int) -> list[tuple[int, int, int]]:
    """(outer, middle, inner) exact splits with the unrolled inner at most
    MAX_KERNEL_ROWS."""
    return [
        (total // inner // middle, middle, inner)
        for inner in divisors(total)
        if inner <= MAX_KERNEL_ROWS
        for middle in divisors(total // inner)
    ]


def vector_tiles(total: int, lanes: int, *, whole: bool) -> list[tuple[int, int]]:
    """(outer, width): exact widths up to MAX_PANEL_VECTORS vectors; with ``whole``,
    only whole vectors where ``total`` allows, else from half a vector up."""
    widest = lanes * MAX_PANEL_VECTORS
    fits = divisors(total)
    if whole:
        widths = [d for d in fits if d <= widest and d % lanes == 0]
    else:
        widths = [d for d in fits if lanes // 2 <= d <= widest]
    widths = widths or [d for d in fits if d <= widest]
    return [(total // w, w) for w in widths]
