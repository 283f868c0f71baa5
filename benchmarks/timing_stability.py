"""Does this machine time parallel kernels steadily? A check before trusting numbers.

    python benchmarks/timing_stability.py                 # 20 s per thread count
    python benchmarks/timing_stability.py --seconds 60 --json

One kernel (conv2d 1x64x56x56, 3x3, 64 filters, default schedule) is timed the way
the tuner's runner times a candidate (the fastest of 5 loops of at least 20 ms) in
windows 0.2 s apart, once on every core and once on one thread, each in a process of
its own. It prints each run's GFLOP/s per window and their spread
((max - min) / median, and the 10th to 90th percentile).

A spread of a few percent on one thread but ten or more on every core means the
cores' cooperation, not the kernel, changes speed over time: seen on a 2-vCPU KVM
guest, where a parallel kernel ran at two levels about 10 % apart for seconds at a
time while two single-thread copies side by side held steady. There, one short
measurement (the search's) and another taken later can disagree by that much; a
tuning run's re-timing spreads its rounds over seconds and keeps the fastest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

WINDOW_GAP_S = 0.2


def timeline(seconds: float) -> list[float]:
    """GFLOP/s of the default-schedule conv2d per window, for ``seconds``."""
    import numpy as np

    import compiler
    from compiler.runtime.profiling import time_raw
    from tuner.task import TuneTask

    sys.path.append(_HERE)
    from tuned_workloads import CONV

    task = TuneTask.from_spec(CONV)
    kernel = compiler.build(task.func, target=task.target)
    rng = np.random.default_rng(0)
    arrays = [
        rng.standard_normal(tuple(int(d) for d in p.shape), dtype=np.float32)
        for p in task.func.params
    ]
    windows = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        windows.append(task.gflops(time_raw(lambda: kernel(*arrays), (), 1, 5, 20.0).min))
        time.sleep(WINDOW_GAP_S)
    return windows


def summary(windows: list[float]) -> dict[str, Any]:
    median = statistics.median(windows)
    deciles = statistics.quantiles(windows, n=10)
    return {
        "windows": [round(w, 1) for w in windows],
        "median_gflops": round(median, 1),
        "spread": round((max(windows) - min(windows)) / median, 3),
        "p10_p90_spread": round((deciles[-1] - deciles[0]) / median, 3),
    }


def run_in_process(threads: int | None, seconds: float) -> dict[str, Any]:
    """``timeline`` in a child process (OpenMP reads its thread count once, at start)."""
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    command = [sys.executable, os.path.abspath(__file__), "--child", "--seconds", str(seconds)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return summary(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per thread count")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(timeline(args.seconds)))
        return
    cores = os.cpu_count() or 1
    rows = {f"{cores}_threads": run_in_process(None, args.seconds)}
    rows["1_thread"] = run_in_process(1, args.seconds)
    for name, row in rows.items():
        print(
            f"== {name}: median {row['median_gflops']} GFLOP/s, spread {row['spread']:.1%}, "
            f"p10-p90 {row['p10_p90_spread']:.1%}"
        )
        print("  " + " ".join(f"{w:.0f}" for w in row["windows"]))
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
