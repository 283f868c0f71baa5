"""``te.create_prim_func``: tensor expressions to a PrimFunc with one block per compute."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.arith import simplify
from compiler.arith.access_bounds import check_accesses
from compiler.ir import expr as E
from compiler.ir.analysis import contains, free_vars, substitute
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterVar,
    Stmt,
    seq,
    true_predicate,
)
from compiler.te.operation import reduce_identity
from compiler.te.tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    ProducerLoad,
    Reduce,
    Tensor,
    TensorError,
    ViewOp,
)

_COMBINERS = {"sum": E.Add, "max": E.Max, "min": E.Min}


def create_prim_func(tensors: Sequence[Tensor]) -> PrimFunc:
    """A PrimFunc whose parameters are exactly ``tensors``, in order.

    Every placeholder the outputs read must be among ``tensors``; computed
    tensors that are not listed become internal buffers of the root block.
    """
    func, _ = lower_tensors(tensors)
    return func


def lower_tensors(tensors: Sequence[Tensor]) -> tuple[PrimFunc, dict[Operation, str]]:
    """``create_prim_func`` and the name of the block each compute operation became
    (names are made unique, so two computes called "C" give "C" and "C_1")."""
    tensors = list(tensors)
    ops = topological_order(tensors)
    names = _UniqueNames()
    buffers: dict[int, Buffer] = {}
    for op in ops:
        buffers[id(op)] = Buffer(names.buffer(op.name), op.shape, op.dtype)
    param_ops = {id(t.op) for t in tensors}
    for op in ops:
        if isinstance(op, PlaceholderOp) and id(op) not in param_ops:
            raise TensorError(
                f"placeholder {op.name!r} is read but not among the arguments; "
                "pass it to create_prim_func"
            )
    block_names: dict[Operation, str] = {}
    nests = []
    for op in ops:
        if isinstance(op, ComputeOp):
            block_names[op] = names.block(op.name)
            nests.append(_loop_nest(op, buffers, block_names[op]))
    internal = tuple(
        buffers[id(op)] for op in ops if isinstance(op, ComputeOp) and id(op) not in param_ops
    )
    root = Block("root", (), seq(*nests), alloc_buffers=internal)
    params = tuple(buffers[id(t.op)] for t in tensors)
    func = PrimFunc(params, BlockRealize((), true_predicate(), root), {"global_symbol": "main"})
    _check_bound(ops, func)
    check_accesses(func)
    return func, block_names


def _check_bound(ops: list[PlaceholderOp | ComputeOp], func: PrimFunc) -> None:
    """Every variable a compute uses is one of its axes, an axis of its reduction or a
    size the parameters' shapes fix; anything else would be unbound when it runs."""
    sizes = {id(v) for v in func.size_vars}
    for op in ops:
        if not isinstance(op, ComputeOp):
            continue
        own = {id(iv.var) for iv in (*op.axis, *op.reduce_axis)}
        for var in (v for part in (op.body, *op.shape) for v in free_vars(part)):
            if id(var) not in own and id(var) not in sizes:
                raise TensorError(
                    f"compute {op.name!r} uses the variable {var.name!r}, which is none of its "
                    "axes, no axis of its reduction (pass it in axis=) and no size in the "
                    "arguments' shapes"
                )


class _UniqueNames:
    def __init__(self) -> None:
        self._blocks: set[str] = set()
        self._buffers: set[str] = set()

    @staticmethod
    def _fresh(name: str, taken: set[str]) -> str:
        candidate, n = name, 1
        while candidate in taken:
            candidate = f"{name}_{n}"
            n += 1
        taken.add(candidate)
        return candidate

    def block(self, name: str) -> str:
        return self._fresh(name, self._blocks)

    def buffer(self, name: str) -> str:
        return self._fresh(name, self._buffers)


def topological_order(outputs: list[Tensor]) -> list[PlaceholderOp | ComputeOp]:
    """The operations ``outputs`` depend on, each after the ones it reads."""
    order: list[PlaceholderOp | ComputeOp] = []
    seen: set[int] = set()

    def visit_op(op: PlaceholderOp | ComputeOp) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            assert not isinstance(t.op, ViewOp), "reading a view reads its source"
            visit_op(t.op)
        order.append(op)

    for t in outputs:
        if not isinstance(t, Tensor):
            raise TensorError(f"create_prim_func takes tensors, got {type(t).__name__}")
        if isinstance(t.op, ViewOp):
            raise TensorError(
                f"tensor {t.name!r} is a view of {t.op.source.name!r}, read in place by the "
                "computations that index it; pass its source as the argument instead"
            )
        visit_op(t.op)
    return order


def _to_buffer_loads(e: PrimExpr, buffers: dict[int, Buffer]) -> PrimExpr:
    def convert_load(n: Node) -> Node | None:
        if isinstance(n, ProducerLoad):
            return E.BufferLoad(buffers[id(n.tensor.op)], n.indices)
        return None

    return transform(e, convert_load)


def _loop_nest(op: ComputeOp, buffers: dict[int, Buffer], block_name: str) -> Stmt:
    """for i, j, k: block(v_i = i, v_j = j, v_k = k): out[v_i, v_j] (+)= body."""
    axes = list(op.axis) + list(op.reduce_axis)
    block_vars = [IterVar(Var("v_" + iv.var.name, iv.var.dtype), iv.dom, iv.kind) for iv in axes]
    to_block_var: dict[Var, PrimExpr] = {
        iv.var: bv.var for iv, bv in zip(axes, block_vars, strict=True)
    }
    out = buffers[id(op)]
    indices = tuple(bv.var for bv in block_vars[: len(op.axis)])
    ranges = {bv.var: bv.dom for bv in block_vars}
    body_expr = _without_needless_division(
        _to_buffer_loads(substitute(op.body, to_block_var), buffers), ranges
    )
    init: Stmt | None = None
    if isinstance(body_expr, Reduce):
        reduce = body_expr
        combine = _COMBINERS[reduce.combiner]
        start = (
            reduce.init if reduce.init is not None else reduce_identity(reduce.combiner, op.dtype)
        )
        init = BufferStore(out, start, indices)
        current = E.BufferLoad(out, indices)
        value: PrimExpr = combine(current, reduce.source)
        if reduce.condition is not None:
            value = E.Select(reduce.condition, value, current)
        body: Stmt = BufferStore(out, value, indices)
    else:
        body = BufferStore(out, body_expr, indices)
    loops = [Var(iv.var.name, iv.var.dtype) for iv in axes]
    bindings = tuple(
        lv if _is_zero(bv.dom.min) else lv + bv.dom.min
        for lv, bv in zip(loops, block_vars, strict=True)
    )
    block = Block(block_name, tuple(block_vars), body, init, annotations=dict(op.attrs))
    stmt: Stmt = BlockRealize(bindings, true_predicate(), block)
    for lv, bv in reversed(list(zip(loops, block_vars, strict=True))):
        stmt = For(lv, E.const(0, lv.dtype), bv.dom.extent, ForKind.SERIAL, stmt)
    return stmt


def _without_needless_division(e: PrimExpr, ranges: dict[Var, E.Range]) -> PrimExpr:
    """``e`` with each load index that divides or takes a remainder replaced by a
    simpler form without any, where the ranges of the block's variables give one.
    Reading through reshapes and transposes (``te.view``) composes flat offsets: a
    BERT attention score read ``p0[(i*768 + h*64 + k) // 768, (...) % 768]``, which
    is ``p0[i, h*64 + k]``. Left divided, loop tiling could not see the unit stride
    and the kernel ran at a seventh of the speed. Only indices that lose every
    division change, so other workloads keep their keys (and stored records)."""

    def resolve(n: Node) -> Node | None:
        if not isinstance(n, E.BufferLoad) or not any(_divides(i) for i in n.indices):
            return None
        simpler = tuple(simplify(i, ranges) if _divides(i) else i for i in n.indices)
        if any(_divides(i) for i in simpler):
            return None
        return E.BufferLoad(n.buffer, simpler)

    return transform(e, resolve)


def _divides(e: PrimExpr) -> bool:
    return contains(e, (E.FloorDiv, E.FloorMod))


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0
