"""Small queries and rewrites over IR trees that many passes and primitives share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from compiler.ir.buffer import Buffer
from compiler.ir.expr import BufferLoad, PrimExpr, Range, ThreadAllReduce, Var
from compiler.ir.node import N, Node, children, memoized, transform, visit
from compiler.ir.stmt import (
    Allocate,
    Barrier,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    SeqStmt,
    Stmt,
)


def substitute(node: N, mapping: Mapping[Var, PrimExpr]) -> N:
    """Replace variables by expressions (by variable identity)."""
    if not mapping:
        return node
    by_id = {id(v): e for v, e in mapping.items()}
    return transform(node, lambda n: by_id.get(id(n)) if isinstance(n, Var) else None)


def replace_buffer(node: N, old: Buffer, new: Buffer) -> N:
    """Make every load and store of ``old`` refer to ``new`` (same indices)."""

    def swap(n: Node) -> Node | None:
        if isinstance(n, BufferLoad) and n.buffer is old:
            return BufferLoad(new, n.indices)
        if isinstance(n, BufferStore) and n.buffer is old:
            return BufferStore(new, n.value, n.indices)
        return None

    return transform(node, swap)


def free_vars(node: Node) -> list[Var]:
    """Variables used in ``node`` (in first-use order), including loop and block
    variables that ``node`` itself defines."""
    found: dict[int, Var] = {}

    def collect(n: Node) -> None:
        if isinstance(n, Var):
            found.setdefault(id(n), n)
        elif isinstance(n, Buffer):
            for dim in n.shape:
                visit(dim, collect)

    visit(node, collect)
    return list(found.values())


def contains(node: Node, kinds: tuple[type[Node], ...]) -> bool:
    """Whether ``node``'s subtree holds a node of one of ``kinds``."""
    found = False

    def look(n: Node) -> bool:
        nonlocal found
        found = found or isinstance(n, kinds)
        return not found

    visit(node, look)
    return found


def reads_memory(e: PrimExpr) -> bool:
    """Whether ``e`` reads memory: a buffer load, or a GPU block's shared reduction."""
    return contains(e, (BufferLoad, ThreadAllReduce))


def uses_var(node: Node, var: Var) -> bool:
    return node is var or id(var) in var_ids(node)


def var_ids(node: Node) -> frozenset[int]:
    """The ids of the variables in ``node``'s subtree, kept on every node of it."""
    found = node.__dict__.get(_VAR_IDS)
    if found is not None:
        return cast(frozenset[int], found)
    # Post-order without recursion: expression chains can be deeper than Python's stack.
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if _VAR_IDS in current.__dict__:
            continue
        kids = children(current)
        if not expanded and kids:
            stack.append((current, True))
            stack.extend((kid, False) for kid in kids)
            continue
        ids: set[int] = {id(current)} if isinstance(current, Var) else set()
        for kid in kids:
            ids.update(kid.__dict__[_VAR_IDS])
        current.__dict__[_VAR_IDS] = frozenset(ids)
    return cast(frozenset[int], node.__dict__[_VAR_IDS])


_VAR_IDS = "_tensortune_var_ids"


def visit_statements(root: Node, fn: Callable[[Node], bool | None]) -> None:
    """``visit`` that calls ``fn`` on the statements only, in pre-order (a ``False``
    return skips that subtree): a query for loops, blocks or realizes need not look
    into the index arithmetic, buffers and ranges, most of a scheduled tree."""
    if isinstance(root, PrimExpr):
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if fn(node) is not False:
            stack.extend(reversed(statement_children(node)))


def find_loop(root: Node, loop_var: Var) -> For | None:
    return _statement_index(root).loops.get(id(loop_var))


def find_block_realize(root: Node, name: str) -> BlockRealize | None:
    if not isinstance(name, str):  # a malformed trace's block name finds no block
        return None
    return _statement_index(root).realizes.get(name)


def ancestors_of(root: Node, target: Node) -> list[Node]:
    """The nodes from ``root`` down to ``target``'s parent; empty if ``target`` is
    ``root``; raises ``LookupError`` if ``target`` is not a statement of the tree."""
    if target is root:
        return []
    parents = _statement_index(root).parents
    path: list[Node] = []
    current = parents.get(id(target))
    if current is None:
        raise LookupError("node is not in this tree")
    while current is not root:
        path.append(current)
        current = parents[id(current)]
    path.append(root)
    path.reverse()
    return path


@dataclass(frozen=True)
class _StatementIndex:
    """Each loop variable's first loop and each block name's first realize in
    pre-order, and each statement's parent (expressions are left out: no statement
    sits inside one, and what is asked about is a loop or a block, each of which
    occurs once in a tree)."""

    loops: dict[int, For]
    realizes: dict[str, BlockRealize]
    parents: dict[int, Node]


def _statement_index(root: Node) -> _StatementIndex:
    """The index of ``root``, made by one walk of its statements and kept on it: a
    schedule asks for loops, blocks and paths on every new program it makes."""
    return memoized(root, "_tensortune_statement_index", lambda: _index_statements(root))


def _index_statements(root: Node) -> _StatementIndex:
    index = _StatementIndex({}, {}, {})
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, For):
            index.loops.setdefault(id(node.loop_var), node)
        elif isinstance(node, BlockRealize):
            index.realizes.setdefault(node.block.name, node)
        statements = statement_children(node)
        for child in statements:
            index.parents.setdefault(id(child), node)
        stack.extend(reversed(statements))
    return index


def statement_children(node: Node) -> tuple[Stmt, ...]:
    """The statements directly under ``node``, in program order (a block's init before
    its body). The statement kinds that make up a scheduled tree say where theirs are,
    so a walk over them touches neither the buffers, ranges and iteration variables
    beside them nor their expressions (a schedule indexes every new program it makes,
    and most of a program is those)."""
    if isinstance(node, (For, Allocate)):
        return (node.body,)
    if isinstance(node, BlockRealize):
        return (node.block,)
    if isinstance(node, SeqStmt):
        return node.seq
    if isinstance(node, (BufferStore, Evaluate, Barrier)):
        return ()
    if isinstance(node, Block):
        return (node.body,) if node.init is None else (node.init, node.body)
    if isinstance(node, IfThenElse):
        return (node.then_case,) if node.else_case is None else (node.then_case, node.else_case)
    return tuple(child for child in children(node) if isinstance(child, Stmt))


def block_accesses(block: Block) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """The (reads, writes) of a block, one point region per access in its body and
    init, in the block's own variables. A buffer the block both loads and stores
    (a reduction's accumulator) appears in both lists."""
    reads, writes = memoized(block, "_tensortune_accesses", lambda: _accesses(block))
    return list(reads), list(writes)


def _accesses(block: Block) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    reads: list[BufferRegion] = []
    writes: list[BufferRegion] = []

    def point(buffer: Buffer, indices: tuple[PrimExpr, ...]) -> BufferRegion:
        return BufferRegion(buffer, tuple(Range.from_min_extent(i, 1) for i in indices))

    def collect(n: Node) -> bool | None:
        if isinstance(n, BlockRealize):
            return False
        if isinstance(n, BufferLoad):
            reads.append(point(n.buffer, n.indices))
        elif isinstance(n, BufferStore):
            writes.append(point(n.buffer, n.indices))
        return None

    for part in (block.init, block.body):
        if part is not None:
            visit(part, collect)
    return tuple(reads), tuple(writes)


def buffers_read(node: Node) -> list[Buffer]:
    found: dict[int, Buffer] = {}

    def collect(n: Node) -> None:
        if isinstance(n, BufferLoad):
            found.setdefault(id(n.buffer), n.buffer)

    visit(node, collect)
    return list(found.values())


def buffers_written(node: Node) -> list[Buffer]:
    found: dict[int, Buffer] = {}

    def collect(n: Node) -> None:
        if isinstance(n, BufferStore):
            found.setdefault(id(n.buffer), n.buffer)

    visit(node, collect)
    return list(found.values())
