"""Expressions to textual LLVM IR.

Every expression is emitted in one of two modes. *Value* mode computes in the
expression's own dtype, with that dtype's wrap-around. *Index* mode computes
integers in the emitter's ``index_type``: buffer offsets, loop bounds, allocation
sizes and integer comparisons, so ``i * n + j`` cannot overflow for big buffers and
loop variables (which live in that type) need no truncation. It is i64, or i32 for a
GPU kernel whose bounds prove every such value fits (``compiler.lower.narrow_index``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from compiler.arith.bounds import Bounder
from compiler.arith.rewrite import fold_ints
from compiler.codegen.llvm_context import ModuleContext
from compiler.codegen.llvm_fastmath import emit_fast_erff, emit_fast_expf
from compiler.codegen.llvm_types import (
    INDEX_TYPE,
    CodegenError,
    float_literal,
    int_literal,
    is_signed,
    storage_type,
    value_type,
)
from compiler.ir import expr as E
from compiler.ir.analysis import reads_memory, var_ids
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Range, Var, bits, byte_size
from compiler.ir.node import Node, visit

FLOAT_FLAGS = "contract"

_INT_ARITH = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}
_FLOAT_ARITH = {E.Add: "fadd", E.Sub: "fsub", E.Mul: "fmul", E.Div: "fdiv"}
_SIGNED_CMP = {E.EQ: "eq", E.NE: "ne", E.LT: "slt", E.LE: "sle", E.GT: "sgt", E.GE: "sge"}
_UNSIGNED_CMP = {E.EQ: "eq", E.NE: "ne", E.LT: "ult", E.LE: "ule", E.GT: "ugt", E.GE: "uge"}
# Ordered comparisons are false on NaN; != is unordered, true on NaN (as in numpy).
# Instructions whose result depends on their operands alone.
_PURE_OPCODES = frozenset(
    "add sub mul sdiv srem udiv urem and or xor shl lshr ashr icmp fcmp select zext sext "
    "trunc sitofp uitofp fptosi fptoui fpext fptrunc getelementptr insertelement "
    "shufflevector".split()
)
_FLOAT_CMP = {E.EQ: "oeq", E.NE: "une", E.LT: "olt", E.LE: "ole", E.GT: "ogt", E.GE: "oge"}
# Instructions that may write memory: the values known to be in memory are forgotten.
_WRITING_OPCODES = frozenset({"store", "call", "atomicrmw", "cmpxchg", "fence"})
# An expression's node id, whether it is index math, and the values of its variables.
_PureKey = tuple[int, bool, tuple[str | None, ...]]
# -0.0, the one float that adding changes nothing (x + -0.0 is x for every x, +0.0,
# -0.0 and NaN included): how a Winograd transform's zero coefficients arrive.
_NEGATIVE_ZEROS = frozenset(float_literal(-0.0, dtype) for dtype in ("float16", "float32"))
# LLVM intrinsics vectorize (as vector code or as scalarized libm calls); erf has none:
# float32 erf is written out (llvm_fastmath), float64 is a call of libm's erf, declared
# pure.
_LLVM_MATH = ("exp", "log", "sqrt", "tanh", "fabs", "floor", "ceil", "pow")


class ExprEmitter:
    """Writes the instructions of one LLVM function; expressions live here,
    statements in the subclass."""

    def __init__(self, module: ModuleContext, name: str) -> None:
        self.module = module
        self.name = name
        self.index_type = INDEX_TYPE
        self.allocas: list[str] = []
        self.lines: list[str] = []
        self.vars: dict[int, str] = {}
        self.buffers: dict[int, str] = {}
        self.current_label = "entry"
        self._count = 0
        # Pure instructions already emitted in the current basic block, by text: an
        # unrolled loop repeats its index arithmetic in every copy (local value
        # numbering, so LLVM is not handed thousands of duplicates to remove).
        self._values: dict[str, str] = {}
        # The value each address holds, by (address, type), as the current basic block
        # last loaded or stored it there: a load of it reads that value instead, and a
        # store of the same value is left out. An unrolled reduction into one element
        # (a Winograd transform's 36 terms) then adds in registers, and hands LLVM far
        # fewer loads and stores. Any instruction that may write memory forgets them
        # all, so two addresses that meet at run time cannot be confused.
        self._memory: dict[tuple[str, str], str] = {}
        # The access groups of the parallel-annotated loops around the current point.
        self.access_groups: list[str] = []
        # Selects that folded to a constant, by ``_pure_key`` (``_select``); each entry
        # holds its node, so that its id is not reused.
        self._folded: dict[_PureKey, tuple[E.Select, str]] = {}
        # The offsets of the accesses emitted in the current basic block, by
        # ``_pure_key`` of their index (``address``): in an unrolled loop most accesses
        # repeat an offset of another copy, such as an accumulator's load and store.
        self._offsets: dict[_PureKey, tuple[PrimExpr, str]] = {}
        # Each expression's variables, for ``_pure_key`` (None when it reads memory).
        self._pure_vars: dict[int, tuple[PrimExpr, tuple[int, ...] | None]] = {}
        # The range of each enclosing loop's variable whose bounds are constants (one
        # object per loop, which every unrolled copy shares): what proves a guarded
        # load in bounds (``_in_bounds``).
        self.ranges: dict[Var, Range] = {}
        # The ids of the variables of the loops being unrolled here, one copy at a time.
        self.unrolled: set[int] = set()
        # Whether an expression's loads are in bounds, by node and the ranges of its
        # variables (``_in_bounds``); each entry holds its node and those ranges, so that
        # no id in its key is reused while it lives.
        self._bounded: dict[tuple[int, tuple[int, ...]], tuple[PrimExpr, list[Range], bool]] = {}

    # instruction plumbing -----------------------------------------------------

    def fresh(self, hint: str = "t") -> str:
        return f"%{self.label(hint)}"

    def label(self, hint: str) -> str:
        """``hint`` numbered by the function's counter; a hint that ends in a digit gets
        a dot first, so that the counter is always the name's trailing digits and no
        two names meet ("r2" then 56 would be "r" then 256)."""
        self._count += 1
        separator = "." if hint[-1:].isdigit() else ""
        return f"{hint}{separator}{self._count}"

    def emit(self, instruction: str) -> None:
        opcode = instruction.partition(" = ")[2] or instruction
        if opcode.partition(" ")[0] in _WRITING_OPCODES:
            self._memory = {}
        self.lines.append("  " + instruction)

    def remember(self, address: str, ty: str, value: str) -> None:
        """``value`` is now at ``address`` (see ``_memory``)."""
        self._memory[(address, ty)] = value

    def in_memory(self, address: str, ty: str) -> str | None:
        """The value known to be at ``address``, if any (see ``_memory``)."""
        return self._memory.get((address, ty))

    def assign(self, instruction: str, hint: str = "t") -> str:
        pure = instruction.partition(" ")[0] in _PURE_OPCODES
        if pure and instruction in self._values:
            return self._values[instruction]
        name = self.fresh(hint)
        self.emit(f"{name} = {instruction}")
        if pure:
            self._values[instruction] = name
        return name

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.current_label = label
        self._values = {}
        self._memory = {}
        self._offsets = {}

    def branch(self, label: str, metadata: str = "") -> None:
        suffix = f", !llvm.loop {metadata}" if metadata else ""
        self.emit(f"br label %{label}{suffix}")

    # expressions --------------------------------------------------------------

    def expr(self, e: PrimExpr, index: bool = False) -> str:
        """Emit ``e``; returns the SSA name or constant of LLVM type
        ``self.value_type(e.dtype, index)``."""
        handler = _HANDLERS.get(type(e))
        if handler is None:
            for cls, candidate in _HANDLERS.items():
                if isinstance(e, cls):
                    handler = candidate
                    break
        if handler is None:
            raise CodegenError(f"cannot generate code for {type(e).__name__} {e}; lower it first")
        return handler(self, e, index)

    def value_type(self, dtype: str, index: bool = False) -> str:
        """The LLVM type of ``dtype`` here: index math in ``index_type``."""
        return value_type(dtype, index, self.index_type)

    def typed(self, e: PrimExpr, dtype: str, index: bool = False) -> str:
        """Emit ``e`` converted to ``dtype`` (a no-op when it already has it)."""
        if e.dtype == dtype:
            return self.expr(e, index)
        return self.convert(e, dtype, index)

    def condition(self, e: PrimExpr) -> str:
        """Emit ``e`` as an i1 truth value."""
        return self.typed(e, "bool")

    def _var(self, e: E.Var, index: bool) -> str:
        value = self.vars.get(id(e))
        if value is None:
            raise CodegenError(
                f"variable {e.name!r} is used in function {self.name!r} but never defined; "
                "is it a loop variable used outside its loop?"
            )
        if E.is_int(e.dtype):
            return self.resize(value, self.index_type, self.value_type(e.dtype, index), signed=True)
        return value

    def _int_imm(self, e: E.IntImm, index: bool) -> str:
        return int_literal(e.value, e.dtype, index, self.index_type)

    def _float_imm(self, e: E.FloatImm, index: bool) -> str:
        return float_literal(e.value, e.dtype)

    def _binary(self, e: E.BinaryOp, index: bool) -> str:
        if isinstance(e, (E.And, E.Or)):
            return self._logical(e)
        if isinstance(e, E.CmpOp):
            return self._compare(e)
        a, b = self.typed(e.a, e.dtype, index), self.typed(e.b, e.dtype, index)
        ty = self.value_type(e.dtype, index)
        if E.is_float(e.dtype):
            return self._float_binary(e, ty, a, b)
        if E.is_int(e.dtype):
            return self._int_binary(e, ty, a, b, index)
        raise CodegenError(f"arithmetic {type(e).__name__} on {e.dtype} values is not supported")

    def _float_binary(self, e: E.BinaryOp, ty: str, a: str, b: str) -> str:
        op = _FLOAT_ARITH.get(type(e))
        if op == "fadd" and b in _NEGATIVE_ZEROS:
            return a
        if op == "fadd" and a in _NEGATIVE_ZEROS:
            return b
        if op is not None:
            return self.assign(f"{op} {FLOAT_FLAGS} {ty} {a}, {b}")
        if isinstance(e, (E.Min, E.Max)):
            pred = "olt" if isinstance(e, E.Min) else "ogt"
            less = self.assign(f"fcmp {pred} {ty} {a}, {b}")
            return self.assign(f"select i1 {less}, {ty} {a}, {ty} {b}")
        quotient = self.assign(f"fdiv {FLOAT_FLAGS} {ty} {a}, {b}")
        floor = self.call_llvm_math("floor", ty, [quotient])
        if isinstance(e, E.FloorDiv):
            return floor
        product = self.assign(f"fmul {FLOAT_FLAGS} {ty} {floor}, {b}")
        return self.assign(f"fsub {FLOAT_FLAGS} {ty} {a}, {product}")

    def _logical(self, e: E.And | E.Or) -> str:
        """``and``/``or`` of two conditions; a constant operand decides it or drops out
        (the other side is then not emitted at all when it cannot matter)."""
        decisive, neutral = ("false", "true") if isinstance(e, E.And) else ("true", "false")
        a = self.condition(e.a)
        if a == decisive:
            return a
        b = self.condition(e.b)
        if b == decisive or a == neutral:
            return b
        if b == neutral:
            return a
        return self.assign(f"{'and' if isinstance(e, E.And) else 'or'} i1 {a}, {b}")

    def _int_binary(self, e: E.BinaryOp, ty: str, a: str, b: str, index: bool) -> str:
        signed = index or is_signed(e.dtype)
        folded = _fold_int(e, a, b) if signed else None
        if folded is not None:
            return int_literal(folded, e.dtype, index, self.index_type)
        op = _INT_ARITH.get(type(e))
        if op is not None:
            flags = " nsw" if index else ""
            return self.assign(f"{op}{flags} {ty} {a}, {b}")
        if isinstance(e, (E.Min, E.Max)):
            name = ("s" if signed else "u") + ("min" if isinstance(e, E.Min) else "max")
            callee = self.module.declare(f"llvm.{name}.{ty}", f"{ty} ({ty}, {ty})")
            return self.assign(f"call {ty} {callee}({ty} {a}, {ty} {b})")
        if not signed:
            op = "urem" if isinstance(e, E.FloorMod) else "udiv"
            return self.assign(f"{op} {ty} {a}, {b}")
        if isinstance(e, E.Div):
            return self.assign(f"sdiv {ty} {a}, {b}")
        return self._floor_div_mod(isinstance(e, E.FloorMod), ty, a, b)

    def _floor_div_mod(self, is_mod: bool, ty: str, a: str, b: str) -> str:
        """Floor semantics from C's truncating sdiv/srem: adjust by one step when the
        remainder is non-zero and its sign differs from the divisor's."""
        remainder = self.assign(f"srem {ty} {a}, {b}")
        signs = self.assign(f"xor {ty} {remainder}, {b}")
        differ = self.assign(f"icmp slt {ty} {signs}, 0")
        nonzero = self.assign(f"icmp ne {ty} {remainder}, 0")
        adjust = self.assign(f"and i1 {differ}, {nonzero}")
        if is_mod:
            step = self.assign(f"select i1 {adjust}, {ty} {b}, {ty} 0")
            return self.assign(f"add {ty} {remainder}, {step}")
        quotient = self.assign(f"sdiv {ty} {a}, {b}")
        step = self.assign(f"zext i1 {adjust} to {ty}")
        return self.assign(f"sub {ty} {quotient}, {step}")

    def _compare(self, e: E.CmpOp) -> str:
        dtype = E.promote(e.a.dtype, e.b.dtype)
        if E.is_float(dtype):
            ty = value_type(dtype)
            a, b = self.typed(e.a, dtype), self.typed(e.b, dtype)
            return self.assign(f"fcmp {_FLOAT_CMP[type(e)]} {ty} {a}, {b}")
        if dtype == "bool":
            a, b = self.condition(e.a), self.condition(e.b)
            return self.assign(f"icmp {_UNSIGNED_CMP[type(e)]} i1 {a}, {b}")
        a, b = self.typed(e.a, dtype, index=True), self.typed(e.b, dtype, index=True)
        known = _fold_int(e, a, b)
        if known is not None:
            return "true" if known else "false"
        return self.assign(f"icmp {_SIGNED_CMP[type(e)]} {self.index_type} {a}, {b}")

    def _not(self, e: E.Not, index: bool) -> str:
        cond = self.condition(e.a)
        if cond in ("true", "false"):
            return "false" if cond == "true" else "true"
        return self.assign(f"xor i1 {cond}, true")

    def _select(self, e: E.Select, index: bool) -> str:
        """A select on the indices of unrolled loops folds to one constant, such as a
        Winograd coefficient chosen by a chain of selects (``topi.nn.winograd``): each
        such constant is found once per value of its variables, not walked down the
        chain again in every unrolled copy."""
        key = self._pure_key(e, index)
        if key is not None:
            known = self._folded.get(key)
            if known is not None:
                return known[1]
        ty = self.value_type(e.dtype, index)
        value = self.select_of(e, ty, lambda side: self.typed(side, e.dtype, index))
        if key is not None and not value.startswith("%"):
            self._folded[key] = (e, value)
        return value

    def _speculated(self, e: E.Select) -> bool:
        """Whether ``e`` is emitted as a ``select``, both sides evaluated: when neither
        reads memory, or when both read only in bounds (``_in_bounds``) and the condition
        changes between the copies of an unrolled loop. A condition the same in every
        copy keeps its branches: LLVM merges identical branches into one and vectorizes
        the loads under it (a padded copy of 16 channels ran 3.5x slower as selects)."""
        sides = (e.true_value, e.false_value)
        if not any(map(reads_memory, sides)):
            return True
        varies = not self.unrolled.isdisjoint(var_ids(e.condition))
        return varies and all(map(self._in_bounds, sides))

    def _in_bounds(self, e: PrimExpr) -> bool:
        """Whether every memory read in ``e`` is a buffer load whose index lies inside its
        buffer for every value of the enclosing loops' variables (``ranges``)."""
        variables = var_ids(e)
        ranges = [r for v, r in self.ranges.items() if id(v) in variables]
        key = (id(e), tuple(map(id, ranges)))
        found = self._bounded.get(key)
        if found is None:
            found = self._bounded[key] = (e, ranges, _loads_in_bounds(e, self.ranges))
        return found[2]

    def _pure_key(self, e: PrimExpr, index: bool) -> _PureKey | None:
        """What ``e``'s emitted value depends on: the node and the values of its
        variables here. None for an expression that reads memory, whose value does not."""
        known = self._pure_vars.get(id(e))
        if known is None:
            variables = None if reads_memory(e) else tuple(var_ids(e))
            known = self._pure_vars[id(e)] = (e, variables)
        variables = known[1]
        if variables is None:
            return None
        return id(e), index, tuple(self.vars.get(v) for v in variables)

    def select_of(self, e: E.Select, ty: str, side: Callable[[PrimExpr], str]) -> str:
        """``e`` as a value of LLVM type ``ty``, each side emitted by ``side``: a
        ``select`` when ``_speculated``; otherwise branches, so a guarded load (padding)
        is never executed out of bounds."""
        cond = self.condition(e.condition)
        if cond in ("true", "false"):  # an unrolled loop's index decided it
            return side(e.true_value if cond == "true" else e.false_value)
        if self._speculated(e):
            t, f = side(e.true_value), side(e.false_value)
            return self.assign(f"select i1 {cond}, {ty} {t}, {ty} {f}")
        then_label, else_label, end_label = (
            self.label("sel.then"),
            self.label("sel.else"),
            self.label("sel.end"),
        )
        self.emit(f"br i1 {cond}, label %{then_label}, label %{else_label}")
        self.start_block(then_label)
        t = side(e.true_value)
        then_end = self.current_label
        self.branch(end_label)
        self.start_block(else_label)
        f = side(e.false_value)
        else_end = self.current_label
        self.branch(end_label)
        self.start_block(end_label)
        return self.assign(f"phi {ty} [ {t}, %{then_end} ], [ {f}, %{else_end} ]")

    def _cast(self, e: E.Cast, index: bool) -> str:
        return self.convert(e.value, e.dtype, index)

    def convert(self, value: PrimExpr, dtype: str, index: bool) -> str:
        """Emit ``value`` converted to ``dtype`` with numpy's conversion rules
        (truncation toward zero from float, wrap-around between integers)."""
        src = value.dtype
        target_ty = self.value_type(dtype, index)
        if dtype == "bool":
            return self._to_bool(value)
        if src == "bool":
            flag = self.condition(value)
            op = "uitofp" if E.is_float(dtype) else "zext"
            return self.assign(f"{op} i1 {flag} to {target_ty}")
        if E.is_float(src) and E.is_float(dtype):
            v = self.expr(value)
            op = "fpext" if bits(dtype) > bits(src) else "fptrunc"
            return self.assign(f"{op} {value_type(src)} {v} to {target_ty}")
        if E.is_float(src):
            v = self.expr(value)
            op = "fptosi" if is_signed(dtype) else "fptoui"
            converted = self.assign(f"{op} {value_type(src)} {v} to {value_type(dtype)}")
            return self.resize(converted, value_type(dtype), target_ty, is_signed(dtype))
        if E.is_float(dtype):
            v = self.expr(value)
            op = "sitofp" if is_signed(src) else "uitofp"
            return self.assign(f"{op} {value_type(src)} {v} to {target_ty}")
        return self._int_to_int(value, dtype, index)

    def _int_to_int(self, value: PrimExpr, dtype: str, index: bool) -> str:
        """A widening cast to 64 bits is exact in index math; a narrowing one wraps."""
        wide = self.expr(value, index=True)
        if bits(dtype) == 64:
            return self.resize(wide, self.index_type, self.value_type(dtype, index), True)
        own = value_type(dtype)
        narrowed = self.resize(wide, self.index_type, own, True)
        return self.resize(narrowed, own, self.value_type(dtype, index), is_signed(dtype))

    def _to_bool(self, value: PrimExpr) -> str:
        if value.dtype == "bool":
            return self.expr(value)
        v = self.expr(value)
        if E.is_float(value.dtype):
            return self.assign(f"fcmp une {value_type(value.dtype)} {v}, 0.0")
        return self.assign(f"icmp ne {value_type(value.dtype)} {v}, 0")

    def resize(self, value: str, src_ty: str, dst_ty: str, signed: bool) -> str:
        """Truncate or extend an integer between LLVM integer types."""
        src_bits, dst_bits = int(src_ty[1:]), int(dst_ty[1:])
        if src_bits == dst_bits:
            return value
        if dst_bits < src_bits:
            return self.assign(f"trunc {src_ty} {value} to {dst_ty}")
        op = "sext" if signed else "zext"
        return self.assign(f"{op} {src_ty} {value} to {dst_ty}")

    def _call(self, e: E.Call, index: bool) -> str:
        if not E.is_float(e.dtype):
            raise CodegenError(f"math intrinsic {e.op} needs a float argument, got {e.dtype}")
        compute_dtype = "float32" if e.dtype == "float16" else e.dtype
        ty = value_type(compute_dtype)
        args = [self.typed(a, compute_dtype) for a in e.args]
        if e.op == "sigmoid":
            negated = self.assign(f"fneg {ty} {args[0]}")
            exp = self.exp(ty, negated)
            one = float_literal(1.0, compute_dtype)
            denominator = self.assign(f"fadd {FLOAT_FLAGS} {ty} {one}, {exp}")
            result = self.assign(f"fdiv {FLOAT_FLAGS} {ty} {one}, {denominator}")
        elif e.op == "exp":
            result = self.exp(ty, args[0])
        elif e.op in _LLVM_MATH:
            result = self.call_llvm_math(e.op, ty, args)
        elif ty == "float":  # erf, the one left (see _LLVM_MATH's comment)
            result = emit_fast_erff(self.assign, args[0], FLOAT_FLAGS)
        else:
            callee = self.module.declare("erf", f"{ty} ({ty}) #1")
            result = self.assign(f"call {ty} {callee}({ty} {args[0]})")
        if compute_dtype != e.dtype:
            return self.assign(f"fptrunc {ty} {result} to {value_type(e.dtype)}")
        return result

    def exp(self, ty: str, x: str) -> str:
        """float32 (and float16, computed in float32) inline, where the loop vectorizer
        sees through it; float64 through the intrinsic, whose libm call is exact."""
        if ty == "float":
            return emit_fast_expf(self.assign, x, FLOAT_FLAGS)
        return self.call_llvm_math("exp", ty, [x])

    def call_llvm_math(self, name: str, ty: str, args: list[str]) -> str:
        suffix = {"float": "f32", "double": "f64", "half": "f16"}[ty]
        params = ", ".join([ty] * len(args))
        callee = self.module.declare(f"llvm.{name}.{suffix}", f"{ty} ({params})")
        operands = ", ".join(f"{ty} {a}" for a in args)
        return self.assign(f"call {FLOAT_FLAGS} {ty} {callee}({operands})")

    def _load(self, e: E.BufferLoad, index: bool) -> str:
        address = self.address(e.buffer, e.indices)
        ty = storage_type(e.buffer.dtype)
        align = self.alignment(e.buffer, e.indices)
        loaded = self.in_memory(address, ty)
        if loaded is None:
            metadata = self.access_metadata()
            loaded = self.assign(f"load {ty}, ptr {address}, align {align}{metadata}")
            self.remember(address, ty, loaded)
        if e.buffer.dtype == "bool":
            return self.assign(f"icmp ne i8 {loaded}, 0")
        if e.dtype != e.buffer.dtype:
            raise CodegenError(f"load of {e.buffer.name} has dtype {e.dtype}, not the buffer's")
        return self.resize_value(loaded, e.dtype, index)

    def _thread_allreduce(self, e: E.ThreadAllReduce, index: bool) -> str:
        return self.resize_value(self.thread_allreduce(e), e.dtype, index)

    def thread_allreduce(self, e: E.ThreadAllReduce) -> str:
        """``e`` as the threads of a GPU block compute it; only a GPU kernel has them."""
        raise CodegenError(
            "a reduction shared by GPU threads (ThreadAllReduce) needs a GPU target; bind "
            "reduction loops to threadIdx.x only when building for cuda"
        )

    def resize_value(self, value: str, dtype: str, index: bool) -> str:
        """An integer ``value`` of ``dtype``'s own type in the type ``index`` asks."""
        if not E.is_int(dtype):
            return value
        return self.resize(
            value, value_type(dtype), self.value_type(dtype, index), is_signed(dtype)
        )

    def access_metadata(self) -> str:
        """What a load or store here carries: the access groups of its parallel loops."""
        if not self.access_groups:
            return ""
        return f", !llvm.access.group {self.module.access_group_list(tuple(self.access_groups))}"

    def alignment(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> int:
        """The alignment in bytes that an access may claim: the element size."""
        return byte_size(buffer.dtype)

    def address(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> str:
        """The element pointer of a flattened access."""
        if len(indices) != 1:
            raise CodegenError(
                f"access to {buffer.name!r} has {len(indices)} indices; run flatten_buffers first"
            )
        base = self.buffers.get(id(buffer))
        if base is None:
            raise CodegenError(
                f"buffer {buffer.name!r} is used in {self.name!r} but is neither a parameter "
                "nor allocated"
            )
        offset = self._offset(indices[0])
        ty = storage_type(buffer.dtype)
        return self.assign(f"getelementptr inbounds {ty}, ptr {base}, {self.index_type} {offset}")

    def _offset(self, index: PrimExpr) -> str:
        """``index`` as an int64 offset, emitted once per basic block and values of its
        variables (see ``_offsets``)."""
        key = self._pure_key(index, True)
        if key is None:
            return self.typed(index, "int64", index=True)
        known = self._offsets.get(key)
        if known is None:
            known = self._offsets[key] = (index, self.typed(index, "int64", index=True))
        return known[1]


def _int_value(literal: str) -> int | None:
    """The value of an integer literal the emitter produced; None for an SSA name."""
    digits = literal[1:] if literal.startswith("-") else literal
    return int(literal) if digits.isdigit() else None


def _fold_int(e: E.BinaryOp, a: str, b: str) -> int | None:
    """The value of signed integer arithmetic on two literals (an unrolled loop's
    index), so that the selects it decides fold while they are emitted."""
    x, y = _int_value(a), _int_value(b)
    return None if x is None or y is None else fold_ints(type(e), x, y)


def _loads_in_bounds(e: PrimExpr, ranges: dict[Var, Range]) -> bool:
    """Whether each memory read in ``e`` is a buffer load of a constant-shaped buffer
    whose flat index is within the buffer when the variables take any value of
    ``ranges`` (a variable without a range may be anything)."""
    bounder = Bounder(ranges)
    safe = True

    def check(n: Node) -> bool:
        nonlocal safe
        if not safe:
            return False
        if isinstance(n, E.ThreadAllReduce):
            safe = False
        elif isinstance(n, E.BufferLoad):
            sizes = [dim.value for dim in n.buffer.shape if isinstance(dim, E.IntImm)]
            if len(sizes) != n.buffer.ndim or len(n.indices) != 1:
                safe = False
            else:
                low, high = bounder.const_bound(n.indices[0])
                safe = low is not None and high is not None and 0 <= low <= high < math.prod(sizes)
        return safe

    visit(e, check)
    return safe


# Each handler takes the node kind it is filed under, hence ``Any`` for the node.
_HANDLERS: dict[type[PrimExpr], Callable[[ExprEmitter, Any, bool], str]] = {
    E.Var: ExprEmitter._var,
    E.IntImm: ExprEmitter._int_imm,
    E.FloatImm: ExprEmitter._float_imm,
    E.BinaryOp: ExprEmitter._binary,
    E.Not: ExprEmitter._not,
    E.Select: ExprEmitter._select,
    E.Cast: ExprEmitter._cast,
    E.Call: ExprEmitter._call,
    E.BufferLoad: ExprEmitter._load,
    E.ThreadAllReduce: ExprEmitter._thread_allreduce,
}
