"""What the rules read about a block: where its loops are, which of them are
spatial, who reads what it writes, and whether its body is costly to recompute."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from compiler.ir import expr as E
from compiler.ir.analysis import (
    block_accesses,
    buffers_read,
    buffers_written,
    find_block_realize,
    uses_var,
)
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import layout_free_params
from compiler.ir.node import Node, visit
from compiler.ir.stmt import Block, BlockRealize, For, ForKind, IterKind
from compiler.schedule import BlockRV, Schedule, ScheduleError
from compiler.schedule import primitives as P
from compiler.schedule.primitives.dataflow import reads_of, writes_of

# Intrinsics that cost far more than a multiply-add: a block calling one is not
# inlined, since every consumer would evaluate it again.
EXPENSIVE_CALLS = frozenset(["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow"])

# Intrinsics LLVM emits as scalar libm calls, which its loop vectorizer cannot widen.
SCALAR_CALLS = frozenset(["erf"])

SPATIAL = "S"
REDUCE = "R"


def func_of(sch: Schedule, block: BlockRV) -> PrimFunc:
    return sch.mod[block.func_name]


def realize_of(sch: Schedule, block: BlockRV) -> BlockRealize:
    realize = find_block_realize(func_of(sch, block).body, block.name)
    assert realize is not None, f"block {block.name!r} is in the schedule"
    return realize


def has_block(sch: Schedule, name: str, func_name: str = "main") -> bool:
    return find_block_realize(sch.mod[func_name].body, name) is not None


def loops_of(sch: Schedule, block: BlockRV) -> list[For]:
    return P.loops_above(func_of(sch, block), block.name)


def loop_kinds(sch: Schedule, block: BlockRV) -> list[str | None]:
    """Per loop above the block, outermost first: SPATIAL when it binds no reduce
    variable of the block, REDUCE when it binds only reduce variables, None when it
    binds both (a fused spatial-reduce loop, which no rule tiles)."""
    realize = realize_of(sch, block)
    pairs = list(zip(realize.block.iter_vars, realize.iter_values, strict=True))
    kinds: list[str | None] = []
    for loop in loops_of(sch, block):
        bound = {iv.kind for iv, value in pairs if uses_var(value, loop.loop_var)}
        if IterKind.REDUCE not in bound:
            kinds.append(SPATIAL)
        else:
            kinds.append(REDUCE if bound == {IterKind.REDUCE} else None)
    return kinds


def is_plain_nest(sch: Schedule, block: BlockRV) -> bool:
    """The block's loops are a chain, each the whole body of the one above, the block
    alone at the bottom, every extent a constant."""
    realize = realize_of(sch, block)
    loops = loops_of(sch, block)
    if not loops or len(extents(loops)) != len(loops):
        return False
    return all(
        outer.body is inner for outer, inner in zip(loops, (*loops[1:], realize), strict=True)
    )


def attempt(sch: Schedule, move: Callable[[Schedule], object]) -> Schedule | None:
    """A copy of ``sch`` after ``move``, or None when a primitive refused part of it."""
    trial = sch.copy()
    try:
        move(trial)
    except ScheduleError:
        return None
    return trial


def extents(loops: list[For]) -> list[int]:
    return [loop.extent.value for loop in loops if isinstance(loop.extent, E.IntImm)]


def iterations(node: Node) -> int:
    """How many times the blocks under ``node`` run, summed over every block (loops
    multiply, sequences add): the steps unrolling it emits. A vectorized loop counts
    once (one vector step); a symbolic extent counts as very large."""
    if isinstance(node, For):
        extent = node.extent.value if isinstance(node.extent, E.IntImm) else 2**31
        if node.kind is ForKind.VECTORIZED:
            extent = 1
        return extent * iterations(node.body)
    if isinstance(node, BlockRealize):
        return 1
    total = 0

    def collect(n: Node) -> bool | None:
        nonlocal total
        if n is node:
            return None
        if isinstance(n, (For, BlockRealize)):
            total += iterations(n)
            return False
        return None

    visit(node, collect)
    return total


def written(block: Block) -> list[Buffer]:
    return buffers_written(block.body)


def is_output(sch: Schedule, block: BlockRV) -> bool:
    """The block writes a parameter of the function (the result)."""
    params = func_of(sch, block).params
    return any(any(p is b for p in params) for b in written(realize_of(sch, block).block))


def consumers(sch: Schedule, block: BlockRV) -> list[Block]:
    """The other blocks that read what ``block`` writes, in program order."""
    outputs = {id(b) for b in written(realize_of(sch, block).block)}
    return [b for b in _other_blocks(sch, block) if any(id(r) in outputs for r in _reads(b))]


def producers(sch: Schedule, block: BlockRV) -> list[Block]:
    """The other blocks that write what ``block`` reads, in program order."""
    inputs = {id(b) for b in _reads(realize_of(sch, block).block)}
    return [b for b in _other_blocks(sch, block) if any(id(w) in inputs for w in written(b))]


def _other_blocks(sch: Schedule, block: BlockRV) -> list[Block]:
    func = func_of(sch, block)
    found = []
    for name in P.block_names(func):
        realize = find_block_realize(func.body, name)
        if realize is not None and name != block.name:
            found.append(realize.block)
    return found


def _reads(block: Block) -> list[Buffer]:
    reads = buffers_read(block.body)
    return reads + buffers_read(block.init) if block.init is not None else reads


def is_expensive(block: Block) -> bool:
    return calls_any(block, EXPENSIVE_CALLS)


def calls_any(block: Block, names: frozenset[str]) -> bool:
    """The block's body calls one of the intrinsics ``names``."""
    found = False

    def look(n: Node) -> bool | None:
        nonlocal found
        found = found or (isinstance(n, E.Call) and n.op in names)
        return not found

    visit(block.body, look)
    return found


def is_injective(block: Block) -> bool:
    """A block that computes each element from loads alone: no reduction, one store."""
    return not block.is_reduction and len(written(block)) == 1


def has_reuse(sch: Schedule, block: BlockRV) -> bool:
    """Some buffer the block reads is indexed without one of its spatial variables,
    so each of its elements is read by many iterations: tiling keeps it in cache
    (matmul's operands, a convolution's weights) where a plain loop would stream."""
    realize = realize_of(sch, block)
    spatial = [iv.var for iv in realize.block.iter_vars if iv.kind is IterKind.SPATIAL]
    missing = False

    def look(n: Node) -> bool | None:
        nonlocal missing
        if isinstance(n, E.BufferLoad):
            missing = missing or any(
                not any(uses_var(i, var) for i in n.indices) for var in spatial
            )
        return not missing

    visit(realize.block.body, look)
    return missing


@dataclass(frozen=True)
class PackableRead:
    """An input worth packing: its ``cache_read`` index, and the layout (an index map)
    that puts the dimension the micro-kernel vectorizes last in the packed tile, or
    None when it already is last."""

    index: int
    layout: str | None


def packable_reads(sch: Schedule, block: BlockRV) -> list[PackableRead]:
    """The inputs worth packing into a contiguous tile: read along the block's last
    spatial variable, the one the micro-kernel vectorizes, and reused (some spatial
    variable is missing from the indices), such as matmul's ``B[k, j]``, an NCHW
    convolution's input or dense's weight ``W[j, k]``. Such a tile is read again for
    every row of the output block, at a stride of the whole input where the copy's
    stride is the tile's; where the vectorized variable indexes a dimension other
    than the last (``W[j, k]``), the tile is also transposed so that it does."""
    block_node = realize_of(sch, block).block
    spatial = [iv.var for iv in block_node.iter_vars if iv.kind is IterKind.SPATIAL]
    if not spatial:
        return []
    outputs = {id(b) for b in writes_of(block_node)}
    inputs = [b for b in reads_of(block_node) if id(b) not in outputs]
    layouts: dict[int, str | None] = {}
    for access in block_accesses(block_node)[0]:
        indices = [r.min for r in access.region]
        if not indices or id(access.buffer) in outputs:
            continue
        vector_dims = [d for d, i in enumerate(indices) if uses_var(i, spatial[-1])]
        reused = any(not any(uses_var(i, v) for i in indices) for v in spatial)
        if len(vector_dims) == 1 and reused:
            layouts[id(access.buffer)] = last_dim_layout(len(indices), vector_dims[0])
    return [PackableRead(k, layouts[id(b)]) for k, b in enumerate(inputs) if id(b) in layouts]


@dataclass(frozen=True)
class BroadcastVector:
    """A spatial loop to vectorize that only the output and constant weights index:
    ``loop`` its position above the block, ``layout`` the index map that moves its
    dimension of the output last (for a channels-last accumulator)."""

    loop: int
    layout: str


def broadcast_vector(sch: Schedule, block: BlockRV, lanes: int) -> BroadcastVector | None:
    """The spatial loop of the blocked ``NCHW[x]c`` micro-kernel, where the block's last
    spatial loop (which the tiling vectorizes) does not run a whole number of vectors
    (an NCHW convolution's 56 columns) and another one does: a whole number of
    ``lanes`` iterations, indexing one dimension of the output and some constant weight
    (``compiler.ir.layout_free``, stored with the loop's vector innermost) and no other
    input, whose every element is then one broadcast per vector: an NCHW convolution's
    output channels. None otherwise (``NCHW[x]c`` itself vectorizes its last loop).
    The block's nest is plain (``is_plain_nest``)."""
    realize = realize_of(sch, block)
    pairs = list(zip(realize.block.iter_vars, realize.iter_values, strict=True))
    loops = loops_of(sch, block)
    sizes = extents(loops)
    spatial = [k for k, kind in enumerate(loop_kinds(sch, block)) if kind == SPATIAL]
    if not spatial or sizes[spatial[-1]] % lanes == 0:
        return None
    constants = {id(b) for b in layout_free_params(func_of(sch, block))}
    outputs = {id(b) for b in writes_of(realize.block)}
    for k in spatial[:-1]:
        bound = [iv.var for iv, value in pairs if uses_var(value, loops[k].loop_var)]
        if len(bound) != 1 or sizes[k] % lanes:
            continue
        used = _dims_using(realize.block, bound[0])
        written = [(b, dims) for key, (b, dims) in used.items() if key in outputs]
        reading = [key for key in used if key not in outputs]
        if len(written) != 1 or len(written[0][1]) != 1:
            continue
        if reading and all(key in constants for key in reading):
            output, (dim,) = written[0]
            layout = last_dim_layout(len(output.shape), dim)
            if layout is not None:
                return BroadcastVector(k, layout)
    return None


def vector_operand_loops(sch: Schedule, block: BlockRV, vector_loop: int) -> set[int]:
    """The spatial loops (positions above the block) whose variable indexes only inputs
    that are also read along loop ``vector_loop``, the loop a micro-kernel vectorizes:
    a blocked convolution's output channel blocks, which index only the weight (read
    as vectors), not the input (a broadcast per pixel). In a register tile these
    loops go innermost, so that their vector operands stay in registers and each
    broadcast value is used by all of them at once. The nest is plain."""
    realize = realize_of(sch, block)
    pairs = list(zip(realize.block.iter_vars, realize.iter_values, strict=True))
    loops = loops_of(sch, block)

    def var_of(k: int) -> E.Var | None:
        bound = [iv.var for iv, value in pairs if uses_var(value, loops[k].loop_var)]
        return bound[0] if len(bound) == 1 else None

    along = var_of(vector_loop)
    if along is None:
        return set()
    outputs = {id(b) for b in writes_of(realize.block)}
    inputs = [a for a in block_accesses(realize.block)[0] if id(a.buffer) not in outputs]
    found = set()
    for k, kind in enumerate(loop_kinds(sch, block)):
        var = var_of(k)
        if kind != SPATIAL or k == vector_loop or var is None:
            continue
        indexed = [a for a in inputs if any(uses_var(r.min, var) for r in a.region)]
        if indexed and all(any(uses_var(r.min, along) for r in a.region) for a in indexed):
            found.add(k)
    return found


def _dims_using(block: Block, var: E.Var) -> dict[int, tuple[Buffer, list[int]]]:
    """Per buffer the block accesses with ``var`` in its indices (by ``id``), the
    buffer and those dimensions."""
    found: dict[int, tuple[Buffer, list[int]]] = {}
    reads, writes = block_accesses(block)
    for access in (*reads, *writes):
        dims = [d for d, r in enumerate(access.region) if uses_var(r.min, var)]
        if dims:
            found[id(access.buffer)] = (access.buffer, dims)
    return found


def last_dim_layout(ndim: int, dim: int) -> str | None:
    """The index map that moves dimension ``dim`` of ``ndim`` last; None when it is."""
    if dim == ndim - 1:
        return None
    names = [f"d{k}" for k in range(ndim)]
    moved = [n for k, n in enumerate(names) if k != dim] + [names[dim]]
    return f"{', '.join(names)} -> {', '.join(moved)}"


def spatial_work(sch: Schedule, block: BlockRV) -> int:
    """The product of the block's spatial loop extents."""
    loops = loops_of(sch, block)
    kinds = loop_kinds(sch, block)
    return math.prod(extents([lp for lp, k in zip(loops, kinds, strict=True) if k == SPATIAL]))
