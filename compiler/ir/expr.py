"""Scalar expressions of the loop IR.

Every node is a frozen dataclass. Python operators build new nodes, so
``i * 4 + j`` is an ``Add`` of a ``Mul``; ``==`` builds an ``EQ`` node whose truth
value (as in TVM) is object identity, so expressions still work in lists and dicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from compiler.ir.node import TEXT_FORMS, Node

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
FLOAT_DTYPES = ("float16", "float32", "float64")
DTYPES = INT_DTYPES + FLOAT_DTYPES + ("bool",)


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


def bits(dtype: str) -> int:
    return 1 if dtype == "bool" else int("".join(c for c in dtype if c.isdigit()))


def byte_size(dtype: str) -> int:
    """The bytes one element of ``dtype`` takes in memory: bools are bytes, as in numpy."""
    return 1 if dtype == "bool" else bits(dtype) // 8


def promote(a: str, b: str) -> str:
    """The dtype of a binary operation on ``a`` and ``b``: floats win, then wider types."""
    if a == b:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    return a if bits(a) >= bits(b) else b


class ExprOp:
    """Python operators that build expressions; shared by PrimExpr and IterVar."""

    def __add__(self, other: Any) -> PrimExpr:
        return _binary(Add, self, other)

    def __radd__(self, other: Any) -> PrimExpr:
        return _binary(Add, other, self)

    def __sub__(self, other: Any) -> PrimExpr:
        return _binary(Sub, self, other)

    def __rsub__(self, other: Any) -> PrimExpr:
        return _binary(Sub, other, self)

    def __mul__(self, other: Any) -> PrimExpr:
        return _binary(Mul, self, other)

    def __rmul__(self, other: Any) -> PrimExpr:
        return _binary(Mul, other, self)

    def __truediv__(self, other: Any) -> PrimExpr:
        return _binary(Div, self, other)

    def __rtruediv__(self, other: Any) -> PrimExpr:
        return _binary(Div, other, self)

    def __floordiv__(self, other: Any) -> PrimExpr:
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other: Any) -> PrimExpr:
        return _binary(FloorDiv, other, self)

    def __mod__(self, other: Any) -> PrimExpr:
        return _binary(FloorMod, self, other)

    def __rmod__(self, other: Any) -> PrimExpr:
        return _binary(FloorMod, other, self)

    def __neg__(self) -> PrimExpr:
        return _binary(Sub, 0, self)

    def __lt__(self, other: Any) -> PrimExpr:
        return _binary(LT, self, other)

    def __le__(self, other: Any) -> PrimExpr:
        return _binary(LE, self, other)

    def __gt__(self, other: Any) -> PrimExpr:
        return _binary(GT, self, other)

    def __ge__(self, other: Any) -> PrimExpr:
        return _binary(GE, self, other)

    def __eq__(self, other: Any) -> PrimExpr:  # type: ignore[override]
        return _binary(EQ, self, other)

    def __ne__(self, other: Any) -> PrimExpr:  # type: ignore[override]
        return _binary(NE, self, other)

    def __and__(self, other: Any) -> PrimExpr:
        return And(convert(self), convert(other))

    def __or__(self, other: Any) -> PrimExpr:
        return Or(convert(self), convert(other))

    def __invert__(self) -> PrimExpr:
        return Not(convert(self))

    __hash__ = object.__hash__


class PrimExpr(ExprOp, Node):
    """Base of all scalar expressions; carries a ``dtype``."""

    dtype: str

    def __bool__(self) -> bool:
        raise TypeError(
            f"cannot use the symbolic expression {self} as a Python bool; "
            "use te.if_then_else or a comparison on constants"
        )

    __hash__ = Node.__hash__

    def astype(self, dtype: str) -> PrimExpr:
        return Cast(check_dtype(dtype), self)

    def __str__(self) -> str:
        return TEXT_FORMS["expr"](self)

    __repr__ = __str__


@dataclass(frozen=True, eq=False, repr=False)
class Var(PrimExpr):
    """A named scalar variable; identity (not the name) makes two variables the same."""

    name: str
    dtype: str = "int32"
    is_leaf = True

    def __post_init__(self) -> None:
        check_dtype(self.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(PrimExpr):
    value: int
    dtype: str = "int32"

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(PrimExpr):
    value: float
    dtype: str = "float32"

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(PrimExpr):
    symbol: ClassVar[str]
    a: PrimExpr
    b: PrimExpr
    dtype: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.result_dtype(self.a.dtype, self.b.dtype))

    @staticmethod
    def result_dtype(a: str, b: str) -> str:
        return promote(a, b)


class Add(BinaryOp):
    symbol = "+"


class Sub(BinaryOp):
    symbol = "-"


class Mul(BinaryOp):
    symbol = "*"


class Div(BinaryOp):
    """True division for floats, truncating division for integers (C semantics)."""

    symbol = "/"


class FloorDiv(BinaryOp):
    symbol = "//"


class FloorMod(BinaryOp):
    symbol = "%"


class Min(BinaryOp):
    symbol = "min"


class Max(BinaryOp):
    symbol = "max"


class CmpOp(BinaryOp):
    @staticmethod
    def result_dtype(a: str, b: str) -> str:
        return "bool"


class EQ(CmpOp):
    symbol = "=="

    def __bool__(self) -> bool:
        return self.a is self.b


class NE(CmpOp):
    symbol = "!="

    def __bool__(self) -> bool:
        return self.a is not self.b


class LT(CmpOp):
    symbol = "<"


class LE(CmpOp):
    symbol = "<="


class GT(CmpOp):
    symbol = ">"


class GE(CmpOp):
    symbol = ">="


class And(CmpOp):
    symbol = "and"


class Or(CmpOp):
    symbol = "or"


@dataclass(frozen=True, eq=False, repr=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, eq=False, repr=False)
class Select(PrimExpr):
    """``true_value if condition else false_value``; both sides may be evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.dtype:
            dtype = promote(self.true_value.dtype, self.false_value.dtype)
            object.__setattr__(self, "dtype", dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


MATH_INTRINSICS = ("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow", "fabs", "floor", "ceil")


@dataclass(frozen=True, eq=False, repr=False)
class Call(PrimExpr):
    """A call of a math intrinsic by name; the names are in ``MATH_INTRINSICS``."""

    op: str
    args: tuple[PrimExpr, ...]
    dtype: str

    def __post_init__(self) -> None:
        if self.op not in MATH_INTRINSICS:
            raise ValueError(f"unknown intrinsic {self.op!r}; expected one of {MATH_INTRINSICS}")


# The combiners a cross-thread reduction may use, by name (``ThreadAllReduce.combine``).
THREAD_COMBINES = ("sum", "product", "max", "min")


@dataclass(frozen=True, eq=False, repr=False)
class ThreadAllReduce(PrimExpr):
    """``value`` combined (``combine``, one of ``THREAD_COMBINES``) over the ``lanes``
    threads of a GPU block that differ only in ``threadIdx.x``; each of them gets the
    result. Every thread of the block must reach it together, as a barrier. GPU
    lowering makes it from a reduction whose loop is bound to ``threadIdx.x``
    (``compiler.lower.thread_reduction``); code generation writes warp shuffles."""

    value: PrimExpr
    combine: str
    lanes: int
    dtype: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.combine not in THREAD_COMBINES:
            raise ValueError(f"unknown combine {self.combine!r}; expected one of {THREAD_COMBINES}")
        if not self.dtype:
            object.__setattr__(self, "dtype", self.value.dtype)

    def script_with(self, expr: Callable[[Any], str]) -> str:
        return f'T.thread_allreduce({expr(self.value)}, "{self.combine}", {self.lanes})'


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    buffer: Any  # compiler.ir.buffer.Buffer; typed loosely to avoid an import cycle
    indices: tuple[PrimExpr, ...]
    dtype: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.buffer.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Range(Node):
    """The half-open interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_min_extent(min_value: Any, extent: Any) -> Range:
        return Range(convert(min_value), convert(extent))

    def __str__(self) -> str:
        return f"Range({self.min}, {self.extent})"

    __repr__ = __str__


def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant; the dtype defaults to int32 for ints, float32 for floats, bool for bools."""
    if isinstance(value, bool):
        return IntImm(int(value), dtype or "bool")
    if dtype is None:
        dtype = "int32" if isinstance(value, int) else "float32"
    check_dtype(dtype)
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    return IntImm(int(value), dtype)


def convert(value: Any, like: str | None = None) -> PrimExpr:
    """Turn a Python number (or an expression) into a PrimExpr.

    ``like`` is the dtype of the other operand, so ``x + 1`` keeps ``x``'s dtype and
    ``x * 0.5`` with an integer ``x`` becomes float32.
    """
    if isinstance(value, PrimExpr):
        return value
    if hasattr(value, "as_expr"):
        return value.as_expr()
    if isinstance(value, bool):
        return const(value)
    if isinstance(value, int):
        return const(value, like if like and not like == "bool" else "int32")
    if isinstance(value, float):
        return const(value, like if like and is_float(like) else "float32")
    raise TypeError(f"cannot convert {value!r} of type {type(value).__name__} to an expression")


def _binary(cls: type[BinaryOp], a: Any, b: Any) -> PrimExpr:
    a_is_expr = isinstance(a, PrimExpr) or hasattr(a, "as_expr")
    b_is_expr = isinstance(b, PrimExpr) or hasattr(b, "as_expr")
    if a_is_expr:
        a = convert(a)
        b = convert(b, like=a.dtype)
    elif b_is_expr:
        b = convert(b)
        a = convert(a, like=b.dtype)
    else:
        a, b = convert(a), convert(b)
    if a.dtype != b.dtype and cls not in (And, Or):
        common = promote(a.dtype, b.dtype)
        a = a if a.dtype == common else Cast(common, a)
        b = b if b.dtype == common else Cast(common, b)
    return cls(a, b)
