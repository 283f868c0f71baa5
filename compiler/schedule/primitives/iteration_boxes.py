"""The boxes of elements that iterations of a loop touch, computed and compared as
arrays (numpy): the legality check of a parallel loop (``concurrency``) builds one
box per iteration of the loop and of the inner loops mixed with it, often
thousands, for every candidate a search proposes. Evaluated one expression node
at a time in Python they took a third of a candidate's replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compiler.arith import Interval
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.node import Node

Values = np.ndarray | int

_ARITH: dict[type[E.BinaryOp], Callable[[Values, Values], Values]] = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.Min: np.minimum,
    E.Max: np.maximum,
}
_DIVISION: dict[type[E.BinaryOp], Callable[[Values, Values], Values]] = {
    E.FloorDiv: np.floor_divide,  # rounds toward -inf, as the IR's floor division
    E.FloorMod: np.mod,
}


def evaluate_all(e: Node, env: Mapping[int, Values]) -> Values | None:
    """``e`` at every point of ``env`` (variable id -> one value or an array of
    them, all arrays of one length); None when it uses anything else, or divides
    by zero somewhere."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, Var):
        return env.get(id(e))
    op = _ARITH.get(type(e))  # type: ignore[arg-type]
    division = _DIVISION.get(type(e))  # type: ignore[arg-type]
    if op is None and division is None:
        return None
    assert isinstance(e, E.BinaryOp)
    a = evaluate_all(e.a, env)
    b = evaluate_all(e.b, env)
    if a is None or b is None:
        return None
    if division is not None:
        if np.any(np.asarray(b) == 0):
            return None
        return division(a, b)
    assert op is not None
    return op(a, b)


def boxes(
    windows: Sequence[Interval],
    atoms: Mapping[Var, PrimExpr],
    env: Mapping[int, Values],
    count: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``count`` boxes (lows and highs, one row per point, one column per
    window) of ``windows`` at the points of ``env``, with each atom of ``atoms``
    evaluated first; None when some end cannot be evaluated."""
    values = dict(env)
    for atom, definition in atoms.items():
        value = evaluate_all(definition, values)
        if value is None:
            return None
        values[id(atom)] = value
    lows, highs = [], []
    for window in windows:
        if window.min is None or window.max is None:
            return None
        low, high = evaluate_all(window.min, values), evaluate_all(window.max, values)
        if low is None or high is None:
            return None
        lows.append(np.broadcast_to(low, count))
        highs.append(np.broadcast_to(high, count))
    return np.stack(lows, axis=1), np.stack(highs, axis=1)


def owners_overlap(lows: np.ndarray, highs: np.ndarray, owners: np.ndarray) -> bool:
    """Whether a box overlaps a box of another owner. The boxes go into a grid of
    cells as large as the widest box, so that only boxes of neighbouring cells are
    compared: each against every member of each of its 3^d neighbouring cells."""
    count, dims = lows.shape
    if count == 0:
        return False
    widths = np.maximum(1, (highs - lows + 1).max(axis=0))
    cells = lows // widths
    cells -= cells.min(axis=0) - 1  # every neighbour of a cell has coordinates >= 0
    radix = cells.max(axis=0) + 2
    keys = np.ravel_multi_index(cells.T, radix)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.searchsorted(sorted_keys, sorted_keys, side="left")
    rank = np.arange(count) - starts  # a box's place among the members of its cell
    members = int(rank.max()) + 1
    for offset in np.ndindex(*(3,) * dims):
        near = np.ravel_multi_index((cells + np.array(offset) - 1).T, radix)
        first = np.searchsorted(sorted_keys, near, side="left")
        last = np.searchsorted(sorted_keys, near, side="right")
        for k in range(members):
            has = first + k < last
            if not has.any():
                break
            mine = np.nonzero(has)[0]
            other = order[first[mine] + k]
            apart = owners[mine] != owners[other]
            meet = np.all((lows[mine] <= highs[other]) & (lows[other] <= highs[mine]), axis=1)
            if np.any(apart & meet):
                return True
    return False
