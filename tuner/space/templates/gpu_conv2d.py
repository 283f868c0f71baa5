"""GPU knob templates for NCHW convolutions: conv2d (with a fused bias/relu epilogue
when the workload has one) and depthwise conv2d, after AutoTVM's CUDA
``conv2d_direct`` and depthwise schedules.

conv2d: output channels, rows and columns each split in four
(``[blockIdx, vthread, threadIdx, inner]``: ``tile_f``, ``tile_y``, ``tile_x``;
the batch joins the channel blocks on ``blockIdx.z``), the input channels in two
(``tile_rc``) and the window's rows and columns in two (``tile_ry``,
``tile_rx``). At each step of the outer reduction loops all threads copy the
padded input tile and the weights the block needs into shared memory (the
padding computed by the copy, ``fetch_vector`` elements per thread at a time),
then each thread accumulates its tile of outputs in registers, written back with
any epilogue. ``unroll_reduce`` unrolls the inner reduction loops.

depthwise: the same four-way splits of channels, rows and columns; every output
channel reads one input channel, so there is no reduction to step over: the
block's whole padded input tile and its weights are staged in shared memory
once, at the block, and the window (``ry``, ``rx``) is unrolled.

Threads per axis are capped so that a block never has more than the target
allows, and conv2d's input-channel step and depthwise's block tiles so that what
they stage fits in shared memory; what an axis alone cannot bound (registers per
block) is refused when the kernel is built.
"""

from __future__ import annotations

from typing import NamedTuple

from compiler.ir.expr import IntImm
from compiler.ir.stmt import BufferStore
from compiler.schedule import BlockRV, LoopRV, Schedule
from tuner.space.config import ConfigEntity
from tuner.space.registry import template
from tuner.space.templates.common import blocks_after, blocks_named, extent
from tuner.space.templates.gpu_common import (
    FETCH_VECTORS,
    Tile,
    accumulate_at,
    axis_thread_limits,
    block_size,
    cooperative_fetch,
    cuda_target,
    local_accumulator,
    shared_step_limit,
    thread_tiles,
    unroll_inner,
)

# A thread's tile per axis (channels, rows, columns), over its virtual threads: at
# most 8 x 2 x 4 = 64 accumulators.
CONV_INNER = (8, 2, 4)
CONV_VTHREADS = 2
DEPTHWISE_INNER = (4, 2, 4)
DEPTHWISE_VTHREADS = 2
# The longest step over input channels: longer ones add shared memory, not reuse.
MAX_RC_STEP = 16
# What one depthwise block stages at most: channels, and rows and columns of the
# padded input (16 x 18 x 36 floats, 41 KiB), so any of its tiles fits in 48 KiB.
DEPTHWISE_SPANS = (16, 18, 36)
THREAD_AXES = ("threadIdx.z", "threadIdx.y", "threadIdx.x")


@template("conv2d_nchw.cuda", blocks=("conv2d_nchw",), target_kind="cuda")
def conv2d_nchw_cuda(cfg: ConfigEntity, sch: Schedule) -> None:
    block = sch.get_block("conv2d_nchw")
    pads = blocks_named(sch, "PadInput")
    epilogues = blocks_after(sch, block)
    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    window = Window.of(sch, pads, y, x, ry, rx)
    tiles = _spatial_tiles(cfg, sch, (f, y, x), CONV_INNER, CONV_VTHREADS, None, window)
    largest = [max(block_size(t) for t in axis) for axis in tiles]
    per_channel = window.rows(largest[1]) * window.columns(largest[2]) + largest[0] * window.size
    step = min(MAX_RC_STEP, shared_step_limit(per_channel, sch.mod["main"], cuda_target(cfg)))

    cfg.define_split("tile_f", f, num_outputs=4, policy="candidate", candidate=tiles[0])
    cfg.define_split("tile_y", y, num_outputs=4, policy="candidate", candidate=tiles[1])
    cfg.define_split("tile_x", x, num_outputs=4, policy="candidate", candidate=tiles[2])
    cfg.define_split("tile_rc", rc, num_outputs=2, policy="factors", max_factor=step)
    cfg.define_split("tile_ry", ry, num_outputs=2, policy="factors")
    cfg.define_split("tile_rx", rx, num_outputs=2, policy="factors")
    cfg.define_knob("fetch_vector", list(FETCH_VECTORS))
    cfg.define_knob("unroll_reduce", [False, True])

    write_back = local_accumulator(sch, block, epilogues)
    bound = _bind_spatial(cfg, sch, n, (("tile_f", f), ("tile_y", y), ("tile_x", x)))
    rco, rci = cfg["tile_rc"].apply(sch, rc)
    ryo, ryi = cfg["tile_ry"].apply(sch, ry)
    rxo, rxi = cfg["tile_rx"].apply(sch, rx)
    sch.reorder(rco, ryo, rxo, rci, ryi, rxi, *bound.inner)

    accumulate_at(sch, block, write_back, bound.thread, rco)
    for operand in (0, 1):
        cooperative_fetch(sch, block, operand, rxo, bound.threads, cfg["fetch_vector"].val)
    for pad in pads:
        sch.compute_inline(pad)
    unroll_inner(sch, block, rxi)
    if cfg["unroll_reduce"].val:
        for loop in (rci, ryi, rxi):
            sch.unroll(loop)


@template("depthwise_conv2d_nchw.cuda", blocks=("depthwise_conv2d_nchw",), target_kind="cuda")
def depthwise_conv2d_nchw_cuda(cfg: ConfigEntity, sch: Schedule) -> None:
    block = sch.get_block("depthwise_conv2d_nchw")
    pads = blocks_named(sch, "PadInput")
    epilogues = blocks_after(sch, block)
    n, c, y, x, ry, rx = sch.get_loops(block)
    window = Window.of(sch, pads, y, x, ry, rx)
    tiles = _spatial_tiles(
        cfg, sch, (c, y, x), DEPTHWISE_INNER, DEPTHWISE_VTHREADS, DEPTHWISE_SPANS, window
    )

    cfg.define_split("tile_c", c, num_outputs=4, policy="candidate", candidate=tiles[0])
    cfg.define_split("tile_y", y, num_outputs=4, policy="candidate", candidate=tiles[1])
    cfg.define_split("tile_x", x, num_outputs=4, policy="candidate", candidate=tiles[2])
    cfg.define_knob("fetch_vector", list(FETCH_VECTORS))

    write_back = local_accumulator(sch, block, epilogues)
    bound = _bind_spatial(cfg, sch, n, (("tile_c", c), ("tile_y", y), ("tile_x", x)))
    accumulate_at(sch, block, write_back, bound.thread, ry)
    for operand in (0, 1):
        cooperative_fetch(sch, block, operand, bound.block, bound.threads, cfg["fetch_vector"].val)
    for pad in pads:
        sch.compute_inline(pad)
    unroll_inner(sch, block, bound.thread)


class Window(NamedTuple):
    """How many padded input rows and columns a tile of output rows and columns reads,
    to size the tiles by. The stride is read off the shapes (input extent over output
    extent): exact without dilation; a dilated window is wider than counted here, and
    a tile that then overflows shared memory is refused by verification."""

    in_rows: int
    in_columns: int
    row_stride: int
    column_stride: int
    kernel_rows: int
    kernel_columns: int

    @classmethod
    def of(
        cls, sch: Schedule, pads: list[BlockRV], y: LoopRV, x: LoopRV, ry: LoopRV, rx: LoopRV
    ) -> Window:
        """The window of the convolution whose loops are ``y x ry rx``, reading the
        output of ``pads`` (or the function's first input when there is no padding)."""
        if pads:
            store = sch.get(pads[0]).body
            assert isinstance(store, BufferStore)
            shape = store.buffer.shape
        else:
            shape = sch.mod["main"].params[0].shape
        in_rows, in_columns = (d.value for d in shape[-2:] if isinstance(d, IntImm))
        kernel_rows, kernel_columns = extent(sch, ry), extent(sch, rx)
        return cls(
            in_rows,
            in_columns,
            _stride(in_rows, extent(sch, y), kernel_rows),
            _stride(in_columns, extent(sch, x), kernel_columns),
            kernel_rows,
            kernel_columns,
        )

    @property
    def size(self) -> int:
        return self.kernel_rows * self.kernel_columns

    def rows(self, out_rows: int) -> int:
        return min(self.in_rows, (out_rows - 1) * self.row_stride + self.kernel_rows)

    def columns(self, out_columns: int) -> int:
        return min(self.in_columns, (out_columns - 1) * self.column_stride + self.kernel_columns)


def _stride(in_extent: int, out_extent: int, kernel: int) -> int:
    return max(1, (in_extent - kernel) // max(1, out_extent - 1))


def _spatial_tiles(
    cfg: ConfigEntity,
    sch: Schedule,
    loops: tuple[LoopRV, LoopRV, LoopRV],
    inner: tuple[int, int, int],
    vthreads: int,
    spans: tuple[int, int, int] | None,
    window: Window,
) -> list[list[Tile]]:
    """The candidate tiles of the (channel, row, column) loops, x with the most
    threads; with ``spans``, only blocks whose input tile stays within them."""
    x_threads, y_threads, z_threads = axis_thread_limits(cuda_target(cfg), 3)
    tiles = [
        thread_tiles(
            extent(sch, loop),
            max_threads=threads,
            max_inner=most_inner,
            max_vthreads=vthreads,
            max_block=extent(sch, loop),
        )
        for loop, threads, most_inner in zip(
            loops, (z_threads, y_threads, x_threads), inner, strict=True
        )
    ]
    if spans is None:
        return tiles
    staged = (lambda c: c, window.rows, window.columns)
    return [
        [t for t in axis if span(block_size(t)) <= most] or axis[:1]
        for axis, span, most in zip(tiles, staged, spans, strict=True)
    ]


class BoundLoops(NamedTuple):
    """The loops a convolution's spatial tiling binds that the rest of it uses."""

    block: LoopRV  # the innermost loop bound to blockIdx
    thread: LoopRV  # the innermost loop bound to threadIdx
    threads: list[tuple[str, int]]  # the thread axes, outermost first, with their counts
    inner: list[LoopRV]  # the loops of a thread's own tile


def _bind_spatial(
    cfg: ConfigEntity, sch: Schedule, n: LoopRV, splits: tuple[tuple[str, LoopRV], ...]
) -> BoundLoops:
    """Split the (channel, row, column) loops by their knobs in ``splits`` and bind
    them: blocks (the batch fused with the channel blocks), virtual threads, threads."""
    parts = [cfg[name].apply(sch, loop) for name, loop in splits]
    blocks, vthreads, threads, inner = (list(level) for level in zip(*parts, strict=True))
    sch.reorder(n, *blocks, *vthreads, *threads, *inner)
    blocks[0] = sch.fuse(n, blocks[0])
    for loop, axis in zip(blocks, ("blockIdx.z", "blockIdx.y", "blockIdx.x"), strict=True):
        sch.bind(loop, axis)
    for loop, axis in zip(vthreads, ("vthread.z", "vthread.y", "vthread.x"), strict=True):
        sch.bind(loop, axis)
    for loop, axis in zip(threads, THREAD_AXES, strict=True):
        sch.bind(loop, axis)
    counts = [cfg[name].size[2] for name, _ in splits]
    return BoundLoops(blocks[2], threads[2], list(zip(THREAD_AXES, counts, strict=True)), inner)
