"""The schedule of a small-tile transform: Winograd's input and output transforms.

Such a block computes, for every tile, ``a x a`` values each a weighted sum over the
``a x a`` elements of the tile, with constant weights written as selects on the loop
indices (``compiler.topi.nn.winograd``). Run as written (tile outermost, tile
elements innermost), each output reloads the whole tile and evaluates the selects.
With the loops over one tile innermost and unrolled, the selects fold to constants,
a zero weight drops its term, and the tile is loaded once for all its outputs: the
transform costs a few additions per element (TVM's Winograd schedule rules unroll
the same loops).

The block says which loops those are with ``TILE_TRANSFORM_ATTR``:

- ``[positions]``: the positions of its spatial block variables that index a tile
  element (the reduce variables always do);
- ``{"tile": m, "axes": [rows, columns]}``: the positions of the spatial block
  variables that are image rows and columns (the last two when ``axes`` is left out):
  each is split by ``m`` and the inner pieces index a tile element. The other spatial
  loops stay outside in their order (a blocked output's channel block among them).

A blocked output's channel block, the output's last axis, is contiguous in the output
and in what the transform reads. The default schedule runs it innermost, below the
unrolled tile, vectorized, and sums the tile's outputs in a local buffer of vectors
written back after the tile: ResNet-18's F(4x4) convolution at 56x56 then ran 2.4x
faster on its default schedule (its transform had been serial). Summed in the output
itself, the kernel took 4.5 s to build instead of 0.6 (LLVM optimizing a load and a
store per tile element and pixel). The generated space keeps the channel block
outside, scalar: its tuned candidates, already parallel, ran no faster with it
(0.96-1.02x at the same decisions), and its stored traces stay its own.
"""

from __future__ import annotations

from compiler.ir.analysis import find_block_realize, uses_var
from compiler.ir.stmt import Block, BlockRealize, IterKind
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import BlockRV, LoopRV
from compiler.schedule.schedule import Schedule

TILE_TRANSFORM_ATTR = "tile_transform"


def is_tile_transform(block: Block) -> bool:
    """Whether ``block`` is a tile transform that says which loops go innermost."""
    return TILE_TRANSFORM_ATTR in block.annotations


def schedule_tile_transform(
    sch: Schedule, block: BlockRV, *, vector_channels: bool = False
) -> list[LoopRV]:
    """Move the loops over one tile innermost and unroll them; the loops left
    outside (over tiles, channels), outermost first, for the caller to parallelize.
    With ``vector_channels``, a blocked output's channel block goes below them,
    vectorized (see the module docstring). ScheduleError when a primitive refuses."""
    spec = sch.get(block).annotations[TILE_TRANSFORM_ATTR]
    loops = sch.get_loops(block)
    reduces = _binds_reduce(sch, block, loops)
    lanes: LoopRV | None = None
    if isinstance(spec, dict):
        spatial = [loop for loop, r in zip(loops, reduces, strict=True) if not r]
        row_at, col_at = (int(a) for a in spec.get("axes", [len(spatial) - 2, len(spatial) - 1]))
        row_out, row_in = sch.split(spatial[row_at], [None, int(spec["tile"])])
        col_out, col_in = sch.split(spatial[col_at], [None, int(spec["tile"])])
        if vector_channels and len(spatial) - 1 not in (row_at, col_at):
            lanes = spatial[-1]  # a channel block, last in the output
        rest = [loop for k, loop in enumerate(spatial) if k not in (row_at, col_at)]
        outer = [*rest[:row_at], row_out, col_out, *rest[row_at:]]
        outer = [loop for loop in outer if loop is not lanes]
        tile = [row_in, col_in]
    else:
        chosen = _bound_loops(sch, block, loops, {int(p) for p in spec})
        tile = [loop for loop, r, c in zip(loops, reduces, chosen, strict=True) if c and not r]
        outer = [loop for loop, r, c in zip(loops, reduces, chosen, strict=True) if not (r or c)]
    # The tile's outputs outside the reduce loops: each output is summed in a register
    # (with the reduce loops outside, LLVM kept every output in memory: 2x slower).
    inner = [*tile, *(loop for loop, r in zip(loops, reduces, strict=True) if r)]
    sch.reorder(*outer, *inner, *([lanes] if lanes is not None else []))
    for loop in inner:
        sch.unroll(loop)
    if lanes is not None:
        sch.vectorize(lanes)
        _accumulate_tile(sch, block, outer[-1], inner[0])
    return outer


def _accumulate_tile(sch: Schedule, block: BlockRV, tile_at: LoopRV, first: LoopRV) -> None:
    """Sum one tile's outputs in a local buffer, zeroed before the tile's first loop
    ``first`` and written back under ``tile_at``, both along the vectorized channels."""
    write_back = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(write_back, tile_at)
    sch.vectorize(sch.get_loops(write_back)[-1])
    init = sch.decompose_reduction(block, first)
    sch.vectorize(sch.get_loops(init)[-1])


def _binds_reduce(sch: Schedule, block: BlockRV, loops: list[LoopRV]) -> list[bool]:
    """For each loop, whether it binds a reduce variable of the block."""
    realize = _realize(sch, block)
    values = [
        value
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.REDUCE
    ]
    return [any(uses_var(v, sch.get(loop).loop_var) for v in values) for loop in loops]


def _bound_loops(
    sch: Schedule, block: BlockRV, loops: list[LoopRV], positions: set[int]
) -> list[bool]:
    """For each loop, whether it binds a block variable at one of ``positions``."""
    realize = _realize(sch, block)
    values = [v for k, v in enumerate(realize.iter_values) if k in positions]
    return [any(uses_var(v, sch.get(loop).loop_var) for v in values) for loop in loops]


def _realize(sch: Schedule, block: BlockRV) -> BlockRealize:
    found = find_block_realize(sch.mod[block.func_name].body, block.name)
    if found is None:
        raise ScheduleError(f"tile transform: no block {block.name!r}")
    return found
