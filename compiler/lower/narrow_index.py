"""Whether a GPU kernel's index math fits in 32 bits (TVM's NarrowDataType).

A GPU has 32-bit integer units: 64-bit index arithmetic costs two or more
instructions per operation and a register pair per value. Code generation computes
indices in i32 when this analysis proves that no integer the kernel computes in
index math can leave the int32 range, whatever values its loop variables take.

The proof bounds the magnitude of every integer expression bottom-up: a loop
variable by its loop's bounds, a sum by the sum of its operands' bounds, a product
by their product, a quotient by its dividend's, a remainder by the sum of both, an
integer loaded from memory by its dtype's range. A kernel with anything it cannot
bound (a symbolic size, a float converted to an integer) keeps 64 bits: the answer
is only ever a sufficient condition.
"""

from __future__ import annotations

from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.node import Node
from compiler.ir.stmt import (
    Allocate,
    Barrier,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    SeqStmt,
    Stmt,
)

INT32_MAX = (1 << 31) - 1


class _Unbounded(CompilerError):
    """An integer the analysis cannot bound within int32 (never leaves this module)."""


def index_bits(body: Stmt) -> int:
    """32 when every integer that ``body`` computes in index math provably fits in
    int32, else 64."""
    try:
        _stmt(body, {})
    except _Unbounded:
        return 64
    return 32


def _stmt(s: Stmt, loops: dict[int, int]) -> None:
    """Check ``s`` with ``loops`` the magnitude bound of each loop variable in scope."""
    if isinstance(s, For):
        low, extent = _magnitude(s.min, loops), _magnitude(s.extent, loops)
        loops[id(s.loop_var)] = _checked(low + extent)  # min + extent is computed too
        _stmt(s.body, loops)
        del loops[id(s.loop_var)]
    elif isinstance(s, SeqStmt):
        for part in s.seq:
            _stmt(part, loops)
    elif isinstance(s, IfThenElse):
        _magnitude(s.condition, loops)
        _stmt(s.then_case, loops)
        if s.else_case is not None:
            _stmt(s.else_case, loops)
    elif isinstance(s, BufferStore):
        for index in s.indices:
            _magnitude(index, loops)
        _magnitude(s.value, loops)
    elif isinstance(s, Allocate):
        for dim in s.buffer.shape:
            _magnitude(dim, loops)
        _stmt(s.body, loops)
    elif isinstance(s, Evaluate):
        _magnitude(s.value, loops)
    elif not isinstance(s, Barrier):
        raise _Unbounded(type(s).__name__)


def _magnitude(e: Node, loops: dict[int, int]) -> int:
    """A bound on ``|e|`` for an integer ``e`` (0 for any other dtype, whose integer
    parts are checked all the same); raises _Unbounded past int32."""
    found = _bound(e, loops)
    return _checked(found) if isinstance(e, E.PrimExpr) and E.is_int(e.dtype) else 0


def _bound(e: Node, loops: dict[int, int]) -> int:
    if isinstance(e, E.IntImm):
        return abs(e.value)
    if isinstance(e, E.FloatImm):
        return 0
    if isinstance(e, E.Var):
        if not E.is_int(e.dtype) or id(e) not in loops:
            raise _Unbounded(e.name)
        return loops[id(e)]
    if isinstance(e, E.CmpOp):  # comparisons, And, Or: operands checked, a bool result
        _magnitude(e.a, loops)
        _magnitude(e.b, loops)
        return 1
    if isinstance(e, E.BinaryOp):
        a, b = _magnitude(e.a, loops), _magnitude(e.b, loops)
        if isinstance(e, E.Mul):
            return a * b
        if isinstance(e, (E.Div, E.FloorDiv)):
            return a
        if isinstance(e, (E.Min, E.Max)):
            return max(a, b)
        return a + b  # Add, Sub; FloorMod, whose floor correction adds the divisor
    if isinstance(e, E.Not):
        _magnitude(e.a, loops)
        return 1
    if isinstance(e, E.Select):
        _magnitude(e.condition, loops)
        return max(_magnitude(e.true_value, loops), _magnitude(e.false_value, loops))
    if isinstance(e, E.Cast):
        return _cast(e, loops)
    if isinstance(e, E.Call):
        for arg in e.args:
            _magnitude(arg, loops)
        return 0
    if isinstance(e, E.ThreadAllReduce):
        _magnitude(e.value, loops)
        if E.is_int(e.dtype):
            raise _Unbounded("an integer combined over threads")
        return 0
    if isinstance(e, E.BufferLoad):
        for index in e.indices:
            _magnitude(index, loops)
        return _dtype_range(e.dtype)
    raise _Unbounded(type(e).__name__)


def _cast(e: E.Cast, loops: dict[int, int]) -> int:
    source = e.value.dtype
    inner = _magnitude(e.value, loops)
    if not E.is_int(e.dtype):
        return 0
    if source == "bool":
        return 1
    if not E.is_int(source):
        raise _Unbounded(f"{source} to {e.dtype}")  # a float's integer value is unbounded
    return min(inner, _dtype_range(e.dtype))


def _dtype_range(dtype: str) -> int:
    """The largest magnitude of a ``dtype`` value (1 for a bool, 0 for a float)."""
    if dtype == "bool":
        return 1
    if not E.is_int(dtype):
        return 0
    bits = E.bits(dtype)
    return (1 << bits) - 1 if dtype.startswith("uint") else 1 << (bits - 1)


def _checked(bound: int) -> int:
    if bound > INT32_MAX:
        raise _Unbounded(str(bound))
    return bound
