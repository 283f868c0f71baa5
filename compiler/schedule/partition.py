"""Which part of an activation each thread of a parallel loop gets.

A parallel loop hands each thread one contiguous chunk of its iterations. Inside a
model the threads of the next kernel read what this one's wrote: where both split an
activation the same way, each thread finds its part in its own core's cache; where
one splits it by channel blocks and the next by rows, half of it moves between the
cores. A convolution reads every input channel at a few rows, so only a split by rows
can be the same on both sides of it. On a 2-core Xeon, a convolution 1x64x56x56 (3x3)
after a copy of its input ran 0.606 ms with both split by channel blocks, 0.546 ms
with both split by rows, and 0.528 ms without the copy; each thread of the
convolution then reads every weight, which costs less than the crossing activations
only while the weights are the smaller of the two.

So where a function's constant weights take fewer bytes than its largest activation,
the loops over rows go outside the loops over channels in a fused parallel loop. A
loop is over channels when a block under it indexes a weight with it (a
convolution's output channels), or writes a buffer whose reader indexes that
dimension with the reader's weight variables alone (a padded input's channel blocks,
which the convolution sums over).
"""

from __future__ import annotations

from compiler.ir import expr as E
from compiler.ir.analysis import block_accesses, var_ids, visit_statements
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import layout_free_params
from compiler.ir.node import Node
from compiler.ir.stmt import Block, BlockRealize
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import LoopRV
from compiler.schedule.schedule import Schedule


def rows_outside_channels(sch: Schedule, loops: list[LoopRV]) -> list[LoopRV]:
    """``loops`` (nested, outermost first) reordered in ``sch`` by ``_rows_first_order``,
    or the same list where that gives none or the reorder primitive refuses it."""
    order = _rows_first_order(sch, loops)
    if order is None:
        return loops
    try:
        sch.reorder(*order)
    except ScheduleError:
        return loops
    return order


def _rows_first_order(sch: Schedule, loops: list[LoopRV]) -> list[LoopRV] | None:
    """``loops`` (nested, outermost first) with those over channels right after the
    first loop over rows (the first other loop of more than one iteration), where the
    module docstring says it pays and the order changes; else None."""
    if len(loops) < 2:
        return None
    func = sch.mod[loops[0].func_name]
    constants = layout_free_params(func)
    activations = [p for p in func.params if all(p is not c for c in constants)]
    largest = max((p.static_nbytes for p in activations), default=0)
    if not constants or sum(c.static_nbytes for c in constants) > largest:
        return None
    blocks = _blocks(func.body)
    channels = _channel_vars(blocks, _weight_buffers(func, blocks))
    feeds_channels = _loop_vars_feeding(sch.get(loops[0]).body, channels)
    over_channels = [id(sch.get(rv).loop_var) in feeds_channels for rv in loops]
    rows = next(
        (k for k, rv in enumerate(loops) if not over_channels[k] and _extent(sch, rv) != 1), None
    )
    if rows is None or not any(over_channels[:rows]):
        return None
    head = list(zip(loops[: rows + 1], over_channels[: rows + 1], strict=True))
    return [rv for rv, c in head if not c] + [rv for rv, c in head if c] + loops[rows + 1 :]


def _weight_buffers(func: PrimFunc, blocks: list[Block]) -> list[Buffer]:
    """The constant parameters and the buffers that ``blocks`` (the function's) fill
    from them alone (a weight in the layout the kernel reads, a packed copy of it)."""
    found = list(layout_free_params(func))
    for block in blocks:
        reads, writes = block_accesses(block)
        if reads and all(any(r.buffer is w for w in found) for r in reads):
            found += [region.buffer for region in writes]
    return found


def _channel_vars(blocks: list[Block], weights: list[Buffer]) -> set[int]:
    """The ids of the block variables over channels, in any of ``blocks``: those that index a
    weight, and those that index a dimension of an activation which some block indexes
    with variables over channels alone (the padded input's channel blocks, which the
    convolution sums over), until no more are found."""
    weight_ids = {id(w) for w in weights}
    # (buffer id, dimension, ids of the block's variables that index it) of every
    # access to an activation
    indexing: list[tuple[int, int, frozenset[int]]] = []
    channels: set[int] = set()
    for block in blocks:
        own = {id(iv.var) for iv in block.iter_vars}
        reads, writes = block_accesses(block)
        if reads and all(id(r.buffer) in weight_ids for r in reads):
            continue  # a copy of a weight
        for region in reads + writes:
            by_dim = [var_ids(r.min) & own for r in region.region]
            if id(region.buffer) in weight_ids:
                channels.update(*by_dim)
            else:
                indexing += [
                    (id(region.buffer), dim, used) for dim, used in enumerate(by_dim) if used
                ]
    channel_dims: set[tuple[int, int]] = set()
    while True:
        before = (len(channels), len(channel_dims))
        for buffer, dim, used in indexing:
            if used <= channels:
                channel_dims.add((buffer, dim))
            elif (buffer, dim) in channel_dims:
                channels |= used
        if (len(channels), len(channel_dims)) == before:
            return channels


def _loop_vars_feeding(body: Node, block_vars: set[int]) -> set[int]:
    """The ids of the variables that feed one of ``block_vars`` (ids) in a block of
    ``body``: one walk of the statements serves every loop of a nest, since a loop's
    variable occurs only under it."""
    feeding: set[int] = set()

    def collect(node: Node) -> None:
        if isinstance(node, BlockRealize):
            for iv, value in zip(node.block.iter_vars, node.iter_values, strict=True):
                if id(iv.var) in block_vars:
                    feeding.update(var_ids(value))

    visit_statements(body, collect)
    return feeding


def _blocks(root: Node) -> list[Block]:
    found: list[Block] = []

    def collect(node: Node) -> None:
        if isinstance(node, Block) and node.name != "root":
            found.append(node)

    visit_statements(root, collect)
    return found


def _extent(sch: Schedule, rv: LoopRV) -> int | None:
    extent = sch.get(rv).extent
    return extent.value if isinstance(extent, E.IntImm) else None
