"""When the iterations of a loop may run at the same time (parallel, vectorized).

A loop may bind only spatial block variables: a reduce variable would have
several iterations update one element. That is not enough when a block updates
its output in place (a reduction, or any block that reads what it writes): two
iterations that update the same element at once lose updates. That happens when
the block does not depend on the loop at all, or when compute_at left it
recomputing overlapping parts in neighbouring iterations. So for such a block the
elements each iteration updates must be shown disjoint from every other
iteration's. Blocks that only overwrite may recompute an element in several
iterations: they all store the same value.

The elements one iteration updates are covered by boxes: one window per spatial
variable, bounded over the inner loops (``bound``). The parallel loop, and any
inner loop that shares a ``//`` or ``%`` with it (a split of a fused loop), are
enumerated instead, so each box is tight; boxes of different iterations must not
overlap. The loops outside take their first value. Cheaper, and tried first where
the loop appears in the bindings only affinely (an unfused tile loop): a window that
provably moves past itself from one iteration to the next. With symbolic extents or
too many boxes, that test alone decides.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from compiler.arith import Interval, bound, can_prove
from compiler.ir import expr as E
from compiler.ir.analysis import ancestors_of, buffers_read, buffers_written, substitute, uses_var
from compiler.ir.expr import PrimExpr, Range, Var, is_int
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, children, transform_pre, visit
from compiler.ir.stmt import Block, BlockRealize, For, IterKind, Stmt
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int
from compiler.schedule.primitives.cross_thread import cross_thread_reduction
from compiler.schedule.primitives.dataflow import evaluate
from compiler.schedule.primitives.iteration_boxes import boxes, owners_overlap

# Most boxes x 3**windows compared; beyond it only the symbolic test decides.
_BOX_LIMIT = 200_000

# Nodes in which the parallel loop and an inner loop cannot be bounded apart.
_NON_AFFINE = (E.FloorDiv, E.FloorMod, E.Div, E.Min, E.Max, E.Select, E.Cast, E.Call)


def check_concurrent(func: PrimFunc, loop: For, verb: str, *, cross_thread: bool = False) -> None:
    """Raise ScheduleError unless ``loop``'s iterations may run at the same time;
    ``verb`` ("parallelize", "vectorize", "bind") words the message. With
    ``cross_thread`` (a binding to ``threadIdx.x``), the loop may bind the reduce
    variables of a reduction that the threads then share
    (``compiler.schedule.primitives.cross_thread``)."""
    outer = _outer_values(func, loop)

    def walk(node: Node, tainted: frozenset[int], inner: tuple[For, ...]) -> None:
        if isinstance(node, For):
            walk(node.body, tainted, (*inner, node))
            return
        if not isinstance(node, BlockRealize):
            for child in children(node):
                if isinstance(child, Stmt):
                    walk(child, tainted, inner)
            return
        block = node.block
        inner_tainted = set(tainted)
        for iv, value in zip(block.iter_vars, node.iter_values, strict=True):
            if not _uses_any(value, tainted):
                continue
            if iv.kind is IterKind.REDUCE:
                if cross_thread and _shared_by_threads(loop, node, iv.var.name):
                    return
                raise ScheduleError(
                    f"cannot {verb} loop {loop.loop_var.name!r}: it binds the reduce variable "
                    f"{iv.var.name} of block {block.name!r}"
                )
            inner_tainted.add(id(iv.var))
        if _updates_in_place(block):
            _check_disjoint_updates(loop, node, inner, outer, verb)
        for part in (block.init, block.body):
            if part is not None:
                walk(part, frozenset(inner_tainted), inner)

    walk(loop.body, frozenset({id(loop.loop_var)}), ())


def _shared_by_threads(loop: For, realize: BlockRealize, reduce_var: str) -> bool:
    """Whether ``loop`` (bound to ``threadIdx.x``) runs ``realize``'s reduction as one
    its threads share; raises ScheduleError saying why not when it binds the reduction
    otherwise."""
    shared = cross_thread_reduction(loop)
    if isinstance(shared, str):
        raise ScheduleError(
            f"cannot bind loop {loop.loop_var.name!r} to threadIdx.x: it binds the reduce "
            f"variable {reduce_var} of block {realize.block.name!r}, and its threads can "
            f"share that reduction only when nothing else is in the way: {shared}"
        )
    return shared.realize is realize


def _check_disjoint_updates(
    loop: For,
    realize: BlockRealize,
    inner: tuple[For, ...],
    outer: dict[Var, int],
    verb: str,
) -> None:
    if const_int(loop.extent) == 1:
        return
    var = loop.loop_var
    bindings = [
        value
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.SPATIAL and uses_var(value, var)
    ]
    start = f"cannot {verb} loop {var.name!r}: block {realize.block.name!r} updates its output "
    if not bindings:
        raise ScheduleError(
            start + "in place but none of its variables depends on the loop, so every "
            "iteration would update the same elements"
        )
    affine = _affine_in(var, bindings)
    if affine and _windows_increase(var, bindings, inner):
        return
    verdict = _disjoint_boxes(loop, bindings, inner, outer)
    if verdict is None:  # the windows' test, unless it already failed above
        verdict = not affine and _windows_increase(var, bindings, inner)
    if not verdict:
        raise ScheduleError(
            start + "in place, and different iterations may update the same elements (as "
            "when compute_at leaves it recomputing overlapping parts); parallelize a loop "
            "outside the one it is computed at"
        )


def _windows_increase(var: Var, bindings: list[PrimExpr], inner: tuple[For, ...]) -> bool:
    """Whether some binding's window over the inner loops provably moves past itself
    from one iteration of ``var`` to the next, which makes the iterations disjoint."""
    ranges = {x.loop_var: Range(x.min, x.extent) for x in inner}
    return any(_increasing(bound(value, ranges), var) for value in bindings)


def _affine_in(var: Var, bindings: list[PrimExpr]) -> bool:
    """Whether ``var`` appears in no binding under a non-affine operation (a ``//`` or
    ``%`` of a fused loop), where bounding alone seldom shows the windows increase."""
    found = False

    def look(n: Node) -> bool:
        nonlocal found
        if isinstance(n, _NON_AFFINE) and uses_var(n, var):
            found = True
        return not found

    for value in bindings:
        visit(value, look)
    return not found


def _disjoint_boxes(
    loop: For, bindings: list[PrimExpr], inner: tuple[For, ...], outer: dict[Var, int]
) -> bool | None:
    """Whether the boxes of different iterations never overlap; None when they
    cannot be computed (symbolic sizes) or there are too many."""
    first, extent = const_int(loop.min), const_int(loop.extent)
    if first is None or extent is None:
        return None
    mixed = _mixed_loops(loop.loop_var, bindings, inner)
    enumerated = frozenset(id(x) for x in (loop.loop_var, *(m.loop_var for m in mixed)))
    others = [x for x in inner if all(x is not m for m in mixed)]
    bounded = frozenset(id(x.loop_var) for x in others)
    ranges = {x.loop_var: Range(x.min, x.extent) for x in others}
    atoms: dict[Var, PrimExpr] = {}
    windows = [bound(_atomize(value, enumerated, bounded, atoms), ranges) for value in bindings]
    if not all(w.is_bounded for w in windows):
        return None
    rows: list[tuple[int, ...]] = []
    budget = _BOX_LIMIT // 3 ** len(windows)
    enumerated_vars = (loop.loop_var, *(m.loop_var for m in mixed))
    for value in range(first, first + extent):
        for env in _assignments(mixed, {**outer, loop.loop_var: value}):
            if env is None or len(rows) >= budget:
                return None
            rows.append(tuple(env[v] for v in enumerated_vars))
    if not rows:
        return True
    columns = np.array(rows, dtype=np.int64).T
    points: dict[int, int | np.ndarray] = {id(v): value for v, value in outer.items()}
    points.update({id(v): column for v, column in zip(enumerated_vars, columns, strict=True)})
    found = boxes(windows, atoms, points, len(rows))
    if found is None:
        return None
    return not owners_overlap(*found, columns[0])


def _mixed_loops(var: Var, bindings: list[PrimExpr], inner: tuple[For, ...]) -> list[For]:
    """The inner loops that appear with ``var`` under a non-affine operation."""
    found: set[int] = set()

    def look(n: Node) -> None:
        if isinstance(n, _NON_AFFINE) and uses_var(n, var):
            found.update(id(x.loop_var) for x in inner if uses_var(n, x.loop_var))

    for value in bindings:
        visit(value, look)
    return [x for x in inner if id(x.loop_var) in found]


def _atomize(
    value: PrimExpr, enumerated: frozenset[int], bounded: frozenset[int], atoms: dict[Var, PrimExpr]
) -> PrimExpr:
    """``value`` with each largest part that uses enumerated loops but none of the
    ``bounded`` ones replaced by a fresh variable defined in ``atoms``, so bounding
    over the bounded loops keeps it exact: ``f % 4 * 2 + j`` becomes ``q0 + j`` with
    ``q0 = f % 4 * 2``, where bounding ``f % 4`` alone would forget ``f``."""

    def replace(n: Node) -> Node | None:
        if not isinstance(n, PrimExpr) or not is_int(n.dtype):
            return None
        if _uses_any(n, enumerated) and not _uses_any(n, bounded):
            atom = Var(f"q{len(atoms)}", n.dtype)
            atoms[atom] = n
            return atom
        return None

    return transform_pre(value, replace)


def _assignments(loops: list[For], env: dict[Var, int]) -> Iterator[dict[Var, int] | None]:
    """Every combination of values of ``loops`` (outermost first) on top of ``env``;
    a None where a loop's range is not a known integer."""
    if not loops:
        yield env
        return
    first, rest = loops[0], loops[1:]
    lo, size = evaluate(first.min, env), evaluate(first.extent, env)
    if lo is None or size is None:
        yield None
        return
    for value in range(lo, lo + size):
        yield from _assignments(rest, {**env, first.loop_var: value})


def _increasing(window: Interval, var: Var) -> bool:
    """The window of iteration ``var + 1`` starts after the one of ``var`` ends."""
    if window.min is None or window.max is None:
        return False
    following = substitute(window.min, {var: var + 1})
    return can_prove(following > window.max)


def _outer_values(func: PrimFunc, loop: For) -> dict[Var, int]:
    """The loops around ``loop`` at their first value, where that is a constant."""
    values: dict[Var, int] = {}
    for node in ancestors_of(func.body, loop):
        if isinstance(node, For):
            first = const_int(node.min)
            if first is not None:
                values[node.loop_var] = first
    return values


def _uses_any(e: Node, var_ids: frozenset[int]) -> bool:
    hit = False

    def look(n: Node) -> bool | None:
        nonlocal hit
        if isinstance(n, Var) and id(n) in var_ids:
            hit = True
        return not hit

    visit(e, look)
    return hit


def _updates_in_place(block: Block) -> bool:
    if block.init is not None or block.is_reduction:
        return True
    written = {id(b) for b in buffers_written(block.body)}
    return any(id(b) in written for b in buffers_read(block.body))
