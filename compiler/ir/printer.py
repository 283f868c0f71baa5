"""Prints IR in a Python-like form close to TVMScript.

Variables that share a name are told apart by a numeric suffix, so the printed
text of a valid function never confuses two variables.
"""

from __future__ import annotations

from collections.abc import Iterable

from compiler.ir import expr as E
from compiler.ir.analysis import block_accesses
from compiler.ir.buffer import Buffer
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.node import TEXT_FORMS, Node
from compiler.ir.stmt import (
    Allocate,
    Barrier,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    SeqStmt,
    Stmt,
)
from compiler.ir.structural import structural_equal

_PRECEDENCE = {
    E.Or: 1,
    E.And: 2,
    E.EQ: 4,
    E.NE: 4,
    E.LT: 4,
    E.LE: 4,
    E.GT: 4,
    E.GE: 4,
    E.Add: 5,
    E.Sub: 5,
    E.Mul: 6,
    E.Div: 6,
    E.FloorDiv: 6,
    E.FloorMod: 6,
}

_FOR_KIND_NAMES = {
    ForKind.SERIAL: "T.serial",
    ForKind.PARALLEL: "T.parallel",
    ForKind.VECTORIZED: "T.vectorized",
    ForKind.UNROLLED: "T.unroll",
    ForKind.THREAD_BINDING: "T.thread_binding",
}


class _Names:
    """Unique display names for variables and buffers, by identity.

    Loop and block variables and block-allocated buffers give their names back when
    their scope ends, so sibling loop nests print as ``i, j`` each time, as in
    TVMScript, while names that are live at the same time never clash.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, str] = {}
        self._taken: set[str] = set()

    def __call__(self, obj: E.Var | Buffer) -> str:
        key = id(obj)
        if key not in self._by_id:
            name = obj.name or "v"
            candidate, n = name, 1
            while candidate in self._taken:
                candidate = f"{name}_{n}"
                n += 1
            self._taken.add(candidate)
            self._by_id[key] = candidate
        return self._by_id[key]

    def release(self, objs: list[E.Var | Buffer]) -> None:
        """End the scope of ``objs``: their names may be used again."""
        for obj in objs:
            name = self._by_id.pop(id(obj), None)
            if name is not None:
                self._taken.discard(name)


class _Printer:
    def __init__(self) -> None:
        self.names = _Names()
        self.lines: list[str] = []
        self.loops: list[For] = []

    # expressions -------------------------------------------------------------

    def expr(self, e: Node, parent_prec: int = 0) -> str:
        if isinstance(e, E.Var):
            return self.names(e)
        if isinstance(e, E.IntImm):
            if e.dtype == "bool":
                return "True" if e.value else "False"
            return str(e.value) if e.dtype == "int32" else f"T.{e.dtype}({e.value})"
        if isinstance(e, E.FloatImm):
            return f"T.{e.dtype}({e.value!r})"
        if isinstance(e, (E.Min, E.Max)):
            return f"T.{e.symbol}({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.BinaryOp):
            prec = _PRECEDENCE[type(e)]
            text = f"{self.expr(e.a, prec)} {e.symbol} {self.expr(e.b, prec + 1)}"
            return f"({text})" if prec < parent_prec else text
        if isinstance(e, E.Not):
            return f"not {self.expr(e.a, 3)}"
        if isinstance(e, E.Select):
            parts = (e.condition, e.true_value, e.false_value)
            return f"T.if_then_else({', '.join(self.expr(p) for p in parts)})"
        if isinstance(e, E.Cast):
            return f'T.Cast("{e.dtype}", {self.expr(e.value)})'
        if isinstance(e, E.Call):
            return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, E.BufferLoad):
            return f"{self.names(e.buffer)}[{self.indices(e.indices)}]"
        if isinstance(e, E.Range):
            return f"{self.expr(e.min)}:{self.expr(e.min + e.extent)}"
        script = getattr(e, "script_with", None)
        if script is not None:
            return str(script(self.expr))
        raise TypeError(f"cannot print {type(e).__name__}")

    def indices(self, indices: tuple[E.PrimExpr, ...]) -> str:
        return ", ".join(self.expr(i) for i in indices)

    def shape(self, buffer: Buffer) -> str:
        dims = ", ".join(self.expr(d) for d in buffer.shape)
        return f"({dims},)" if len(buffer.shape) == 1 else f"({dims})"

    def buffer_decl(self, buffer: Buffer, maker: str = "T.Buffer") -> str:
        scope = "" if buffer.scope == "global" else f', scope="{buffer.scope}"'
        return f'{maker}({self.shape(buffer)}, "{buffer.dtype}"{scope})'

    def region(self, region: BufferRegion) -> str:
        parts = []
        for r in region.region:
            if isinstance(r.extent, E.IntImm) and r.extent.value == 1:
                parts.append(self.expr(r.min))
            else:
                parts.append(self.expr(r))
        return f"{self.names(region.buffer)}[{', '.join(parts)}]"

    # statements --------------------------------------------------------------

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def stmt(self, s: Stmt, depth: int) -> None:
        if isinstance(s, SeqStmt):
            for child in s.seq:
                self.stmt(child, depth)
        elif isinstance(s, For):
            self.for_loop(s, depth)
        elif isinstance(s, BlockRealize):
            self.block_realize(s, depth)
        elif isinstance(s, BufferStore):
            target = f"{self.names(s.buffer)}[{self.indices(s.indices)}]"
            self.emit(depth, f"{target} = {self.expr(s.value)}")
        elif isinstance(s, IfThenElse):
            self.emit(depth, f"if {self.expr(s.condition)}:")
            self.stmt(s.then_case, depth + 1)
            if s.else_case is not None:
                self.emit(depth, "else:")
                self.stmt(s.else_case, depth + 1)
        elif isinstance(s, Evaluate):
            self.emit(depth, f"T.evaluate({self.expr(s.value)})")
        elif isinstance(s, Barrier):
            self.emit(depth, 'T.tvm_storage_sync("shared")')
        elif isinstance(s, Allocate):
            decl = self.buffer_decl(s.buffer, "T.allocate")
            self.emit(depth, f"{self.names(s.buffer)} = {decl}")
            self.stmt(s.body, depth)
            self.names.release([s.buffer])
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    def for_loop(self, loop: For, depth: int) -> None:
        grid = _grid(loop)
        if len(grid) > 1:
            names = ", ".join(self.names(g.loop_var) for g in grid)
            extents = ", ".join(self.expr(g.extent) for g in grid)
            self.emit(depth, f"for {names} in T.grid({extents}):")
            self.loops.extend(grid)
            self.stmt(grid[-1].body, depth + 1)
            del self.loops[-len(grid) :]
            self.names.release([g.loop_var for g in grid])
            return
        kind = _FOR_KIND_NAMES[loop.kind]
        if _is_zero(loop.min):
            bounds = self.expr(loop.extent)
        else:
            bounds = f"{self.expr(loop.min)}, {self.expr(loop.min + loop.extent)}"
        extras = []
        if loop.thread_binding:
            extras.append(f'thread="{loop.thread_binding}"')
        if loop.annotations:
            extras.append(f"annotations={loop.annotations!r}")
        tail = "".join(", " + x for x in extras)
        self.emit(depth, f"for {self.names(loop.loop_var)} in {kind}({bounds}{tail}):")
        self.loops.append(loop)
        self.stmt(loop.body, depth + 1)
        self.loops.pop()
        self.names.release([loop.loop_var])

    def block_realize(self, realize: BlockRealize, depth: int) -> None:
        block = realize.block
        if block.name == "root" and not realize.iter_values:
            self.emit(depth, '# with T.block("root"):')
            self.block_contents(block, depth)
            return
        self.emit(depth, f'with T.block("{block.name}"):')
        inner = depth + 1
        self.block_vars(realize, inner)
        if not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value):
            self.emit(inner, f"T.where({self.expr(realize.predicate)})")
        reads, writes = block_accesses(block)
        if block.init is not None:
            written = {id(w.buffer) for w in writes}
            reads = [r for r in reads if id(r.buffer) not in written]
        self.emit(inner, f"T.reads({_unique(self.region(r) for r in reads)})")
        self.emit(inner, f"T.writes({_unique(self.region(w) for w in writes)})")
        if block.annotations:
            self.emit(inner, f"T.block_attr({block.annotations!r})")
        self.block_contents(block, inner)
        self.names.release([iv.var for iv in block.iter_vars])

    def block_vars(self, realize: BlockRealize, depth: int) -> None:
        """``T.axis.remap`` when every block variable is bound to a whole enclosing
        loop, as TVMScript prints it; one ``T.axis.spatial/reduce`` line each otherwise."""
        block = realize.block
        if block.iter_vars and self._is_remap(realize):
            kinds = "".join(iv.kind.value for iv in block.iter_vars)
            names = ", ".join(self.names(iv.var) for iv in block.iter_vars)
            values = ", ".join(self.expr(v) for v in realize.iter_values)
            self.emit(depth, f'{names} = T.axis.remap("{kinds}", [{values}])')
            return
        for iv, value in zip(block.iter_vars, realize.iter_values, strict=True):
            kind = "spatial" if iv.kind is IterKind.SPATIAL else "reduce"
            dom = self.expr(iv.dom.extent)
            if not _is_zero(iv.dom.min):
                dom = f"({self.expr(iv.dom.min)}, {self.expr(iv.dom.min + iv.dom.extent)})"
            self.emit(depth, f"{self.names(iv.var)} = T.axis.{kind}({dom}, {self.expr(value)})")

    def _is_remap(self, realize: BlockRealize) -> bool:
        extents = {id(loop.loop_var): loop for loop in self.loops}
        seen: set[int] = set()
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
            loop = extents.get(id(value))
            if loop is None or id(value) in seen or not _is_zero(loop.min):
                return False
            if not _is_zero(iv.dom.min) or not _same_extent(iv.dom.extent, loop.extent):
                return False
            seen.add(id(value))
        return True

    def block_contents(self, block: Block, depth: int) -> None:
        for buf in block.alloc_buffers:
            self.emit(depth, f"{self.names(buf)} = {self.buffer_decl(buf, 'T.alloc_buffer')}")
        if block.init is not None:
            self.emit(depth, "with T.init():")
            self.stmt(block.init, depth + 1)
        self.stmt(block.body, depth)
        self.names.release(list(block.alloc_buffers))


def _grid(loop: For) -> list[For]:
    """The perfectly nested plain serial loops starting at ``loop`` (TVMScript's T.grid)."""
    grid: list[For] = []
    current: object = loop
    while isinstance(current, For) and _is_plain_serial(current):
        grid.append(current)
        current = current.body
    return grid


def _is_plain_serial(loop: For) -> bool:
    return (
        loop.kind is ForKind.SERIAL
        and _is_zero(loop.min)
        and not loop.annotations
        and not loop.thread_binding
    )


def _is_zero(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _same_extent(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    return structural_equal(a, b)


def _unique(items: Iterable[str]) -> str:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return ", ".join(seen)


def expr_to_str(e: Node) -> str:
    return _Printer().expr(e)


def stmt_to_str(s: Stmt) -> str:
    printer = _Printer()
    printer.stmt(s, 0)
    return "\n".join(printer.lines)


def func_to_script(func: PrimFunc, name: str) -> str:
    printer = _Printer()
    params = ", ".join(f"{printer.names(p)}: {printer.buffer_decl(p)}" for p in func.params)
    printer.emit(0, "@T.prim_func")
    printer.emit(0, f"def {name}({params}):")
    printer.stmt(func.body, 1)
    return "\n".join(printer.lines)


def module_to_script(mod: IRModule) -> str:
    parts = ["@I.ir_module", "class Module:"]
    for name, func in mod.functions.items():
        text = func_to_script(func, name)
        parts.extend("    " + line for line in text.splitlines())
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


TEXT_FORMS.update(expr=expr_to_str, stmt=stmt_to_str, func=func_to_script, module=module_to_script)
