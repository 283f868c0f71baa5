"""Record the tuning fixtures the cost-model tests learn from (run once, by hand).

    python benchmarks/record_cost_model_fixture.py                      # about ten minutes
    python benchmarks/record_cost_model_fixture.py --set cross_task --trials 96  # about 20

The default set tunes two small workloads (matmul 256^3, and conv2d NCHW 1x16x28x28
with 32 3x3 filters, pad 1) and writes ``tests/fixtures/tuning_records.json.gz``;
``cross_task`` tunes four convolutions of other shapes, one of them strided, and
writes ``tests/fixtures/cross_task_records.json.gz``, for a model that must rank a
workload it was not trained on. Each is tuned with random search over its knob
template and the local workers; every trace the search measured is re-timed with
care, and (trace JSON, seconds or None for a failure) per workload spec is written
with the machine (``lscpu`` model), the load before the run and the date. Random
search keeps the records an unbiased sample of the space, which is what a ranking
test wants.

The search's own times are one measurement each, and a disturbance on the way
reorders them: an earlier recording's convolution times ordered only 0.78 of the
pairs as a careful re-timing did, which caps what any model can reach on them. So
each record is re-timed in PASSES passes, each in its own random order (the fastest
of ten loops of at least 20 ms, three times), and keeps its fastest time. The share
of pairs the two passes order alike, and the share the search's times order as the
careful ones, are written with the records; the script refuses to write the file
when the passes agree on fewer than MIN_AGREEMENT, and to start when the one-minute
load is 1.5 or more. Nothing else should run on the machine meanwhile. The tests
read this file as data and never time anything again.
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

import numpy as np  # noqa: E402

import compiler  # noqa: E402
import workers  # noqa: E402
from compiler.runtime.profiling import time_raw  # noqa: E402
from db import Purpose, SQLDatabase  # noqa: E402
from tuner.space import space_for  # noqa: E402
from tuner.task import TuneTask  # noqa: E402
from tuner.tune import TuneOptions, tune  # noqa: E402


def _conv(channels: int, size: int, filters: int, stride: int = 1) -> dict[str, Any]:
    args = {"batch": 1, "in_channels": channels, "height": size, "width": size}
    return {
        "op": "conv2d_nchw",
        "args": {**args, "out_channels": filters, "kernel": 3, "padding": 1, "stride": stride},
    }


# Each set: its workloads and the fixture it writes.
FIXTURES = Path(_HERE).parent / "tests" / "fixtures"
SETS: dict[str, tuple[tuple[dict[str, Any], ...], Path]] = {
    "default": (
        ({"op": "matmul", "args": {"m": 256, "n": 256, "k": 256}}, _conv(16, 28, 32)),
        FIXTURES / "tuning_records.json.gz",
    ),
    "cross_task": (
        (_conv(8, 56, 16), _conv(32, 14, 64), _conv(64, 7, 64), _conv(16, 56, 32, stride=2)),
        FIXTURES / "cross_task_records.json.gz",
    ),
}
MAX_LOAD = 1.5
# Careful re-timings of every record, each in its own random order; a record keeps
# the fastest. The two must order at least MIN_AGREEMENT of the pairs alike.
PASSES = 2
MIN_AGREEMENT = 0.9


def machine() -> str:
    """The CPU model as ``lscpu`` names it, with the core count."""
    listing = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    model = next(
        (line.split(":", 1)[1].strip() for line in listing.splitlines() if "Model name" in line),
        "unknown",
    )
    return f"{model}, {os.cpu_count()} cores"


def record(spec: dict[str, Any], trials: int, seed: int) -> dict[str, Any]:
    """Tune ``spec`` at random for ``trials``; its traces with careful times."""
    task = TuneTask.from_spec(spec)
    options = TuneOptions(
        trials=trials, tuner="random", seed=seed, retime_top=0, transfer=False, baseline=False
    )
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{os.path.join(folder, 'tune.db')}"
        with SQLDatabase(url) as database, workers.create("local") as backend:
            result = tune(task, database=database, workers=backend, options=options)
            stored = database.records(task.workload_key, purpose=Purpose.SEARCH, limit=10 * trials)
    print(f"{spec['op']}: {result.measured} measured, best {result.best_gflops} GFLOP/s")
    searched = [(r.trace, r.seconds) for r in reversed(stored)]
    passes = [retimed(task, searched, np.random.default_rng([seed, k])) for k in range(PASSES)]
    careful = np.min(passes, axis=0)
    timed = np.array([seconds or np.nan for _, seconds in searched])
    quality = {
        "passes_agree": pair_agreement(passes[0], passes[1]),
        "search_agrees": pair_agreement(timed, careful),
    }
    print(f"{spec['op']}: share of pairs ordered alike, {quality}")
    return {
        "spec": spec,
        "target": task.target,
        "records": [
            [trace, None if np.isnan(seconds) else float(seconds)]
            for (trace, _), seconds in zip(searched, careful, strict=True)
        ],
        **quality,
    }


def retimed(
    task: TuneTask, records: list[tuple[str, float | None]], rng: np.random.Generator
) -> np.ndarray:
    """Each record's seconds per call, timed with care in a random order (NaN for a
    failure): the fastest of three windows of ten loops of at least 20 ms."""
    space = space_for(task.func, target=task.target)
    arrays = [
        rng.standard_normal([int(d) for d in p.shape]).astype(p.dtype) for p in task.func.params
    ]
    seconds = np.full(len(records), np.nan)
    for k in rng.permutation(len(records)):
        trace, searched = records[k]
        if searched is None:
            continue
        candidate = space.candidate_from_trace(trace)
        assert candidate is not None, "a recorded trace reads back into its space"
        kernel = compiler.build(space.program(candidate).func, target=task.target)["main"]
        seconds[k] = min(time_raw(kernel, arrays, 1, 10, 20.0).min for _ in range(3))
    return seconds


def pair_agreement(first: np.ndarray, second: np.ndarray) -> float:
    """The share of pairs (of entries timed in both) that both order alike."""
    both = ~(np.isnan(first) | np.isnan(second))
    upper = np.triu_indices(int(both.sum()), k=1)
    alike = (
        np.sign(np.subtract.outer(first[both], first[both]))[upper]
        == np.sign(np.subtract.outer(second[both], second[both]))[upper]
    )
    return round(float(alike.mean()), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="default")
    parser.add_argument("--trials", type=int, default=176)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="default: the set's fixture")
    args = parser.parse_args()
    workloads, fixture = SETS[args.set]
    out = args.out or fixture
    load = os.getloadavg()[0]
    if load >= MAX_LOAD:
        sys.exit(f"the one-minute load is {load:.2f}; record when it is below {MAX_LOAD}")
    document = {
        "about": "random-search measurements; written by benchmarks/record_cost_model_fixture.py",
        "machine": machine(),
        "load_before": round(load, 2),
        "recorded": datetime.date.today().isoformat(),
        "workloads": [record(spec, args.trials, args.seed) for spec in workloads],
    }
    poor = [w["spec"]["op"] for w in document["workloads"] if w["passes_agree"] < MIN_AGREEMENT]
    if poor:
        sys.exit(
            f"the re-timings of {', '.join(poor)} disagree on more than {1 - MIN_AGREEMENT:.0%} "
            "of pairs: the machine was busy; record again"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt") as written:
        json.dump(document, written, separators=(",", ":"))
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
