"""Knob templates for NCHW convolutions: conv2d (with a fused bias/relu epilogue when
the workload has one) and depthwise conv2d.

The micro-kernel vectorizes the output row (``x``): in NCHW both the output and the
input are contiguous along it, and each kernel weight is a broadcast. For conv2d
it keeps ``o2`` output channels by a vector of columns in registers, unrolled
over the channels, and runs the reduction (``rc ry rx``) around it:

- output channels split in three (``o0`` for threads, ``o1``, ``o2`` unrolled),
  rows in two (``y0``, ``y1``), columns in two (``x0``, ``xv`` vectorized);
- input channels split in two (``rc0``, ``rc1``) and two orders of the reduction;
- candidate orders of the outer spatial loops;
- padding computed in place (inlined) or as its own pass;
- the input tile a micro-kernel pass reads packed into a contiguous buffer
  (``cache_read`` computed at ``rc0``: data packing) or read in place;
- when the workload marks the kernel constant (a model's weight), the kernel kept
  in the caller's layout or stored once, at build time, in the order the tiles
  read it (``weight_layout``: Ansor's layout rewrite);
- a local accumulator written back outside the reduction, its init split out;
- the outermost loops fused until every thread gets 1, 4 or 16 chunks, and run in
  parallel.

When the kernel is constant and the output channels fill whole vectors, a second
micro-kernel (``vector`` = ``channels``) vectorizes the output channels instead, the
micro-kernel of onnxruntime's and TVM's blocked ``NCHW[x]c`` convolutions: the tile
is ``blocks`` vectors of channels by ``rows`` x ``columns`` output pixels, each
input pixel a broadcast, the kernel stored once with a vector of output channels
innermost, the accumulator laid out channels-last so that it stays in registers, and
the finished tile written back to NCHW. It needs no blocked layout outside the
kernel, and no vector runs past a row of an odd width: at 1x64x56x56 it ran 1.6x the
columns micro-kernel's best (``-mcpu=znver5``). The vectors of channels run inside
the tile's rows and columns, so that the weight vectors stay in registers across the
tile and each broadcast only for its multiply-adds (``compiler.schedule.default``'s
channel tile says what the other order cost).
"""

from __future__ import annotations

from compiler.schedule import BlockRV, LoopRV, Schedule
from compiler.schedule.layout_rewrite import rewrite_layout_free
from compiler.schedule.partition import rows_outside_channels
from tuner.space.config import ConfigEntity
from tuner.space.registry import template
from tuner.space.templates.common import (
    PARALLEL_GRAINS,
    blocks_after,
    blocks_named,
    cpu_target,
    divisors,
    extent,
    fold_epilogues,
    has_constant_weights,
    kernel_tiles,
    parallelize,
    vector_tiles,
)

# Orders of the outer spatial loops (o0, y0, x0, o1, y1).
CONV_ORDERS = ((0, 1, 2, 3, 4), (0, 1, 3, 4, 2), (1, 0, 2, 3, 4), (0, 3, 1, 4, 2))
# Orders of the reduction loops (rc0, rc1, ry, rx).
REDUCE_ORDERS = ((0, 1, 2, 3), (0, 2, 3, 1), (2, 3, 0, 1))
# Orders of depthwise's outer loops (c0, y0, x0, c1, y1).
DEPTHWISE_ORDERS = ((0, 1, 2, 3, 4), (0, 3, 1, 4, 2), (0, 1, 3, 4, 2))
# The channels micro-kernel's tile: at most this many vector accumulators (on
# AVX-512, tiles of 28 ran at half the speed of 2x1x7's 14 at 1x64x56x56, measured
# while the vectors of channels ran outside the columns), of at most this many
# vectors of channels and rows.
MAX_ACCUMULATORS = 16
MAX_CHANNEL_VECTORS = 4
MAX_TILE_ROWS = 4


@template("conv2d_nchw.x86", blocks=("conv2d_nchw",))
def conv2d_nchw_x86(cfg: ConfigEntity, sch: Schedule) -> None:
    block = sch.get_block("conv2d_nchw")
    pads = blocks_named(sch, "PadInput")
    epilogues = blocks_after(sch, block)
    n, o, y, x, rc, ry, rx = sch.get_loops(block)
    lanes = cpu_target(cfg).vector_bits // 32

    cfg.define_split(
        "tile_o", o, num_outputs=3, policy="candidate", candidate=kernel_tiles(extent(sch, o))
    )
    cfg.define_split("tile_y", y, num_outputs=2, policy="factors", max_factor=8)
    cfg.define_split(
        "tile_x",
        x,
        num_outputs=2,
        policy="candidate",
        candidate=vector_tiles(extent(sch, x), lanes, whole=False),
    )
    cfg.define_split("tile_rc", rc, num_outputs=2, policy="factors")
    cfg.define_reorder("order", 5, policy="candidate", candidate=CONV_ORDERS)
    cfg.define_reorder("reduce_order", 4, policy="candidate", candidate=REDUCE_ORDERS)
    cfg.define_knob("pad", ["inline", "root"] if pads else ["none"])
    cfg.define_knob("pack_data", ["none", "rc0"])
    cfg.define_knob("parallel", list(PARALLEL_GRAINS))
    if has_constant_weights(sch):
        cfg.define_knob("weight_layout", ["caller", "tiled"])
    channel_tiles = _channel_tiles(sch, block, lanes)
    if channel_tiles:  # no knob otherwise: the traces of other workloads stay as they were
        cfg.define_knob("vector", ["columns", "channels"])
        cfg.define_knob("channel_tile", channel_tiles)
        if cfg["vector"].val == "channels":
            _vectorize_channels(cfg, sch, block, pads, epilogues, lanes)
            return
    o0, o1, o2 = cfg["tile_o"].apply(sch, o)
    y0, y1 = cfg["tile_y"].apply(sch, y)
    x0, xv = cfg["tile_x"].apply(sch, x)
    rc0, rc1 = cfg["tile_rc"].apply(sch, rc)
    outer = cfg["order"].apply(sch, [o0, y0, x0, o1, y1])
    reduction = cfg["reduce_order"].apply(sch, [rc0, rc1, ry, rx])
    sch.reorder(n, *outer, *reduction, o2, xv)
    if has_constant_weights(sch) and cfg["weight_layout"].val == "tiled":
        rewrite_layout_free(sch)

    _place_padding(sch, pads, cfg["pad"].val)
    if cfg["pack_data"].val == "rc0":
        packed = sch.cache_read(block, 0, "global")
        sch.compute_at(packed, rc0)
    _accumulate(sch, block, epilogues, outer[-1], reduction[0])
    sch.unroll(o2)
    sch.vectorize(xv)
    parallelize(sch, [n, *outer], cfg["parallel"].val, cpu_target(cfg).threads)


def _channel_tiles(sch: Schedule, block: BlockRV, lanes: int) -> list[str]:
    """The register tiles of the channels micro-kernel, as "vectors of channels x rows
    x columns" ("2x1x7"), or none where it does not fit: a kernel that is not
    constant, or output channels that do not fill whole vectors."""
    _, o, y, x, *_ = sch.get_loops(block)
    channels = extent(sch, o)
    if not has_constant_weights(sch) or channels % lanes:
        return []
    return [
        f"{blocks}x{rows}x{columns}"
        for blocks in divisors(channels // lanes)
        if blocks <= MAX_CHANNEL_VECTORS
        for rows in divisors(extent(sch, y))
        if rows <= MAX_TILE_ROWS
        for columns in divisors(extent(sch, x))
        if blocks * rows * columns <= MAX_ACCUMULATORS
    ]


def _vectorize_channels(
    cfg: ConfigEntity,
    sch: Schedule,
    block: BlockRV,
    pads: list[BlockRV],
    epilogues: list[BlockRV],
    lanes: int,
) -> None:
    """The channels micro-kernel (see the module docstring)."""
    n, o, y, x, rc, ry, rx = sch.get_loops(block)
    blocks, rows, columns = (int(size) for size in cfg["channel_tile"].val.split("x"))
    o0, o1, o2 = sch.split(o, [None, blocks, lanes])
    y0, y1 = sch.split(y, [None, rows])
    x0, x1 = sch.split(x, [None, columns])
    rc0, rc1 = cfg["tile_rc"].apply(sch, rc)
    reduction = cfg["reduce_order"].apply(sch, [rc0, rc1, ry, rx])
    sch.reorder(n, o0, y0, x0, *reduction, y1, x1, o1, o2)
    rewrite_layout_free(sch)
    _place_padding(sch, pads, "root")  # a select per broadcast ran 9x slower
    _accumulate(sch, block, epilogues, x0, reduction[0], layout="n, o, y, x -> n, y, x, o")
    for loop in (y1, x1, o1):
        sch.unroll(loop)
    sch.vectorize(o2)
    parallelize(sch, [n, o0, y0, x0], cfg["parallel"].val, cpu_target(cfg).threads)


@template("depthwise_conv2d_nchw.x86", blocks=("depthwise_conv2d_nchw",))
def depthwise_conv2d_nchw_x86(cfg: ConfigEntity, sch: Schedule) -> None:
    block = sch.get_block("depthwise_conv2d_nchw")
    pads = blocks_named(sch, "PadInput")
    n, c, y, x, ry, rx = sch.get_loops(block)
    lanes = cpu_target(cfg).vector_bits // 32

    cfg.define_split("tile_c", c, num_outputs=2, policy="factors", max_factor=8)
    cfg.define_split("tile_y", y, num_outputs=2, policy="factors", max_factor=8)
    cfg.define_split(
        "tile_x",
        x,
        num_outputs=2,
        policy="candidate",
        candidate=vector_tiles(extent(sch, x), lanes, whole=False),
    )
    cfg.define_reorder("order", 5, policy="candidate", candidate=DEPTHWISE_ORDERS)
    cfg.define_knob("unroll_window", [False, True])
    cfg.define_knob("pad", ["inline", "root"] if pads else ["none"])
    cfg.define_knob("parallel", list(PARALLEL_GRAINS))

    c0, c1 = cfg["tile_c"].apply(sch, c)
    y0, y1 = cfg["tile_y"].apply(sch, y)
    x0, xv = cfg["tile_x"].apply(sch, x)
    outer = cfg["order"].apply(sch, [c0, y0, x0, c1, y1])
    sch.reorder(n, *outer, ry, rx, xv)

    _place_padding(sch, pads, cfg["pad"].val)
    _accumulate(sch, block, blocks_after(sch, block), outer[-1], ry)
    if cfg["unroll_window"].val:
        sch.unroll(ry)
        sch.unroll(rx)
    sch.vectorize(xv)
    parallelize(sch, [n, *outer], cfg["parallel"].val, cpu_target(cfg).threads)


def _place_padding(sch: Schedule, pads: list[BlockRV], where: str) -> None:
    """Inline the padding into its reader, or keep it a pass of its own with its
    outer loops in parallel and its rows vectorized."""
    for pad in pads:
        if where == "inline":
            sch.compute_inline(pad)
        elif where == "root":
            loops = sch.get_loops(pad)
            sch.parallel(sch.fuse(*rows_outside_channels(sch, loops[:3])[:2]))
            sch.vectorize(loops[-1])


def _accumulate(
    sch: Schedule,
    block: BlockRV,
    epilogues: list[BlockRV],
    spatial: LoopRV,
    first_reduce: LoopRV,
    *,
    layout: str | None = None,
) -> None:
    """A local accumulator (in ``layout``, an index map, when given) written back (with
    any epilogue) right outside the reduction."""
    write_back = sch.cache_write(block, 0, "local")
    if layout is not None:
        sch.transform_layout(block, ("write", 0), layout)
    fold_epilogues(sch, epilogues)
    sch.reverse_compute_at(write_back, spatial)
    sch.decompose_reduction(block, first_reduce)
