"""Tuning end to end: fp32 GEMM 1024^3 and conv2d NCHW 1x64x56x56 (64 filters, 3x3,
pad 1), each tuned with the model-based tuner from several seeds, against the
strongest plain-numpy formulation, onnxruntime (where installed) and the default
schedule.

    python benchmarks/tune.py --trials 64 --seeds 3       # per seed: a fresh database
    python benchmarks/tune.py --only conv2d --json        # last line: one JSON object

Per workload it prints the baselines' GFLOP/s, then per seed the schedule the run
picked as its best: as the search measured it, as the run's re-timing measured it,
and built and timed here afresh; the ratios search/fresh and re-timed/fresh (1.0:
the tuner's numbers can be trusted), and the spread of the fresh GFLOP/s over the
seeds ((max - min) / median). Each run uses a temporary SQLite database and the
local workers; nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402

from tuner.task import TuneTask  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from baselines import (  # noqa: E402
    baselines,
    print_baselines,
    reference_of,
    rounded,
    seconds_per_call,
)
from onnx_peer import onnxruntime_version  # noqa: E402
from tuned_workloads import CONV, GEMM, tune_from_scratch  # noqa: E402

WORKLOADS = {"gemm": ("gemm_1024", GEMM), "conv2d": ("conv2d_1x64x56x56_k3", CONV)}


def seed_row(task: TuneTask, arrays: list[np.ndarray], trials: int, seed: int) -> dict[str, Any]:
    start = time.monotonic()
    result, kernel = tune_from_scratch(task, trials=trials, seed=seed)
    tune_seconds = time.monotonic() - start
    if not result.best:
        raise RuntimeError(f"seed {seed}: no schedule succeeded in {trials} trials")
    best = result.best[0]
    expected = reference_of(task)(*arrays[:-1])
    kernel(*arrays)
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-3, atol=1e-3)
    fresh = task.gflops(seconds_per_call(lambda: kernel(*arrays)))
    search = task.gflops(best.search_seconds)
    return {
        "seed": seed,
        "search_gflops": search,
        "retimed_gflops": best.gflops,
        "fresh_gflops": fresh,
        "search_vs_fresh": search / fresh,
        "retimed_vs_fresh": None if best.gflops is None else best.gflops / fresh,
        "trials": result.measured,
        "errors": result.errors,
        "tune_seconds": tune_seconds,
        "trials_per_second": result.measured / tune_seconds,
    }


def bench(name: str, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    task = TuneTask.from_spec(spec)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(d) for d in p.shape) for p in task.func.params]
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    row = baselines(task, spec, arrays)
    row["seeds"] = [seed_row(task, arrays, args.trials, seed) for seed in range(args.seeds)]
    fresh = [s["fresh_gflops"] for s in row["seeds"]]
    row["tuned_gflops_median"] = statistics.median(fresh)
    row["spread_over_seeds"] = (max(fresh) - min(fresh)) / statistics.median(fresh)
    row["worst_search_vs_fresh"] = max(row["seeds"], key=lambda s: abs(s["search_vs_fresh"] - 1))[
        "search_vs_fresh"
    ]
    row["tuned_vs_numpy"] = row["tuned_gflops_median"] / row["numpy_gflops"]
    if "onnxruntime_gflops" in row:
        row["tuned_vs_onnxruntime"] = row["tuned_gflops_median"] / row["onnxruntime_gflops"]
    print_row(name, row)
    return rounded(row)


def print_row(name: str, row: dict[str, Any]) -> None:
    print_baselines(name, row)
    print("  seed  search  re-timed  fresh  search/fresh  re-timed/fresh  trials/s")
    for s in row["seeds"]:
        retimed = "-" if s["retimed_gflops"] is None else f"{s['retimed_gflops']:.1f}"
        ratio = "-" if s["retimed_vs_fresh"] is None else f"{s['retimed_vs_fresh']:.3f}"
        print(
            f"  {s['seed']:>4}  {s['search_gflops']:6.1f}  {retimed:>8}  {s['fresh_gflops']:5.1f}"
            f"  {s['search_vs_fresh']:12.3f}  {ratio:>14}  {s['trials_per_second']:8.2f}"
        )
    line = (
        f"  tuned (median of seeds) {row['tuned_gflops_median']:.1f} GFLOP/s: "
        f"{row['tuned_vs_numpy']:.2f}x numpy"
    )
    if "tuned_vs_onnxruntime" in row:
        line += f", {row['tuned_vs_onnxruntime']:.2f}x onnxruntime"
    print(line + f"; spread over seeds {row['spread_over_seeds']:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64, help="trials per run")
    parser.add_argument("--seeds", type=int, default=3, help="runs per workload, seeds 0..N-1")
    parser.add_argument("--only", choices=sorted(WORKLOADS), help="one workload")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    if args.trials < 1 or args.seeds < 1:
        parser.error("--trials and --seeds must be at least 1")
    print(f"onnxruntime: {onnxruntime_version() or 'not installed (pip install .[bench])'}")
    report = {}
    for short, (key, spec) in WORKLOADS.items():
        if args.only in (None, short):
            report[key] = bench(key, spec, args)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
