"""Features from the lowered loop nest, which mean the same for any workload.

The schedule is lowered (flat loops, flattened buffers, compacted allocations) and
every store is read with the loops around it. The row describes the hot store,
the one that runs most often, and the rest in sums:

- the hot store's nest: log2 of its iterations, its depth, its innermost extent
  and loop kind, the vector length, the unrolled and the parallel extents;
- for the store and its first three loads: the stride along the innermost loop,
  whether the buffer is a local allocation, and log2 of the bytes touched by the
  innermost 1, 2 and 3 loops and by the whole nest (a footprint per loop level);
- arithmetic intensity: floating-point operations per byte touched by the nest;
- the other stores: how many, and log2 of their iterations (packing, init and
  write-back overheads); log2 of the bytes allocated inside the function.

About 20 ms per point, nearly all of it applying and lowering the schedule, so
a search scores few points this way; rows are cached per space and point, and
the lowered program is shared through the replay cache.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compiler.arith.linear import to_linear
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, visit
from compiler.ir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from compiler.lower import lower_func
from compiler.schedule import ScheduleError
from compiler.workload.flops import expr_flops
from tuner.cost_model.features.base import FeatureExtractor
from tuner.space.base import Decisions, Space

ACCESSES = 4  # the store and its first three loads
LEVELS = (1, 2, 3, None)  # innermost loops whose footprint is measured; None: all
KINDS = (ForKind.SERIAL, ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL)
NEST_WIDTH = 7 + len(KINDS)
ACCESS_WIDTH = 2 + len(LEVELS)
WIDTH = NEST_WIDTH + ACCESSES * ACCESS_WIDTH + 4


@dataclass(frozen=True)
class _Store:
    store: BufferStore
    loops: tuple[For, ...]

    @property
    def iterations(self) -> int:
        return math.prod(_extent(loop) for loop in self.loops)


class LoopNestFeatures(FeatureExtractor):
    """Features of the lowered loop nest of each point's candidate, read from the
    process's replay cache (the lowering the build of the same candidate uses)."""

    def __init__(self) -> None:
        self._rows: weakref.WeakKeyDictionary[Space, dict[Decisions, np.ndarray]] = (
            weakref.WeakKeyDictionary()
        )

    def transform(self, space: Space, points: Sequence[Decisions]) -> np.ndarray:
        cache = self._rows.setdefault(space, {})
        rows = []
        for point in points:
            if point not in cache:
                cache[point] = self._row(space, point)
            rows.append(cache[point])
        return np.array(rows, dtype=float).reshape(len(rows), WIDTH)

    def _row(self, space: Space, point: Decisions) -> np.ndarray:
        try:
            program = space.program(space.candidate(point))
        except ScheduleError:
            return np.full(WIDTH, np.nan)
        return lowered_features(program.lowered)


def function_features(func: PrimFunc) -> np.ndarray:
    """The feature row of a scheduled function (lowered here), whatever made it."""
    return lowered_features(lower_func(func))


def lowered_features(lowered: PrimFunc) -> np.ndarray:
    """The feature row of a lowered function."""
    stores: list[_Store] = []
    allocated: list[Buffer] = []
    _walk(lowered.body, (), stores, allocated)
    if not stores:
        return np.zeros(WIDTH)
    hot = max(stores, key=lambda s: s.iterations)
    local = {id(b) for b in allocated}
    others = [s for s in stores if s is not hot]
    accesses: list[BufferStore | E.BufferLoad] = [hot.store, *_loads(hot.store.value)]
    accesses = accesses[:ACCESSES]
    row = _nest_features(hot)
    for k in range(ACCESSES):
        if k < len(accesses):
            row.extend(_access_features(accesses[k], hot.loops, local))
        else:
            row.extend([0.0] * ACCESS_WIDTH)
    row.append(_intensity(hot, accesses))
    row.append(float(len(others)))
    row.append(_log2(sum(s.iterations for s in others)))
    row.append(_log2(sum(_bytes(b) for b in allocated)))
    return np.array(row, dtype=float)


def _walk(
    stmt: Stmt, loops: tuple[For, ...], stores: list[_Store], allocated: list[Buffer]
) -> None:
    if isinstance(stmt, For):
        _walk(stmt.body, (*loops, stmt), stores, allocated)
    elif isinstance(stmt, SeqStmt):
        for part in stmt.seq:
            _walk(part, loops, stores, allocated)
    elif isinstance(stmt, IfThenElse):
        _walk(stmt.then_case, loops, stores, allocated)
        if stmt.else_case is not None:
            _walk(stmt.else_case, loops, stores, allocated)
    elif isinstance(stmt, Allocate):
        allocated.append(stmt.buffer)
        _walk(stmt.body, loops, stores, allocated)
    elif isinstance(stmt, BufferStore):
        stores.append(_Store(stmt, loops))


def _nest_features(hot: _Store) -> list[float]:
    loops = hot.loops
    innermost = loops[-1] if loops else None

    def product(kind: ForKind) -> float:
        return _log2(math.prod(_extent(lp) for lp in loops if lp.kind is kind))

    kinds = [float(innermost is not None and innermost.kind is kind) for kind in KINDS]
    return [
        _log2(hot.iterations),
        float(len(loops)),
        _log2(_extent(innermost)) if innermost is not None else 0.0,
        product(ForKind.VECTORIZED),
        product(ForKind.UNROLLED),
        product(ForKind.PARALLEL),
        float(expr_flops(hot.store.value)),
        *kinds,
    ]


def _access_features(
    access: BufferStore | E.BufferLoad, loops: tuple[For, ...], local: set[int]
) -> list[float]:
    strides = _strides(access, loops)
    itemsize = _itemsize(access.buffer)
    footprints = []
    for level in LEVELS:
        inner = loops if level is None else loops[len(loops) - level :]
        touched = math.prod(_extent(lp) for lp in inner if strides.get(id(lp.loop_var), 0))
        footprints.append(_log2(touched * itemsize))
    innermost = abs(strides.get(id(loops[-1].loop_var), 0)) if loops else 0
    return [_log2(1 + innermost), float(id(access.buffer) in local), *footprints]


def _strides(access: BufferStore | E.BufferLoad, loops: tuple[For, ...]) -> dict[int, int]:
    """The step of the flat index per loop variable (0 when the loop does not move it)."""
    loop_ids = {id(lp.loop_var) for lp in loops}
    strides: dict[int, int] = {}
    for index in access.indices:
        for atom, coeff in to_linear(index).terms.values():
            if isinstance(atom, E.Var) and id(atom) in loop_ids:
                strides[id(atom)] = strides.get(id(atom), 0) + coeff
            else:
                for var in _vars(atom):
                    if id(var) in loop_ids:
                        strides.setdefault(id(var), 1)
    return strides


def _intensity(hot: _Store, accesses: list[BufferStore | E.BufferLoad]) -> float:
    flops = expr_flops(hot.store.value) * hot.iterations
    touched = 0
    for access in accesses:
        strides = _strides(access, hot.loops)
        moving = [lp for lp in hot.loops if strides.get(id(lp.loop_var), 0)]
        touched += math.prod(_extent(lp) for lp in moving) * _itemsize(access.buffer)
    return flops / touched if touched else 0.0


def _loads(value: Node) -> list[E.BufferLoad]:
    found: list[E.BufferLoad] = []
    visit(value, lambda n: found.append(n) if isinstance(n, E.BufferLoad) else None)
    return found


def _vars(node: Node) -> list[E.Var]:
    found: list[E.Var] = []
    visit(node, lambda n: found.append(n) if isinstance(n, E.Var) else None)
    return found


def _extent(loop: For) -> int:
    return loop.extent.value if isinstance(loop.extent, E.IntImm) else 1


def _itemsize(buffer: Buffer) -> int:
    digits = "".join(ch for ch in buffer.dtype if ch.isdigit())
    return max(1, int(digits) // 8) if digits else 1


def _bytes(buffer: Buffer) -> int:
    return math.prod(_extent_of(d) for d in buffer.shape) * _itemsize(buffer)


def _extent_of(dim: E.PrimExpr) -> int:
    return dim.value if isinstance(dim, E.IntImm) else 1


def _log2(value: float) -> float:
    return math.log2(value) if value > 0 else 0.0
