"""What a compiled kernel expects of its arguments, as plain data, and the checks.

A signature records each buffer parameter (name, dtype, shape) and the symbolic
size variables. It travels as JSON inside exported libraries, so a loaded
library checks its arguments exactly like a freshly built one. Shape dimensions
are encoded as an int, ``["var", k]`` (the k-th size variable) or
``[op, a, b]`` for the few arithmetic forms shapes use.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.analysis import buffers_written
from compiler.ir.expr import PrimExpr
from compiler.ir.function import PrimFunc

SIGNATURES_SYMBOL = "tensortune_signatures"


class RuntimeArgumentError(CompilerError, ValueError):
    """Arguments that do not match the kernel's parameters; the message names the
    parameter, what it expects and what it got."""


Dim = Any  # int | list: ["var", k] | [op, Dim, Dim]

_DIM_OPS: dict[str, Callable[[int, int], int]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "floormod": operator.mod,
    "min": min,
    "max": max,
}
_DIM_NODES: dict[type[E.BinaryOp], str] = {
    E.Add: "add",
    E.Sub: "sub",
    E.Mul: "mul",
    E.FloorDiv: "floordiv",
    E.FloorMod: "floormod",
    E.Min: "min",
    E.Max: "max",
}


@dataclass(frozen=True)
class ParamSpec:
    name: str
    dtype: str
    shape: tuple[Dim, ...]
    shape_text: tuple[str, ...]
    written: bool

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(np.bool_ if self.dtype == "bool" else self.dtype)


@dataclass(frozen=True)
class FuncSignature:
    """``name`` is the function's key in its module; ``symbol`` its name in the object."""

    name: str
    symbol: str
    params: tuple[ParamSpec, ...]
    size_vars: tuple[str, ...]

    @staticmethod
    def from_prim_func(name: str, symbol: str, func: PrimFunc) -> FuncSignature:
        size_vars = func.size_vars
        positions = {id(v): k for k, v in enumerate(size_vars)}
        written = {id(b) for b in buffers_written(func.body)}
        params = tuple(
            ParamSpec(
                p.name,
                p.dtype,
                tuple(_encode_dim(d, positions, p.name) for d in p.shape),
                tuple(str(d) for d in p.shape),
                id(p) in written,
            )
            for p in func.params
        )
        bound = {dim[1] for p in params for dim in p.shape if _is_var(dim)}
        for k, var in enumerate(size_vars):
            if k not in bound:
                raise RuntimeArgumentError(
                    f"function {name!r}: size variable {var.name!r} appears only inside shape "
                    "expressions, so it cannot be read from the arguments' shapes; make it a "
                    "dimension of some parameter on its own"
                )
        return FuncSignature(name, symbol, params, tuple(v.name for v in size_vars))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "symbol": self.symbol,
            "size_vars": list(self.size_vars),
            "params": [
                {
                    "name": p.name,
                    "dtype": p.dtype,
                    "shape": list(p.shape),
                    "shape_text": list(p.shape_text),
                    "written": p.written,
                }
                for p in self.params
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> FuncSignature:
        params = tuple(
            ParamSpec(
                p["name"],
                p["dtype"],
                tuple(_freeze(d) for d in p["shape"]),
                tuple(p["shape_text"]),
                bool(p["written"]),
            )
            for p in data["params"]
        )
        return FuncSignature(data["name"], data["symbol"], params, tuple(data["size_vars"]))

    def bind(self, arrays: Sequence[Any]) -> list[int]:
        """Check ``arrays`` and return the raw call arguments: one data pointer per
        buffer, then the value of each size variable."""
        if len(arrays) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise RuntimeArgumentError(
                f"{self.name} takes {len(self.params)} arguments ({names}), got {len(arrays)}"
            )
        sizes: dict[int, int] = {}
        bound_by: dict[int, str] = {}
        for spec, array in zip(self.params, arrays, strict=True):
            self._check_array(spec, array)
            for axis, (dim, actual) in enumerate(zip(spec.shape, array.shape, strict=True)):
                where = f"{spec.name}.shape[{axis}]"
                if isinstance(dim, int):
                    if actual != dim:
                        raise self._shape_error(spec, array, f"{where} must be {dim}")
                elif _is_var(dim):
                    k = dim[1]
                    if k not in sizes:
                        sizes[k], bound_by[k] = actual, where
                    elif sizes[k] != actual:
                        raise self._shape_error(
                            spec,
                            array,
                            f"{where} must equal {bound_by[k]} = {sizes[k]} "
                            f"(both are {self.size_vars[k]})",
                        )
        for spec, array in zip(self.params, arrays, strict=True):
            for axis, (dim, text) in enumerate(zip(spec.shape, spec.shape_text, strict=True)):
                if isinstance(dim, tuple) and not _is_var(dim):
                    expected = _evaluate(dim, sizes)
                    if array.shape[axis] != expected:
                        message = f"{spec.name}.shape[{axis}] must be {text} = {expected}"
                        raise self._shape_error(spec, array, message)
        self._check_overlap(arrays)
        return [a.ctypes.data for a in arrays] + [sizes[k] for k in range(len(self.size_vars))]

    def _check_array(self, spec: ParamSpec, array: Any) -> None:
        what = f"{self.name}: argument {spec.name!r}"
        if not isinstance(array, np.ndarray):
            raise RuntimeArgumentError(f"{what} must be a numpy array, got {type(array).__name__}")
        if array.dtype != spec.np_dtype:
            raise RuntimeArgumentError(
                f"{what} must have dtype {spec.dtype}, got {array.dtype}; "
                f"convert it with .astype({spec.dtype!r})"
            )
        if array.ndim != len(spec.shape):
            raise self._shape_error(spec, array, f"it must have {len(spec.shape)} dimensions")
        if not array.flags.c_contiguous or not array.flags.aligned:
            raise RuntimeArgumentError(
                f"{what} must be C-contiguous and aligned; pass np.ascontiguousarray(...)"
            )
        if spec.written and not array.flags.writeable:
            raise RuntimeArgumentError(f"{what} is written by the kernel but is read-only")

    def _shape_error(self, spec: ParamSpec, array: Any, reason: str) -> RuntimeArgumentError:
        expected = "(" + ", ".join(spec.shape_text) + ("," if len(spec.shape) == 1 else "") + ")"
        return RuntimeArgumentError(
            f"{self.name}: argument {spec.name!r} has shape {tuple(array.shape)}, "
            f"expected {expected}: {reason}"
        )

    def _check_overlap(self, arrays: Sequence[np.ndarray]) -> None:
        """Kernels assume their buffers do not alias (pointers are ``noalias``)."""
        for i, first in enumerate(self.params):
            for j in range(i + 1, len(self.params)):
                second = self.params[j]
                if not (first.written or second.written):
                    continue
                if np.may_share_memory(arrays[i], arrays[j]):
                    raise RuntimeArgumentError(
                        f"{self.name}: arguments {first.name!r} and {second.name!r} share "
                        "memory, and one of them is written; pass distinct arrays"
                    )


def _encode_dim(dim: PrimExpr, positions: dict[int, int], param: str) -> Dim:
    if isinstance(dim, E.IntImm):
        return dim.value
    if isinstance(dim, E.Var):
        return ("var", positions[id(dim)])
    if isinstance(dim, E.Cast) and E.is_int(dim.dtype):
        return _encode_dim(dim.value, positions, param)
    if isinstance(dim, E.BinaryOp) and type(dim) in _DIM_NODES:
        a = _encode_dim(dim.a, positions, param)
        b = _encode_dim(dim.b, positions, param)
        return (_DIM_NODES[type(dim)], a, b)
    raise RuntimeArgumentError(
        f"parameter {param!r}: shape dimension {dim} is not supported; use integers, size "
        f"variables and {', '.join(_DIM_OPS)}"
    )


def _is_var(dim: Dim) -> bool:
    return isinstance(dim, tuple) and dim[0] == "var"


def _freeze(dim: Dim) -> Dim:
    """JSON lists back to the tuples that ``bind`` reads."""
    if not isinstance(dim, list):
        return int(dim)
    if dim[0] == "var":
        return ("var", int(dim[1]))
    return (str(dim[0]), _freeze(dim[1]), _freeze(dim[2]))


def _evaluate(dim: Dim, sizes: dict[int, int]) -> int:
    if isinstance(dim, int):
        return dim
    if dim[0] == "var":
        return sizes[dim[1]]
    return _DIM_OPS[dim[0]](_evaluate(dim[1], sizes), _evaluate(dim[2], sizes))
