"""A stochastic schedule tuned as a space, as at the end of TVM's TensorIR tutorial.

    python examples/stochastic_schedule.py [--trials 8] [--db sqlite:///tuning.db]

The schedule of matmul + relu draws its tile sizes with ``sample_perfect_tile``;
``tuner.tune_tir`` searches those decisions (the model-based search, the local
workers), storing every measurement in the database. Building the workload with
``database=`` then replays the fastest trace, which is checked against numpy.
Without ``--db`` the database is a temporary file, gone when the example ends;
with one, running the example again resumes and measures no schedule twice.
"""

import argparse
import tempfile

import numpy as np

import compiler
import db
import tuner
from compiler import te
from compiler.schedule import Schedule, Trace
from compiler.tuned.lookup import apply_best
from tuner.cli.tables import format_table

M = N = K = 128


def workload() -> compiler.PrimFunc:
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    Y = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((M, N), lambda i, j: te.max(Y[i, j], 0), name="C")
    return te.create_prim_func([A, B, C])


def stochastic_schedule_mm(sch: Schedule) -> None:
    """Tiles of i and j drawn at random; the relu computed under each j tile; the
    reduction's initialization split out so the inner loop vectorizes."""
    block_Y = sch.get_block("Y", "main")
    i, j, k = sch.get_loops(block=block_Y)
    i_factors = sch.sample_perfect_tile(loop=i, n=2)
    j_factors = sch.sample_perfect_tile(loop=j, n=2)
    i0, i1 = sch.split(loop=i, factors=i_factors)
    j0, j1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i0, j0, i1, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "main"), j0)
    sch.decompose_reduction(block_Y, k)
    sch.vectorize(j1)
    sch.parallel(i0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", help="database URL (default: a temporary SQLite file)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        url = args.db or f"sqlite:///{folder}/tuning.db"
        with db.create(url) as database:
            result = tuner.tune_tir(
                workload(),
                space=stochastic_schedule_mm,
                trials=args.trials,
                database=database,
                seed=args.seed,
                batch_size=4,
            )
            print(format_table(result))
            best = database.best_trace(result.task.workload_key, result.task.target)
            _, report = apply_best(compiler.IRModule({"main": workload()}), "llvm", database)
            kernel = compiler.build(workload(), database=database)

    assert best is not None and report.tuned == ["main"], report
    print("\nthe best trace, which the build replays:")
    print("\n".join(Trace.from_json(best).as_python()))
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.empty((M, N), dtype="float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-4)
    print("the build replays the best trace and computes numpy's result")


if __name__ == "__main__":
    main()
