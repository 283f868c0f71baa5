"""Per-store features of the scheduled program, after Ansor's, in under a
millisecond a point.

Every store is described with the loops around it (``stores.py``), in raw counts:

- operations by kind, run as often as the store runs: float add/sub, mul, div,
  min/max, compare, select, math calls; integer add/sub, mul, div/mod, min/max,
  compare, select (index arithmetic, bindings included); boolean logic;
- the nest: iterations, depth, the innermost extent and the product of the
  loops outside it; per loop kind (vectorized, unrolled, parallel) the product of
  its extents, how many there are, and how far the innermost of them is from the
  innermost loop (1 for the innermost itself, 0 when there is none); whether the
  store accumulates into what it stores;
- per buffer (the stored one, then the three loaded ones that touch the most
  bytes): whether the function allocates it and whether it is local scope; bytes
  accessed and unique bytes touched, cache lines fetched and unique lines; the
  stride along the innermost loop and along the innermost loop that moves the
  access; the bytes touched by the innermost 1, 2 and 3 loops; reuse: the
  extent of the innermost loop that does not move the access, the iterations,
  the bytes of every buffer and of this one touched between two uses (the last
  is the register tile of an accumulator);
- arithmetic intensity: floating-point operations per unique byte under the
  innermost 1, 2, 3, 4 loops and the whole nest (a curve of where data is reused).

A program's row is the features of its hot store (the most floating-point
operations, then the most iterations), the sum over all stores, and the number
of stores and allocations with the bytes allocated in all and at most (each
allocation at the size its accesses need, as lowering compacts it); every number
is ``log2(1 + x)``; ``FEATURE_NAMES`` names the columns. Counts, bytes and
strides mean the same on any workload and any space, so records of one teach a
model about another.

The features are read from the scheduled function, which making a candidate
produced anyway (the replay cache holds it), not from the lowered one: lowering,
4 to 11 ms a point on GEMM and conv2d templates (``benchmarks/feature_speed.py``),
is skipped. Rows are kept for the process, per workload, trace hash and target.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from compiler.ir import expr as E
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import For, ForKind
from compiler.schedule import ScheduleError
from tuner.cost_model.features.base import FeatureExtractor
from tuner.cost_model.features.stores import (
    Access,
    ProgramNests,
    StoreNest,
    allocation_elements,
    program_nests,
)
from tuner.space.base import Decisions, Space

CACHE_LINE = 64  # bytes
ACCESSES = 4  # the stored buffer and the three loaded ones that touch the most bytes
FOOTPRINT_LEVELS = (1, 2, 3)
INTENSITY_LEVELS = (1, 2, 3, 4, None)  # None: the whole nest
ANNOTATED = (ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL)
OP_KINDS = ("addsub", "mul", "div", "minmax", "cmp", "select", "math")
INT_OP_KINDS = OP_KINDS[:-1]
FLOP_KINDS = ("addsub", "mul", "div", "minmax", "math")
_OP_KIND: dict[type, str] = {
    E.Add: "addsub",
    E.Sub: "addsub",
    E.Mul: "mul",
    E.Div: "div",
    E.FloorDiv: "div",
    E.FloorMod: "div",
    E.Min: "minmax",
    E.Max: "minmax",
    E.EQ: "cmp",
    E.NE: "cmp",
    E.LT: "cmp",
    E.LE: "cmp",
    E.GT: "cmp",
    E.GE: "cmp",
    E.Select: "select",
    E.Call: "math",
}
_BOOL_OPS = (E.And, E.Or, E.Not)

ACCESS_NAMES = (
    "allocated",
    "local",
    "bytes",
    "unique_bytes",
    "lines",
    "unique_lines",
    "stride_innermost",
    "stride_moving",
    *(f"footprint_{level}" for level in FOOTPRINT_LEVELS),
    "reuse_extent",
    "reuse_iterations",
    "reuse_bytes",
    "reuse_own_bytes",
)
STORE_NAMES = (
    *(f"float_{kind}" for kind in OP_KINDS),
    *(f"int_{kind}" for kind in INT_OP_KINDS),
    "bool_logic",
    "iterations",
    "depth",
    "innermost_extent",
    "outer_iterations",
    *(f"{kind.value}_{part}" for kind in ANNOTATED for part in ("extent", "loops", "position")),
    "accumulates",
    *(f"buffer{slot}_{name}" for slot in range(ACCESSES) for name in ACCESS_NAMES),
    *(f"intensity_{level or 'all'}" for level in INTENSITY_LEVELS),
)
PROGRAM_NAMES = ("stores", "allocations", "allocated_bytes", "largest_allocation_bytes")
FEATURE_NAMES = (
    *(f"hot.{name}" for name in STORE_NAMES),
    *(f"sum.{name}" for name in STORE_NAMES),
    *PROGRAM_NAMES,
)
ACCESS_WIDTH = len(ACCESS_NAMES)
WIDTH = len(FEATURE_NAMES)
# Rows kept for the process: the candidates of a few search rounds on several workloads.
CACHE_SIZE = 16384
# A row depends only on the workload, the trace and the target, so every extractor
# shares them: a model's tuning makes a search (and an extractor) per round, and each
# learns from the same stored records of its task and of similar workloads.
_rows: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
_rows_lock = threading.Lock()


class ProgramFeatures(FeatureExtractor):
    """Per-store features of each point's scheduled kernel (the replay cache's, so
    a point that was made into a candidate is not scheduled again), without the
    conversions of constant weights, which never run in a timed call."""

    def transform(self, space: Space, points: Sequence[Decisions]) -> np.ndarray:
        rows = np.empty((len(points), WIDTH))
        for k, point in enumerate(points):
            rows[k] = self._row(space, point)
        return rows

    def width(self, space: Space) -> int:
        return WIDTH

    def _row(self, space: Space, point: Decisions) -> np.ndarray:
        try:
            candidate = space.candidate(point)
        except ScheduleError:
            return np.full(WIDTH, np.nan)
        key = (candidate.workload_key, candidate.trace_hash, str(space.target))
        with _rows_lock:
            row = _rows.get(key)
        if row is None:
            row = program_features(space.program(candidate).kernel)
            with _rows_lock:
                _rows[key] = row
                if len(_rows) > CACHE_SIZE:
                    _rows.popitem(last=False)
        return row


def program_features(func: PrimFunc) -> np.ndarray:
    """The feature row of a function, scheduled or lowered, whatever made it."""
    nests = program_nests(func)
    if not nests.stores:
        return np.zeros(WIDTH)
    table = np.array([_store_features(nest) for nest in nests.stores])
    hot = max(
        range(len(nests.stores)),
        key=lambda k: (table[k, : len(OP_KINDS)].sum(), nests.stores[k].iterations),
    )
    allocations = _allocation_bytes(nests)
    program = [len(nests.stores), len(allocations), sum(allocations), max(allocations, default=0)]
    return np.log2(1.0 + np.concatenate([table[hot], table.sum(axis=0), program]))


def _store_features(nest: StoreNest) -> np.ndarray:
    extents = nest.extents
    flops_per_iteration, ops = _op_counts(nest)
    accesses = [nest.write, *nest.loads]
    curves = np.array([_footprints(access, extents) for access in accesses])
    touched = curves.sum(axis=0)
    # runs[k]: iterations of the innermost k loops, k = 0 .. depth
    runs = np.concatenate([[1.0], np.cumprod(extents[::-1], dtype=float)])
    order = [0, *sorted(range(1, len(accesses)), key=lambda k: -curves[k, -1])][:ACCESSES]
    slots = [_access_features(accesses[k], curves[k], touched, extents, runs) for k in order]
    slots.extend([np.zeros(ACCESS_WIDTH)] * (ACCESSES - len(slots)))
    depth = len(extents)
    inner = [depth if level is None else min(level, depth) for level in INTENSITY_LEVELS]
    intensity = flops_per_iteration * runs[inner] / np.maximum(touched[inner], 1.0)
    return np.concatenate([ops * runs[-1], _nest_features(nest, runs), *slots, intensity])


def _op_counts(nest: StoreNest) -> tuple[float, np.ndarray]:
    """Floating-point operations of one run of the store, and its operations by kind
    (floats, then integers, then boolean logic)."""
    floats = dict.fromkeys(OP_KINDS, 0)
    ints = dict.fromkeys(INT_OP_KINDS, 0)
    logic = 0
    for node in nest.nodes:
        kind = _OP_KIND.get(type(node))
        if kind is None:
            logic += isinstance(node, _BOOL_OPS)
            continue
        operand = node.a if isinstance(node, E.CmpOp) else node
        if E.is_float(operand.dtype):  # type: ignore[attr-defined]
            floats[kind] += 1
        elif kind in ints:
            ints[kind] += 1
    flops = sum(floats[k] for k in FLOP_KINDS)
    return float(flops), np.array([*floats.values(), *ints.values(), logic], dtype=float)


def _nest_features(nest: StoreNest, runs: np.ndarray) -> np.ndarray:
    extents = nest.extents
    depth = len(extents)
    innermost = float(extents[-1]) if depth else 0.0
    features = [runs[-1], depth, innermost, runs[-1] / max(innermost, 1.0)]
    for kind in ANNOTATED:
        chosen = [k for k, loop_kind in enumerate(nest.kinds) if loop_kind is kind]
        features.append(float(np.prod(extents[chosen])) if chosen else 0.0)
        features.append(len(chosen))
        features.append(depth - chosen[-1] if chosen else 0)
    features.append(float(nest.reads_itself))
    return np.array(features, dtype=float)


def _footprints(access: Access, extents: np.ndarray) -> np.ndarray:
    """Bytes the innermost k loops touch of the access, for k = 0 .. depth: each
    dimension spans one more than the sum of its steps over those loops, at most
    the buffer's extent."""
    moves = access.coefficients * (extents - 1)
    spans = np.ones((len(moves), len(extents) + 1), dtype=np.int64)
    spans[:, 1:] += np.cumsum(moves[:, ::-1], axis=1)
    spans = np.minimum(spans, access.shape[:, None])
    return spans.prod(axis=0).astype(float) * access.itemsize


def _access_features(
    access: Access, curve: np.ndarray, touched: np.ndarray, extents: np.ndarray, runs: np.ndarray
) -> np.ndarray:
    """The features of one buffer of a store; ``curve`` is its footprint per level,
    ``touched`` that of all the store's buffers, ``runs`` the iterations per level."""
    size = access.itemsize
    depth = len(extents)
    row_strides = np.cumprod(np.concatenate([[1], access.shape[:0:-1]]))[::-1][: len(access.shape)]
    strides = row_strides @ access.coefficients
    moving = np.flatnonzero((strides != 0) & (extents > 1))
    move_stride = float(strides[moving[-1]]) if len(moving) else 0.0
    line_share = min(1.0, move_stride * size / CACHE_LINE)
    lines = float(np.prod(extents[moving])) * line_share if len(moving) else 1.0
    unique_lines = max(1.0, curve[-1] / CACHE_LINE * max(line_share, size / CACHE_LINE))
    still = np.flatnonzero((strides == 0) & (extents > 1))
    reuse = [0.0, 0.0, 0.0, 0.0]
    if len(still):
        inside = depth - 1 - int(still[-1])
        reuse = [float(extents[still[-1]]), runs[inside], touched[inside], curve[inside]]
    features = [
        float(access.allocated),
        float(access.buffer.scope == "local"),
        runs[-1] * size,
        curve[-1],
        lines,
        unique_lines,
        float(strides[-1]) if depth else 0.0,
        move_stride,
        *(curve[min(level, depth)] for level in FOOTPRINT_LEVELS),
        *reuse,
    ]
    return np.array(features, dtype=float)


def _allocation_bytes(nests: ProgramNests) -> list[float]:
    """The bytes of each allocation, at the size its accesses need inside the loops
    that enclose all of them (how lowering compacts it), at most its declared size."""
    sizes = []
    for buffer in nests.allocated:
        uses = [
            (nest, access)
            for nest in nests.stores
            for access in (nest.write, *nest.loads)
            if access.buffer is buffer
        ]
        if not uses:
            continue
        shared = _common_prefix([nest.loops for nest, _ in uses])
        needed = max(
            _footprints(access, nest.extents)[len(nest.extents) - shared] for nest, access in uses
        )
        sizes.append(min(needed, allocation_elements(buffer) * uses[0][1].itemsize))
    return sizes


def _common_prefix(nests: list[tuple[For, ...]]) -> int:
    """How many outer loops all the nests share."""
    shared = min(len(loops) for loops in nests)
    for k in range(shared):
        if any(loops[k] is not nests[0][k] for loops in nests):
            return k
    return shared
