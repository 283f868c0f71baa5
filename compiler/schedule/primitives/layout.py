"""transform_layout: store a buffer in another layout (TVM TensorIR's primitive).

The buffer gets the shape the index map gives it, and every load and store of
it in the function is rewritten through the map, so the program computes the
same values with its data placed differently: ``NCHW`` becomes ``NCHW[16]c``
(``n, c, h, w -> n, c // 16, h, w, c % 16``) so that the inner channels are
contiguous and vectorize.

An intermediate buffer changes in place. A parameter cannot, since the caller's
arrays keep the original layout; the function instead gets a new buffer in the
new layout and a copy block between the two: one that converts an input at the
start of the function (annotated ``layout_rewrite`` with the parameter's name,
so a build can convert a constant weight once, see ``compiler.lower.prepack``),
or one that converts an output back at its end. The copy is an ordinary block
that later primitives can split, vectorize or compute_at.

A block that stores the buffer now stores it at mapped indices (``v_c // 16``),
not at its own block variables one per dimension, so compute_at and
reverse_compute_at refuse to move that block or a consumer under it (TVM's
``transform_block_layout``, which would re-index the block, does not exist here
yet); lay out what such a block writes before it through a cache instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from compiler.arith import normalize
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import LAYOUT_REWRITE_ATTR
from compiler.ir.node import Node, transform
from compiler.ir.stmt import Block, BlockRealize, BufferStore, Stmt, seq
from compiler.schedule.errors import ScheduleError
from compiler.schedule.index_map import IndexMap
from compiler.schedule.primitives.cache import check_whole_write, point_nest
from compiler.schedule.primitives.dataflow import (
    accesses,
    buffer_names,
    fresh_name,
    is_param,
    leaf_realizes,
    locate,
    reads_of,
    scope_children,
    site_of,
    taken_block_names,
    writers,
    writes_of,
)

BUFFER_KINDS = ("read", "write")

BufferSpec = tuple[str, int] | str


def transform_layout(
    func: PrimFunc, block: Block, buffer: BufferSpec, index_map: IndexMap
) -> tuple[PrimFunc, str | None]:
    """Lay out one buffer of ``block`` by ``index_map``; also the name of the copy
    block made for a parameter (None for an intermediate).

    ``buffer`` is ``("read", k)`` (the k-th buffer the block loads, init first, in
    order of first load; a reduction's accumulator counts), ``("write", k)`` (the
    k-th it stores) or a buffer's name.
    """
    locate(func, block, "transform_layout")
    target = _pick(block, buffer)
    where = f"transform_layout of buffer {target.name} with '{index_map}'"
    shape = _const_shape(target, where)
    new_shape = tuple(E.const(d, "int32") for d in index_map.new_shape(shape, target.name))
    if not is_param(func, target):
        laid_out = dataclasses.replace(target, shape=new_shape)
        return _rewrite(func, target, laid_out, index_map), None
    name = fresh_name(f"{target.name}_layout", [*taken_block_names(func), *buffer_names(func)])
    laid_out = Buffer(name, new_shape, target.dtype)
    if not writers(func, target):
        convert = _conversion(name, target, laid_out, index_map.inverse(shape), index_map)
        return _with_copy(_rewrite(func, target, laid_out, index_map), convert, 0, laid_out), name
    _check_output(func, target, where)
    convert_back = point_nest(
        name,
        target.shape,
        lambda point: BufferStore(target, laid_out[index_map.apply(point)], point),
    )
    rewritten = _rewrite(func, target, laid_out, index_map)
    at = len(scope_children(rewritten.root_block))
    return _with_copy(rewritten, convert_back, at, laid_out), name


def _conversion(
    name: str, param: Buffer, laid_out: Buffer, inverse: IndexMap | None, index_map: IndexMap
) -> Stmt:
    """The block that fills ``laid_out`` from the input ``param``: over the new shape
    when the map inverts (so it writes one element per point, which compute_at
    needs), else over the parameter's shape."""
    mark = {LAYOUT_REWRITE_ATTR: param.name}
    if inverse is None:
        return point_nest(
            name,
            param.shape,
            lambda point: BufferStore(laid_out, param[point], index_map.apply(point)),
            mark,
        )
    return point_nest(
        name,
        laid_out.shape,
        lambda point: BufferStore(laid_out, param[inverse.apply(point)], point),
        mark,
    )


def _pick(block: Block, spec: BufferSpec) -> Buffer:
    reads, writes = reads_of(block), writes_of(block)
    listing = (
        f"it reads {[b.name for b in reads]} and writes {[b.name for b in writes]}; pass "
        "('read', k), ('write', k) or a buffer name"
    )
    if isinstance(spec, str):
        named = [b for b in [*reads, *writes] if b.name == spec]
        if not named:
            raise ScheduleError(
                f"transform_layout of block {block.name!r}: it uses no buffer {spec!r}; {listing}"
            )
        return named[0]
    kind, index = _kind_and_index(spec)
    if kind not in BUFFER_KINDS:
        raise ScheduleError(
            f"transform_layout of block {block.name!r}: buffer kind {kind!r} is not one of "
            f"{', '.join(BUFFER_KINDS)}; {listing}"
        )
    buffers = reads if kind == "read" else writes
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(buffers):
        raise ScheduleError(
            f"transform_layout of block {block.name!r}: {kind} buffer index {index!r} is out "
            f"of range; {listing}"
        )
    return buffers[index]


def _kind_and_index(spec: object) -> tuple[object, object]:
    if isinstance(spec, (list, tuple)) and len(spec) == 2:
        return spec[0], spec[1]
    raise ScheduleError(
        f"transform_layout: buffer {spec!r} must be ('read', k), ('write', k) or a buffer name"
    )


def _const_shape(buffer: Buffer, where: str) -> list[int]:
    shape = [dim.value for dim in buffer.shape if isinstance(dim, E.IntImm)]
    if len(shape) != buffer.ndim:
        raise ScheduleError(
            f"{where}: the shape {list(buffer.shape)} is symbolic; a layout is checked on "
            "constant shapes, so bind the sizes first"
        )
    return shape


def _rewrite(func: PrimFunc, old: Buffer, new: Buffer, index_map: IndexMap) -> PrimFunc:
    """``func`` with every access of ``old`` an access of ``new`` through the map, and
    ``new`` allocated wherever ``old`` was."""

    def remap(indices: Sequence[E.PrimExpr]) -> tuple[E.PrimExpr, ...]:
        return tuple(normalize(e) for e in index_map.apply(indices))

    def edit(n: Node) -> Node | None:
        if isinstance(n, E.BufferLoad) and n.buffer is old:
            return E.BufferLoad(new, remap(n.indices))
        if isinstance(n, BufferStore) and n.buffer is old:
            return BufferStore(new, n.value, remap(n.indices))
        if isinstance(n, Block) and any(b is old for b in n.alloc_buffers):
            allocs = tuple(new if b is old else b for b in n.alloc_buffers)
            return dataclasses.replace(n, alloc_buffers=allocs)
        return None

    return dataclasses.replace(func, body=transform(func.body, edit))


def _check_output(func: PrimFunc, buffer: Buffer, where: str) -> None:
    """The copy back writes every element of the parameter, so the function must
    write them all before any block reads one (the caller's values are not copied in)."""
    first = next(r for r in leaf_realizes(func.body) if accesses(r.block, buffer))
    if all(b is not buffer for b in writes_of(first.block)):
        raise ScheduleError(
            f"{where}: block {first.block.name!r} reads the parameter before any block writes "
            "it, and the new layout would not hold the caller's values; lay out a buffer the "
            "function writes first"
        )
    check_whole_write(func, site_of(func, first), buffer, "transform_layout")


def _with_copy(func: PrimFunc, copy: Stmt, at: int, laid_out: Buffer) -> PrimFunc:
    """``func`` with ``copy`` as the ``at``-th statement of the root block, which
    allocates ``laid_out``."""
    root = func.root_block
    children = scope_children(root)
    children.insert(at, copy)
    new_root = dataclasses.replace(
        root, body=seq(*children), alloc_buffers=(*root.alloc_buffers, laid_out)
    )
    assert isinstance(func.body, BlockRealize)
    return dataclasses.replace(func, body=dataclasses.replace(func.body, block=new_root))
