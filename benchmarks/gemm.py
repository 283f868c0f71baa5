"""fp32 GEMM: numpy against tensortune's unscheduled and hand-scheduled builds.

    python benchmarks/gemm.py            # 1024 x 1024 x 1024
    python benchmarks/gemm.py --json     # last line: one JSON object

The hand schedule is the classic CPU one: B packed into column panels, a
register-blocked micro-kernel (cache_write to a local accumulator, the inner
rows unrolled and the panel columns vectorized), the reduction's init split
out, and the outer row blocks run in parallel.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import compiler
from compiler import te
from compiler.schedule import Schedule

PANEL = 16  # columns of B per packed panel = the vectorized micro-kernel width
ROWS = 4  # rows of the micro-kernel, unrolled
K_BLOCK = 256  # reduction block that keeps a packed panel slice in L1


def gemm_workload(m: int, n: int, k: int, packed: bool) -> compiler.PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    if not packed:
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
        return te.create_prim_func([a, b, c])
    panels = te.compute(
        (n // PANEL, k, PANEL), lambda p, kk, c: b[kk, p * PANEL + c], name="B_packed"
    )
    c = te.compute(
        (m, n),
        lambda i, j: te.sum(a[i, r] * panels[j // PANEL, r, j % PANEL], axis=r),
        name="C",
    )
    return te.create_prim_func([a, b, c])


def hand_schedule(func: compiler.PrimFunc) -> Schedule:
    sch = Schedule(func)
    pack = sch.get_block("B_packed")
    p, _kk, c = sch.get_loops(pack)
    sch.parallel(p)
    sch.vectorize(c)

    gemm = sch.get_block("C")
    i, j, k = sch.get_loops(gemm)
    i_outer, i_inner = sch.split(i, [None, ROWS])
    j_outer, j_inner = sch.split(j, [None, PANEL])
    k_outer, k_inner = sch.split(k, [None, K_BLOCK])
    sch.reorder(i_outer, j_outer, k_outer, k_inner, i_inner, j_inner)
    write_back = sch.cache_write(gemm, 0, "local")
    sch.reverse_compute_at(write_back, j_outer)
    sch.decompose_reduction(gemm, k_outer)
    sch.unroll(i_inner)
    sch.vectorize(j_inner)
    sch.parallel(i_outer)
    return sch


def gflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2.0 * m * n * k / seconds / 1e9


def time_numpy_once(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> float:
    start = time.perf_counter()
    np.matmul(a, b, out=out)
    return time.perf_counter() - start


def time_interleaved(
    lib: compiler.runtime.Module, a: np.ndarray, b: np.ndarray, c: np.ndarray, rounds: int
) -> tuple[float, float, float]:
    """Median seconds of numpy and of ``lib``, and the median of per-round ratios.

    The two are timed in turn, round by round, so a machine whose speed drifts
    (other processes, frequency changes) slows both sides alike.
    """
    timer = lib.time_evaluator("main", number=1, repeat=1)
    out = np.empty_like(c)
    time_numpy_once(a, b, out)
    timer(a, b, c)
    numpy_runs, lib_runs = [], []
    for _ in range(rounds):
        numpy_runs.append(time_numpy_once(a, b, out))
        lib_runs.append(timer(a, b, c).median)
    ratios = [n / t for n, t in zip(numpy_runs, lib_runs, strict=True)]
    return statistics.median(numpy_runs), statistics.median(lib_runs), statistics.median(ratios)


def time_build(mod: compiler.IRModule, times: int) -> tuple[compiler.runtime.Module, float]:
    seconds = []
    lib = None
    for _ in range(times):
        start = time.perf_counter()
        lib = compiler.build(mod, target="llvm")
        seconds.append(time.perf_counter() - start)
    assert lib is not None
    return lib, statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size", type=int, nargs=3, default=[1024, 1024, 1024], metavar=("M", "N", "K")
    )
    parser.add_argument("--rounds", type=int, default=20, help="numpy/tensortune timing pairs")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    m, n, k = args.size
    if n % PANEL:
        parser.error(f"N must be a multiple of the panel width {PANEL}")

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    expected = a @ b

    naive = compiler.build(
        gemm_workload(m, n, k, packed=False), target="llvm", default_schedule=False
    )
    c = np.empty((m, n), dtype=np.float32)
    naive_s = naive.time_evaluator("main", number=1, repeat=1)(a, b, c).median
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)

    sch = hand_schedule(gemm_workload(m, n, k, packed=True))
    lib, build_s = time_build(sch.mod, times=5)
    c = np.empty((m, n), dtype=np.float32)
    lib(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)
    numpy_s, scheduled_s, ratio = time_interleaved(lib, a, b, c, args.rounds)

    result = {
        "numpy_gflops": round(gflops(m, n, k, numpy_s), 2),
        "naive_gflops": round(gflops(m, n, k, naive_s), 2),
        "scheduled_gflops": round(gflops(m, n, k, scheduled_s), 2),
        "ratio_to_numpy": round(ratio, 3),
        "build_seconds": round(build_s, 4),
    }
    print(f"fp32 GEMM {m}x{n}x{k}")
    print(f"  numpy (BLAS)        {result['numpy_gflops']:8.1f} GFLOP/s")
    print(f"  unscheduled build   {result['naive_gflops']:8.1f} GFLOP/s")
    print(f"  hand schedule       {result['scheduled_gflops']:8.1f} GFLOP/s")
    print(f"  ratio to numpy      {result['ratio_to_numpy']:8.3f}  (median of paired rounds)")
    print(f"  median build time   {result['build_seconds']:8.4f} s")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
