"""Record the tuning fixture the cost-model tests learn from (run once, by hand).

    nice -n 19 python benchmarks/record_cost_model_fixture.py   # a few minutes

Tunes two small workloads (matmul 256^3, and conv2d NCHW 1x16x28x28 with 32 3x3
filters, pad 1) with random search over their knob templates and the local workers,
and writes every search measurement as (trace JSON, seconds or None for a failure)
per workload spec to ``tests/fixtures/tuning_records.json.gz``, with the machine
(``lscpu`` model), the load before the run and the date. Random search keeps the
records an unbiased sample of the space, which is what a ranking test wants.

The tests read this file as data and never time anything again. Record it only on
a quiet machine: the script refuses to start when the one-minute load is 1.5 or
more, since a busy host turns timings into noise that no model can rank.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import workers  # noqa: E402
from db import Purpose, SQLDatabase  # noqa: E402
from tuner.task import TuneTask  # noqa: E402
from tuner.tune import TuneOptions, tune  # noqa: E402

WORKLOADS: tuple[dict[str, Any], ...] = (
    {"op": "matmul", "args": {"m": 256, "n": 256, "k": 256}},
    {
        "op": "conv2d_nchw",
        "args": {
            "batch": 1,
            "in_channels": 16,
            "height": 28,
            "width": 28,
            "out_channels": 32,
            "kernel": 3,
            "padding": 1,
        },
    },
)
FIXTURE = Path(_HERE).parent / "tests" / "fixtures" / "tuning_records.json.gz"
MAX_LOAD = 1.5


def machine() -> str:
    """The CPU model as ``lscpu`` names it, with the core count."""
    listing = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    model = next(
        (line.split(":", 1)[1].strip() for line in listing.splitlines() if "Model name" in line),
        "unknown",
    )
    return f"{model}, {os.cpu_count()} cores"


def record(spec: dict[str, Any], trials: int, seed: int) -> dict[str, Any]:
    """Tune ``spec`` at random for ``trials`` and return its search measurements."""
    task = TuneTask.from_spec(spec)
    options = TuneOptions(trials=trials, tuner="random", seed=seed, retime_top=0, transfer=False)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{os.path.join(folder, 'tune.db')}"
        with SQLDatabase(url) as database, workers.create("local") as backend:
            result = tune(task, database=database, workers=backend, options=options)
            stored = database.records(task.workload_key, purpose=Purpose.SEARCH, limit=10 * trials)
    print(f"{spec['op']}: {result.measured} measured, best {result.best_gflops} GFLOP/s")
    return {
        "spec": spec,
        "target": task.target,
        "records": [[r.trace, r.seconds] for r in reversed(stored)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=176)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    if load >= MAX_LOAD:
        sys.exit(f"the one-minute load is {load:.2f}; record when it is below {MAX_LOAD}")
    document = {
        "about": "random-search measurements; written by benchmarks/record_cost_model_fixture.py",
        "machine": machine(),
        "load_before": round(load, 2),
        "recorded": datetime.date.today().isoformat(),
        "workloads": [record(spec, args.trials, args.seed) for spec in WORKLOADS],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as out:
        json.dump(document, out, separators=(",", ":"))
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
