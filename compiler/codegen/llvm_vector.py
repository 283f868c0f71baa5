"""A vectorized loop of constant extent, written as LLVM vector instructions.

Emitted as a scalar loop that asks to be vectorized, a loop of one vector is
unrolled whole by LLVM's full unroll (which runs before its loop vectorizer),
and the SLP vectorizer puts the vectors back together afterwards. Inside a
register tile that leaves blocks of over a thousand scalar loads and stores,
which LoopLoadElimination compares pairwise: LLVM's optimization took 0.53 s of a
ResNet-18 candidate's 0.79 s build on average, and 0.24 s once such loops were
written as vectors here (30 stored candidates, `-mcpu=znver5`).

Only loops whose meaning is plain lane by lane are written this way:
- the bounds are constant and the extent is 2-64 lanes;
- the body is stores of float32 or float64 values, and its iterations are proved
  to touch disjoint memory one element apart (``loop_independence``), so that
  running the lanes together reads and writes what the loop would;
- every access moves by exactly one element a lane, or does not depend on the
  lane at all (then it is computed once and broadcast);
- the lane's variable appears only in those accesses, and the arithmetic on
  lanes is float ``+ - * /``, min, max, float casts, and selects whose
  condition does not depend on the lane;
- the loop fills at least one vector register. A narrower loop (4 lanes on
  AVX-512) is left to LLVM, which joins the unrolled copies of such a loop into
  full registers; written as narrow vectors here, such tiles ran up to 3x slower;
- a buffer the loop both reads and writes (an accumulator) is allocated on the
  stack, or the loop sits directly in an unrolled loop (a register tile); and
  every buffer on the stack small enough for the vector registers that the loop
  touches is accessed only by such loops, all of one width (``plan_vector_loops``).

Any other vectorized loop keeps the loop form and LLVM's loop vectorizer; one that
LLVM would first unroll into over a thousand scalar copies is kept rolled
(``rolled_vector_loops``).
"""

from __future__ import annotations

import math
from collections.abc import Container

from compiler.arith.linear import stride
from compiler.codegen.llvm_expr import FLOAT_FLAGS, ExprEmitter
from compiler.codegen.llvm_types import value_type
from compiler.codegen.loop_independence import disjoint_stride
from compiler.ir import expr as E
from compiler.ir.analysis import uses_var
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var, byte_size
from compiler.ir.node import Node, visit
from compiler.ir.stmt import Allocate, BufferStore, For, ForKind, SeqStmt, Stmt

MAX_LANES = 64
# Vector registers of the widest x86 register files (AVX-512 has 32): a stack buffer
# larger than this many registers lives in memory whatever its accesses' widths.
REGISTER_FILE_VECTORS = 32
# A vectorized loop left to LLVM is kept rolled when its lanes, times the copies of the
# unrolled loops right around it, exceed this (``rolled_vector_loops``).
MAX_UNROLLED_LANES = 1024
FLOAT_DTYPES = frozenset({"float32", "float64"})
_ARITH = {E.Add: "fadd", E.Sub: "fsub", E.Mul: "fmul", E.Div: "fdiv"}
_CHOICE = {E.Min: "olt", E.Max: "ogt"}


def plan_vector_loops(
    body: Stmt, vector_bits: int, stack_bytes: int
) -> dict[int, list[BufferStore]]:
    """The loops in a function's ``body`` to write as vector instructions, by id, with
    their stores; ``stack_bytes`` is the size of the largest buffer allocated on the
    stack.

    Two kinds of vector loop are left to LLVM, as measured on Zen 5:
    - one that accumulates into a buffer not on the stack, unless it sits directly
      in an unrolled loop: the default NCHW and NHWC convolutions, whose vector loops
      add into their output right inside serial reduction loops, ran 1.3-1.5x slower
      written as vectors (their inner loops came out alike; the cause was not
      found), while register tiles too large for the stack ran as fast or faster
      and built in half the time;
    - one that touches a buffer on the stack which another loop reads or writes
      element by element, when the buffer fits in the vector registers: LLVM then
      cannot keep it there and built every vector from scalars; a BERT dense tile
      whose accumulators were initialized by a scalar loop ran 14x slower. Leaving
      such a loop to LLVM makes the buffers it touches element-wise in turn, until
      nothing changes. A larger buffer is loaded and stored anyway, and a loop left
      to LLVM for it only costs time: a blocked convolution's write-back of its
      50 kB accumulator, 7x7 unrolled copies of a 16-lane loop, became 784 scalar
      copies whose 2,352 memory accesses LoopLoadElimination compared pairwise, 3 s
      of a 4.4 s build (ResNet-18's 512-channel 7x7 convolution, ``-mcpu=znver4``)."""
    on_stack: set[int] = set()
    in_registers: set[int] = set()
    register_file_bytes = REGISTER_FILE_VECTORS * vector_bits // 8
    found: dict[int, tuple[For, list[BufferStore]]] = {}
    unrolled_inside: set[int] = set()

    def find(n: Node) -> None:
        if isinstance(n, Allocate):
            size = _bytes(n.buffer)
            if size <= stack_bytes:
                on_stack.add(id(n.buffer))
            if size <= min(stack_bytes, register_file_bytes):
                in_registers.add(id(n.buffer))
        elif isinstance(n, For):
            if n.kind is ForKind.UNROLLED and isinstance(n.body, For):
                unrolled_inside.add(id(n.body))
            stores = vector_stores(n, vector_bits)
            if stores is not None:
                found[id(n)] = (n, stores)

    visit(body, find)
    touched = {k: _touched(loop) for k, (loop, _) in found.items()}
    chosen = {
        k: loop
        for k, (loop, _) in found.items()
        if k in unrolled_inside or touched[k][0] & touched[k][1] <= on_stack
    }
    while chosen:
        widths = _access_widths(body, chosen, touched)
        mixed = {b for b in in_registers & widths.keys() if len(widths[b]) > 1}
        dropped = [k for k in chosen if (touched[k][0] | touched[k][1]) & mixed]
        if not dropped:
            break
        for k in dropped:
            del chosen[k]
    return {k: found[k][1] for k in chosen}


def rolled_vector_loops(body: Stmt, written: Container[int]) -> set[int]:
    """The ids of the vectorized loops in ``body`` that LLVM must not unroll: those not
    ``written`` as vectors here whose constant extent, times the extents of the unrolled
    loops around them (up to the nearest loop that is not unrolled), exceeds
    MAX_UNROLLED_LANES.

    LLVM's full unroll runs before its loop vectorizer, so such a loop becomes that many
    scalar statements in one loop body, whose memory accesses LoopLoadElimination then
    compares pairwise: a Winograd batched GEMM accumulating 32 lanes in a loop unrolled
    64 times took 27 s to optimize, and 0.6 s with the vector loop kept rolled (LLVM
    then vectorizes it at full width). Below the limit LLVM's unrolling stays: 14
    unrolled copies of a 32-lane loop ran 3.2x slower kept rolled (Zen 5).

    Each select and integer min or max in the loop's body counts as one copy more: a
    padding copy clamps its indices and selects per lane, which InstCombine works
    through statement by statement. A template-free NCHW convolution whose 16-lane
    padding loop was unrolled 58 times took 7.3 s to optimize, and 3.9 s with that
    loop kept rolled. (Counting gathers too took it to 0.8 s, but ResNet-18's default
    schedules ran 2 % slower with their gathers kept rolled.)"""
    rolled: set[int] = set()

    def within(node: Node, copies: int) -> None:
        def find(n: Node) -> bool:
            if not isinstance(n, For):
                return True
            if not isinstance(n.extent, E.IntImm):
                within(n.body, 1)
                return False
            lanes = n.extent.value * copies
            if n.kind is ForKind.VECTORIZED and id(n) not in written:
                if lanes * (1 + _lane_choices(n)) > MAX_UNROLLED_LANES:
                    rolled.add(id(n))
            within(n.body, lanes if n.kind is ForKind.UNROLLED else 1)
            return False

        visit(node, find)

    within(body, 1)
    return rolled


def _lane_choices(loop: For) -> int:
    """How many selects and integer mins and maxes the vectorized ``loop``'s body holds."""
    count = 0

    def find(n: Node) -> bool:
        nonlocal count
        if isinstance(n, E.Select) or (isinstance(n, (E.Min, E.Max)) and E.is_int(n.dtype)):
            count += 1
        return True

    visit(loop.body, find)
    return count


def _access_widths(
    body: Stmt, chosen: dict[int, For], touched: dict[int, tuple[set[int], set[int]]]
) -> dict[int, set[int]]:
    """For each buffer accessed in ``body``, the lane counts of the chosen loops that
    access it (``touched``: the buffers each stores and loads), and 1 where an access
    lies outside them."""
    widths: dict[int, set[int]] = {}

    def find(n: Node) -> bool:
        if isinstance(n, For) and id(n) in chosen:
            assert isinstance(n.extent, E.IntImm)
            stored, loaded = touched[id(n)]
            for buffer in stored | loaded:
                widths.setdefault(buffer, set()).add(n.extent.value)
            return False
        if isinstance(n, (BufferStore, E.BufferLoad)):
            widths.setdefault(id(n.buffer), set()).add(1)
        return True

    visit(body, find)
    return widths


def _bytes(buffer: Buffer) -> float:
    """The buffer's size in bytes; infinite when its shape is not constant."""
    sizes = [dim.value for dim in buffer.shape if isinstance(dim, E.IntImm)]
    if len(sizes) < len(buffer.shape):
        return math.inf
    return math.prod(sizes) * byte_size(buffer.dtype)


def _touched(loop: For) -> tuple[set[int], set[int]]:
    """The ids of the buffers ``loop`` stores to and of those it loads from."""
    stored: set[int] = set()
    loaded: set[int] = set()

    def find(n: Node) -> None:
        if isinstance(n, BufferStore):
            stored.add(id(n.buffer))
        elif isinstance(n, E.BufferLoad):
            loaded.add(id(n.buffer))

    visit(loop.body, find)
    return stored, loaded


def vector_stores(loop: For, vector_bits: int) -> list[BufferStore] | None:
    """The stores of ``loop``'s body when it can be written as vector instructions
    (the module docstring says when) for registers of ``vector_bits``; None otherwise.
    Buffers are told apart by identity: code generation gives each its own pointer."""
    if loop.kind is not ForKind.VECTORIZED:
        return None
    if not (isinstance(loop.min, E.IntImm) and isinstance(loop.extent, E.IntImm)):
        return None
    if vector_bits == 0 or not 2 <= loop.extent.value <= MAX_LANES:
        return None
    stores = _stores(loop.body)
    if not stores or any(loop.extent.value * E.bits(s.buffer.dtype) < vector_bits for s in stores):
        return None
    if disjoint_stride(loop, id) != 1:
        return None
    var = loop.loop_var
    for store in stores:
        if store.buffer.dtype not in FLOAT_DTYPES or store.value.dtype != store.buffer.dtype:
            return None
        if len(store.indices) != 1 or stride(store.indices[0], var) != 1:
            return None
        if not _lane_wise(store.value, var):
            return None
    return stores


def _stores(body: Stmt) -> list[BufferStore] | None:
    if isinstance(body, BufferStore):
        return [body]
    if isinstance(body, SeqStmt) and all(isinstance(s, BufferStore) for s in body.seq):
        return [s for s in body.seq if isinstance(s, BufferStore)]
    return None


def _lane_wise(e: PrimExpr, var: Var) -> bool:
    """Whether ``e`` can be computed for all lanes at once (see the module docstring)."""
    if not uses_var(e, var):
        return True
    if e.dtype not in FLOAT_DTYPES:
        return False
    if isinstance(e, E.BufferLoad):
        return e.buffer.dtype == e.dtype and len(e.indices) == 1 and stride(e.indices[0], var) == 1
    if type(e) in _ARITH or type(e) in _CHOICE:
        assert isinstance(e, E.BinaryOp)
        same = e.a.dtype == e.dtype and e.b.dtype == e.dtype
        return same and _lane_wise(e.a, var) and _lane_wise(e.b, var)
    if isinstance(e, E.Cast):
        return e.value.dtype in FLOAT_DTYPES and _lane_wise(e.value, var)
    if isinstance(e, E.Select):
        if uses_var(e.condition, var):
            return False
        return _lane_wise(e.true_value, var) and _lane_wise(e.false_value, var)
    return False


class VectorLoop:
    """Writes one vectorized loop, whose stores ``plan_vector_loops`` chose, into
    ``emitter``'s function as vector instructions of ``lanes`` lanes."""

    def __init__(self, emitter: ExprEmitter, loop: For) -> None:
        assert isinstance(loop.min, E.IntImm) and isinstance(loop.extent, E.IntImm)
        self.emitter = emitter
        self.var = loop.loop_var
        self.start = loop.min.value
        self.lanes = loop.extent.value

    def emit(self, stores: list[BufferStore]) -> None:
        """Each store once, for all lanes: the addresses are those of the first lane."""
        self.emitter.vars[id(self.var)] = str(self.start)
        try:
            for store in stores:
                value = self.vector(store.value)
                self.emitter.emit(
                    f"store {self.type(store.buffer.dtype)} {value}, "
                    f"ptr {self._address(store.buffer, store.indices)}"
                )
        finally:
            del self.emitter.vars[id(self.var)]

    def type(self, dtype: str) -> str:
        return f"<{self.lanes} x {value_type(dtype)}>"

    def vector(self, e: PrimExpr) -> str:
        """``e`` for every lane, as a vector value."""
        if not uses_var(e, self.var):
            return self.broadcast(self.emitter.expr(e), e.dtype)
        if isinstance(e, E.BufferLoad):
            address = self._address(e.buffer, e.indices)
            return self.emitter.assign(f"load {self.type(e.dtype)}, ptr {address}")
        if isinstance(e, E.Cast):
            return self._cast(e)
        if isinstance(e, E.Select):
            return self._select(e)
        assert isinstance(e, E.BinaryOp)
        a, b, ty = self.vector(e.a), self.vector(e.b), self.type(e.dtype)
        op = _ARITH.get(type(e))
        if op is not None:
            return self.emitter.assign(f"{op} {FLOAT_FLAGS} {ty} {a}, {b}")
        chosen = self.emitter.assign(f"fcmp {_CHOICE[type(e)]} {ty} {a}, {b}")
        return self.emitter.assign(f"select <{self.lanes} x i1> {chosen}, {ty} {a}, {ty} {b}")

    def broadcast(self, scalar: str, dtype: str) -> str:
        ty = self.type(dtype)
        first = self.emitter.assign(
            f"insertelement {ty} poison, {value_type(dtype)} {scalar}, i64 0"
        )
        zeros = f"<{self.lanes} x i32> zeroinitializer"
        return self.emitter.assign(f"shufflevector {ty} {first}, {ty} poison, {zeros}")

    def _address(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> str:
        address = self.emitter.address(buffer, indices)
        return f"{address}, align {byte_size(buffer.dtype)}{self.emitter.access_metadata()}"

    def _cast(self, e: E.Cast) -> str:
        value = self.vector(e.value)
        source, target = e.value.dtype, e.dtype
        if source == target:
            return value
        op = "fpext" if E.bits(target) > E.bits(source) else "fptrunc"
        return self.emitter.assign(f"{op} {self.type(source)} {value} to {self.type(target)}")

    def _select(self, e: E.Select) -> str:
        """As a scalar select, branching around a side that loads (padding); the
        condition is the same for every lane."""
        return self.emitter.select_of(e, self.type(e.dtype), self.vector)
