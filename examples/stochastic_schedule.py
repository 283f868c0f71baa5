"""A stochastic schedule and a random search over it, as in TVM's TensorIR tutorial.

    python examples/stochastic_schedule.py [--trials 8]

The schedule samples its tile sizes with ``sample_perfect_tile``; each trial
draws new decisions, builds, checks against numpy and times. The best trial's
trace is printed: it replays the winning schedule exactly.
"""

import argparse

import numpy as np

import compiler
from compiler import te
from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule, Trace

M = N = K = 128


def workload() -> compiler.PrimFunc:
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    Y = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((M, N), lambda i, j: te.max(Y[i, j], 0), name="C")
    return te.create_prim_func([A, B, C])


def stochastic_schedule_mm(sch: Schedule) -> None:
    block_Y = sch.get_block("Y", "main")
    i, j, k = sch.get_loops(block=block_Y)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    j0, j1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "main"), j0)
    sch.decompose_reduction(block_Y, k)
    sch.vectorize(j1)
    sch.parallel(i)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    expected = np.maximum(a @ b, 0)
    c = np.empty((M, N), dtype="float32")

    func = workload()
    best: tuple[float, Schedule] | None = None
    for trial in range(args.trials):
        sch = Schedule(func, seed=args.seed + trial)
        stochastic_schedule_mm(sch)
        lib = compiler.build(sch.mod, target="llvm")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)
        seconds = lib.time_evaluator("main", number=20, repeat=3)(a, b, c).median
        j_tiles = sch.trace.decisions
        print(f"trial {trial}: decisions {list(j_tiles.values())}  {seconds * 1e6:8.1f} us")
        if best is None or seconds < best[0]:
            best = (seconds, sch)

    assert best is not None
    best_seconds, best_sch = best
    print(f"\nbest: {best_seconds * 1e6:.1f} us; its trace:")
    print(best_sch.trace)
    replayed = Schedule(func)
    Trace.from_json(best_sch.trace.as_json()).apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, best_sch.mod)
    lib = compiler.build(replayed.mod, target="llvm")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)
    print("the replayed best schedule computes the same result")


if __name__ == "__main__":
    main()
