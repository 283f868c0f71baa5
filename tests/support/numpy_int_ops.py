"""numpy's integer operations with the IR's semantics, by IR node type: ``//`` and
``%`` floor, as ``E.FloorDiv`` and ``E.FloorMod`` do (tests evaluate generated index
expressions with them)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.ir import expr as E

NUMPY_INT_OPS: dict[type[E.BinaryOp], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.Min: np.minimum,
    E.Max: np.maximum,
    E.FloorDiv: np.floor_divide,
    E.FloorMod: np.mod,
}
