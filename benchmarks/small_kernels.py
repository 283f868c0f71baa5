"""Does the search time a kernel of a few microseconds as its re-timing does?

    python benchmarks/small_kernels.py                  # 16 random trials per workload
    python benchmarks/small_kernels.py --trials 32 --json

A model has many kernels of microseconds (a small matmul, an activation, a softmax
row block). Per workload this tunes with random search and the local workers into a
temporary SQLite database, re-times every measured schedule (two more rounds, the
runner's usual careful measurement), and prints, per schedule, the search's time,
the re-timed time and their ratio; then per workload the largest ratio over the
schedules of at least 1 us. A ratio near 1 means the search saw the kernel as it
runs; a search that times a cold call (a freshly loaded library's first parallel
call takes milliseconds) shows ratios in the thousands. Nothing else should run on
the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import db  # noqa: E402
import workers  # noqa: E402
from tuner.task import TuneTask  # noqa: E402
from tuner.tune import TuneOptions, tune  # noqa: E402

WORKLOADS = {
    "matmul_32": {"op": "matmul", "args": {"m": 32, "n": 32, "k": 32}},
    "dense_relu_4x64": {
        "op": "dense",
        "args": {"batch": 4, "in_features": 64, "out_features": 64, "activation": "relu"},
    },
    "softmax_16x40": {"op": "softmax", "args": {"shape": [16, 40]}},
}
# Below this a kernel is the timer's and the call's as much as its own.
SHORTEST_SECONDS = 1e-6


def compare(spec: dict, trials: int, seed: int) -> list[tuple[float, float]]:
    """(search seconds, re-timed seconds) of every schedule the search measured."""
    task = TuneTask.from_spec(spec, "llvm")
    options = TuneOptions(
        trials=trials, tuner="random", batch_size=8, seed=seed, retime_top=trials, retime_rounds=2
    )
    with tempfile.TemporaryDirectory() as folder:
        database = db.create(f"sqlite:///{folder}/tuning.db")
        with workers.create("local") as backend:
            result = tune(task, database=database, workers=backend, options=options)
        database.close()
    return [(row.search_seconds, row.seconds) for row in result.best if row.seconds is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16, help="random trials per workload")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    summary = {}
    for name, spec in WORKLOADS.items():
        pairs = compare(spec, args.trials, args.seed)
        print(f"{name}: {len(pairs)} schedules (search us, re-timed us, ratio)")
        for found, retimed in pairs:
            print(f"  {found * 1e6:10.2f} {retimed * 1e6:10.2f} {found / retimed:8.2f}")
        ratios = [found / retimed for found, retimed in pairs if retimed >= SHORTEST_SECONDS]
        worst = max(ratios, key=lambda r: abs(r - 1.0), default=None)
        shown = "-" if worst is None else f"{worst:.2f}"
        print(f"{name}: largest ratio over the schedules of >= 1 us: {shown}")
        summary[name] = {"pairs": pairs, "largest_ratio": worst}
    if args.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
