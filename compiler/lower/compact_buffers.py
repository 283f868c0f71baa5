"""``compact_buffers``: allocate each intermediate buffer where it is used, at the size used.

After ``lower_blocks`` every block-allocated buffer is an ``Allocate`` at its
block's position, often the root, with the buffer's full declared shape. A
cache_write accumulator under a tile loop, though, only ever holds one tile: this
pass moves each ``Allocate`` down to wrap the body of the innermost loop that
still encloses every access of its buffer (under a parallel loop that makes the
buffer private to each thread), then shrinks each dimension to the region the
accesses touch in one iteration of that loop, subtracting the region's start
from every index. A dimension shrinks only when the region's extent is bounded
by a constant, so a tile-sized accumulator becomes a small fixed-size array. A
buffer whose shape would stay symbolic keeps its place: code generation puts
such a buffer on the heap, and inside a loop that would be an allocation per
iteration.

Like TVM's CompactBufferAllocation, this relies on the block semantics the
schedule primitives keep: values of a block-allocated buffer never flow from one
iteration of the loop that encloses all its accesses to the next.
"""

from __future__ import annotations

import dataclasses

from compiler.arith import Interval, bound, const_bound, normalize, simplify
from compiler.arith.linear import to_linear
from compiler.ir.analysis import free_vars, substitute, uses_var
from compiler.ir.buffer import Buffer
from compiler.ir.expr import LT, And, BufferLoad, Call, IntImm, PrimExpr, Range, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, children, transform, transform_pre, visit
from compiler.ir.printer import expr_to_str
from compiler.ir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt, Stmt

Ranges = dict[Var, Range]


def compact_buffers(func: PrimFunc) -> PrimFunc:
    return dataclasses.replace(func, body=_visit(func.body, {}, {}))


def _visit(stmt: Stmt, ranges: Ranges, threads: Ranges) -> Stmt:
    """Rebuild ``stmt`` with every Allocate in it placed and shrunk; ``ranges`` are
    the loops around ``stmt``, ``threads`` those of them bound to ``threadIdx`` or
    ``vthread``."""
    if isinstance(stmt, Allocate):
        placed = dataclasses.replace(stmt, body=_visit(stmt.body, ranges, threads))
        return _compact(placed, ranges, threads)
    if isinstance(stmt, For):
        inner = {**ranges, stmt.loop_var: Range(stmt.min, stmt.extent)}
        if _is_thread_loop(stmt):
            threads = {**threads, stmt.loop_var: Range(stmt.min, stmt.extent)}
        return _replace_body(stmt, _visit(stmt.body, inner, threads))
    if isinstance(stmt, SeqStmt):
        new = tuple(_visit(s, ranges, threads) for s in stmt.seq)
        changed = any(a is not b for a, b in zip(new, stmt.seq, strict=True))
        return SeqStmt(new) if changed else stmt
    if isinstance(stmt, IfThenElse):
        then_case = _visit(stmt.then_case, ranges, threads)
        else_case = None if stmt.else_case is None else _visit(stmt.else_case, ranges, threads)
        if then_case is stmt.then_case and else_case is stmt.else_case:
            return stmt
        return IfThenElse(stmt.condition, then_case, else_case)
    return stmt


def _is_thread_loop(loop: For) -> bool:
    """Bound to threads or virtual threads: a shared buffer under it serves them all."""
    return loop.thread_binding is not None and loop.thread_binding.startswith(
        ("threadIdx", "vthread")
    )


def _compact(alloc: Allocate, ranges: Ranges, threads: Ranges) -> Stmt:
    """``alloc`` moved into the innermost loop enclosing all accesses, and shrunk."""
    buffer = alloc.buffer
    path = _path_to_innermost_loop(alloc.body, buffer)
    if not path:
        return _shrunk(buffer, alloc.body, ranges, _relaxed(buffer, [], threads))
    fixed = dict(ranges)
    for node in path:
        if isinstance(node, For):
            fixed[node.loop_var] = Range(node.min, node.extent)
    target = path[-1]
    assert isinstance(target, For)
    inner = _shrunk(buffer, target.body, fixed, _relaxed(buffer, path, threads))
    if not all(isinstance(d, IntImm) for d in inner.buffer.shape):
        return _shrunk(buffer, alloc.body, ranges, _relaxed(buffer, [], threads))
    placed: Stmt = _replace_body(target, inner)
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
        placed = _replace_child(parent, child, placed)
    return placed


def _path_to_innermost_loop(body: Stmt, buffer: Buffer) -> list[Stmt]:
    """The statements from ``body`` down to the innermost loop whose body holds every
    access of ``buffer`` (empty when no loop does)."""
    if not _uses(body, buffer):
        return []
    path: list[Stmt] = []
    node: Stmt = body
    best = 0
    while True:
        path.append(node)
        if isinstance(node, For):
            if _uses(node.min, buffer) or _uses(node.extent, buffer):
                break
            best = len(path)
            node = node.body
        elif isinstance(node, Allocate):
            node = node.body
        elif isinstance(node, SeqStmt):
            holders = [s for s in node.seq if _uses(s, buffer)]
            if len(holders) != 1:
                break
            node = holders[0]
        elif isinstance(node, IfThenElse):
            branches = [s for s in (node.then_case, node.else_case) if s is not None]
            holders = [s for s in branches if _uses(s, buffer)]
            if _uses(node.condition, buffer) or len(holders) != 1:
                break
            node = holders[0]
        else:
            break
    return path[:best]


def _relaxed(buffer: Buffer, path: list[Stmt], threads: Ranges) -> Ranges:
    """The loops that the region spans although the allocation is inside them: for a
    buffer in GPU shared memory, those bound to ``threadIdx`` or ``vthread``
    (``threads`` around the allocation, and those on ``path`` down to where it
    moves), since one copy serves every thread and virtual thread of the block."""
    if buffer.scope != "shared":
        return {}
    on_path = {
        n.loop_var: Range(n.min, n.extent)
        for n in path
        if isinstance(n, For) and _is_thread_loop(n)
    }
    return {**threads, **on_path}


def _shrunk(buffer: Buffer, scope: Stmt, fixed: Ranges, relaxed: Ranges) -> Allocate:
    """``Allocate`` of ``buffer`` around ``scope``, each dimension cut to the region
    the accesses in ``scope`` touch while the loops in ``fixed`` stay put, except
    those in ``relaxed``, which the region spans."""
    fixed = {var: r for var, r in fixed.items() if var not in relaxed}
    region = _access_region(scope, buffer, relaxed)
    if region is None:
        return Allocate(buffer, scope)
    shape: list[PrimExpr] = []
    offsets: list[PrimExpr | None] = []
    for dim, interval in zip(buffer.shape, region, strict=True):
        extent = _const_extent(interval, fixed)
        old = dim.value if isinstance(dim, IntImm) else None
        if extent is None or (old is not None and extent >= old):
            shape.append(dim)
            offsets.append(None)
        else:
            shape.append(IntImm(extent, dim.dtype))
            offsets.append(interval.min)
    if all(o is None for o in offsets):
        return Allocate(buffer, scope)
    compact = dataclasses.replace(buffer, shape=tuple(shape))
    return Allocate(compact, _reindex(scope, buffer, compact, offsets))


def _const_extent(interval: Interval, fixed: Ranges) -> int | None:
    """A constant that ``max - min + 1`` never exceeds while the fixed loops run."""
    if interval.min is None or interval.max is None:
        return None
    extent = simplify(interval.max - interval.min + 1, fixed)
    if isinstance(extent, IntImm):
        return extent.value
    _, high = const_bound(extent, fixed)
    return high


def _access_region(scope: Stmt, buffer: Buffer, relaxed: Ranges) -> list[Interval] | None:
    """Per dimension, the union of the bounds of every index of ``buffer`` in
    ``scope`` over the loops inside ``scope`` and the ``relaxed`` ones; None when
    nothing accesses it."""
    region: list[Interval] | None = None
    outer = _OuterTerms()

    def record(indices: tuple[PrimExpr, ...], inner: Ranges) -> None:
        nonlocal region
        dims = [bound(outer.opaque(i, inner), inner) for i in indices]
        region = dims if region is None else [a.union(b) for a, b in zip(region, dims, strict=True)]

    def loads_in(e: Node, inner: Ranges) -> None:
        def check(n: Node) -> None:
            if isinstance(n, BufferLoad) and n.buffer is buffer:
                record(n.indices, inner)

        visit(e, check)

    def walk(node: Stmt, inner: Ranges) -> None:
        if isinstance(node, BufferStore) and node.buffer is buffer:
            record(node.indices, inner)
        body_ranges = inner
        if isinstance(node, For):
            body_ranges = {**inner, node.loop_var: Range(node.min, node.extent)}
        elif isinstance(node, IfThenElse):
            loads_in(node.condition, inner)
            walk(node.then_case, _narrowed(inner, node.condition))
            if node.else_case is not None:
                walk(node.else_case, inner)
            return
        for child in children(node):
            if isinstance(child, Stmt):
                walk(child, body_ranges if isinstance(node, For) else inner)
            else:
                loads_in(child, inner)

    walk(scope, dict(relaxed))
    return None if region is None else [outer.restore(interval) for interval in region]


def _narrowed(ranges: Ranges, condition: PrimExpr) -> Ranges:
    """``ranges`` with the loops cut to what ``condition`` lets through, for each of
    its conjuncts ``sum(c * loop) + k < bound`` (positive constant ``c``, loops from
    0, constant ``bound``): a loop's largest value is what the bound leaves when the
    others sit at 0. A split that does not divide guards its body so; the region
    the guarded accesses touch is then the tile, not the whole split."""
    narrowed = dict(ranges)
    for conjunct in _conjuncts(condition):
        if not (isinstance(conjunct, LT) and isinstance(conjunct.b, IntImm)):
            continue
        linear = to_linear(conjunct.a)
        loops = [(a, c) for a, c in linear.terms.values() if isinstance(a, Var) and c > 0]
        if len(loops) != len(linear.terms) or not all(a in narrowed for a, _ in loops):
            continue
        if not all(_starts_at_zero(narrowed[a]) for a, _ in loops):
            continue
        for atom, coeff in loops:
            old = narrowed[atom]
            last = (conjunct.b.value - 1 - linear.const) // coeff
            if isinstance(old.extent, IntImm) and 0 <= last < old.extent.value - 1:
                narrowed[atom] = Range(old.min, IntImm(last + 1, old.extent.dtype))
    return narrowed


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, And):
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    return [e]


def _starts_at_zero(r: Range) -> bool:
    return isinstance(r.min, IntImm) and r.min.value == 0


class _OuterTerms:
    """Stands in a fresh variable for each term of an index that only loops outside
    the scope move, such as ``fused % 2 * 28`` of a fused parallel loop: constant in
    one iteration of the scope, it is an offset of the region, but bounding it would
    spread the region over every value it takes (``[0, 28]``) and keep the buffer
    whole. The same term (as printed) gets the same variable everywhere, so the
    region's ends still subtract; ``restore`` puts the terms back."""

    def __init__(self) -> None:
        self._atoms: dict[str, Var] = {}
        self._terms: dict[Var, PrimExpr] = {}

    def opaque(self, index: PrimExpr, inner: Ranges) -> PrimExpr:
        def replace(n: Node) -> Node | None:
            if isinstance(n, Var | IntImm) or not isinstance(n, PrimExpr):
                return None
            if any(uses_var(n, v) for v in inner) or not _is_arithmetic(n):
                return None
            if not free_vars(n):
                return None
            key = expr_to_str(n)
            atom = self._atoms.get(key)
            if atom is None:
                atom = Var(f"outer{len(self._atoms)}", n.dtype)
                self._atoms[key] = atom
                self._terms[atom] = n
            return atom

        return transform_pre(index, replace)

    def restore(self, interval: Interval) -> Interval:
        if not self._terms:
            return interval
        low = None if interval.min is None else substitute(interval.min, self._terms)
        high = None if interval.max is None else substitute(interval.max, self._terms)
        return Interval(low, high)


def _is_arithmetic(e: PrimExpr) -> bool:
    """Built from variables and constants alone: no load or call, whose value could
    change inside the scope."""
    found = True

    def check(n: Node) -> bool:
        nonlocal found
        found = found and not isinstance(n, BufferLoad | Call)
        return found

    visit(e, check)
    return found


def _reindex(scope: Stmt, old: Buffer, new: Buffer, offsets: list[PrimExpr | None]) -> Stmt:
    def shift(indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return tuple(
            i if o is None else normalize(i - o) for i, o in zip(indices, offsets, strict=True)
        )

    def rewrite(n: Node) -> Node | None:
        if isinstance(n, BufferLoad) and n.buffer is old:
            return BufferLoad(new, shift(n.indices))
        if isinstance(n, BufferStore) and n.buffer is old:
            return BufferStore(new, n.value, shift(n.indices))
        return None

    return transform(scope, rewrite)


def _uses(node: Node, buffer: Buffer) -> bool:
    hit = False

    def check(n: Node) -> bool:
        nonlocal hit
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buffer:
            hit = True
        return not hit

    visit(node, check)
    return hit


def _replace_body(stmt: For, body: Stmt) -> For:
    return stmt if body is stmt.body else dataclasses.replace(stmt, body=body)


def _replace_child(parent: Stmt, old: Stmt, new: Stmt) -> Stmt:
    if isinstance(parent, (For, Allocate)):
        return dataclasses.replace(parent, body=new)
    if isinstance(parent, SeqStmt):
        return SeqStmt(tuple(new if s is old else s for s in parent.seq))
    if isinstance(parent, IfThenElse):
        if parent.then_case is old:
            return dataclasses.replace(parent, then_case=new)
        return dataclasses.replace(parent, else_case=new)
    raise TypeError(f"cannot replace a child of {type(parent).__name__}")
