"""compute_at, reverse_compute_at and sample_compute_location (TensorIR semantics).

``compute_at`` moves a producer block under a loop of its consumers so that, in
each iteration of that loop, it computes just the part of its output the
consumers there read; ``reverse_compute_at`` moves a consumer under a loop of
its producers so that it consumes each part as soon as it is written. Both
rebuild the moved block's loop nest from a region computed by bound analysis
(``compiler.arith``) over the loops inside the target loop, guard the new nest
with a predicate where the region may leave the block's domain, and refuse,
with a ``ScheduleError``, any move that could change what the program computes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sequence

from compiler.arith import (
    Interval,
    bound,
    can_prove,
    const_bound,
    dense_image,
    normalize,
    simplify,
)
from compiler.arith.linear import to_linear
from compiler.ir import expr as E
from compiler.ir.analysis import block_accesses, substitute, uses_var
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import (
    Block,
    BlockRealize,
    For,
    ForKind,
    IterKind,
    IterVar,
    SeqStmt,
    Stmt,
    true_predicate,
)
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import const_int
from compiler.schedule.primitives.inline import compute_inline
from compiler.schedule.primitives.program_order import program_tree

Ranges = dict[Var, Range]


def compute_at(
    func: PrimFunc, block: Block, loop: For, preserve_unit_loops: bool = False
) -> PrimFunc:
    """Move producer ``block`` (with a new loop nest) to the start of ``loop``'s body."""
    move, regions = _compute_at_move(func, block, loop, need_regions=True)
    assert regions is not None
    return move.install(regions, preserve_unit_loops, at_end=False)


def compute_at_iterations(func: PrimFunc, block: Block, loop: For) -> int:
    """How many times ``block`` runs once computed at ``loop``: the product of the
    extents of the loops then around it (``loop``, the loops above it in the block's
    scope, and the new nest's; an extent that is not a constant counts as 1). Raises
    ScheduleError where compute_at would; the new program is not built, so a space
    that weighs a dozen locations of a block pays for their regions alone."""
    move, regions = _compute_at_move(func, block, loop, need_regions=True)
    assert regions is not None
    path = move.tree.path(loop)
    scope_at = max((k for k, n in enumerate(path) if isinstance(n, Block)), default=-1)
    extents = [n.extent for n in path[scope_at + 1 :] if isinstance(n, For)] + [loop.extent]
    nest = _block_nest(move.realize, regions, move.fixed_ranges(), preserve_unit_loops=False)
    while isinstance(nest, For):
        extents.append(nest.extent)
        nest = nest.body
    constants = (const_int(e) for e in extents)
    return math.prod(c if c is not None else 1 for c in constants)


def _compute_at_move(
    func: PrimFunc, block: Block, loop: For, *, need_regions: bool
) -> tuple[_Move, dict[int, Interval] | None]:
    """The checked move of compute_at, and the region of the block's output that each
    iteration of ``loop`` needs, per spatial variable (when ``need_regions`` or the
    legality check needs it); raises ScheduleError where the move is illegal.
    Installing the new nest cannot fail after this."""
    move = _Move("compute_at", func, block, loop)
    producer = move.realize
    move.require(move.tree.before(producer, loop), "the block comes after the loop")
    buffer, _ = move.output()
    writers = move.tree.writers(buffer)
    move.require(
        writers == [producer],
        f"{buffer.name!r} is also written by {_names(w for w in writers if w is not producer)}",
    )
    consumers = [r for r in move.tree.readers(buffer) if r is not producer]
    move.require(bool(consumers), f"no block reads its output {buffer.name!r}")
    outside = [r for r in consumers if not move.tree.contains(loop, r)]
    move.require(not outside, f"its consumers {_names(outside)} are not under the loop")
    move.require_idempotent(buffer)
    start, end = move.tree.span(producer)[1], move.tree.span(loop)[1]
    move.require_undisturbed(
        [r for r in move.tree.realizes_between(start, end) if r is not producer],
        written=_reads(producer.block) - {id(buffer)},
        touched=set(),
    )
    is_param = any(p is buffer for p in func.params)
    if not (need_regions or is_param):
        return move, None
    regions = _spatial_regions(move, buffer, move.region(consumers, buffer, reads=True))
    if is_param:
        move.require(
            _covers_domain(move, regions),
            f"its output {buffer.name!r} is a function parameter, and the parts its consumers "
            "under the loop read do not provably cover it over all iterations, so some "
            "elements would never be written; use reverse_compute_at on its consumer",
        )
    return move, regions


def _covers_domain(move: _Move, regions: dict[int, Interval]) -> bool:
    """Whether the regions the moved block computes, taken over every iteration of
    the loop and the loops around it, cover the block's whole spatial domain, so a
    function parameter it writes is still written in full.

    Proved per dimension, with no loop shared by two dimensions (their union could
    be a diagonal rather than a box): the loops the dimension's region follows are
    swept away innermost first, each sweep leaving the region from its first
    iteration's start to its last iteration's end, and what remains must contain
    the domain.
    """
    path = move.tree.path(move.loop)
    scope_at = max(k for k, n in enumerate(path) if isinstance(n, Block))
    if not all(isinstance(n, (For, SeqStmt)) for n in path[scope_at + 1 :]):
        return False
    fixed = move.fixed_ranges()
    claimed: set[int] = set()
    for iv in move.block.iter_vars:
        if iv.kind is not IterKind.SPATIAL:
            continue
        region = regions.get(id(iv.var), Interval(None, None))
        dom_end = normalize(iv.dom.min + iv.dom.extent)
        low = iv.dom.min if region.min is None else region.min
        high = normalize(dom_end - 1) if region.max is None else region.max
        moving = [v for v in fixed if uses_var(low, v) or uses_var(high, v)]
        if any(id(v) in claimed for v in moving) or not can_prove(low <= high, fixed):
            return False
        claimed.update(id(v) for v in moving)
        for var in reversed(moving):
            swept = _sweep(low, high, var, fixed)
            if swept is None:
                return False
            low, high = swept
        if not (can_prove(low <= iv.dom.min, fixed) and can_prove(high >= dom_end - 1, fixed)):
            return False
    return True


def _sweep(
    low: PrimExpr, high: PrimExpr, var: Var, fixed: Ranges
) -> tuple[PrimExpr, PrimExpr] | None:
    """An interval that ``[low, high]`` covers without gaps as ``var`` runs over its
    range (each iteration's region starts at most one past the previous one's end),
    or None when that cannot be proved."""
    first, extent = fixed[var].min, fixed[var].extent
    last = normalize(first + extent - 1)
    before_last = {**fixed, var: Range(first, normalize(extent - 1))}
    if not can_prove(substitute(low, {var: var + 1}) <= high + 1, before_last):
        return None
    return substitute(low, {var: first}), substitute(high, {var: last})


def reverse_compute_at(
    func: PrimFunc, block: Block, loop: For, preserve_unit_loops: bool = False
) -> PrimFunc:
    """Move consumer ``block`` (with a new loop nest) to the end of ``loop``'s body.

    In each iteration the block computes exactly the points whose input its one
    producer under the loop has just written in full, so every value it reads is
    written in the same iteration (which compact_buffers relies on).
    """
    move = _Move("reverse_compute_at", func, block, loop)
    consumer = move.realize
    move.require(move.tree.before(loop, consumer), "the block comes before the loop")
    output, _ = move.output()
    move.require_idempotent(output)
    read_ids = _reads(consumer.block)
    inside = move.tree.realizes_between(*move.tree.span(loop))
    produced = _unique_buffers(
        b for r in inside for b in _written_buffers(r.block) if id(b) in read_ids
    )
    move.require(bool(produced), "it reads nothing that a block under the loop writes")
    move.require(
        len(produced) == 1,
        f"it reads several buffers written under the loop ({_buffer_names(produced)}); "
        "it can follow only one producer",
    )
    buffer = produced[0]
    writers = move.tree.writers(buffer)
    move.require(
        len(writers) == 1,
        f"{buffer.name!r}, which it reads, is written by several blocks {_names(writers)}",
    )
    after = move.tree.realizes_between(move.tree.span(loop)[1], move.tree.span(consumer)[0])
    move.require_undisturbed(after, written=read_ids | {id(output)}, touched={id(output)})
    move.require_undisturbed(inside, written={id(output)}, touched={id(output)})
    written = _written_box(move, writers[0], buffer)
    return move.install(
        _consumer_regions(move, buffer, writers[0], written), preserve_unit_loops, at_end=True
    )


def sample_compute_location(
    rng: random.Random, func: PrimFunc, block: Block, decision: int | None
) -> tuple[int, For | None]:
    """Pick where to compute ``block``: -1 stays at the root, -2 inlines it (offered
    only when inlining is legal), ``k >= 0`` the k-th loop where compute_at is legal.
    A given decision checks only what it needs (trying compute_at at every loop is
    what makes replaying such a trace slow): the root nothing, inlining its legality,
    the k-th loop the loops up to it."""
    if decision is None:
        loops = compute_at_candidates(func, block)
        index = rng.choice(_choices(func, block, loops))
        return index, (loops[index] if index >= 0 else None)
    if decision == -1:
        return decision, None
    if decision == -2 and _inlinable(func, block):
        return decision, None
    if isinstance(decision, int) and decision >= 0:
        found = list(itertools.islice(_legal_loops(func, block), decision + 1))
        if len(found) == decision + 1:
            return decision, found[decision]
    loops = compute_at_candidates(func, block)
    raise ScheduleError(
        f"sample_compute_location of block {block.name!r}: decision {decision} is not "
        f"one of the legal locations {_choices(func, block, loops)} (-1 root, -2 inline, k "
        f"the k-th loop of {[loop.loop_var.name for loop in loops]})"
    )


def compute_location_choices(func: PrimFunc, block: Block) -> list[int]:
    """The decisions ``sample_compute_location`` accepts for ``block`` in ``func``: a
    search's domain for that instruction."""
    return _choices(func, block, compute_at_candidates(func, block))


def _choices(func: PrimFunc, block: Block, loops: list[For]) -> list[int]:
    return ([-2] if _inlinable(func, block) else []) + [-1] + list(range(len(loops)))


def compute_at_candidates(func: PrimFunc, block: Block) -> list[For]:
    """Every loop, outermost first, that ``block`` can be computed at."""
    return list(_legal_loops(func, block))


def _legal_loops(func: PrimFunc, block: Block) -> Iterator[For]:
    """The loops compute_at accepts, checked without building each new nest."""
    for loop in program_tree(func.body).loops():
        try:
            _compute_at_move(func, block, loop, need_regions=False)
        except ScheduleError:
            continue
        yield loop


def _inlinable(func: PrimFunc, block: Block) -> bool:
    """Whether compute_inline of ``block`` is legal; a reduction or a block whose
    output is a parameter never is."""
    written = _written_buffers(block)
    if block.is_reduction or len(written) != 1 or any(p is written[0] for p in func.params):
        return False
    try:
        compute_inline(func, block)
    except ScheduleError:
        return False
    return True


# the move -----------------------------------------------------------------------------


class _Move:
    """The block, the loop and the checks both primitives share."""

    def __init__(self, primitive: str, func: PrimFunc, block: Block, loop: For) -> None:
        self.primitive = primitive
        self.func = func
        self.block = block
        self.loop = loop
        self.tree = program_tree(func.body)
        realize = self.tree.realize_of(block)
        self.require(realize is not None, "the block is not in this function")
        self.require(self.tree.has(loop), "the loop is not in this function")
        self.require(block is not func.root_block, "the root block cannot move")
        assert realize is not None
        self.realize = realize
        self.require(not self.tree.contains(realize, loop), "the loop is inside the block")
        self.require(not self.tree.contains(loop, realize), "the block is already under the loop")
        self.require(
            self.tree.scope(realize) is self.tree.scope(loop),
            "the block and the loop are in different block scopes",
        )

    def fail(self, reason: str) -> ScheduleError:
        return ScheduleError(
            f"{self.primitive} of block {self.block.name!r} at loop "
            f"{self.loop.loop_var.name!r}: {reason}"
        )

    def require(self, condition: bool, reason: str) -> None:
        if not condition:
            raise self.fail(reason)

    def output(self) -> tuple[Buffer, list[IterVar]]:
        """The one buffer the block writes and, per dimension, the spatial block
        variable that indexes it."""
        dims = output_dims(self.block)
        if isinstance(dims, str):
            raise self.fail(dims)
        return dims

    def require_idempotent(self, buffer: Buffer) -> None:
        """A block that reads what it writes must start from its init each time, or
        computing a point twice (overlapping regions) would accumulate twice."""
        reads_itself = id(buffer) in _reads(self.block)
        self.require(
            not reads_itself or self.block.init is not None,
            f"it updates {buffer.name!r} in place without an init, so it cannot be recomputed",
        )

    def require_undisturbed(
        self, others: Sequence[BlockRealize], written: set[int], touched: set[int]
    ) -> None:
        """None of ``others`` (the blocks the move reorders the block against) may write
        a buffer in ``written`` or access one in ``touched``."""
        for other in others:
            if other is self.realize:
                continue
            clash = [b for b in _written_buffers(other.block) if id(b) in written]
            clash += [b for b in _read_buffers(other.block) if id(b) in touched]
            if clash:
                raise self.fail(
                    f"block {other.block.name!r} accesses {clash[0].name!r} in between, "
                    "so moving the block would change what it computes"
                )

    def region(
        self, realizes: Sequence[BlockRealize], buffer: Buffer, reads: bool
    ) -> list[Interval]:
        """The part of ``buffer`` that ``realizes`` read (or write) in one iteration of
        the loop, per dimension; for a shared-memory buffer, in one iteration of the
        loop for all threads (``thread_ranges``)."""
        result: list[Interval] | None = None
        relaxed = self.thread_ranges() if buffer.scope == "shared" else {}
        for realize in realizes:
            ranges = {**relaxed, **self.inner_ranges(realize)}
            for indices in self.accesses(realize, buffer, reads):
                dims = [bound(i, ranges) for i in indices]
                result = (
                    dims
                    if result is None
                    else [a.union(b) for a, b in zip(result, dims, strict=True)]
                )
        assert result is not None
        return result

    def accesses(
        self, realize: BlockRealize, buffer: Buffer, reads: bool
    ) -> list[tuple[PrimExpr, ...]]:
        """Index tuples of ``realize``'s accesses to ``buffer`` in loop variables."""
        mapping = self.tree.bindings_below(self.loop, realize)
        found_reads, found_writes = block_accesses(realize.block)
        regions = found_reads if reads else found_writes
        return [
            tuple(substitute(r.min, mapping) for r in region.region)
            for region in regions
            if region.buffer is buffer
        ]

    def inner_ranges(self, realize: BlockRealize) -> dict[Var, Range]:
        return self.tree.loop_ranges_below(self.loop, realize)

    def thread_ranges(self) -> dict[Var, Range]:
        """Ranges of the loops at and around the loop bound to ``threadIdx`` or
        ``vthread``: a buffer in shared memory serves every thread (and virtual
        thread) of a GPU block, so the part one iteration needs is what all of them
        need (as in TVM, the threads of a block then fetch it together)."""
        chain = [n for n in self.tree.path(self.loop) if isinstance(n, For)] + [self.loop]
        return {
            f.loop_var: Range(f.min, f.extent)
            for f in chain
            if (f.thread_binding or "").startswith(("threadIdx", "vthread"))
        }

    def fixed_ranges(self) -> dict[Var, Range]:
        """Ranges of the loop and the loops around it: fixed in one iteration."""
        return self.tree.loop_ranges_above(self.loop)

    def install(
        self, regions: dict[int, Interval], preserve_unit_loops: bool, at_end: bool
    ) -> PrimFunc:
        nest = _block_nest(self.realize, regions, self.fixed_ranges(), preserve_unit_loops)
        body = self.tree.move(self.realize, self.loop, nest, at_end)
        return dataclasses.replace(self.func, body=body)


def output_dims(block: Block) -> tuple[Buffer, list[IterVar]] | str:
    """The buffer ``block`` writes and the spatial variable indexing each of its
    dimensions, or the reason the block does not have that form."""
    _, writes = block_accesses(block)
    buffers = _unique_buffers(w.buffer for w in writes)
    if len(buffers) != 1:
        return f"it writes {len(buffers)} buffers ({_buffer_names(buffers)}), not exactly one"
    spatial = {id(iv.var): iv for iv in block.iter_vars if iv.kind is IterKind.SPATIAL}
    dims: list[IterVar] | None = None
    for write in writes:
        indices = [r.min for r in write.region]
        found = _distinct_vars(indices, spatial)
        if found is None or len(found) != len(spatial):
            return (
                f"it writes {buffers[0].name}[{', '.join(str(i) for i in indices)}], not "
                "indexed by its spatial block variables one per dimension"
            )
        if dims is not None and any(a is not b for a, b in zip(dims, found, strict=True)):
            return f"it writes {buffers[0].name!r} at two different index orders"
        dims = found
    assert dims is not None
    return buffers[0], dims


def _distinct_vars(
    indices: Sequence[PrimExpr], spatial: dict[int, IterVar]
) -> list[IterVar] | None:
    """The spatial variables ``indices`` are, when each is a different one."""
    found = [spatial.get(id(i)) for i in indices]
    ivs = [iv for iv in found if iv is not None]
    if len(ivs) != len(found) or len({id(iv) for iv in ivs}) != len(ivs):
        return None
    return ivs


def _spatial_regions(move: _Move, buffer: Buffer, region: list[Interval]) -> dict[int, Interval]:
    _, dims = move.output()
    return {id(iv.var): interval for iv, interval in zip(dims, region, strict=True)}


def _written_box(move: _Move, writer: BlockRealize, buffer: Buffer) -> list[Interval]:
    """Per dimension of ``buffer``, the interval ``writer`` writes completely (every
    point inside the writer's domain, with every reduction step) in one iteration."""
    what = f"producer {writer.block.name!r}"
    dims = output_dims(writer.block)
    if isinstance(dims, str):
        raise move.fail(f"{what}: {dims}")
    _, writer_dims = dims
    below = move.tree.path(writer)[len(move.tree.path(move.loop)) + 1 :]
    move.require(
        all(isinstance(n, (For, SeqStmt)) for n in below),
        f"{what} sits under a condition or a nested block inside the loop",
    )
    fixed = move.fixed_ranges()
    inner = move.inner_ranges(writer)
    values = {
        id(iv.var): v for iv, v in zip(writer.block.iter_vars, writer.iter_values, strict=True)
    }
    for iv in writer.block.iter_vars:
        if iv.kind is IterKind.REDUCE:
            move.require(
                not any(uses_var(values[id(iv.var)], v) for v in fixed),
                f"the loop runs part of the reduction of {what}, so {buffer.name!r} is "
                "only final after the loop",
            )
    box: list[Interval] = []
    for iv in writer_dims:
        image = dense_image(values[id(iv.var)], inner)
        if image is None:
            raise move.fail(
                f"{what} binds {iv.var.name} = {values[id(iv.var)]}, which does not visit a "
                "contiguous range exactly in one iteration"
            )
        box.append(image)
    known = {**fixed, **inner}
    for guard in _conjuncts(writer.predicate):
        move.require(
            _is_domain_guard(guard, writer.block.iter_vars, values, known),
            f"{what} has the predicate {guard}, which may skip points inside its domain",
        )
    return box


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, E.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [] if _is_true(e) else [e]


def _is_domain_guard(
    guard: PrimExpr, iter_vars: Sequence[IterVar], values: dict[int, PrimExpr], known: Ranges
) -> bool:
    """Whether ``guard`` only excludes points outside the block's domain: it reads
    ``binding < end`` for an end at or past the end of the domain of the variable
    the binding is for (or ``binding >= start`` for a start at or before it). The
    guard a split of a split leaves, ``outer < end`` where ``binding = outer * c +
    rest`` with ``0 <= rest < c``, reads ``binding < end * c``."""
    if isinstance(guard, (E.GT, E.GE)):
        flipped = E.LT if isinstance(guard, E.GT) else E.LE
        guard = flipped(guard.b, guard.a)
    if not isinstance(guard, (E.LT, E.LE)):
        return False
    slack = 0 if isinstance(guard, E.LT) else 1
    for iv in iter_vars:
        value = values[id(iv.var)]
        upper = _upper_limit(guard.a, guard.b + slack, value, known)
        if upper is not None and can_prove(upper >= iv.dom.min + iv.dom.extent, known):
            return True
        offset = _offset(guard.b, value)
        if offset is not None:
            start = guard.a - offset + 1 - slack
            if can_prove(start <= iv.dom.min, known):
                return True
    return False


def _upper_limit(small: PrimExpr, end: PrimExpr, value: PrimExpr, known: Ranges) -> PrimExpr | None:
    """An expression ``limit`` such that ``small < end`` holds exactly when
    ``value < limit``, or None when ``small`` is not a scaled part of ``value``."""
    offset = _offset(small, value)
    if offset is not None:
        return end - offset
    small_terms = to_linear(normalize(small)).terms
    value_terms = to_linear(normalize(value)).terms
    if not small_terms:
        return None
    key, (_, small_coeff) = next(iter(small_terms.items()))
    value_coeff = value_terms.get(key, (None, 0))[1]
    if value_coeff % small_coeff != 0 or value_coeff // small_coeff <= 1:
        return None
    scale = value_coeff // small_coeff
    low, high = const_bound(value - small * scale, known)
    if low is None or high is None or low < 0 or high >= scale:
        return None
    return end * scale


def _offset(e: PrimExpr, value: PrimExpr) -> int | None:
    """``c`` when ``e == value + c`` for a constant ``c``."""
    difference = normalize(e - value)
    return difference.value if isinstance(difference, E.IntImm) else None


def _consumer_regions(
    move: _Move, buffer: Buffer, writer: BlockRealize, written: list[Interval]
) -> dict[int, Interval]:
    """The consumer's spatial region: the points whose input was written in the
    iteration; it must read ``buffer`` at its own spatial variables."""
    spatial = {id(iv.var): iv for iv in move.block.iter_vars if iv.kind is IterKind.SPATIAL}
    reads, _ = block_accesses(move.block)
    order: list[IterVar] | None = None
    for read in reads:
        if read.buffer is not buffer:
            continue
        found = _distinct_vars([r.min for r in read.region], spatial)
        if found is None:
            raise move.fail(
                f"it reads {buffer.name}[{', '.join(str(r.min) for r in read.region)}], not at "
                "distinct spatial block variables, so its region cannot follow the producer's"
            )
        move.require(
            order is None or all(a is b for a, b in zip(order, found, strict=True)),
            f"it reads {buffer.name!r} in two index orders",
        )
        order = found
    assert order is not None
    writer_dims = output_dims(writer.block)
    assert not isinstance(writer_dims, str)
    for iv, wiv in zip(order, writer_dims[1], strict=True):
        move.require(
            _domain_within(iv.dom, wiv.dom),
            f"its variable {iv.var.name} ranges over {iv.dom}, beyond what producer "
            f"{writer.block.name!r} writes ({wiv.dom})",
        )
    return {id(iv.var): interval for iv, interval in zip(order, written, strict=True)}


def _domain_within(inner: Range, outer: Range) -> bool:
    low = normalize(inner.min - outer.min)
    high = normalize(outer.min + outer.extent - (inner.min + inner.extent))
    return _nonneg_const(low) and _nonneg_const(high)


def _nonneg_const(e: PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value >= 0


# the new loop nest ----------------------------------------------------------------


def _block_nest(
    realize: BlockRealize,
    regions: dict[int, Interval],
    fixed: dict[Var, Range],
    preserve_unit_loops: bool,
) -> Stmt:
    """Loops over the block's variables: spatial ones over their region, reduce ones
    (and spatial ones the region leaves open) over their domain; a predicate keeps
    every instance inside the block's domain."""
    block = realize.block
    loops: list[tuple[Var, PrimExpr]] = []
    known: dict[Var, Range] = dict(fixed)
    bindings: list[PrimExpr] = []
    guards: list[PrimExpr] = []
    for iv in block.iter_vars:
        dom_end = normalize(iv.dom.min + iv.dom.extent)
        region = regions.get(id(iv.var), Interval(None, None))
        low = iv.dom.min if region.min is None else region.min
        high = normalize(dom_end - 1) if region.max is None else region.max
        extent = simplify(high - low + 1, known)
        if _is_one(extent) and not preserve_unit_loops:
            value = low
        else:
            loop_var = Var(f"ax{len(loops)}", iv.var.dtype)
            loops.append((loop_var, extent))
            known[loop_var] = Range(E.const(0, loop_var.dtype), extent)
            value = normalize(low + loop_var)
        bindings.append(value)
        if region.min is not None:
            guards.append(value >= iv.dom.min)
        if region.max is not None:
            guards.append(value < dom_end)
    predicate: PrimExpr = true_predicate()
    for guard in guards:
        guard = simplify(guard, known)
        if not (isinstance(guard, E.IntImm) and guard.value):
            predicate = guard if _is_true(predicate) else E.And(predicate, guard)
    stmt: Stmt = BlockRealize(tuple(bindings), predicate, block)
    for loop_var, extent in reversed(loops):
        stmt = For(loop_var, E.const(0, loop_var.dtype), extent, ForKind.SERIAL, stmt)
    return stmt


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _is_true(e: PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and bool(e.value)


# small helpers -------------------------------------------------------------------


def _reads(block: Block) -> set[int]:
    return {id(b) for b in _read_buffers(block)}


def _read_buffers(block: Block) -> list[Buffer]:
    reads, _ = block_accesses(block)
    return _unique_buffers(r.buffer for r in reads)


def _written_buffers(block: Block) -> list[Buffer]:
    _, writes = block_accesses(block)
    return _unique_buffers(w.buffer for w in writes)


def _unique_buffers(buffers: Iterable[Buffer]) -> list[Buffer]:
    found: dict[int, Buffer] = {}
    for b in buffers:
        found.setdefault(id(b), b)
    return list(found.values())


def _names(realizes: Iterable[BlockRealize]) -> str:
    return ", ".join(repr(r.block.name) for r in realizes)


def _buffer_names(buffers: list[Buffer]) -> str:
    return ", ".join(b.name for b in buffers)
