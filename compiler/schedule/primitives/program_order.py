"""Program order of the statements of a block-level function, for primitives that move blocks.

A preorder numbering makes a subtree a contiguous span, so "inside", "before" and
"between" are integer comparisons; with it come the loops and bindings between a
loop and a block (what varies within one iteration of the loop) and the one edit
compute_at needs: take a block out and put a new loop nest into a loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from compiler.ir import expr as E
from compiler.ir.analysis import block_accesses, statement_children, substitute
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var
from compiler.ir.node import Node, memoized
from compiler.ir.stmt import Allocate, Block, BlockRealize, For, IfThenElse, SeqStmt, Stmt, seq


def program_tree(root: Stmt) -> ProgramTree:
    """The ``ProgramTree`` of ``root``, made once and kept on it: a tree never changes,
    and the search for the loops a block can move to asks one for every loop."""
    return memoized(root, "_tensortune_program_tree", lambda: ProgramTree(root))


class ProgramTree:
    """Program-order facts about a function body: each statement's preorder span
    (a subtree is a contiguous span, so "inside" and "before" are comparisons),
    parents, and which blocks read and write which buffers. Read-only once made."""

    def __init__(self, root: Stmt) -> None:
        self.root = root
        self.spans: dict[int, tuple[int, int]] = {}
        self.parents: dict[int, Node] = {}
        self.realizes: list[BlockRealize] = []
        self.for_loops: list[For] = []
        self.counter = 0
        self._walk(root)
        self.access = {id(r): _buffer_ids(r.block) for r in self.realizes}

    def _walk(self, node: Stmt) -> None:
        start = self.counter
        self.counter += 1
        if isinstance(node, BlockRealize):
            self.realizes.append(node)
        elif isinstance(node, For):
            self.for_loops.append(node)
        for child in statement_children(node):
            self.parents[id(child)] = node
            self._walk(child)
        self.spans[id(node)] = (start, self.counter)

    # queries ---------------------------------------------------------------------

    def has(self, node: Node) -> bool:
        return id(node) in self.spans

    def span(self, node: Node) -> tuple[int, int]:
        return self.spans[id(node)]

    def contains(self, outer: Node, inner: Node) -> bool:
        """Whether ``inner`` is strictly inside ``outer``."""
        o, i = self.spans[id(outer)], self.spans[id(inner)]
        return o[0] < i[0] < o[1]

    def before(self, a: Node, b: Node) -> bool:
        """Whether ``a`` (and all of it) runs before ``b`` starts."""
        return self.spans[id(a)][1] <= self.spans[id(b)][0]

    def loops(self) -> list[For]:
        return list(self.for_loops)

    def realize_of(self, block: Block) -> BlockRealize | None:
        return next((r for r in self.realizes if r.block is block), None)

    def realizes_between(self, start: int, end: int) -> list[BlockRealize]:
        return [r for r in self.realizes if start <= self.spans[id(r)][0] < end]

    def writers(self, buffer: Buffer) -> list[BlockRealize]:
        return [r for r in self.realizes if id(buffer) in self.access[id(r)][1]]

    def readers(self, buffer: Buffer) -> list[BlockRealize]:
        return [r for r in self.realizes if id(buffer) in self.access[id(r)][0]]

    def path(self, node: Node) -> list[Node]:
        """The ancestors of ``node``, outermost first."""
        out: list[Node] = []
        current = self.parents.get(id(node))
        while current is not None:
            out.append(current)
            current = self.parents.get(id(current))
        return out[::-1]

    def scope(self, node: Node) -> Block | None:
        """The innermost block around ``node`` (not a realized block itself)."""
        return next((n for n in reversed(self.path(node)) if isinstance(n, Block)), None)

    def loop_ranges_above(self, loop: For) -> dict[Var, Range]:
        chain = [n for n in self.path(loop) if isinstance(n, For)] + [loop]
        return {f.loop_var: Range(f.min, f.extent) for f in chain}

    def bindings_below(self, loop: For, realize: BlockRealize) -> dict[Var, PrimExpr]:
        """Block variables of ``realize`` (and of blocks between it and ``loop``) as
        expressions of loop variables."""
        mapping: dict[Var, PrimExpr] = {}
        for node in [*self._below(loop, realize), realize]:
            if isinstance(node, BlockRealize):
                for iv, value in zip(node.block.iter_vars, node.iter_values, strict=True):
                    mapping[iv.var] = substitute(value, mapping)
        return mapping

    def loop_ranges_below(self, loop: For, realize: BlockRealize) -> dict[Var, Range]:
        """Ranges of the loops between ``loop`` and ``realize``: what varies within
        one iteration of ``loop``."""
        mapping: dict[Var, PrimExpr] = {}
        ranges: dict[Var, Range] = {}
        for node in self._below(loop, realize):
            if isinstance(node, For):
                ranges[node.loop_var] = Range(
                    substitute(node.min, mapping), substitute(node.extent, mapping)
                )
            elif isinstance(node, BlockRealize):
                for iv, value in zip(node.block.iter_vars, node.iter_values, strict=True):
                    mapping[iv.var] = substitute(value, mapping)
        return ranges

    def _below(self, loop: For, node: Node) -> list[Node]:
        path = self.path(node)
        return path[next(k for k, n in enumerate(path) if n is loop) + 1 :]

    # the edit --------------------------------------------------------------------

    def move(self, realize: BlockRealize, loop: For, nest: Stmt, at_end: bool) -> Stmt:
        """The body with ``realize`` removed (and the loops left empty by that) and
        ``nest`` put at the start (or end) of ``loop``'s body."""

        def rebuild(node: Stmt) -> Stmt | None:
            if node is realize:
                return None
            if node is loop:
                body = rebuild(loop.body)
                assert body is not None
                parts = (body, nest) if at_end else (nest, body)
                return dataclasses.replace(loop, body=seq(*parts))
            if not (self.contains(node, realize) or self.contains(node, loop)):
                return node
            return _rebuild_stmt(node, rebuild)

        result = rebuild(self.root)
        assert result is not None
        return result


def _rebuild_stmt(node: Stmt, rebuild: Callable[[Stmt], Stmt | None]) -> Stmt | None:
    """``node`` with its statement children rebuilt; None when nothing is left."""
    if isinstance(node, SeqStmt):
        kept = [s for s in (rebuild(c) for c in node.seq) if s is not None]
        return seq(*kept) if kept else None
    if isinstance(node, (For, Allocate)):
        body = rebuild(node.body)
        return None if body is None else dataclasses.replace(node, body=body)
    if isinstance(node, BlockRealize):
        block = rebuild(node.block)
        if block is None:
            return None
        assert isinstance(block, Block)
        return dataclasses.replace(node, block=block)
    if isinstance(node, Block):
        body = rebuild(node.body)
        return dataclasses.replace(node, body=SeqStmt(()) if body is None else body)
    if isinstance(node, IfThenElse):
        then_case = rebuild(node.then_case)
        else_case = None if node.else_case is None else rebuild(node.else_case)
        if then_case is None and else_case is None:
            return None
        if then_case is None:
            assert else_case is not None
            return IfThenElse(E.Not(node.condition), else_case)
        return IfThenElse(node.condition, then_case, else_case)
    return node


def _buffer_ids(block: Block) -> tuple[set[int], set[int]]:
    """Identities of the buffers ``block`` reads and of those it writes."""
    reads, writes = block_accesses(block)
    return {id(r.buffer) for r in reads}, {id(w.buffer) for w in writes}
