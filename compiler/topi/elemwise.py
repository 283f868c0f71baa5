"""Elementwise unary operators: ``out[i...] = f(x[i...])`` over the input's shape.

The scalar forms (``relu_expr``, ``gelu_expr``, ...) are what fused operators such as
``dense(..., activation="gelu")`` put into their own compute, so the activation is
one expression of the producer's element rather than a separate pass over memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from compiler import te
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.utils import check_float, check_tensor


def relu_expr(x: PrimExpr) -> PrimExpr:
    return te.max(x, te.const(0, x.dtype))


def gelu_expr(x: PrimExpr) -> PrimExpr:
    """The exact GELU, ``x/2 * (1 + erf(x/sqrt(2)))``, not the tanh approximation."""
    return 0.5 * x * (1.0 + te.erf(x * (1.0 / math.sqrt(2.0))))


def sigmoid_expr(x: PrimExpr) -> PrimExpr:
    return te.sigmoid(x)


ACTIVATIONS: dict[str, Callable[[PrimExpr], PrimExpr]] = {
    "relu": relu_expr,
    "gelu": gelu_expr,
    "sigmoid": sigmoid_expr,
}


def _unary(
    name: str, scalar: Callable[[PrimExpr], PrimExpr], needs_float: bool
) -> Callable[[Tensor], Tensor]:
    def operator(x: Tensor) -> Tensor:
        check_tensor(name, "x", x)
        if needs_float:
            check_float(name, "x", x)
        return te.compute(x.shape, lambda *i: scalar(x[i]), name=f"T_{name}")

    operator.__name__ = name
    operator.__qualname__ = name
    operator.__doc__ = f"Elementwise {name} of ``x``; same shape and dtype."
    return operator


relu = _unary("relu", relu_expr, needs_float=False)
gelu = _unary("gelu", gelu_expr, needs_float=True)
sigmoid = _unary("sigmoid", sigmoid_expr, needs_float=True)
exp = _unary("exp", te.exp, needs_float=True)
log = _unary("log", te.log, needs_float=True)
sqrt = _unary("sqrt", te.sqrt, needs_float=True)
tanh = _unary("tanh", te.tanh, needs_float=True)
abs = _unary("abs", te.abs, needs_float=False)  # TVM's name
negative = _unary("negative", lambda x: -x, needs_float=False)
