"""Statements to textual LLVM IR: loops of every kind, conditions, stores, allocations.

Loop kinds map to LLVM as follows. SERIAL is a plain loop. VECTORIZED is a loop
carrying ``llvm.loop.vectorize.enable``, so LLVM's loop vectorizer must vectorize
it (it also may reorder a float reduction there, as a vectorized reduction must).
UNROLLED with a small constant extent is emitted once per iteration; otherwise
it carries ``llvm.loop.unroll.full``. PARALLEL is outlined into a worker that
``GOMP_parallel`` runs on every thread of the OpenMP team, each thread taking
one contiguous chunk; a parallel loop inside another is emitted serial.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from compiler.arith.linear import stride
from compiler.codegen.llvm_context import ModuleContext
from compiler.codegen.llvm_expr import ExprEmitter
from compiler.codegen.llvm_types import CodegenError, storage_type
from compiler.codegen.llvm_vector import VectorLoop
from compiler.codegen.loop_independence import disjoint_stride
from compiler.ir import expr as E
from compiler.ir.analysis import free_vars
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var, byte_size
from compiler.ir.node import Node, visit
from compiler.ir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Stmt,
)

MAX_EXPLICIT_UNROLL = 32
STACK_LIMIT_BYTES = 64 * 1024
FRAME_LIMIT_BYTES = 512 * 1024
ALLOC_ALIGN = 64


class FunctionEmitter(ExprEmitter):
    def __init__(self, module: ModuleContext, name: str, in_parallel: bool = False) -> None:
        super().__init__(module, name)
        self.in_parallel = in_parallel
        self.stack_bytes = 0
        # The loops to write as vector instructions (llvm_vector.plan_vector_loops), and
        # the vectorized loops LLVM must not unroll (llvm_vector.rolled_vector_loops).
        self.vector_loops: dict[int, list[BufferStore]] = {}
        self.rolled_loops: set[int] = set()
        # The loops LLVM must leave rolled and scalar (llvm_module.scalar_copy_loops).
        self.scalar_loops: set[int] = set()

    def finish(self, header: str) -> str:
        """The function's text; ``header`` is e.g. ``"void @f(ptr %a)"``."""
        return "\n".join(
            [f"define {header} #0 {{", "entry:", *self.allocas, *self.lines, "  ret void", "}", ""]
        )

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for child in s.seq:
                self.stmt(child)
        elif isinstance(s, BufferStore):
            self._store(s)
        elif isinstance(s, For):
            self._ranged_for(s)
        elif isinstance(s, IfThenElse):
            self._if(s)
        elif isinstance(s, Allocate):
            self._allocate(s)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        else:
            raise CodegenError(
                f"cannot generate code for {type(s).__name__}; lower the function first "
                "(compiler.lower) so that only loops, conditions and stores remain"
            )

    def _store(self, s: BufferStore) -> None:
        value = self.typed(s.value, s.buffer.dtype)
        if s.buffer.dtype == "bool":
            value = self.assign(f"zext i1 {value} to i8")
        address = self.address(s.buffer, s.indices)
        ty = storage_type(s.buffer.dtype)
        if self.in_memory(address, ty) == value:
            return  # the element already holds it
        align = self.alignment(s.buffer, s.indices)
        self.emit(f"store {ty} {value}, ptr {address}, align {align}{self.access_metadata()}")
        self.remember(address, ty, value)

    def _if(self, s: IfThenElse) -> None:
        cond = self.condition(s.condition)
        if cond in ("true", "false"):  # an unrolled loop's index decided it
            taken = s.then_case if cond == "true" else s.else_case
            if taken is not None:
                self.stmt(taken)
            return
        then_label, end_label = self.label("if.then"), self.label("if.end")
        else_label = self.label("if.else") if s.else_case is not None else end_label
        self.emit(f"br i1 {cond}, label %{then_label}, label %{else_label}")
        self.start_block(then_label)
        self.stmt(s.then_case)
        self.branch(end_label)
        if s.else_case is not None:
            self.start_block(else_label)
            self.stmt(s.else_case)
            self.branch(end_label)
        self.start_block(end_label)

    # loops --------------------------------------------------------------------

    def _ranged_for(self, loop: For) -> None:
        """``loop``, its variable's range known inside it when its bounds are constants."""
        var = loop.loop_var
        if _const(loop.min) is None or _const(loop.extent) is None:
            self._for(loop)
            return
        self.ranges[var] = Range(loop.min, loop.extent)
        try:
            self._for(loop)
        finally:
            del self.ranges[var]

    def _for(self, loop: For) -> None:
        if loop.kind is ForKind.THREAD_BINDING:
            raise CodegenError(
                f"loop {loop.loop_var.name!r} is bound to {loop.thread_binding!r}; thread "
                "bindings need a GPU target, the llvm target runs loops on the CPU"
            )
        if loop.kind is ForKind.PARALLEL and not self.in_parallel:
            self._parallel_for(loop)
            return
        stores = self.vector_loops.get(id(loop))
        if stores is not None:
            VectorLoop(self, loop).emit(stores)
            return
        extent = _const(loop.extent)
        start = _const(loop.min)
        if loop.kind is ForKind.UNROLLED and extent is not None and start is not None:
            if extent <= MAX_EXPLICIT_UNROLL:
                self.unrolled.add(id(loop.loop_var))
                for value in range(start, start + extent):
                    self.vars[id(loop.loop_var)] = str(value)
                    self.stmt(loop.body)
                del self.vars[id(loop.loop_var)]
                self.unrolled.discard(id(loop.loop_var))
                return
        low, high = self._bounds(loop)
        self._loop_with(loop, low, high, self._loop_properties(loop))

    def _loop_with(self, loop: For, low: str, high: str, properties: list[str]) -> None:
        """``loop`` over ``[low, high)`` with the ``llvm.loop`` ``properties``, and
        ``llvm.loop.parallel_accesses`` where its iterations touch disjoint memory
        (``loop_independence``) one element apart: its loads and stores then join its
        access group. A loop whose iterations are further apart is left unmarked: once
        the loops inside were unrolled, LLVM's vectorizer grouped its strided accesses
        and reordered the loads and stores of one iteration to one element (LLVM 20:
        Winograd's batched GEMM over a tile accumulating in memory returned NaN)."""
        parallel = disjoint_stride(loop, self._memory_of) == 1
        if parallel:
            group = self.module.access_group()
            properties = [*properties, f'!"llvm.loop.parallel_accesses", {group}']
            self.access_groups.append(group)
        metadata = self.module.loop_metadata(properties) if properties else ""
        self.loop(loop.loop_var, low, high, loop.body, metadata)
        if parallel:
            self.access_groups.pop()

    def _memory_of(self, buffer: Buffer) -> Hashable:
        """The memory ``buffer`` is: its pointer when it has one here."""
        return self.buffers.get(id(buffer)) or ("allocated in the loop", id(buffer))

    def _bounds(self, loop: For) -> tuple[str, str]:
        low = self.typed(loop.min, "int64", index=True)
        extent = self.typed(loop.extent, "int64", index=True)
        if low == "0":
            return low, extent
        return low, self.assign(f"add nsw {self.index_type} {low}, {extent}")

    def _loop_properties(self, loop: For) -> list[str]:
        if loop.kind is ForKind.VECTORIZED:
            rolled = ['!"llvm.loop.unroll.disable"'] if id(loop) in self.rolled_loops else []
            return ['!"llvm.loop.vectorize.enable", i1 true', *rolled]
        if loop.kind is ForKind.UNROLLED:
            constant = _const(loop.extent) is not None
            return ['!"llvm.loop.unroll.full"' if constant else '!"llvm.loop.unroll.enable"']
        if id(loop) in self.scalar_loops:
            return ['!"llvm.loop.unroll.disable"', '!"llvm.loop.vectorize.enable", i1 false']
        return _around_vector_loop(loop)

    def loop(self, var: Var, low: str, high: str, body: Stmt, metadata: str = "") -> None:
        """``for var in [low, high)`` with ``var`` as an induction variable of the index type."""
        preheader = self.current_label
        header, body_label = self.label("for.head"), self.label("for.body")
        latch, exit_label = self.label("for.latch"), self.label("for.end")
        self.branch(header)
        self.start_block(header)
        induction, step = self.fresh(_hint(var)), self.fresh("next")
        ty = self.index_type
        self.emit(f"{induction} = phi {ty} [ {low}, %{preheader} ], [ {step}, %{latch} ]")
        more = self.assign(f"icmp slt {ty} {induction}, {high}")
        self.emit(f"br i1 {more}, label %{body_label}, label %{exit_label}")
        self.start_block(body_label)
        self.vars[id(var)] = induction
        self.stmt(body)
        del self.vars[id(var)]
        self.branch(latch)
        self.start_block(latch)
        self.emit(f"{step} = add nsw {self.index_type} {induction}, 1")
        self.branch(header, metadata)
        self.start_block(exit_label)

    def _parallel_for(self, loop: For) -> None:
        """Outline the loop into a worker and run it with ``GOMP_parallel``.

        The context struct carries the bounds and every pointer and variable the
        body uses. The worker picks its thread's chunk and calls a body function
        whose pointer parameters are ``noalias``, so the body optimizes as well
        as a top-level kernel does.
        """
        low, high = self._bounds(loop)
        captured_vars = [v for v in free_vars(loop.body) if id(v) in self.vars]
        captured_buffers = [b for b in _accessed_buffers(loop.body) if id(b) in self.buffers]
        body_name = self._emit_parallel_body(loop, captured_vars, captured_buffers)
        fields = ["i64", "i64", *(["ptr"] * len(captured_buffers)), *(["i64"] * len(captured_vars))]
        struct = "{ " + ", ".join(fields) + " }"
        worker = self._emit_parallel_worker(body_name, fields)
        context = self.fresh("omp.ctx")
        self.allocas.append(f"  {context} = alloca {struct}, align 8")
        values = [
            low,
            high,
            *(self.buffers[id(b)] for b in captured_buffers),
            *(self.vars[id(v)] for v in captured_vars),
        ]
        for position, (ty, value) in enumerate(zip(fields, values, strict=True)):
            slot = self.assign(
                f"getelementptr inbounds {struct}, ptr {context}, i32 0, i32 {position}"
            )
            self.emit(f"store {ty} {value}, ptr {slot}")
        run_label, end_label = self.label("omp.run"), self.label("omp.end")
        nonempty = self.assign(f"icmp slt {self.index_type} {low}, {high}")
        self.emit(f"br i1 {nonempty}, label %{run_label}, label %{end_label}")
        self.start_block(run_label)
        gomp = self.module.declare("GOMP_parallel", "void (ptr, ptr, i32, i32)")
        threads = self.module.num_threads
        self.emit(f"call void {gomp}(ptr @{worker}, ptr {context}, i32 {threads}, i32 0)")
        self.branch(end_label)
        self.start_block(end_label)

    def _emit_parallel_body(
        self, loop: For, captured_vars: list[Var], captured_buffers: list[Buffer]
    ) -> str:
        name = self.module.symbol(f"{self.name}_parallel_body")
        body = FunctionEmitter(self.module, name, in_parallel=True)
        body.vector_loops = self.vector_loops
        body.rolled_loops = self.rolled_loops
        body.scalar_loops = self.scalar_loops
        body.ranges = dict(self.ranges)
        params = []
        for k, buffer in enumerate(captured_buffers):
            body.buffers[id(buffer)] = f"%buf{k}"
            params.append(f"ptr noalias align {byte_size(buffer.dtype)} %buf{k}")
        for k, var in enumerate(captured_vars):
            body.vars[id(var)] = f"%var{k}"
            params.append(f"i64 %var{k}")
        params += ["i64 %begin", "i64 %end"]
        body._loop_with(loop, "%begin", "%end", _around_vector_loop(loop))
        self.module.functions.append(body.finish(f"internal void @{name}({', '.join(params)})"))
        return name

    def _emit_parallel_worker(self, body_name: str, field_types: list[str]) -> str:
        """``void worker(ctx*)``: this thread's chunk of ``[low, high)``, statically split;
        ``field_types`` are the context's fields: low, high, then the body's arguments."""
        name = self.module.symbol(f"{self.name}_parallel_worker")
        w = FunctionEmitter(self.module, name, in_parallel=True)
        struct = "{ " + ", ".join(field_types) + " }"
        fields = []
        for position, ty in enumerate(field_types):
            slot = w.assign(f"getelementptr inbounds {struct}, ptr %ctx, i32 0, i32 {position}")
            fields.append((ty, w.assign(f"load {ty}, ptr {slot}")))
        (_, low), (_, high) = fields[0], fields[1]
        thread_num = self.module.declare("omp_get_thread_num", "i32 ()")
        num_threads = self.module.declare("omp_get_num_threads", "i32 ()")
        tid = w.resize(w.assign(f"call i32 {thread_num}()"), "i32", "i64", signed=True)
        team = w.resize(w.assign(f"call i32 {num_threads}()"), "i32", "i64", signed=True)
        count = w.assign(f"sub nsw i64 {high}, {low}")
        rounded = w.assign(f"add nsw i64 {count}, {team}")
        rounded = w.assign(f"sub nsw i64 {rounded}, 1")
        chunk = w.assign(f"sdiv i64 {rounded}, {team}")
        smin = self.module.declare("llvm.smin.i64", "i64 (i64, i64)")
        first = w.assign(f"mul nsw i64 {tid}, {chunk}")
        first = w.assign(f"call i64 {smin}(i64 {first}, i64 {count})")
        last = w.assign(f"add nsw i64 {first}, {chunk}")
        last = w.assign(f"call i64 {smin}(i64 {last}, i64 {count})")
        begin = w.assign(f"add nsw i64 {low}, {first}")
        end = w.assign(f"add nsw i64 {low}, {last}")
        args = [f"{ty} {value}" for ty, value in fields[2:]] + [f"i64 {begin}", f"i64 {end}"]
        w.emit(f"call void @{body_name}({', '.join(args)})")
        self.module.functions.append(w.finish(f"internal void @{name}(ptr %ctx)"))
        return name

    # storage ------------------------------------------------------------------

    def _allocate(self, s: Allocate) -> None:
        """Small constant-size buffers live on the stack of the current function (per
        thread inside a parallel body), up to a frame budget that keeps deep kernels
        within a thread's stack; others on the heap, 64-byte aligned."""
        buffer = s.buffer
        sizes = [size for size in map(_const, buffer.shape) if size is not None]
        if len(sizes) == len(buffer.shape):
            nbytes = math.prod(sizes) * byte_size(buffer.dtype)
            fits = self.stack_bytes + nbytes <= FRAME_LIMIT_BYTES
            if nbytes <= STACK_LIMIT_BYTES and fits:
                self.stack_bytes += nbytes
                pointer = self.fresh(_hint(buffer))
                count = max(nbytes, 1)
                self.allocas.append(f"  {pointer} = alloca [{count} x i8], align {ALLOC_ALIGN}")
                self._with_buffer(buffer, pointer, s.body)
                return
        pointer = self._heap_allocate(buffer)
        self._with_buffer(buffer, pointer, s.body)
        free = self.module.declare("free", "void (ptr)")
        self.emit(f"call void {free}(ptr {pointer})")

    def _heap_allocate(self, buffer: Buffer) -> str:
        elements: PrimExpr = E.const(1, "int64")
        for dim in buffer.shape:
            elements = E._binary(E.Mul, elements, E.Cast("int64", dim))
        count = self.expr(elements, index=True)
        nbytes = self.assign(f"mul nsw i64 {count}, {byte_size(buffer.dtype)}")
        padded = self.assign(f"add nsw i64 {nbytes}, {ALLOC_ALIGN - 1}")
        padded = self.assign(f"and i64 {padded}, {-ALLOC_ALIGN}")
        umax = self.module.declare("llvm.umax.i64", "i64 (i64, i64)")
        padded = self.assign(f"call i64 {umax}(i64 {padded}, i64 {ALLOC_ALIGN})")
        aligned_alloc = self.module.declare("aligned_alloc", "ptr (i64, i64)")
        pointer = self.assign(f"call ptr {aligned_alloc}(i64 {ALLOC_ALIGN}, i64 {padded})")
        failed = self.assign(f"icmp eq ptr {pointer}, null")
        fail_label, ok_label = self.label("alloc.fail"), self.label("alloc.ok")
        self.emit(f"br i1 {failed}, label %{fail_label}, label %{ok_label}")
        self.start_block(fail_label)
        trap = self.module.declare("llvm.trap", "void ()")
        self.emit(f"call void {trap}()")
        self.emit("unreachable")
        self.start_block(ok_label)
        return pointer

    def _with_buffer(self, buffer: Buffer, pointer: str, body: Stmt) -> None:
        self.buffers[id(buffer)] = pointer
        self.stmt(body)
        del self.buffers[id(buffer)]


def _around_vector_loop(loop: For) -> list[str]:
    """The property that keeps LLVM from vectorizing ``loop`` when a loop inside it is
    vectorized and streams (each access moves by 0 or 1 element a step): the schedule
    chose that loop. A vector loop of one vector or less (a blocked layout's channel
    block) is unrolled whole by LLVM first, and its vectorizer then took the loop
    outside instead, with gathers and scatters across the block (a blocked depthwise
    convolution ran 2-10x slower). A vector loop that gathers anyway leaves LLVM
    free to find a better loop outside."""
    inner: list[For] = []

    def collect(n: Node) -> None:
        if isinstance(n, For) and n.kind is ForKind.VECTORIZED:
            inner.append(n)

    visit(loop.body, collect)
    if not any(_streams(vector_loop) for vector_loop in inner):
        return []
    return ['!"llvm.loop.vectorize.enable", i1 false']


def _streams(loop: For) -> bool:
    """Whether every access in ``loop`` moves by 0 or 1 element per iteration (row-major:
    the last index by 0 or 1, the others not at all)."""
    var = loop.loop_var
    accesses: list[tuple[PrimExpr, ...]] = []

    def collect(n: Node) -> None:
        if isinstance(n, (E.BufferLoad, BufferStore)):
            accesses.append(n.indices)

    visit(loop.body, collect)
    return all(
        stride(indices[-1], var) in (0, 1) and all(stride(i, var) == 0 for i in indices[:-1])
        for indices in accesses
        if indices
    )


def _const(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def _hint(named: Var | Buffer) -> str:
    cleaned = "".join(c for c in named.name if c.isascii() and (c.isalnum() or c == "_"))
    return ("v" + cleaned if not cleaned or cleaned[0].isdigit() else cleaned) + "."


def _accessed_buffers(node: Node) -> list[Buffer]:
    found: dict[int, Buffer] = {}

    def collect(n: Node) -> None:
        if isinstance(n, (E.BufferLoad, BufferStore)):
            found.setdefault(id(n.buffer), n.buffer)

    visit(node, collect)
    return list(found.values())
