"""GPU kernels to textual LLVM IR for the NVPTX back end.

Each kernel becomes ``define ptx_kernel void @symbol(ptr addrspace(1) ...)``, one
global pointer per buffer it takes. Inside, every buffer is addressed through a
generic pointer (LLVM's address-space inference turns the loads and stores back
into global, shared or local ones), so the CPU emitter's expressions and loops
serve unchanged. What differs is here:

- a loop bound to ``blockIdx``/``threadIdx`` reads the block or thread index
  (``llvm.nvvm.read.ptx.sreg.*``) instead of looping; one shorter than the
  block's size on its axis runs under ``if index < extent``;
- a virtual-thread or vectorized loop is unrolled (the GPU vectorizes loads and
  stores of neighbouring elements, not loops); a parallel loop is serial;
- a shared buffer is a module global in address space 3, a local one a stack
  slot (registers after optimization); a barrier is ``llvm.nvvm.barrier0``;
- index math is 32-bit where the kernel's bounds prove it fits
  (``Kernel.index_bits``), as it is in hand-written CUDA;
- a reduction shared by threads (``ThreadAllReduce``) is warp shuffles
  (``llvm.nvvm.shfl.sync.bfly``), through shared memory between warps;
- math is written out or mapped to PTX's own instructions: there is no libm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from compiler.codegen.llvm_context import ModuleContext
from compiler.codegen.llvm_expr import FLOAT_FLAGS
from compiler.codegen.llvm_fastmath import emit_fast_expf
from compiler.codegen.llvm_stmt import FunctionEmitter, _const, _hint
from compiler.codegen.llvm_types import CodegenError, float_literal, value_type
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import IntImm, PrimExpr, Var, byte_size
from compiler.ir.stmt import Allocate, Barrier, For, ForKind, IfThenElse, Stmt
from compiler.lower.gpu_kernels import AXES, Kernel
from compiler.schedule.primitives.reducer import COMBINERS
from compiler.schedule.primitives.reducer import identity as identity_of

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
WARP = 32
_COMBINE_OPS = {name: op for op, name in COMBINERS.items()}  # by ThreadAllReduce.combine
# The alignment of every buffer a kernel addresses, which accesses may rely on.
BUFFER_ALIGN = 16
_LN2 = math.log(2.0)


def emit_kernels(kernels: Sequence[tuple[str, Kernel]], data_layout: str) -> str:
    """Textual LLVM IR of ``kernels``, each given with its symbol."""
    module = ModuleContext(num_threads=1)
    shared_globals: list[str] = []
    for symbol, _ in kernels:
        module.symbol(symbol)
    for symbol, kernel in kernels:
        emitter = KernelEmitter(module, symbol, kernel, shared_globals)
        module.functions.append(emitter.emit_kernel())
    header = [f'target triple = "{NVPTX_TRIPLE}"', f'target datalayout = "{data_layout}"']
    return module.text(header, shared_globals)


class KernelEmitter(FunctionEmitter):
    def __init__(
        self, module: ModuleContext, name: str, kernel: Kernel, shared_globals: list[str]
    ) -> None:
        super().__init__(module, name, in_parallel=True)
        self.index_type = f"i{kernel.index_bits}"
        self.kernel = kernel
        self.shared_globals = shared_globals
        self.storage: dict[int, str] = {}
        self.scratch: dict[str, str] = {}  # the reductions' shared array, by type

    def emit_kernel(self) -> str:
        params = []
        for k, buffer in enumerate(self.kernel.buffers):
            params.append(f"ptr addrspace(1) noalias align {BUFFER_ALIGN} %param{k}")
            self.buffers[id(buffer)] = self.assign(
                f"addrspacecast ptr addrspace(1) %param{k} to ptr", _hint(buffer)
            )
        self.stmt(self.kernel.body)
        return self.finish(f"ptx_kernel void @{self.name}({', '.join(params)})")

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Barrier):
            barrier = self.module.declare("llvm.nvvm.barrier0", "void ()")
            self.emit(f"call void {barrier}()")
        else:
            super().stmt(s)

    # loops --------------------------------------------------------------------

    def _for(self, loop: For) -> None:
        axis = loop.thread_binding or ""
        if loop.kind is ForKind.THREAD_BINDING and axis.startswith(("blockIdx", "threadIdx")):
            self._bound_loop(loop, axis)
            return
        if loop.kind in (ForKind.THREAD_BINDING, ForKind.VECTORIZED):
            loop = For(loop.loop_var, loop.min, loop.extent, ForKind.UNROLLED, loop.body)
        elif loop.kind is ForKind.PARALLEL:
            loop = For(loop.loop_var, loop.min, loop.extent, ForKind.SERIAL, loop.body)
        super()._for(loop)

    def _bound_loop(self, loop: For, axis: str) -> None:
        kind, _, dim = axis.partition(".")
        register = "ctaid" if kind == "blockIdx" else "tid"
        reader = self.module.declare(f"llvm.nvvm.read.ptx.sreg.{register}.{dim}", "i32 ()")
        launched = (self.kernel.grid if kind == "blockIdx" else self.kernel.block)[AXES.index(dim)]
        # The index's range lets LLVM treat the floor divisions and remainders of index
        # math as the unsigned ones they are (shifts and masks for powers of two).
        known = self.module.range_metadata("i32", 0, launched)
        index = self.assign(f"call i32 {reader}(), !range {known}", _hint(loop.loop_var))
        if self.index_type != "i32":
            index = self.assign(f"zext i32 {index} to {self.index_type}")
        start = self.typed(loop.min, "int64", index=True)
        if start != "0":
            index = self.assign(f"add nsw {self.index_type} {index}, {start}")
        self.vars[id(loop.loop_var)] = index
        if _const(loop.extent) == launched:
            self.stmt(loop.body)
        else:
            guard = loop.loop_var - loop.min < loop.extent
            self._if(IfThenElse(guard, loop.body))
        del self.vars[id(loop.loop_var)]

    # reductions shared by threads ---------------------------------------------

    def thread_allreduce(self, e: E.ThreadAllReduce) -> str:
        """Warp shuffles (butterflies) within each group of ``lanes`` threads, which
        ``gpu_kernels`` checks are aligned powers of two along ``threadIdx.x``; beyond
        a warp, each warp's result goes through a shared array (a slot per warp, and
        one per group for the total), read back by the group's first warp."""
        ty = value_type(e.dtype)
        if ty not in ("float", "i32"):
            raise CodegenError(
                f"a reduction shared by GPU threads of {e.dtype} has no GPU code yet; "
                "reduce in float32 or int32"
            )
        value = self._butterfly(self.expr(e.value), e, min(e.lanes, WARP))
        if e.lanes <= WARP:
            return value
        return self._across_warps(value, e, ty)

    def _butterfly(self, value: str, e: E.ThreadAllReduce, width: int) -> str:
        ty = value_type(e.dtype)
        suffix = "f32" if ty == "float" else "i32"
        shuffle = self.module.declare(
            f"llvm.nvvm.shfl.sync.bfly.{suffix}", f"{ty} (i32, {ty}, i32, i32)"
        )
        threads = math.prod(self.kernel.block)
        mask = -1 if threads >= WARP else (1 << threads) - 1
        offset = width // 2
        while offset:
            other = self.assign(
                f"call {ty} {shuffle}(i32 {mask}, {ty} {value}, i32 {offset}, i32 {WARP - 1})"
            )
            value = self._combine(e, value, other)
            offset //= 2
        return value

    def _combine(self, e: E.ThreadAllReduce, a: str, b: str) -> str:
        zero = E.const(0, e.dtype)
        kind = _COMBINE_OPS[e.combine](zero, zero)  # the arithmetic node to emit
        ty = value_type(e.dtype)
        if E.is_float(e.dtype):
            return self._float_binary(kind, ty, a, b)
        return self._int_binary(kind, ty, a, b, False)

    def _across_warps(self, value: str, e: E.ThreadAllReduce, ty: str) -> str:
        scratch = self._allreduce_scratch(ty)
        linear = self._linear_thread()
        lane = self.assign(f"and i32 {linear}, {WARP - 1}")
        warp = self.assign(f"lshr i32 {linear}, 5")
        per_group = e.lanes // WARP
        group = self.assign(f"lshr i32 {linear}, {e.lanes.bit_length() - 1}")
        first_lane = self.assign(f"icmp eq i32 {lane}, 0")
        self._when(first_lane, lambda: self._store_shared(scratch, ty, warp, value))
        self.stmt(Barrier())
        in_group = self.assign(f"and i32 {warp}, {per_group - 1}")
        first_warp = self.assign(f"icmp eq i32 {in_group}, 0")

        def total() -> None:
            base = self.assign(f"mul nsw i32 {group}, {per_group}")
            slot = self.assign(f"add nsw i32 {base}, {lane}")
            mine = self._load_shared(scratch, ty, slot)
            present = self.assign(f"icmp ult i32 {lane}, {per_group}")
            identity = self.expr(identity_of(_COMBINE_OPS[e.combine], e.dtype))
            part = self.assign(f"select i1 {present}, {ty} {mine}, {ty} {identity}")
            whole = self._butterfly(part, e, per_group)
            at = self.assign(f"add nsw i32 {group}, {WARP}")
            self._when(first_lane, lambda: self._store_shared(scratch, ty, at, whole))

        self._when(first_warp, total)
        self.stmt(Barrier())
        return self._load_shared(scratch, ty, self.assign(f"add nsw i32 {group}, {WARP}"))

    def _allreduce_scratch(self, ty: str) -> str:
        """The kernel's shared array for reductions across warps: a slot per warp of
        the block, then one per group of threads."""
        symbol = self.scratch.get(ty)
        if symbol is None:
            symbol = self.scratch[ty] = self.module.symbol(f"{self.name}_allreduce_{ty}")
            self.shared_globals.append(
                f"@{symbol} = internal addrspace(3) global [{2 * WARP} x {ty}] undef, "
                f"align {BUFFER_ALIGN}"
            )
        return symbol

    def _store_shared(self, symbol: str, ty: str, slot: str, value: str) -> None:
        pointer = self._scratch_slot(symbol, ty, slot)
        self.emit(f"store {ty} {value}, ptr addrspace(3) {pointer}, align 4")

    def _load_shared(self, symbol: str, ty: str, slot: str) -> str:
        pointer = self._scratch_slot(symbol, ty, slot)
        return self.assign(f"load {ty}, ptr addrspace(3) {pointer}, align 4")

    def _scratch_slot(self, symbol: str, ty: str, slot: str) -> str:
        return self.assign(
            f"getelementptr inbounds [{2 * WARP} x {ty}], ptr addrspace(3) @{symbol}, i32 0, "
            f"i32 {slot}"
        )

    def _linear_thread(self) -> str:
        """The thread's number in its block, x fastest."""
        linear = "0"
        stride = 1
        for dim, size in zip(AXES, self.kernel.block, strict=True):
            if size == 1:
                continue
            reader = self.module.declare(f"llvm.nvvm.read.ptx.sreg.tid.{dim}", "i32 ()")
            known = self.module.range_metadata("i32", 0, size)
            index = self.assign(f"call i32 {reader}(), !range {known}")
            scaled = index if stride == 1 else self.assign(f"mul nuw nsw i32 {index}, {stride}")
            linear = scaled if linear == "0" else self.assign(f"add nuw nsw i32 {linear}, {scaled}")
            stride *= size
        return linear

    def _when(self, condition: str, body: Callable[[], None]) -> None:
        then_label, end_label = self.label("when.then"), self.label("when.end")
        self.emit(f"br i1 {condition}, label %{then_label}, label %{end_label}")
        self.start_block(then_label)
        body()
        self.branch(end_label)
        self.start_block(end_label)

    # storage ------------------------------------------------------------------

    def _allocate(self, s: Allocate) -> None:
        """Shared buffers are module globals, local ones stack slots. An allocation
        an unrolled loop emits once per iteration gets its storage once: the
        iterations run one after another and lowering counted it once."""
        buffer = s.buffer
        pointer = self.storage.get(id(buffer))
        if pointer is None:
            pointer = self._storage(buffer)
            self.storage[id(buffer)] = pointer
        self._with_buffer(buffer, pointer, s.body)

    def _storage(self, buffer: Buffer) -> str:
        sizes = [_const(d) for d in buffer.shape]
        if any(size is None for size in sizes):
            raise CodegenError(f"buffer {buffer.name!r} in a GPU kernel has a symbolic shape")
        nbytes = max(math.prod(size for size in sizes if size is not None), 1)
        nbytes *= byte_size(buffer.dtype)
        if buffer.scope == "shared":
            symbol = self.module.symbol(f"{self.name}_{buffer.name}")
            self.shared_globals.append(
                f"@{symbol} = internal addrspace(3) global [{nbytes} x i8] undef, "
                f"align {BUFFER_ALIGN}"
            )
            cast = f"addrspacecast (ptr addrspace(3) @{symbol} to ptr)"
            return self._entry_value(cast, _hint(buffer))
        pointer = self.fresh(_hint(buffer))
        self.allocas.append(f"  {pointer} = alloca [{nbytes} x i8], align {BUFFER_ALIGN}")
        return pointer

    def _entry_value(self, constant: str, hint: str) -> str:
        """A value computed once in the entry block, where it dominates every use."""
        name = self.fresh(hint)
        self.allocas.append(f"  {name} = getelementptr i8, ptr {constant}, i64 0")
        return name

    def alignment(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> int:
        """Up to 16 bytes where the flat offset is known to be a multiple of it, so
        that LLVM's load/store vectorizer may join neighbouring accesses into one
        ``ld.v4``/``st.v4``: every buffer starts 16-byte aligned (cuMemAlloc gives
        256, shared and local storage is declared so). The loop variables of an
        unrolled loop count as the constants they are where the access is emitted."""
        size = byte_size(buffer.dtype)
        divisor = self._divisor(indices[0])
        offset_bytes = divisor * size if divisor else BUFFER_ALIGN
        return max(size, math.gcd(offset_bytes, BUFFER_ALIGN))

    def _divisor(self, e: PrimExpr) -> int:
        """A number that divides every value of integer ``e`` (0: ``e`` is 0)."""
        if isinstance(e, IntImm):
            return abs(e.value)
        if isinstance(e, Var):
            known = self.vars.get(id(e), "")
            return abs(int(known)) if known.lstrip("-").isdigit() else 1
        if isinstance(e, (E.Add, E.Sub)):
            return math.gcd(self._divisor(e.a), self._divisor(e.b))
        if isinstance(e, E.Mul):
            return self._divisor(e.a) * self._divisor(e.b)
        if isinstance(e, E.FloorMod) and isinstance(e.b, IntImm):
            return math.gcd(self._divisor(e.a), e.b.value)
        return 1

    # math ---------------------------------------------------------------------

    def exp(self, ty: str, x: str) -> str:
        if ty != "float":
            raise CodegenError(f"exp of {ty} has no GPU code yet; compute it in float32")
        return emit_fast_expf(self.assign, x, FLOAT_FLAGS)

    def call_llvm_math(self, name: str, ty: str, args: list[str]) -> str:
        if name in ("sqrt", "fabs", "floor", "ceil"):
            return super().call_llvm_math(name, ty, args)
        if ty != "float":
            raise CodegenError(f"{name} of {ty} has no GPU code yet; compute it in float32")
        if name == "log":
            return self._log(args[0])
        if name == "pow":
            product = self.assign(f"fmul {FLOAT_FLAGS} float {args[1]}, {self._log(args[0])}")
            return self.exp(ty, product)
        if name == "tanh":
            return self._tanh(args[0])
        raise CodegenError(f"math function {name} has no GPU code")

    def _log(self, x: str) -> str:
        """ln(x) = log2(x) * ln 2, log2 by PTX's ``lg2.approx`` (2**-22 from exact)."""
        lg2 = self.module.declare("llvm.nvvm.lg2.approx.f", "float (float)")
        log2 = self.assign(f"call float {lg2}(float {x})")
        return self.assign(f"fmul {FLOAT_FLAGS} float {log2}, {float_literal(_LN2, 'float32')}")

    def _tanh(self, x: str) -> str:
        """tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|), which neither
        overflows nor loses small results (PTX's tanh.approx is 2**-11 from exact)."""
        fabs = super().call_llvm_math("fabs", "float", [x])
        scaled = self.assign(f"fmul {FLOAT_FLAGS} float {fabs}, -2.0")
        e = self.exp("float", scaled)
        one = float_literal(1.0, "float32")
        numerator = self.assign(f"fsub {FLOAT_FLAGS} float {one}, {e}")
        denominator = self.assign(f"fadd {FLOAT_FLAGS} float {one}, {e}")
        magnitude = self.assign(f"fdiv {FLOAT_FLAGS} float {numerator}, {denominator}")
        copysign = self.module.declare("llvm.copysign.f32", "float (float, float)")
        return self.assign(f"call float {copysign}(float {magnitude}, float {x})")
