"""Prints IR in a Python-like form close to TVMScript.

Variables that share a name are told apart by a numeric suffix, so the printed
text of a valid function never confuses two variables.
"""

from __future__ import annotations

from compiler.ir import expr as E
from compiler.ir.analysis import block_accesses
from compiler.ir.buffer import Buffer
from compiler.ir.node import Node
from compiler.ir.stmt import (
    Allocate,
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
    """Unique display names for variables and buffers, by identity."""

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


class _Printer:
    def __init__(self) -> None:
        self.names = _Names()
        self.lines: list[str] = []

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
            return f"T.Cast(\"{e.dtype}\", {self.expr(e.value)})"
        if isinstance(e, E.Call):
            return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, E.BufferLoad):
            return f"{self.names(e.buffer)}[{self.indices(e.indices)}]"
        if isinstance(e, E.Range):
            return f"{self.expr(e.min)}:{self.expr(e.min + e.extent)}"
        raise TypeError(f"cannot print {type(e).__name__}")

    def indices(self, indices: tuple[E.PrimExpr, ...]) -> str:
        return ", ".join(self.expr(i) for i in indices)

    def shape(self, buffer: Buffer) -> str:
        dims = ", ".join(self.expr(d) for d in buffer.shape)
        return f"({dims},)" if len(buffer.shape) == 1 else f"({dims})"

    def buffer_decl(self, buffer: Buffer) -> str:
        scope = "" if buffer.scope == "global" else f', scope="{buffer.scope}"'
        return f'T.Buffer({self.shape(buffer)}, "{buffer.dtype}"{scope})'

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
        elif isinstance(s, Allocate):
            decl = self.buffer_decl(s.buffer).replace("T.Buffer", "T.allocate", 1)
            self.emit(depth, f"{self.names(s.buffer)} = {decl}")
            self.stmt(s.body, depth)
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    def for_loop(self, loop: For, depth: int) -> None:
        kind = _FOR_KIND_NAMES[loop.kind]
        is_zero_min = isinstance(loop.min, E.IntImm) and loop.min.value == 0
        if is_zero_min:
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
        self.stmt(loop.body, depth + 1)

    def block_realize(self, realize: BlockRealize, depth: int) -> None:
        block = realize.block
        if block.name == "root" and not realize.iter_values:
            self.emit(depth, '# with T.block("root"):')
            self.block_contents(block, depth)
            return
        self.emit(depth, f'with T.block("{block.name}"):')
        inner = depth + 1
        for iv, value in zip(block.iter_vars, realize.iter_values, strict=True):
            kind = "spatial" if iv.kind is IterKind.SPATIAL else "reduce"
            dom = self.expr(iv.dom.extent)
            is_zero_min = isinstance(iv.dom.min, E.IntImm) and iv.dom.min.value == 0
            if not is_zero_min:
                dom = f"({self.expr(iv.dom.min)}, {self.expr(iv.dom.min + iv.dom.extent)})"
            line = f"{self.names(iv.var)} = T.axis.{kind}({dom}, {self.expr(value)})"
            self.emit(inner, line)
        if not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value):
            self.emit(inner, f"T.where({self.expr(realize.predicate)})")
        reads, writes = block_accesses(block)
        self.emit(inner, f"T.reads({_unique(self.region(r) for r in reads)})")
        self.emit(inner, f"T.writes({_unique(self.region(w) for w in writes)})")
        if block.annotations:
            self.emit(inner, f"T.block_attr({block.annotations!r})")
        self.block_contents(block, inner)

    def block_contents(self, block: Block, depth: int) -> None:
        for buf in block.alloc_buffers:
            self.emit(depth, f"{self.names(buf)} = {self.buffer_decl(buf)}")
        if block.init is not None:
            self.emit(depth, "with T.init():")
            self.stmt(block.init, depth + 1)
        self.stmt(block.body, depth)


def _unique(items: object) -> str:
    seen: list[str] = []
    for item in items:  # type: ignore[attr-defined]
        if item not in seen:
            seen.append(item)
    return ", ".join(seen)


def expr_to_str(e: Node) -> str:
    return _Printer().expr(e)


def stmt_to_str(s: Stmt) -> str:
    printer = _Printer()
    printer.stmt(s, 0)
    return "\n".join(printer.lines)


def func_to_script(func: object, name: str) -> str:
    from compiler.ir.function import PrimFunc

    assert isinstance(func, PrimFunc)
    printer = _Printer()
    params = ", ".join(f"{printer.names(p)}: {printer.buffer_decl(p)}" for p in func.params)
    printer.emit(0, "@T.prim_func")
    printer.emit(0, f"def {name}({params}):")
    printer.stmt(func.body, 1)
    return "\n".join(printer.lines)


def module_to_script(mod: object) -> str:
    parts = ["@I.ir_module", "class Module:"]
    for name, func in mod.functions.items():  # type: ignore[attr-defined]
        text = func_to_script(func, name)
        parts.extend("    " + line for line in text.splitlines())
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
