"""Random tensor expressions and schedules for the compiler fuzz test, and the child
process that builds and runs them.

An example is plain data, made from a seed: an input ``A`` of one or two random
dimensions, an output of one or two axes, maybe a reduction, and for each dimension
of ``A`` an index ``coeff * axis + offset`` (offsets near the edges, now and then far
outside). Its numpy reference walks every output point, so it knows whether some
access leaves ``A``. The child runs a batch, printing each example before it runs
it: when generated code kills the child, the last example printed is the culprit.

Run as ``python compiler_fuzz_cases.py FIRST_SEED COUNT``; each result is one JSON line.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from dataclasses import asdict, dataclass

import numpy as np
from schedule_moves import RandomChooser, apply_moves

import compiler
from compiler import te
from compiler.errors import CompilerError
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule


@dataclass(frozen=True)
class Example:
    seed: int
    a_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    reduce_extent: int  # 0: elementwise
    indices: tuple[tuple[int, int, int], ...]  # per dimension of A: (axis, coeff, offset)
    moves: int


def make_example(seed: int) -> Example:
    rng = random.Random(seed)
    a_shape = tuple(rng.randint(1, 12) for _ in range(rng.randint(1, 2)))
    out_shape = tuple(rng.randint(1, 8) for _ in range(rng.randint(1, 2)))
    reduce_extent = rng.choice([0, 0, rng.randint(1, 8)])
    axes = len(out_shape) + (1 if reduce_extent else 0)
    indices = tuple(
        (rng.randrange(axes), rng.choice([1, 1, 1, 2, -1]), _offset(rng, n)) for n in a_shape
    )
    return Example(seed, a_shape, out_shape, reduce_extent, indices, rng.randint(0, 6))


def _offset(rng: random.Random, extent: int) -> int:
    if rng.random() < 0.05:
        return rng.choice([100_000_000, -100_000_000, 2**30])
    return rng.choice([0, 0, 0, 0, 0, rng.randint(-3, 3), extent - 1, extent])


def reference(example: Example, a: np.ndarray) -> np.ndarray | None:
    """What the expression computes, or None when some point reads outside ``A``."""
    out = np.zeros(example.out_shape, "float64")
    reduce = range(example.reduce_extent) if example.reduce_extent else [None]
    for point in itertools.product(*(range(n) for n in example.out_shape)):
        for k in reduce:
            axes = (*point, k) if k is not None else point
            index = tuple(c * axes[axis] + off for axis, c, off in example.indices)
            if any(not 0 <= i < n for i, n in zip(index, example.a_shape, strict=True)):
                return None
            out[point] += a[index] * 2.0 + 1.0
    return out


def build_func(example: Example) -> PrimFunc:
    A = te.placeholder(example.a_shape, name="A")
    k = te.reduce_axis((0, example.reduce_extent), "k") if example.reduce_extent else None

    def body(*point):
        axes = (*point, k) if k is not None else point
        value = A[tuple(c * axes[axis] + off for axis, c, off in example.indices)] * 2.0 + 1.0
        return te.sum(value, axis=k) if k is not None else value

    C = te.compute(example.out_shape, body, name="C")
    return te.create_prim_func([A, C])


def run_example(example: Example) -> dict[str, object]:
    """Build, schedule, compile and run one example: ``ok``, ``refused`` (with the
    error's type) or ``wrong`` (with what went wrong)."""
    rng = np.random.default_rng(example.seed)
    a = rng.random(example.a_shape, dtype="float32")
    expected = reference(example, a.astype("float64"))
    try:
        sch = Schedule(build_func(example), seed=example.seed)
        moves = apply_moves(sch, RandomChooser(example.seed), example.moves)
        kernel = compiler.build(sch.mod)["main"]
    except CompilerError as err:
        return {"outcome": "refused", "error": type(err).__name__, "message": str(err)}
    if expected is None:
        return {"outcome": "wrong", "error": f"out-of-bounds program built (moves {moves})"}
    c = np.full(example.out_shape, np.nan, "float32")
    kernel(a, c)
    if not np.allclose(c, expected, rtol=1e-4, atol=1e-4):
        return {"outcome": "wrong", "error": f"differs from numpy after moves {moves}"}
    return {"outcome": "ok"}


def main(first_seed: int, count: int) -> None:
    for seed in range(first_seed, first_seed + count):
        example = make_example(seed)
        print(json.dumps({"start": asdict(example)}), flush=True)
        print(json.dumps({"seed": seed, **run_example(example)}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
