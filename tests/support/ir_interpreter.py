"""A reference interpreter for block-level IR: runs a PrimFunc on numpy arrays in Python.

It is the test oracle that does not share code with the LLVM backend, so a schedule
primitive and the code generator cannot hide each other's bugs. It is meant for tiny
shapes: every loop runs serially, one scalar at a time.

The interpreter is strict where a wrong schedule would otherwise go unnoticed: a load
or store outside a buffer's shape, a block variable bound outside its domain, an
unbound variable or an integer division by zero raise ``InterpreterError``, and every
buffer a block or ``Allocate`` makes starts filled with NaN (or a sentinel for
integer dtypes), so reading memory nobody wrote shows in the result.

    run_func(func, a, b, c)            # writes the outputs into c (and any other param)
    run_func(func, a, c, sizes={"n": 7})

The IR is compiled once into nested Python closures, which is several times faster
than walking the tree for every scalar.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterKind,
    SeqStmt,
    Stmt,
)

__all__ = ["ClosureCompiler", "InterpreterError", "random_args", "run_func"]

Env = dict[Any, Any]
ExprFn = Callable[[Env], Any]
StmtFn = Callable[[Env], None]

_INT_SENTINEL = -(2**31) + 7
_ARRAYS = object()  # env key: the live buffers' arrays
_SHAPES = object()  # env key: the live buffers' shapes, for bounds checks


class InterpreterError(RuntimeError):
    """The program did something undefined: an out-of-bounds access, a block variable
    outside its domain, an unbound variable, an integer division by zero."""


def run_func(
    func: PrimFunc | IRModule,
    *arrays: np.ndarray,
    sizes: Mapping[str | E.Var, int] | None = None,
) -> None:
    """Run ``func`` on ``arrays`` (one per parameter, in order), writing results in place.

    Symbolic sizes are read off the arrays' shapes; ``sizes`` (by variable or name)
    gives those that no parameter shape determines and must agree with the arrays.
    An IRModule runs its "main" function, or its only one.
    """
    func = _pick_function(func)
    if len(arrays) != len(func.params):
        names = [p.name for p in func.params]
        raise ValueError(f"the function takes {len(names)} arrays {names}, got {len(arrays)}")
    env: Env = {}
    _bind_sizes(func, arrays, sizes or {}, env)
    for param, array in zip(func.params, arrays, strict=True):
        _check_param(param, array, env)
    env[_ARRAYS] = dict(zip(func.params, arrays, strict=True))
    env[_SHAPES] = {param: array.shape for param, array in zip(func.params, arrays, strict=True)}
    program = ClosureCompiler().stmt(func.body)
    program(env)


def random_args(
    func: PrimFunc | IRModule,
    seed: int = 0,
    sizes: Mapping[str | E.Var, int] | None = None,
) -> list[np.ndarray]:
    """Random arrays for every parameter of ``func``: floats from a normal distribution,
    integers in [1, 10) (never zero, so a wrong result cannot hide behind zeros).
    Symbolic dimensions need ``sizes``."""
    func = _pick_function(func)
    rng = np.random.default_rng(seed)
    env: Env = {}
    by_name = {str(k) if isinstance(k, str) else k.name: v for k, v in (sizes or {}).items()}
    for var in func.size_vars:
        if var.name not in by_name:
            raise ValueError(f"random_args needs sizes[{var.name!r}] for a symbolic dimension")
        env[var] = by_name[var.name]
    out = []
    for param in func.params:
        shape = tuple(int(ClosureCompiler().expr(d)(env)) for d in param.shape)
        if E.is_float(param.dtype):
            out.append(rng.standard_normal(shape).astype(param.dtype))
        else:
            out.append(rng.integers(1, 10, size=shape).astype(_numpy_dtype(param.dtype)))
    return out


def _pick_function(func: PrimFunc | IRModule) -> PrimFunc:
    if isinstance(func, PrimFunc):
        return func
    if "main" in func:
        return func["main"]
    if len(func) == 1:
        return next(iter(func.values()))
    raise ValueError(f"the module has several functions {sorted(func)}; pass one PrimFunc")


def _bind_sizes(
    func: PrimFunc, arrays: tuple[np.ndarray, ...], sizes: Mapping[Any, int], env: Env
) -> None:
    by_name = {k if isinstance(k, str) else k.name: int(v) for k, v in sizes.items()}
    for var in func.size_vars:
        if var.name in by_name:
            env[var] = by_name[var.name]
    for param, array in zip(func.params, arrays, strict=True):
        if array.ndim != len(param.shape):
            raise ValueError(
                f"array for {param.name!r} has {array.ndim} dimensions, the buffer has "
                f"{len(param.shape)}"
            )
        for dim, actual in zip(param.shape, array.shape, strict=True):
            if isinstance(dim, E.Var) and dim not in env:
                env[dim] = int(actual)


def _check_param(param: Buffer, array: np.ndarray, env: Env) -> None:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"argument for {param.name!r} is {type(array).__name__}, not an ndarray")
    expected = tuple(int(ClosureCompiler().expr(d)(env)) for d in param.shape)
    if array.shape != expected:
        raise ValueError(f"array for {param.name!r} has shape {array.shape}, expected {expected}")
    if array.dtype != np.dtype(_numpy_dtype(param.dtype)):
        raise ValueError(
            f"array for {param.name!r} has dtype {array.dtype}, expected {param.dtype}"
        )


def _numpy_dtype(dtype: str) -> str:
    return "bool" if dtype == "bool" else dtype


# scalar semantics ------------------------------------------------------------------


def _truncdiv(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return _float_div(a, b)
    if b == 0:
        raise InterpreterError(f"integer division {a} / 0")
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _float_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _floordiv(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return math.floor(_float_div(a, b)) if b != 0 else _float_div(a, b)
    if b == 0:
        raise InterpreterError(f"integer floor division {a} // 0")
    return a // b


def _floormod(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return a - math.floor(a / b) * b if b != 0 else math.nan
    if b == 0:
        raise InterpreterError(f"integer floor modulo {a} % 0")
    return a % b


def _min(a: Any, b: Any) -> Any:
    if a != a or b != b:
        return math.nan
    return a if a <= b else b


def _max(a: Any, b: Any) -> Any:
    if a != a or b != b:
        return math.nan
    return a if a >= b else b


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log(x: float) -> float:
    if x != x or x < 0:
        return math.nan
    return -math.inf if x == 0 else math.log(x)


def _sqrt(x: float) -> float:
    return math.nan if x != x or x < 0 else math.sqrt(x)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + _exp(-x))


def _pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except (OverflowError, ValueError):
        return float(np.power(np.float64(x), np.float64(y)))


def _rounding(fn: Callable[[float], int]) -> Callable[[float], float]:
    def call(x: float) -> float:
        return x if x != x or math.isinf(x) else float(fn(x))

    return call


_INTRINSICS: dict[str, Callable[..., float]] = {
    "exp": _exp,
    "log": _log,
    "sqrt": _sqrt,
    "tanh": math.tanh,
    "sigmoid": _sigmoid,
    "erf": math.erf,
    "pow": _pow,
    "fabs": math.fabs,
    "floor": _rounding(math.floor),
    "ceil": _rounding(math.ceil),
}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.Div: _truncdiv,
    E.FloorDiv: _floordiv,
    E.FloorMod: _floormod,
    E.Min: _min,
    E.Max: _max,
    E.EQ: lambda a, b: a == b,
    E.NE: lambda a, b: a != b,
    E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b,
    E.GT: lambda a, b: a > b,
    E.GE: lambda a, b: a >= b,
}


def _caster(dtype: str) -> Callable[[Any], Any]:
    if dtype == "bool":
        return bool
    if E.is_float(dtype):
        if dtype == "float64":
            return float
        np_type = np.float32 if dtype == "float32" else np.float16
        return lambda x: float(np_type(x))
    bits = int(dtype.removeprefix("uint").removeprefix("int"))
    low = 0 if dtype.startswith("uint") else -(2 ** (bits - 1))
    span = 2**bits

    def to_int(x: Any) -> int:
        if isinstance(x, float):
            if x != x or math.isinf(x):
                raise InterpreterError(f"cast of {x} to {dtype}")
            x = math.trunc(x)
        return (int(x) - low) % span + low

    return to_int


# the compiler from IR to closures --------------------------------------------------


class ClosureCompiler:
    """Turns IR into closures over an environment: variables by identity, plus the
    arrays and shapes of the buffers that are live, under the keys _ARRAYS and _SHAPES."""

    # expressions -------------------------------------------------------------

    def expr(self, e: E.PrimExpr) -> ExprFn:
        if isinstance(e, E.Var):
            return _var_reader(e)
        if isinstance(e, E.IntImm):
            value: Any = bool(e.value) if e.dtype == "bool" else int(e.value)
            return lambda env: value
        if isinstance(e, E.FloatImm):
            fvalue = float(e.value)
            return lambda env: fvalue
        if isinstance(e, E.And):
            fa, fb = self.expr(e.a), self.expr(e.b)
            return lambda env: bool(fa(env)) and bool(fb(env))
        if isinstance(e, E.Or):
            fa, fb = self.expr(e.a), self.expr(e.b)
            return lambda env: bool(fa(env)) or bool(fb(env))
        if isinstance(e, E.BinaryOp):
            return self.binary(e)
        if isinstance(e, E.Not):
            fa = self.expr(e.a)
            return lambda env: not fa(env)
        if isinstance(e, E.Select):
            fc, ft, ff = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            return lambda env: ft(env) if fc(env) else ff(env)
        if isinstance(e, E.Cast):
            fv, cast = self.expr(e.value), _caster(e.dtype)
            return lambda env: cast(fv(env))
        if isinstance(e, E.Call):
            fn = _INTRINSICS[e.op]
            args = [self.expr(a) for a in e.args]
            if len(args) == 1:
                (fa,) = args
                return lambda env: fn(float(fa(env)))
            return lambda env: fn(*(float(a(env)) for a in args))
        if isinstance(e, E.BufferLoad):
            return self.load(e)
        raise InterpreterError(f"the interpreter cannot evaluate {type(e).__name__}: {e}")

    def binary(self, e: E.BinaryOp) -> ExprFn:
        op = _BINARY[type(e)]
        fa, fb = self.expr(e.a), self.expr(e.b)
        if E.is_float(e.dtype) and not isinstance(e, E.CmpOp):
            return lambda env: op(float(fa(env)), float(fb(env)))
        return lambda env: op(fa(env), fb(env))

    def load(self, e: E.BufferLoad) -> ExprFn:
        array_of = self.buffer_getter(e.buffer)
        index = self.indexer(e.buffer, e.indices, "load")
        return lambda env: array_of(env).item(index(env))

    def indexer(self, buffer: Buffer, indices: tuple[E.PrimExpr, ...], what: str) -> ExprFn:
        fns = [self.expr(i) for i in indices]
        name = buffer.name

        def index(env: Env) -> tuple[int, ...]:
            idx = tuple(fn(env) for fn in fns)
            shape = env[_SHAPES][buffer]
            for axis, (i, n) in enumerate(zip(idx, shape, strict=True)):
                if not 0 <= i < n:
                    raise InterpreterError(
                        f"{what} of {name}{list(idx)} is out of bounds: index {i} on axis "
                        f"{axis} of shape {shape}"
                    )
            return idx

        return index

    def buffer_getter(self, buffer: Buffer) -> Callable[[Env], np.ndarray]:
        def get(env: Env) -> np.ndarray:
            try:
                return env[_ARRAYS][buffer]
            except KeyError:
                raise InterpreterError(
                    f"buffer {buffer.name!r} is used outside the block or Allocate that makes it"
                ) from None

        return get

    # statements --------------------------------------------------------------

    def stmt(self, s: Stmt) -> StmtFn:
        if isinstance(s, SeqStmt):
            parts = [self.stmt(c) for c in s.seq]

            def run_seq(env: Env) -> None:
                for part in parts:
                    part(env)

            return run_seq
        if isinstance(s, For):
            return self.loop(s)
        if isinstance(s, BlockRealize):
            return self.block_realize(s)
        if isinstance(s, BufferStore):
            return self.store(s)
        if isinstance(s, IfThenElse):
            cond, then = self.expr(s.condition), self.stmt(s.then_case)
            otherwise = self.stmt(s.else_case) if s.else_case is not None else None

            def run_if(env: Env) -> None:
                if cond(env):
                    then(env)
                elif otherwise is not None:
                    otherwise(env)

            return run_if
        if isinstance(s, Evaluate):
            value = self.expr(s.value)

            def run_evaluate(env: Env) -> None:
                value(env)

            return run_evaluate
        if isinstance(s, Allocate):
            return self.allocate((s.buffer,), self.stmt(s.body))
        raise InterpreterError(f"the interpreter cannot run {type(s).__name__}")

    def loop(self, s: For) -> StmtFn:
        var, lo, extent, body = s.loop_var, self.expr(s.min), self.expr(s.extent), self.stmt(s.body)

        def run_for(env: Env) -> None:
            start = lo(env)
            for value in range(start, start + extent(env)):
                env[var] = value
                body(env)
            env.pop(var, None)

        return run_for

    def store(self, s: BufferStore) -> StmtFn:
        array_of = self.buffer_getter(s.buffer)
        index = self.indexer(s.buffer, s.indices, "store")
        value = self.expr(s.value)

        def run_store(env: Env) -> None:
            array_of(env)[index(env)] = value(env)

        return run_store

    def block_realize(self, s: BlockRealize) -> StmtFn:
        block = s.block
        values = [self.expr(v) for v in s.iter_values]
        predicate = self.expr(s.predicate)
        if len(values) != len(block.iter_vars):
            raise InterpreterError(
                f"block {block.name!r} has {len(block.iter_vars)} variables but "
                f"{len(values)} bindings"
            )
        domains = [
            (iv.var, self.expr(iv.dom.min), self.expr(iv.dom.extent)) for iv in block.iter_vars
        ]
        reduce_positions = [k for k, iv in enumerate(block.iter_vars) if iv.kind is IterKind.REDUCE]
        body = self.block_body(block)
        init = self.stmt(block.init) if block.init is not None else None
        name = block.name

        def run_block(env: Env) -> None:
            if not predicate(env):
                return
            bound = [v(env) for v in values]
            is_first = True
            for k, ((var, lo, extent), value) in enumerate(zip(domains, bound, strict=True)):
                start = lo(env)
                if not start <= value < start + extent(env):
                    raise InterpreterError(
                        f"block {name!r}: variable {var.name} is bound to {value}, outside "
                        f"its domain [{start}, {start + extent(env)})"
                    )
                if k in reduce_positions and value != start:
                    is_first = False
            for (var, _, _), value in zip(domains, bound, strict=True):
                env[var] = value
            if init is not None and is_first:
                init(env)
            body(env)

        return run_block

    def block_body(self, block: Block) -> StmtFn:
        body = self.stmt(block.body)
        if not block.alloc_buffers:
            return body
        return self.allocate(block.alloc_buffers, body)

    def allocate(self, buffers: tuple[Buffer, ...], body: StmtFn) -> StmtFn:
        shapes = [(b, [self.expr(d) for d in b.shape]) for b in buffers]

        def run_allocate(env: Env) -> None:
            arrays, all_shapes = env[_ARRAYS], env[_SHAPES]
            saved = [(b, arrays.get(b), all_shapes.get(b)) for b in buffers]
            for buffer, dims in shapes:
                shape = tuple(int(d(env)) for d in dims)
                arrays[buffer] = _fresh_array(shape, buffer.dtype)
                all_shapes[buffer] = shape
            body(env)
            for buffer, array, shape in saved:
                if array is None:
                    arrays.pop(buffer, None)
                    all_shapes.pop(buffer, None)
                else:
                    arrays[buffer] = array
                    all_shapes[buffer] = shape

        return run_allocate


def _var_reader(var: E.Var) -> ExprFn:
    def read(env: Env) -> Any:
        try:
            return env[var]
        except KeyError:
            raise InterpreterError(f"variable {var.name!r} is used where it is not bound") from None

    return read


def _fresh_array(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if E.is_float(dtype):
        return np.full(shape, np.nan, dtype=dtype)
    if dtype == "bool":
        return np.zeros(shape, dtype=bool)
    return np.full(shape, _INT_SENTINEL, dtype=np.int64).astype(dtype)
