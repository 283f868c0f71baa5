"""Layout rewrite of constant weights: store a layout-free parameter in the order
the tiled loops read it (Ansor's layout rewrite, MetaSchedule's RewriteLayout).

After tiling, a matmul reads ``B[k, j]`` under loops such as ``j0 k0 j1 k1 j2``,
each a piece of ``k`` or ``j``. Laid out as ``B'[j0, k0, j1, k1, j2]`` the weight
is read front to back, one contiguous stream per tile, and the innermost
(vectorized) piece is contiguous. ``layout_rewrite_map`` derives that map from the
loops; ``rewrite_layout_free`` applies it with ``transform_layout`` to every
parameter the function marks constant (``compiler.ir.layout_free``), so the trace
records it with the block sizes that the tiling decisions chose, and a build
converts the weight once (``compiler.lower.prepack``).

A weight is left as it is when its reads do not fit the model: read by more than
one block, or only by a conversion of its own (a Winograd weight transform), at
indices that are not each one block variable, or through loops that do not split
its dimensions exactly (a padded tile, a fused loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.arith.linear import same_expr, to_linear
from compiler.ir import expr as E
from compiler.ir.analysis import find_block_realize
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import is_conversion, layout_free_params
from compiler.ir.node import visit
from compiler.ir.stmt import Block, For
from compiler.schedule import primitives as P
from compiler.schedule.primitives.common import const_int
from compiler.schedule.primitives.dataflow import readers
from compiler.schedule.schedule import Schedule


@dataclass(frozen=True)
class _Piece:
    """One loop's share of a weight dimension: the dimension's index is
    ``... + coeff * loop + ...`` with the loop running ``extent`` times."""

    loop: int
    dim: int
    coeff: int
    extent: int


def rewrite_layout_free(
    sch: Schedule, func_name: str = "main", *, block: str | None = None
) -> list[str]:
    """Rewrite the layout of every constant parameter of ``func_name`` (that
    ``block`` reads, when given) that its reading block's loops split exactly; the
    names of the parameters rewritten."""
    func = sch.mod[func_name]
    rewritten = []
    for param in layout_free_params(func):
        found = readers(sch.mod[func_name], param)
        if (
            len(found) != 1
            or block not in (None, found[0].block.name)
            or is_conversion(found[0].block)
        ):
            continue
        index_map = layout_rewrite_map(sch.mod[func_name], found[0].block.name, param)
        if index_map is not None:
            reader = sch.get_block(found[0].block.name, func_name)
            sch.transform_layout(reader, param.name, index_map)
            rewritten.append(param.name)
    return rewritten


def layout_rewrite_map(func: PrimFunc, block_name: str, param: Buffer) -> str | None:
    """The index map that lays ``param`` out in the order block ``block_name`` reads
    it under its loops, or None when the reads do not fit (see the module docstring)
    or the layout would not change."""
    realize = find_block_realize(func.body, block_name)
    if realize is None:
        return None
    indices = _single_index(realize.block, param)
    shape = [d.value if isinstance(d, E.IntImm) else None for d in param.shape]
    if indices is None or None in shape:
        return None
    loops = P.loops_above(func, block_name)
    bindings = {
        id(iv.var): value
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
    }
    if len({id(index) for index in indices}) != len(indices):
        return None
    pieces = []
    for dim, index in enumerate(indices):
        if not isinstance(index, E.Var) or id(index) not in bindings:
            return None
        found = _pieces(bindings[id(index)], dim, int(shape[dim] or 0), loops)
        if found is None:
            return None
        pieces += found
    pieces.sort(key=lambda p: p.loop)
    return _map_text(_merged(pieces), [int(s) for s in shape if s is not None])


def _single_index(block: Block, param: Buffer) -> tuple[E.PrimExpr, ...] | None:
    """The indices at which ``block`` loads ``param``, when every load uses the same."""
    loads: list[E.BufferLoad] = []

    def collect(node: object) -> None:
        if isinstance(node, E.BufferLoad) and node.buffer is param:
            loads.append(node)

    visit(block.body, collect)
    if block.init is not None:
        visit(block.init, collect)
    if not loads:
        return None
    first = loads[0].indices
    for load in loads[1:]:
        if not all(same_expr(a, b) for a, b in zip(load.indices, first, strict=True)):
            return None
    return first


def _pieces(binding: E.PrimExpr, dim: int, size: int, loops: list[For]) -> list[_Piece] | None:
    """The loops whose pieces make up ``binding`` exactly (a mixed radix over
    ``0..size-1``), or None."""
    linear = to_linear(binding)
    if linear.const != 0:
        return None
    position = {id(loop.loop_var): k for k, loop in enumerate(loops)}
    pieces = []
    for atom, coeff in linear.terms.values():
        loop = position.get(id(atom)) if isinstance(atom, E.Var) else None
        if loop is None or coeff <= 0:
            return None
        start, extent = const_int(loops[loop].min), const_int(loops[loop].extent)
        if start != 0 or extent is None:
            return None
        if extent > 1:  # a loop of one iteration adds nothing, whatever its coefficient
            pieces.append(_Piece(loop, dim, coeff, extent))
    stride = 1
    for piece in sorted(pieces, key=lambda p: p.coeff):
        if piece.coeff != stride:
            return None
        stride *= piece.extent
    if stride != size:
        return None
    return pieces


def _merged(pieces: list[_Piece]) -> list[_Piece]:
    """Neighbouring pieces that continue each other (``k0`` then ``k1`` of one split)
    as one: the layout gets no more dimensions than the reads need."""
    merged: list[_Piece] = []
    for piece in pieces:
        last = merged[-1] if merged else None
        if last is not None and last.dim == piece.dim and last.coeff == piece.coeff * piece.extent:
            merged[-1] = _Piece(last.loop, piece.dim, piece.coeff, last.extent * piece.extent)
        else:
            merged.append(piece)
    return merged


def _map_text(pieces: list[_Piece], shape: list[int]) -> str | None:
    names = [f"d{k}" for k in range(len(shape))]
    identity = [p.dim for p in pieces] == list(range(len(shape))) and all(
        p.extent == shape[p.dim] for p in pieces
    )
    if identity or not pieces:
        return None
    outputs = []
    for piece in pieces:
        term = names[piece.dim] if piece.coeff == 1 else f"{names[piece.dim]} // {piece.coeff}"
        if piece.coeff * piece.extent < shape[piece.dim]:
            term = f"({term}) % {piece.extent}" if piece.coeff > 1 else f"{term} % {piece.extent}"
        outputs.append(term)
    return f"{', '.join(names)} -> {', '.join(outputs)}"
