"""Tuning end to end: fp32 GEMM 1024^3 and conv2d NCHW 1x64x56x56 (64 filters, 3x3,
pad 1), each tuned with the model-based tuner, against numpy and the default schedule.

    python benchmarks/tune.py                     # 200 trials per workload
    python benchmarks/tune.py --trials 32         # a quick run
    python benchmarks/tune.py --json              # last line: one JSON object

Per workload it prints numpy's GFLOP/s (the conv as im2col + one matmul), the
default schedule's, the tuned schedule's (its trace replayed, built and timed here,
afresh, after the tuning), the ratios, the tuning wall time and trials per second,
and the best-so-far curve of the model-based tuner against a shorter random run.
Each tuning run uses a fresh temporary SQLite database and the local workers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

import compiler  # noqa: E402
import workers  # noqa: E402
from compiler.schedule import Schedule, Trace  # noqa: E402
from db import SQLDatabase  # noqa: E402
from tuner.task import TuneTask  # noqa: E402
from tuner.tune import TuneOptions, TuneResult, tune  # noqa: E402

GEMM = {"op": "matmul", "args": {"m": 1024, "n": 1024, "k": 1024}}
CONV = {
    "op": "conv2d_nchw",
    "args": {
        "batch": 1,
        "in_channels": 64,
        "height": 56,
        "width": 56,
        "out_channels": 64,
        "kernel": 3,
        "padding": 1,
    },
}
REPEATS = 7
WINDOWS = 5
WINDOW_GAP_S = 0.2
BLAS_SETTLE_S = 0.5  # numpy's BLAS threads spin a while after a call
CURVE_POINTS = 8


def numpy_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b


def numpy_conv(data: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """im2col + one matmul, as a framework without a convolution kernel does it."""
    o, c, kh, kw = kernel.shape
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = sliding_window_view(padded, (kh, kw), axis=(2, 3))
    n, _, oh, ow = windows.shape[:4]
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    out = cols @ kernel.reshape(o, -1).T
    return np.ascontiguousarray(out.reshape(n, oh, ow, o).transpose(0, 3, 1, 2))


def time_numpy(reference: Callable[..., np.ndarray], inputs: list[np.ndarray]) -> float:
    reference(*inputs)
    runs = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        reference(*inputs)
        runs.append(time.perf_counter() - start)
    time.sleep(BLAS_SETTLE_S)
    return statistics.median(runs)


def time_kernel(kernel: Any, arrays: list[np.ndarray]) -> float:
    """The median of ``WINDOWS`` timings a moment apart: on a shared machine one
    kernel's back-to-back timings differ by up to 20 %."""
    evaluate = kernel.time_evaluator("main", number=1, repeat=REPEATS, min_repeat_ms=50)
    windows = []
    for _ in range(WINDOWS):
        windows.append(float(evaluate(*arrays).median))
        time.sleep(WINDOW_GAP_S)
    return statistics.median(windows)


def tuned_kernel(task: TuneTask, result: TuneResult) -> Any:
    """The re-timed best schedule, replayed on the workload and built here."""
    sch = Schedule(task.func)
    Trace.from_json(result.best[0].trace).apply_to_schedule(sch)
    return compiler.build(sch.mod)


def curve_points(curve: tuple[float, ...], trials: int) -> list[tuple[int, float]]:
    """Best-so-far GFLOP/s every ``trials // CURVE_POINTS`` trials (the same marks for
    any run of a workload, so a shorter run's curve lines up with the longer one's)."""
    step = max(1, trials // CURVE_POINTS)
    return [(t, round(curve[t - 1], 2)) for t in range(step, len(curve) + 1, step)]


def tune_once(task: TuneTask, tuner: str, trials: int, seed: int) -> TuneResult:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{os.path.join(folder, 'tune.db')}"
        with SQLDatabase(url) as database, workers.create("local") as backend:
            options = TuneOptions(trials=trials, tuner=tuner, seed=seed)
            return tune(task, database=database, workers=backend, options=options)


def bench(
    name: str, spec: dict[str, Any], reference: Callable[..., np.ndarray], args: argparse.Namespace
) -> dict[str, Any]:
    task = TuneTask.from_spec(spec)
    rng = np.random.default_rng(0)
    kernel_default = compiler.build(task.func)
    shapes = [tuple(int(d) for d in p.shape) for p in task.func.params]
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes[:-1]]
    arrays.append(np.zeros(shapes[-1], dtype=np.float32))
    expected = reference(*arrays[:-1])

    numpy_s = time_numpy(reference, arrays[:-1])
    default_s = time_kernel(kernel_default, arrays)

    start = time.monotonic()
    tuned = tune_once(task, "xgb", args.trials, args.seed)
    tune_seconds = time.monotonic() - start
    if not tuned.best:
        raise RuntimeError(f"{name}: no tuned schedule succeeded in {args.trials} trials")
    kernel_tuned = tuned_kernel(task, tuned)
    kernel_tuned(*arrays)
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-3, atol=1e-3)
    tuned_s = time_kernel(kernel_tuned, arrays)

    random_trials = args.random_trials if args.random_trials is not None else args.trials // 2
    random = tune_once(task, "random", random_trials, args.seed) if random_trials > 0 else None
    gflops = task.gflops
    row = {
        "numpy_gflops": round(gflops(numpy_s), 2),
        "default_gflops": round(gflops(default_s), 2),
        "tuned_gflops": round(gflops(tuned_s), 2),
        "tuner_reported_gflops": round(tuned.best_gflops or 0.0, 2),
        "reported_vs_afresh": round((tuned.best_gflops or 0.0) / gflops(tuned_s), 3),
        "tuned_vs_numpy": round(numpy_s / tuned_s, 3),
        "tuned_vs_default": round(default_s / tuned_s, 3),
        "tune_seconds": round(tune_seconds, 1),
        "trials": tuned.measured,
        "errors": tuned.errors,
        "trials_per_second": round(tuned.measured / tune_seconds, 2),
        "curve_xgb": curve_points(tuned.curve, args.trials),
        "curve_random": [] if random is None else curve_points(random.curve, args.trials),
    }
    print_row(name, row)
    return row


def print_row(name: str, row: dict[str, Any]) -> None:
    print(f"== {name}")
    print(
        f"  numpy {row['numpy_gflops']:.1f}  default {row['default_gflops']:.1f}  tuned "
        f"{row['tuned_gflops']:.1f} GFLOP/s (the tuner said {row['tuner_reported_gflops']:.1f}, "
        f"{row['reported_vs_afresh']:.2f}x of the fresh timing)"
    )
    print(
        f"  tuned/numpy {row['tuned_vs_numpy']:.2f}x  tuned/default {row['tuned_vs_default']:.2f}x"
    )
    print(
        f"  {row['trials']} trials ({row['errors']} errors) in {row['tune_seconds']:.0f} s: "
        f"{row['trials_per_second']:.2f} trials/s"
    )
    print("  best-so-far GFLOP/s  trial: xgb | random")
    randoms = dict(row["curve_random"])
    for trial, value in row["curve_xgb"]:
        other = randoms.get(trial)
        shown = "-" if other is None else f"{other:.1f}"
        print(f"  {trial:>6}: {value:>8.1f} | {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="trials per workload")
    parser.add_argument(
        "--random-trials", type=int, help="trials of the random run (default: half)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("gemm", "conv2d"), help="one workload")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error(f"--trials must be at least 1, got {args.trials}")
    report = {}
    if args.only in (None, "gemm"):
        report["gemm_1024"] = bench("fp32 GEMM 1024^3", GEMM, numpy_gemm, args)
    if args.only in (None, "conv2d"):
        report["conv2d_1x64x56x56_k3"] = bench("conv2d NCHW 1x64x56x56 3x3", CONV, numpy_conv, args)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
