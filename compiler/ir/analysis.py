"""Small queries and rewrites over IR trees that many passes and primitives share."""

from __future__ import annotations

from collections.abc import Mapping

from compiler.ir.buffer import Buffer
from compiler.ir.expr import BufferLoad, PrimExpr, Range, Var
from compiler.ir.node import N, Node, transform, visit
from compiler.ir.stmt import Block, BlockRealize, BufferRegion, BufferStore, For


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


def uses_var(node: Node, var: Var) -> bool:
    hit = False

    def check(n: Node) -> bool | None:
        nonlocal hit
        if n is var:
            hit = True
        return not hit

    visit(node, check)
    return hit


def find_loop(root: Node, loop_var: Var) -> For | None:
    found: list[For] = []

    def check(n: Node) -> bool | None:
        if isinstance(n, For) and n.loop_var is loop_var:
            found.append(n)
            return False
        return not found

    visit(root, check)
    return found[0] if found else None


def find_block_realize(root: Node, name: str) -> BlockRealize | None:
    found: list[BlockRealize] = []

    def check(n: Node) -> bool | None:
        if isinstance(n, BlockRealize) and n.block.name == name:
            found.append(n)
            return False
        return not found

    visit(root, check)
    return found[0] if found else None


def ancestors_of(root: Node, target: Node) -> list[Node]:
    """The nodes from ``root`` down to ``target``'s parent; empty if ``target`` is
    ``root``; raises ``LookupError`` if ``target`` is not in the tree."""
    path: list[Node] = []

    def search(node: Node) -> bool:
        if node is target:
            return True
        from compiler.ir.node import children

        path.append(node)
        for child in children(node):
            if search(child):
                return True
        path.pop()
        return False

    if not search(root):
        raise LookupError("node is not in this tree")
    return path


def block_accesses(block: Block) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """The (reads, writes) of a block, one point region per access in its body and
    init, in the block's own variables. A buffer the block both loads and stores
    (a reduction's accumulator) appears in both lists."""
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
    return reads, writes


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
