"""Tuned kernels next to numpy in one process: do they keep their speed?

    python benchmarks/coexist.py                 # tune 32 trials each, then time
    python benchmarks/coexist.py --json          # last line: one JSON object
    python benchmarks/coexist.py --no-share      # BLAS on its own threads (the old way)

A user calls tuned kernels from a Python program that also calls numpy. numpy's
BLAS and the kernels each run on a thread pool; this times GEMM 1024^3 and conv2d
1x64x56x56 (3x3, 64 filters), each tuned briefly into a temporary database and
built from it, first alone, then interleaved call by call with the numpy
formulation of the same computation (``compiler.topi.reference``: one matmul for
GEMM, im2col and one matmul for the convolution). It prints each side's GFLOP/s alone and
interleaved and the ratio interleaved/alone (1.0: no loss). By default the runtime
runs numpy's BLAS on the kernels' OpenMP pool (``compiler.runtime.blas_pool``);
``--no-share`` turns that off to show what it fixes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402

from compiler.runtime import share_pool_with_blas  # noqa: E402
from compiler.topi.reference import numpy_function  # noqa: E402
from tuner.task import TuneTask  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from tuned_workloads import CONV, GEMM, tune_from_scratch  # noqa: E402

SETTLE_S = 0.3


def seconds_of(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def coexist(
    task: TuneTask,
    kernel: Callable[[], Any],
    numpy_call: Callable[[], Any],
    rounds: int,
) -> dict[str, float]:
    """Each side alone (``rounds`` calls back to back, median), then ``rounds`` pairs of
    numpy-then-kernel calls; GFLOP/s of the medians and the interleaved/alone ratios."""
    for _ in range(3):
        kernel()
        numpy_call()
    time.sleep(SETTLE_S)
    kernel_alone = statistics.median(seconds_of(kernel) for _ in range(rounds))
    numpy_alone = statistics.median(seconds_of(numpy_call) for _ in range(rounds))
    time.sleep(SETTLE_S)
    kernel_mixed, numpy_mixed = [], []
    for _ in range(rounds):
        numpy_mixed.append(seconds_of(numpy_call))
        kernel_mixed.append(seconds_of(kernel))
    kernel_next = statistics.median(kernel_mixed)
    numpy_next = statistics.median(numpy_mixed)
    return {
        "kernel_alone_gflops": round(task.gflops(kernel_alone), 1),
        "kernel_interleaved_gflops": round(task.gflops(kernel_next), 1),
        "kernel_interleaved_vs_alone": round(kernel_alone / kernel_next, 3),
        "numpy_alone_gflops": round(task.gflops(numpy_alone), 1),
        "numpy_interleaved_gflops": round(task.gflops(numpy_next), 1),
        "numpy_interleaved_vs_alone": round(numpy_alone / numpy_next, 3),
    }


def bench(name: str, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    task = TuneTask.from_spec(spec)
    _, lib = tune_from_scratch(task, trials=args.trials, seed=args.seed)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(d) for d in p.shape) for p in task.func.params]
    inputs = [rng.standard_normal(s, dtype=np.float32) for s in shapes[:-1]]
    out = np.empty(shapes[-1], dtype=np.float32)
    reference = numpy_function(json.loads(task.spec or "{}"))

    def numpy_call() -> Any:
        return reference(*inputs)

    lib(*inputs, out)
    np.testing.assert_allclose(out, numpy_call(), rtol=1e-3, atol=1e-3)
    row = coexist(task, lambda: lib(*inputs, out), numpy_call, args.rounds)
    print(f"== {name}")
    print(
        f"  kernel  alone {row['kernel_alone_gflops']:7.1f}  next to numpy "
        f"{row['kernel_interleaved_gflops']:7.1f} GFLOP/s  ratio "
        f"{row['kernel_interleaved_vs_alone']:.2f}"
    )
    print(
        f"  numpy   alone {row['numpy_alone_gflops']:7.1f}  next to kernel "
        f"{row['numpy_interleaved_gflops']:7.1f} GFLOP/s  ratio "
        f"{row['numpy_interleaved_vs_alone']:.2f}"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=32, help="tuning trials per workload")
    parser.add_argument("--rounds", type=int, default=30, help="timed calls per phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-share", action="store_true", help="BLAS on its own threads")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    if args.trials < 1 or args.rounds < 1:
        parser.error("--trials and --rounds must be at least 1")
    shared = share_pool_with_blas(not args.no_share)
    print(f"numpy's BLAS on the kernels' thread pool: {'yes' if shared else 'no'}")
    report: dict[str, Any] = {"blas_shares_pool": shared}
    report["gemm_1024"] = bench("fp32 GEMM 1024^3", GEMM, args)
    report["conv2d_1x64x56x56_k3"] = bench("conv2d NCHW 1x64x56x56 3x3", CONV, args)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
