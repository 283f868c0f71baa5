"""Would building the next batch while this one is timed disturb the timings?

    python benchmarks/build_overlap.py            # about a minute
    python benchmarks/build_overlap.py --json
    python benchmarks/build_overlap.py --rounds 2     # a smoke run, seconds

The local workers build a whole batch, then time it (``workers.base.Workers.measure``),
so that no build competes with a timing. Overlapping the two would hide the build
time, but only if a timing taken beside a build is as good as one taken alone. This
times one kernel (the conv2d of ``timing_stability.py``, default schedule, every
core) the way the runner times a candidate (the fastest of 5 loops of at least
20 ms), ``--rounds`` times (default ``ROUNDS``) in each of three phases: alone,
while one builder process compiles candidates of that convolution's generated space
without pause (the next batch), and alone again (the host's drift). It prints each
phase's GFLOP/s (median, and the spread (max - min) / median) and the busy phase's
median over the mean of the two quiet ones. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402

import compiler  # noqa: E402
import workers  # noqa: E402
from compiler.runtime.profiling import time_raw  # noqa: E402
from compiler.schedule.errors import ScheduleError  # noqa: E402
from tuner.space_choice import choose_space  # noqa: E402
from tuner.task import TuneTask  # noqa: E402
from workers import Candidate  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from tuned_workloads import CONV  # noqa: E402

ROUNDS = 15
GAP_S = 0.2
BATCH = 8


def candidates(task: TuneTask, count: int) -> list[Candidate]:
    """``count`` random candidates of the task's generated space that replay."""
    space = choose_space("generated", task.func, target=task.target, seed=0)
    rng = random.Random(0)
    found: list[Candidate] = []
    while len(found) < count:
        try:
            trace = space.candidate(space.random_decisions(rng)).trace
        except ScheduleError:
            continue
        found.append(Candidate.make(task.func, trace, task.target))
    return found


def phase(task: TuneTask, call: Any, rounds: int) -> list[float]:
    """GFLOP/s of ``rounds`` timings of ``call``, ``GAP_S`` apart."""
    speeds = []
    for _ in range(rounds):
        speeds.append(task.gflops(time_raw(call, (), 1, 5, 20.0).min))
        time.sleep(GAP_S)
    return speeds


def summary(speeds: list[float]) -> dict[str, float]:
    median = statistics.median(speeds)
    return {"median_gflops": median, "spread": (max(speeds) - min(speeds)) / median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timings per phase")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    task = TuneTask.from_spec(CONV)
    kernel = compiler.build(task.func, target=task.target)
    rng = np.random.default_rng(0)
    arrays = [
        rng.standard_normal(tuple(int(d) for d in p.shape), dtype=np.float32)
        for p in task.func.params
    ]

    def call() -> None:
        kernel(*arrays)

    batch = candidates(task, BATCH)
    builds = 0
    with workers.create("local", max_workers=1) as backend:
        backend.builder.build(batch[:1])  # the builder process is up before the timing
        quiet_before = phase(task, call, args.rounds)
        stop = threading.Event()

        def build_without_pause() -> None:
            nonlocal builds
            while not stop.is_set():
                builds += len(backend.builder.build(batch))

        builder = threading.Thread(target=build_without_pause, daemon=True)
        builder.start()
        time.sleep(1.0)  # the first builds under way
        busy = phase(task, call, args.rounds)
        stop.set()
        builder.join()
        quiet_after = phase(task, call, args.rounds)
    result = {
        "cpu_count": os.cpu_count(),
        "alone": summary(quiet_before),
        "beside_builds": summary(busy),
        "alone_again": summary(quiet_after),
        "candidates_built": builds,
    }
    quiet = (result["alone"]["median_gflops"] + result["alone_again"]["median_gflops"]) / 2
    result["beside_builds_over_alone"] = result["beside_builds"]["median_gflops"] / quiet
    for name in ("alone", "beside_builds", "alone_again"):
        row = result[name]
        print(f"{name:14} {row['median_gflops']:8.1f} GFLOP/s  spread {row['spread']:6.1%}")
    print(
        f"beside builds / alone: {result['beside_builds_over_alone']:.2f} "
        f"({builds} candidates built meanwhile)"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
