"""Knob templates for matrix products: matmul, batch matmul and dense.

The schedule is the classic CPU GEMM of ``benchmarks/gemm.py``, as a space:

- the rows split in three (``i0`` blocks for threads, ``i1`` rows per panel pass,
  ``i2`` rows of the micro-kernel, unrolled) and the columns in two (``j0``
  panels, ``jv`` the vectorized panel width);
- the reduction split in two (``k0`` blocks, ``k1`` steps inside the micro-kernel);
- an order of the outer loops ``i0 j0 i1 k0`` (four candidates), under which the
  micro-kernel ``k1 i2 jv`` always runs;
- a local accumulator (``cache_write``) written back right outside the reduction,
  with its initialization split out (``decompose_reduction``);
- the right operand packed into a contiguous panel (``cache_read`` computed at
  ``j0`` or ``k0``) or read in place; a panel whose columns ``j`` index another
  dimension than the operand's last (dense's ``W[j, k]``, attention's ``K`` read as
  ``K[j, k]`` for ``Q K^T``) is transposed as it is packed (``transform_layout`` of
  the copy), so that the vector loop over ``j`` loads it contiguously instead of
  gathering at a stride of K; when the workload marks it constant (a
  model's weight), also stored once, at build time, in the order the tiles read
  it (``tiled``: Ansor's layout rewrite, so no call packs anything);
- the outermost loops fused until every thread gets 1, 4 or 16 chunks, and run in
  parallel, or none; a panel packed at ``j0`` ends the loops that may be fused
  there, since its copy sits in ``j0`` beside the loops under it.

Every knob is defined from the loop extents alone; a combination the primitives
refuse (packing under a loop it cannot sit in, fusing loops that are no longer
nested) is a ScheduleError, which the search skips.
"""

from __future__ import annotations

from compiler.schedule import BlockRV, Schedule
from compiler.schedule.layout_rewrite import rewrite_layout_free
from tuner.space.config import ConfigEntity
from tuner.space.registry import template
from tuner.space.rules.analysis import packable_reads
from tuner.space.templates.common import (
    PARALLEL_GRAINS,
    blocks_after,
    cpu_target,
    extent,
    fold_epilogues,
    has_constant_weights,
    kernel_tiles,
    parallelize,
    vector_tiles,
)

# Orders of the outer loops (i0, j0, i1, k0) as permutations.
ORDERS = ((0, 1, 2, 3), (0, 1, 3, 2), (1, 0, 2, 3), (1, 0, 3, 2))


@template("matmul.x86", blocks=("T_matmul",))
def matmul_x86(cfg: ConfigEntity, sch: Schedule) -> None:
    gemm_template(cfg, sch, "T_matmul", batch=False)


@template("batch_matmul.x86", blocks=("T_batch_matmul",))
def batch_matmul_x86(cfg: ConfigEntity, sch: Schedule) -> None:
    gemm_template(cfg, sch, "T_batch_matmul", batch=True)


@template("dense.x86", blocks=("T_dense",))
def dense_x86(cfg: ConfigEntity, sch: Schedule) -> None:
    """Dense reads its weight as ``W[j, k]``, so the vector loop over ``j`` would gather
    with a stride of K: a packed panel is transposed, and a constant weight stored
    ``tiled`` is read contiguously."""
    gemm_template(cfg, sch, "T_dense", batch=False)


def gemm_template(cfg: ConfigEntity, sch: Schedule, block_name: str, *, batch: bool) -> None:
    """Schedule the product ``block_name`` (loops ``[b,] i, j, k``) by ``cfg``."""
    block = sch.get_block(block_name)
    epilogues = blocks_after(sch, block)
    loops = sch.get_loops(block)
    b = loops[0] if batch else None
    i, j, k = loops[-3:]
    extents = [extent(sch, loop) for loop in (i, j, k)]
    lanes = cpu_target(cfg).vector_bits // 32

    cfg.define_split(
        "tile_i", i, num_outputs=3, policy="candidate", candidate=kernel_tiles(extents[0])
    )
    cfg.define_split(
        "tile_j",
        j,
        num_outputs=2,
        policy="candidate",
        candidate=vector_tiles(extents[1], lanes, whole=True),
    )
    cfg.define_split("tile_k", k, num_outputs=2, policy="factors")
    cfg.define_reorder("order", 4, policy="candidate", candidate=ORDERS)
    cfg.define_knob(
        "pack_b", ["none", "j0", "k0", *(["tiled"] if has_constant_weights(sch) else [])]
    )
    cfg.define_knob("parallel", [0, *PARALLEL_GRAINS])

    i0, i1, i2 = cfg["tile_i"].apply(sch, i)
    j0, jv = cfg["tile_j"].apply(sch, j)
    k0, k1 = cfg["tile_k"].apply(sch, k)
    outer = cfg["order"].apply(sch, [i0, j0, i1, k0])
    sch.reorder(*([b] if b is not None else []), *outer, k1, i2, jv)

    named = {"j0": j0, "k0": k0}
    pack = cfg["pack_b"].val
    if pack == "tiled":
        rewrite_layout_free(sch)
    elif pack != "none":
        layout = _right_operand_layout(sch, block)
        packed = sch.cache_read(block, 1, "global")
        sch.compute_at(packed, named[pack])
        copy_loops = sch.get_loops(packed)
        if layout is not None:
            sch.transform_layout(packed, ("write", 0), layout)
        if copy_loops[-1].var is not named[pack].var:  # unit copy loops are dropped
            sch.vectorize(copy_loops[-1])

    spatial_outer = outer[: outer.index(k0)]
    accumulate_at = spatial_outer[-1] if spatial_outer else b
    write_back = sch.cache_write(block, 0, "local")
    fold_epilogues(sch, epilogues)
    if accumulate_at is not None:
        sch.reverse_compute_at(write_back, accumulate_at)
    sch.decompose_reduction(block, k0)
    sch.unroll(i2)
    sch.vectorize(jv)
    leading = [*([b] if b is not None else []), *spatial_outer]
    if pack == "j0" and j0 in leading:  # the panel's copy sits in j0, beside the loops under it
        leading = leading[: leading.index(j0) + 1]
    parallelize(sch, leading, cfg["parallel"].val, cpu_target(cfg).threads)


def _right_operand_layout(sch: Schedule, block: BlockRV) -> str | None:
    """The index map that puts the right operand's vectorized dimension last when it
    is packed, None where it already is."""
    for read in packable_reads(sch, block):
        if read.index == 1:
            return read.layout
    return None
