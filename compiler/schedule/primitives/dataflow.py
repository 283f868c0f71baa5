"""Queries and tree edits over the blocks of a function that compute_inline,
reverse_compute_inline, cache_read, cache_write and decompose_reduction share.

They answer the dataflow questions those primitives must settle before they move
a computation (who writes or reads a buffer, in which order the blocks run, which
loops bind a block) and make the few tree edits they share: remove a block with
the loops that only held it, insert a statement before another, swap a buffer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from compiler.ir import expr as E
from compiler.ir.analysis import (
    ancestors_of,
    block_accesses,
    replace_buffer,
    substitute,
    visit_statements,
)
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import N, Node, transform, transform_pre, visit
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, SeqStmt, Stmt
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.common import block_names


@dataclass(frozen=True)
class BlockSite:
    """Where a block sits: its realize, the block that scopes it and the loops
    between that scope and the realize (outermost first)."""

    realize: BlockRealize
    scope: Block
    loops: tuple[For, ...]

    @property
    def block(self) -> Block:
        return self.realize.block


def locate(func: PrimFunc, block: Block, primitive: str) -> BlockSite:
    """The site of ``block`` (matched by identity) in ``func``."""
    realize = find_realize_of(func, block)
    if realize is None:
        raise ScheduleError(f"{primitive}: block {block.name!r} is not in this function")
    if realize is func.body:
        raise ScheduleError(f"{primitive}: the root block cannot be scheduled this way")
    return site_of(func, realize)


def site_of(func: PrimFunc, realize: BlockRealize) -> BlockSite:
    path = ancestors_of(func.body, realize)
    scope_at = max(i for i, n in enumerate(path) if isinstance(n, Block))
    scope = path[scope_at]
    assert isinstance(scope, Block)
    loops = tuple(n for n in path[scope_at + 1 :] if isinstance(n, For))
    return BlockSite(realize, scope, loops)


def find_realize_of(func: PrimFunc, block: Block) -> BlockRealize | None:
    found: list[BlockRealize] = []

    def check(n: Node) -> bool:
        if isinstance(n, BlockRealize) and n.block is block:
            found.append(n)
        return not found

    visit_statements(func.body, check)
    return found[0] if found else None


def leaf_realizes(root: Node) -> list[BlockRealize]:
    """Every realize under ``root`` except the root block's, in program order."""
    found: list[BlockRealize] = []

    def collect(n: Node) -> None:
        if isinstance(n, BlockRealize) and n.block.name != "root":
            found.append(n)

    visit_statements(root, collect)
    return found


def _unique(buffers: Iterable[Buffer]) -> list[Buffer]:
    out: list[Buffer] = []
    for b in buffers:
        if all(b is not seen for seen in out):
            out.append(b)
    return out


def reads_of(block: Block) -> list[Buffer]:
    """Buffers the block loads (init first, then body), in order of first load."""
    reads, _ = block_accesses(block)
    return _unique(r.buffer for r in reads)


def writes_of(block: Block) -> list[Buffer]:
    """Buffers the block stores (init first, then body), in order of first store."""
    _, writes = block_accesses(block)
    return _unique(w.buffer for w in writes)


def accesses(block: Block, buffer: Buffer) -> bool:
    return any(b is buffer for b in reads_of(block) + writes_of(block))


def writers(func: PrimFunc, buffer: Buffer) -> list[BlockRealize]:
    return [r for r in leaf_realizes(func.body) if any(b is buffer for b in writes_of(r.block))]


def readers(func: PrimFunc, buffer: Buffer) -> list[BlockRealize]:
    return [r for r in leaf_realizes(func.body) if any(b is buffer for b in reads_of(r.block))]


def is_param(func: PrimFunc, buffer: Buffer) -> bool:
    return any(p is buffer for p in func.params)


def single_store(block: Block) -> BufferStore | None:
    """The block's body when it is one BufferStore, else None."""
    return block.body if isinstance(block.body, BufferStore) else None


def names_of(iterable: Iterable[BlockRealize]) -> str:
    return ", ".join(repr(r.block.name) for r in iterable)


# names ---------------------------------------------------------------------------


def fresh_name(base: str, taken: Iterable[str]) -> str:
    """``base``, or ``base_1``, ``base_2`` ... whichever is not taken."""
    used = set(taken)
    candidate, n = base, 1
    while candidate in used:
        candidate = f"{base}_{n}"
        n += 1
    return candidate


def taken_block_names(func: PrimFunc) -> list[str]:
    """Every block name of ``func``, the root's too: the names a new block must avoid."""
    return ["root", *block_names(func)]


def buffer_names(func: PrimFunc) -> list[str]:
    names = [p.name for p in func.params]

    def collect(n: Node) -> None:
        if isinstance(n, Block):
            names.extend(b.name for b in n.alloc_buffers)

    visit_statements(func.body, collect)
    return names


# edits ------------------------------------------------------------------------------


def scope_children(scope: Block) -> list[Stmt]:
    body = scope.body
    return list(body.seq) if isinstance(body, SeqStmt) else [body]


def child_index(scope: Block, realize: BlockRealize) -> int:
    """Which top-level statement of ``scope`` holds ``realize``."""
    for index, child in enumerate(scope_children(scope)):
        if child is realize or _contains(child, realize):
            return index
    raise LookupError(realize.block.name)


def _contains(root: Node, target: Node) -> bool:
    hit = False

    def check(n: Node) -> bool:
        nonlocal hit
        hit = hit or n is target
        return not hit

    visit_statements(root, check)
    return hit


def replace(root: N, old: Node, new: Node) -> N:
    """``root`` with the node ``old`` (by identity) replaced by ``new``."""
    if isinstance(old, PrimExpr):
        return transform_pre(root, lambda n: new if n is old else None)
    return transform_pre(root, lambda n: new if n is old else _kept_if_expression(n))


def _kept_if_expression(node: Node) -> Node | None:
    """``node`` itself when it is an expression, for ``transform_pre`` to keep whole
    without a look inside, in an edit of statements: no statement sits inside one."""
    return node if isinstance(node, PrimExpr) else None


def replace_in_func(func: PrimFunc, old: Node, new: Node) -> PrimFunc:
    return dataclasses.replace(func, body=replace(func.body, old, new))


def insert_before(func: PrimFunc, target: Stmt, stmts: list[Stmt]) -> PrimFunc:
    """``func`` with ``stmts`` placed right before ``target`` in its parent's sequence."""

    def edit(n: Node) -> Node | None:
        if isinstance(n, SeqStmt) and any(s is target for s in n.seq):
            flat: list[Stmt] = []
            for s in n.seq:
                flat.extend([*stmts, s] if s is target else [s])
            return SeqStmt(tuple(flat))
        if n is target:
            return SeqStmt((*stmts, target))
        return _kept_if_expression(n)

    return dataclasses.replace(func, body=transform_pre(func.body, edit))


def copy_loops(loops: Sequence[For], loop_map: Mapping[Var, Var], body: Stmt) -> Stmt:
    """``body`` under copies of ``loops`` (outermost first), each loop variable renamed
    by ``loop_map`` in the copies' variables and ranges."""
    stmt = body
    for lp in reversed(loops):
        stmt = dataclasses.replace(
            lp,
            loop_var=loop_map[lp.loop_var],
            min=substitute(lp.min, loop_map),
            extent=substitute(lp.extent, loop_map),
            body=stmt,
            annotations=dict(lp.annotations),
        )
    return stmt


def remove_realize(func: PrimFunc, realize: BlockRealize, primitive: str) -> PrimFunc:
    """``func`` without ``realize`` and without the loops that only held it."""
    path = ancestors_of(func.body, realize)
    doomed: Node = realize
    for parent in reversed(path):
        if isinstance(parent, For):
            doomed = parent
            continue
        if isinstance(parent, SeqStmt):
            rest = [s for s in parent.seq if s is not doomed]
            kept: Stmt = rest[0] if len(rest) == 1 else SeqStmt(tuple(rest))
            return replace_in_func(func, parent, kept)
        break
    raise ScheduleError(
        f"{primitive}: block {realize.block.name!r} is the only statement of its scope; "
        "removing it would leave the scope empty"
    )


def drop_alloc(func: PrimFunc, buffer: Buffer) -> PrimFunc:
    """``func`` with ``buffer`` removed from whichever block allocates it."""

    def edit(n: Node) -> Node | None:
        if isinstance(n, Block) and any(b is buffer for b in n.alloc_buffers):
            kept = tuple(b for b in n.alloc_buffers if b is not buffer)
            return dataclasses.replace(n, alloc_buffers=kept)
        return None

    return dataclasses.replace(func, body=transform(func.body, edit))


def in_block_only(block: Block, fn: Callable[[Node], Node | None]) -> Block:
    """Apply ``fn`` (a ``transform_pre`` callback) to the block's init and body,
    without entering nested blocks."""

    def guarded(n: Node) -> Node | None:
        if isinstance(n, BlockRealize):
            return n
        return fn(n)

    init = None if block.init is None else transform_pre(block.init, guarded)
    return dataclasses.replace(block, init=init, body=transform_pre(block.body, guarded))


def swap_buffer(block: Block, old: Buffer, new: Buffer) -> Block:
    """The block with its own loads and stores of ``old`` turned to ``new``."""

    def edit(n: Node) -> Node | None:
        if isinstance(n, E.BufferLoad) and n.buffer is old:
            return E.BufferLoad(new, tuple(replace_buffer(i, old, new) for i in n.indices))
        if isinstance(n, BufferStore) and n.buffer is old:
            indices = tuple(replace_buffer(i, old, new) for i in n.indices)
            return BufferStore(new, replace_buffer(n.value, old, new), indices)
        return None

    return in_block_only(block, edit)


# expressions --------------------------------------------------------------------------


def evaluate(e: PrimExpr, env: dict[Var, int]) -> int | None:
    """The integer value of ``e`` with the variables in ``env`` bound, or None when
    it depends on anything else (booleans are 0 or 1)."""
    by_id = {id(v): value for v, value in env.items()}
    return _eval(e, by_id)


_ARITH: dict[type[E.BinaryOp], Callable[[int, int], int | None]] = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b if b else None,
    E.FloorMod: lambda a, b: a % b if b else None,
    E.Min: min,
    E.Max: max,
    E.EQ: lambda a, b: int(a == b),
    E.NE: lambda a, b: int(a != b),
    E.LT: lambda a, b: int(a < b),
    E.LE: lambda a, b: int(a <= b),
    E.GT: lambda a, b: int(a > b),
    E.GE: lambda a, b: int(a >= b),
    E.And: lambda a, b: int(bool(a) and bool(b)),
    E.Or: lambda a, b: int(bool(a) or bool(b)),
}


def _eval(e: Node, env: dict[int, int]) -> int | None:
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, Var):
        return env.get(id(e))
    if isinstance(e, E.Not):
        inner = _eval(e.a, env)
        return None if inner is None else int(not inner)
    if not isinstance(e, E.BinaryOp) or type(e) not in _ARITH:
        return None
    op = _ARITH[type(e)]
    a = _eval(e.a, env)
    b = _eval(e.b, env)
    return None if a is None or b is None else op(a, b)


def conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, E.And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def is_true(e: PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and bool(e.value)


def uses_any(node: Node, variables: Iterable[Var]) -> bool:
    ids = {id(v) for v in variables}
    hit = False

    def check(n: Node) -> bool:
        nonlocal hit
        hit = hit or (isinstance(n, Var) and id(n) in ids)
        return not hit

    visit(node, check)
    return hit


def vars_in(node: Node) -> list[Var]:
    found: dict[int, Var] = {}

    def collect(n: Node) -> None:
        if isinstance(n, Var):
            found.setdefault(id(n), n)

    visit(node, collect)
    return list(found.values())
